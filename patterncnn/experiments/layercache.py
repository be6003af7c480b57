"""Evaluate a fine-tuned classifier on fixed batches, re-running only the layers at and above a change.

Usage::

    runner = CachedClassifier(model, tokenizer, examples, max_length=128)   # one full pass, inputs cached
    runner.baseline                      # (N,) logits or (N, C) of the untouched model, in example order
    with UniformHeads(model, {4: [2]}) as off:
        logits = runner.run(from_layer=4, heads_off=off)   # layers 0-3 are read from the cache

Disabling a head of layer l cannot change what layers below l compute, so the inputs of every layer
are recorded once (pre-hooks on the layer modules) and replayed: a head of the last layer costs one
layer, a head of the first layer a full pass. The replay is checked against the full pass at start.
"""

from __future__ import annotations

import torch

from ..encoders.uniform_heads import DisableError, encoder_layers


def _logits_from_sequence(model, seq: torch.Tensor) -> torch.Tensor:
    """The task head of a BERT or MPNet sequence classifier applied to the last layer's output (B, T, D)."""
    kind = model.config.model_type
    if kind == "bert":
        pooled = model.bert.pooler(seq) if model.bert.pooler is not None else seq[:, 0]
        return model.classifier(model.dropout(pooled))
    if kind == "mpnet":
        return model.classifier(seq)
    raise DisableError(f"no task head replay for model type {kind!r}; supported: bert, mpnet")


class CachedClassifier:
    """A sequence classifier run once over fixed, length-sorted batches, with every layer's inputs cached.

    Args:
        model: ``AutoModelForSequenceClassification`` (BERT or MPNet, eager attention, eval mode).
        tokenizer: its tokenizer.
        texts: one tuple of 1 or 2 strings per example.
        max_length: truncation, as in fine-tuning.
        batch_size: examples per forward pass.
    """

    def __init__(self, model, tokenizer, texts: list[tuple[str, ...]], max_length: int = 128, batch_size: int = 32):
        self.model = model
        self.layers = encoder_layers(model)
        lengths = [len(tokenizer(*t, truncation=True, max_length=max_length)["input_ids"]) for t in texts]
        self.order = sorted(range(len(texts)), key=lambda i: lengths[i])  # length bucketing
        self.batches = []
        for s in range(0, len(texts), batch_size):
            idx = self.order[s : s + batch_size]
            cols = list(zip(*(texts[i] for i in idx)))
            self.batches.append(tokenizer(*cols, truncation=True, max_length=max_length, padding=True,
                                          return_tensors="pt"))
        self.cache: list[list[tuple]] = [[] for _ in self.layers]  # layer -> per batch (args, kwargs)
        self.baseline = self._full_pass(record=True)
        check = self.run(0)
        if not torch.allclose(check, self.baseline, atol=1e-4):
            raise DisableError("replaying the cached layers does not reproduce the model's own output; this model's "
                               "layers take inputs the cache does not know (report it)")

    def _full_pass(self, record: bool) -> torch.Tensor:
        handles = []
        if record:
            for k, layer in enumerate(self.layers):
                handles.append(layer.register_forward_pre_hook(self._recorder(k), with_kwargs=True))
        try:
            with torch.inference_mode():
                out = [self.model(**batch).logits for batch in self.batches]
        finally:
            for h in handles:
                h.remove()
        return self._unsort(out)

    def _recorder(self, k: int):
        def hook(module, args, kwargs):
            self.cache[k].append((args, dict(kwargs)))

        return hook

    def _unsort(self, per_batch: list[torch.Tensor]) -> torch.Tensor:
        logits = torch.cat(per_batch)
        out = torch.empty_like(logits)
        out[torch.tensor(self.order)] = logits
        return out

    def run(self, from_layer: int, heads_off=None) -> torch.Tensor:
        """Logits (N, C) in example order, recomputing layers ``from_layer``.. from their cached inputs.

        Args:
            heads_off: the active :class:`patterncnn.encoders.uniform_heads.UniformHeads`, told each batch's padding mask.
        """
        out = []
        with torch.inference_mode():
            for b, batch in enumerate(self.batches):
                args, kwargs = self.cache[from_layer][b]
                if heads_off is not None:
                    heads_off.key_mask = batch["attention_mask"]
                hidden = args[0]
                for layer in self.layers[from_layer:]:
                    res = layer(hidden, *args[1:], **kwargs)
                    hidden = res[0] if isinstance(res, tuple) else res
                out.append(_logits_from_sequence(self.model, hidden))
        return self._unsort(out)

    def full(self) -> torch.Tensor:
        """Logits (N, C) of a full forward pass with whatever hooks are active (no cache): the reference."""
        return self._full_pass(record=False)
