"""Disable attention heads the paper's way: the head's attention becomes uniform, 1/L over the real tokens.

Usage::

    with UniformHeads(model, {2: [5], 4: [0, 1]}):   # layer -> heads; model: BERT or MPNet (HF, eager)
        logits = model(**batch).logits

This is not Hugging Face's ``head_mask`` (which zeroes the head's output): every query of a
disabled head attends with weight 1/L to each of the L real (non-padding) tokens of its input, so
the head passes on the mean of its value vectors. Only forward hooks on modules are used, no
patched transformers, and they follow how each family computes attention in transformers 5:

* BERT (``BertSelfAttention``): the attention function is a plain function, so a hook on the
  self-attention module rewrites the chosen heads' slice of its context output (the mean of that
  head's values, from the module's own ``value`` projection) and the returned maps;
* MPNet (``MPNetSelfAttention``): the probabilities pass through the module's ``dropout`` before
  they meet the values, so a hook on that dropout replaces them there, output projection included.

The real tokens come from the ``attention_mask`` the model is called with (a pre-hook records it);
without a mask every position counts.
"""

from __future__ import annotations

import torch

from ..core.errors import PatternCNNError

STYLES = {"bert": "context", "mpnet": "probs"}  # model_type -> where the hook goes (see the module docstring)


class DisableError(PatternCNNError, RuntimeError):
    """The model cannot have heads disabled as asked; the message says what to do."""


def encoder_layers(model) -> list:
    """The encoder's layer modules of a BERT or MPNet model (bare or with a task head)."""
    base = getattr(model, "base_model", model)
    layers = getattr(getattr(base, "encoder", None), "layer", None)
    if layers is None:
        raise DisableError(f"{type(model).__name__} has no encoder.layer list; disabling supports "
                           f"{', '.join(STYLES)} models")
    return list(layers)


def attention_style(model) -> str:
    kind = getattr(model.config, "model_type", "")
    if kind not in STYLES:
        raise DisableError(f"disabling heads supports the model types {', '.join(STYLES)} (got {kind!r}); "
                           f"pass a BERT (e.g. minilm) or MPNet model")
    return STYLES[kind]


def self_attention(layer, style: str):
    """The self-attention module of one encoder layer."""
    return layer.attention.self if style == "context" else layer.attention.attn


class UniformHeads:
    """Context manager: while active, the given heads attend uniformly over the real tokens.

    Args:
        model: a transformers BERT or MPNet model loaded with ``attn_implementation="eager"``.
        heads: layer index -> head indices to disable (an empty dict disables nothing).
    """

    def __init__(self, model, heads: dict[int, list[int]]):
        self.model = model
        self.style = attention_style(model)
        self.layers = encoder_layers(model)
        n_heads = model.config.num_attention_heads
        for layer, hs in heads.items():
            if not 0 <= layer < len(self.layers) or any(not 0 <= h < n_heads for h in hs):
                raise DisableError(f"no head {layer}:{list(hs)} in a model of {len(self.layers)} layers x "
                                   f"{n_heads} heads (layers and heads count from 0)")
        self.heads = {int(k): sorted({int(h) for h in v}) for k, v in heads.items() if v}
        self.key_mask: torch.Tensor | None = None  # (B, T) 1 for real tokens; None: all real
        self._handles: list = []

    def __enter__(self) -> "UniformHeads":
        self._handles.append(self.model.register_forward_pre_hook(self._record_mask, with_kwargs=True))
        for layer, hs in self.heads.items():
            att = self_attention(self.layers[layer], self.style)
            if self.style == "context":
                hook = self._context_hook(hs)
                self._handles.append(att.register_forward_hook(hook, with_kwargs=True, prepend=True))
            else:
                self._handles.append(att.dropout.register_forward_hook(self._probs_hook(hs), prepend=True))
        return self

    def __exit__(self, *exc) -> None:
        for h in self._handles:
            h.remove()
        self._handles.clear()

    def _record_mask(self, module, args, kwargs):
        mask = kwargs.get("attention_mask")
        self.key_mask = None if mask is None else mask

    def uniform(self, batch: int, width: int, like: torch.Tensor) -> torch.Tensor:
        """(B, T) attention weights: 1/L on each real token, 0 on padding."""
        if self.key_mask is None:
            m = torch.ones(batch, width, dtype=like.dtype, device=like.device)
        else:
            m = self.key_mask[:, :width].to(like.dtype)
        return m / m.sum(1, keepdim=True).clamp(min=1)

    def _context_hook(self, hs: list[int]):
        def hook(module, args, kwargs, output):
            hidden = args[0] if args else kwargs["hidden_states"]  # (B, T, D)
            ctx, weights = output[0], output[1]
            b, t, _ = hidden.shape
            d = module.attention_head_size
            u = self.uniform(b, t, hidden)  # (B, T)
            v = module.value(hidden).view(b, t, -1, d)[:, :, hs]  # (B, T, k, d)
            mixed = torch.einsum("bt,btkd->bkd", u, v)  # (B, k, d): the same for every query
            ctx = ctx.clone().view(b, t, -1, d)
            ctx[:, :, hs] = mixed[:, None].to(ctx.dtype)
            if weights is not None:
                weights = weights.clone()
                weights[:, hs] = u[:, None, None, :].to(weights.dtype)
            return (ctx.view(b, t, -1), weights, *output[2:])

        return hook

    def _probs_hook(self, hs: list[int]):
        def hook(module, args, probs):  # probs: (B, H, T, T)
            b, _, _, t = probs.shape
            probs = probs.clone()
            probs[:, hs] = self.uniform(b, t, probs)[:, None, None, :]
            return probs

        return hook
