"""Disable attention heads the paper's way: the head's attention becomes uniform, 1/L over the real tokens.

Usage::

    with UniformHeads(model, {2: [5], 4: [0, 1]}):   # layer -> heads; any encoder whose family takes attn_implementation
        logits = model(**batch).logits

This is not Hugging Face's ``head_mask`` (which zeroes the head's output): every query of a disabled
head attends with weight 1/L to each of the L real (non-padding) tokens of its input, so the head
passes on the mean of its value vectors. Formally the disabled head gets the weights eager attention
gives a head whose scores are all equal, ``softmax(mask)``: 1/L on the keys the attention mask lets the
query see (for a padding mask, the input's real tokens), 0 on the others.

How, without patching transformers:

* Every family whose attention modules call transformers' attention interface
  (``ALL_ATTENTION_FUNCTIONS.get_interface``: BERT, RoBERTa, XLM-R, CamemBERT, ELECTRA, DistilBERT,
  ERNIE, ...): :func:`uniform_heads_attention` is registered with ``AttentionInterface`` (and the eager
  mask with ``AttentionMaskInterface``, so the model builds the same 4D mask as with eager) under the
  name :data:`ATTENTION`, and ``UniformHeads`` switches the model to it with
  ``model.set_attn_implementation`` and back to the previous implementation on exit. The function runs
  the family's own ``eager_attention_forward`` (the one the model falls back to), then overwrites the
  chosen heads' weights and output slices. The attention module passes itself; its layer comes from a
  map module -> layer index built once per model over the encoder's layer list, not from names.
* MPNet and DeBERTa (v1, v2 and v3) compute attention in their own modules and ignore
  ``attn_implementation``; they get a hook (:data:`HOOKED`: where each family's self-attention module
  sits in a layer): a pre-hook records the mask the self-attention receives, and a hook on the module's
  ``dropout`` (which the probabilities pass through before they meet the values) replaces the chosen
  heads there.
* Any other family (ALBERT with layers sharing one module, ...) is refused with a
  :class:`DisableError`, and so is a layer whose forward pass did not reach the function (checked on
  every call), so no model is scored with heads silently left on.

The real tokens come from the attention mask each attention call receives, so a replay of cached layer
inputs (``patterncnn.experiments.disable.CachedClassifier``) needs no separate padding information.
Use it in eval mode: the disabled head's weights get no attention dropout.
"""

from __future__ import annotations

import sys
import weakref

import torch
from torch import nn

from ..core.errors import PatternCNNError

ATTENTION = "patterncnn_uniform_heads"  # the name registered with transformers' AttentionInterface
# Families whose attention ignores attn_implementation, disabled by a hook instead: model_type -> (the attribute path
# from an encoder layer to its self-attention module, the one whose ``dropout`` the probabilities pass through; whether
# the family reads its mask as boolean whatever its dtype, as DeBERTa's ``attention_mask.bool()`` does).
HOOKED = {"mpnet": (("attention", "attn"), False), "deberta": (("attention", "self"), True),
          "deberta-v2": (("attention", "self"), True)}
SUPPORTED = "a BERT, RoBERTa, XLM-R, ELECTRA, DistilBERT, MPNet or DeBERTa model"  # what the errors tell users to pass

# Attention module -> (the active UniformHeads, its layer index): what the registered function looks up.
_ACTIVE: dict[nn.Module, tuple["UniformHeads", int]] = {}
_LAYER_MAPS: "weakref.WeakKeyDictionary[nn.Module, dict[nn.Module, int]]" = weakref.WeakKeyDictionary()


class DisableError(PatternCNNError, RuntimeError):
    """The model cannot have heads disabled as asked; the message says what to do."""


def encoder_layers(model) -> list:
    """The encoder's layer modules, in order: the one ``nn.ModuleList`` of ``num_hidden_layers`` layers of the base model.

    Args:
        model: a transformers encoder, bare or with a task head.
    """
    base = getattr(model, "base_model", model)
    n = getattr(model.config, "num_hidden_layers", None)
    lists = [(name, m) for name, m in base.named_modules() if isinstance(m, nn.ModuleList) and len(m) == n]
    outer = [(name, m) for name, m in lists if not any(name.startswith(f"{o}.") for o, _ in lists if o)]
    if len(outer) != 1:
        raise DisableError(f"{type(model).__name__} has no single list of its {n} encoder layers (found "
                           f"{[name for name, _ in outer]}); disabling heads needs one module per layer: use {SUPPORTED}")
    return list(outer[0][1])


def layer_map(model) -> dict[nn.Module, int]:
    """Every submodule of each encoder layer -> that layer's index (built once per model).

    Raises:
        DisableError: a module belongs to two layers (layers sharing weights, as in ALBERT), so a call
            from it cannot tell which layer it is in.
    """
    if model in _LAYER_MAPS:
        return _LAYER_MAPS[model]
    found: dict[nn.Module, int] = {}
    for k, layer in enumerate(encoder_layers(model)):
        for m in layer.modules():
            if found.setdefault(m, k) != k:
                raise DisableError(f"{type(model).__name__}: layers {found[m]} and {k} share the module "
                                   f"{type(m).__name__}, so a head cannot be disabled in one layer only; use {SUPPORTED} "
                                   f"(one module per layer)")
    _LAYER_MAPS[model] = found
    return found


def additive_mask(mask: torch.Tensor | None, dtype: torch.dtype) -> torch.Tensor | None:
    """A boolean mask (True: attend, sdpa's form) or a 0/1 integer one (1: attend, DeBERTa's) as eager's additive one
    (0 / the dtype's minimum); an additive (floating) mask as given."""
    if mask is None or mask.dtype.is_floating_point:
        return mask
    mask = mask.bool()
    return torch.zeros(mask.shape, dtype=dtype, device=mask.device).masked_fill_(~mask, torch.finfo(dtype).min)


def uniform_weights(mask: torch.Tensor | None, k_len: int, like: torch.Tensor) -> torch.Tensor:
    """The weights of a head whose scores are all equal: 1/L on the L keys the mask lets each query see.

    Args:
        mask: the attention mask the attention call received: additive (B, 1, Q|1, K') with 0 on visible
            keys, boolean (True: visible), 0/1 integers (1: visible), or None (every key visible).
        k_len: the key length; like: a tensor whose dtype and device the result takes.

    Returns:
        (B|1, 1, Q|1, K) weights, each row summing to 1, broadcastable over heads and queries.
    """
    if mask is None:
        return torch.full((1, 1, 1, k_len), 1.0 / k_len, dtype=like.dtype, device=like.device)
    if mask.dim() != 4:
        raise DisableError(f"the attention mask reaching the attention call has shape {tuple(mask.shape)}, not "
                           f"(B, 1, Q, K); this model prepares its mask in a way disabling does not know (report it)")
    scores = additive_mask(mask, torch.float32)[..., :k_len].float()  # all scores equal: the mask alone remains
    return torch.softmax(scores, dim=-1).to(like.dtype)


def _family_eager(module: nn.Module):
    """The family's own ``eager_attention_forward``: what the model runs when attn_implementation is eager."""
    eager = getattr(sys.modules.get(type(module).__module__), "eager_attention_forward", None)
    if eager is None:
        raise DisableError(f"{type(module).__name__} calls the attention interface, but its module "
                           f"{type(module).__module__} has no eager_attention_forward to compute it exactly (report it)")
    return eager


def uniform_heads_attention(module: nn.Module, query: torch.Tensor, key: torch.Tensor, value: torch.Tensor,
                            attention_mask: torch.Tensor | None, **kwargs):
    """Eager attention of ``module``'s family, with the heads disabled in its layer made uniform.

    Registered with transformers' ``AttentionInterface`` under :data:`ATTENTION`; called by the
    attention module as any attention function.

    Args:
        query: (B, H, Q, d); key, value: (B, H_kv, K, d); attention_mask: as the model built it for eager.

    Returns:
        (output (B, Q, H, d), weights (B, H, Q, K)): eager's, with the disabled heads' weights uniform
        over the visible keys and their output the matching mean of the value vectors.
    """
    entry = _ACTIVE.get(module)
    if entry is None:
        raise DisableError(f"{type(module).__name__} ran with attn_implementation={ATTENTION!r} outside a "
                           f"UniformHeads block or outside the encoder's layers; set the model's attention back with "
                           f"model.set_attn_implementation('eager')")
    owner, layer = entry
    attention_mask = additive_mask(attention_mask, query.dtype)
    out, weights = _family_eager(module)(module, query, key, value, attention_mask, **kwargs)
    owner.calls[layer] = owner.calls.get(layer, 0) + 1
    hs = owner.heads.get(layer)
    if not hs:
        return out, weights
    n_heads = query.shape[1]
    if out.dim() != 4 or out.shape[2] != n_heads or weights is None:
        raise DisableError(f"{type(module).__name__}'s eager attention returned output {tuple(out.shape)}, not "
                           f"(batch, queries, {n_heads} heads, head size) with weights; disabling does not know it "
                           f"(report it)")
    u = uniform_weights(attention_mask, key.shape[2], weights)  # (B|1, 1, Q|1, K)
    groups = n_heads // value.shape[1]  # query heads per key/value head (1 unless grouped-query attention)
    mixed = torch.matmul(u.to(value.dtype), value[:, [h // groups for h in hs]])  # (B, k, Q|1, d)
    out = out.clone()
    out[:, :, hs] = mixed.transpose(1, 2).to(out.dtype)  # broadcasts over queries when the mask has one row
    weights = weights.clone()
    weights[:, hs] = u
    return out, weights


def _register() -> None:
    """Make :data:`ATTENTION` known to transformers (idempotent): the function, and the eager mask for it."""
    from transformers import AttentionInterface, AttentionMaskInterface
    from transformers.masking_utils import eager_mask

    AttentionInterface.register(ATTENTION, uniform_heads_attention)
    AttentionMaskInterface.register(ATTENTION, eager_mask)


class UniformHeads:
    """Context manager: while active, the given heads attend uniformly over the real tokens.

    Args:
        model: a transformers encoder (bare or with a task head) of a family that takes
            ``attn_implementation`` (BERT, RoBERTa, XLM-R, ELECTRA, DistilBERT, ...), MPNet or DeBERTa; the
            implementation it was loaded with is restored on exit.
        heads: layer index -> head indices to disable (an empty dict disables nothing).
    """

    def __init__(self, model, heads: dict[int, list[int]]):
        self.model = model
        self.kind = getattr(model.config, "model_type", "")
        self.layers = encoder_layers(model)
        n_heads = model.config.num_attention_heads
        for layer, hs in heads.items():
            if not 0 <= layer < len(self.layers) or any(not 0 <= h < n_heads for h in hs):
                raise DisableError(f"no head {layer}:{list(hs)} in a model of {len(self.layers)} layers x "
                                   f"{n_heads} heads (layers and heads count from 0)")
        self.heads = {int(k): sorted({int(h) for h in v}) for k, v in heads.items() if v}
        if self.kind not in HOOKED:
            self._check_interface()
        self.calls: dict[int, int] = {}  # layer -> calls of the attention function so far
        self._previous: str | None = None  # the implementation to restore, once switched
        self._switched = False
        self._handles: list = []
        self._modules: list[nn.Module] = []

    def _check_interface(self) -> None:
        # transformers' own test of whether a model's attention follows the interface: where it fails,
        # set_attn_implementation only warns and keeps the old implementation.
        can_set = getattr(self.model, "_can_set_attn_implementation", None)
        if can_set is None or not can_set():
            raise DisableError(f"{type(self.model).__name__} ({self.kind}) computes attention in its own modules, not "
                               f"through transformers' attention interface (attn_implementation), so its heads cannot "
                               f"be disabled; use {SUPPORTED}")

    def __enter__(self) -> "UniformHeads":
        try:
            if self.kind in HOOKED:
                for layer, hs in self.heads.items():
                    self._hook_probs(self._self_attention(self.layers[layer]), layer, hs)
            else:
                self._switch()
            for layer in self.heads:  # a layer that never reaches the mechanism would leave its heads on: refuse it
                mod = self.layers[layer]
                self._handles.append(mod.register_forward_pre_hook(self._count_before(layer)))
                self._handles.append(mod.register_forward_hook(self._count_after(layer)))
        except BaseException:
            self.__exit__()
            raise
        return self

    def _switch(self) -> None:
        mapping = layer_map(self.model)
        if any(m in _ACTIVE for m in mapping):
            raise DisableError("heads of this model are already disabled by another UniformHeads block; nest none")
        _register()
        for m, k in mapping.items():
            _ACTIVE[m] = (self, k)
            self._modules.append(m)
        self._previous = self.model.config._attn_implementation
        self._switched = True
        self.model.set_attn_implementation(ATTENTION)
        if self.model.config._attn_implementation != ATTENTION:
            raise DisableError(f"{type(self.model).__name__} did not switch to attn_implementation={ATTENTION!r}; "
                               f"use {SUPPORTED}")

    def __exit__(self, *exc) -> None:
        for h in self._handles:
            h.remove()
        self._handles.clear()
        for m in self._modules:
            _ACTIVE.pop(m, None)
        self._modules.clear()
        if self._switched:
            self._switched = False
            if self._previous is None:  # never dispatched: put the config back as it was
                self.model.config._attn_implementation = None
            else:
                self.model.set_attn_implementation(self._previous)

    def _count_before(self, layer: int):
        def hook(module, args):
            self._before = self.calls.get(layer, 0)

        return hook

    def _count_after(self, layer: int):
        def hook(module, args, output):
            if self.calls.get(layer, 0) == self._before:
                how = ("its self-attention's dropout, where the hook replaces the heads" if self.kind in HOOKED
                       else "transformers' attention interface")
                raise DisableError(f"layer {layer} of {type(self.model).__name__} ran without reaching {how}, so its "
                                   f"heads were not disabled; use {SUPPORTED}, and do not change its "
                                   f"attn_implementation inside the block")

        return hook

    def _self_attention(self, layer: nn.Module) -> nn.Module:
        """A hooked family's self-attention module in ``layer`` (:data:`HOOKED`), checked to have a ``dropout``."""
        att = layer
        path = HOOKED[self.kind][0]
        for name in path:
            att = getattr(att, name, None)
        if not isinstance(getattr(att, "dropout", None), nn.Module):
            raise DisableError(f"{type(self.model).__name__} ({self.kind}): its layers are not wired as this version of "
                               f"patterncnn knows ({'.'.join(path)}.dropout), so its heads cannot be disabled (report "
                               f"it)")
        if getattr(att, "head_weights_proj", None) is not None:  # DeBERTa's talking heads mix heads after the dropout
            raise DisableError(f"{type(self.model).__name__} mixes its heads after their attention (talking_head), so "
                               f"one head cannot be made uniform on its own; use {SUPPORTED} without talking heads")
        return att

    def _hook_probs(self, att: nn.Module, layer: int, hs: list[int]) -> None:
        """MPNet, DeBERTa: the mask the self-attention receives (pre-hook); the chosen heads' probabilities at its
        dropout (each replacement counted, for the check that every layer with disabled heads reached it)."""
        seen: dict[str, torch.Tensor | None] = {}
        boolean = HOOKED[self.kind][1]

        def record(module, args, kwargs):
            mask = args[1] if len(args) > 1 else kwargs.get("attention_mask")
            seen["mask"] = mask.bool() if boolean and mask is not None else mask

        def replace(module, args, probs):  # probs: (B, H, T, T)
            probs = probs.clone()
            probs[:, hs] = uniform_weights(seen.get("mask"), probs.shape[-1], probs)
            self.calls[layer] = self.calls.get(layer, 0) + 1
            return probs

        self._handles.append(att.register_forward_pre_hook(record, with_kwargs=True))
        self._handles.append(att.dropout.register_forward_hook(replace, prepend=True))
