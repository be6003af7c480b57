"""What the Python API classifies and what it gives back: maps, or a Hugging Face model's attentions, in; patterns out.

Usage (through :meth:`patterncnn.classifier.onnx.OnnxClassifier.classify_attentions`)::

    batch = tokenizer(["The cat sat."], ["A cat was sitting."], padding=True, return_tensors="pt")
    out = model(**batch, output_attentions=True)                   # eager attention
    tokens = [tokenizer.convert_ids_to_tokens(ids) for ids in batch["input_ids"]]
    heads = clf.classify_attentions(out.attentions, attention_mask=batch["attention_mask"], tokens=tokens)
    heads.labels          # (B, L, H) pattern names;  heads.probs: (B, L, H, 5), LABELS order
    heads.frame()         # one row per (example, layer, head)

Each example's maps are cut to its real tokens (those whose ``attention_mask`` is 1, on either side
of the padding), and its separators are found in its tokens by
:func:`patterncnn.core.segments.separators`, the function the encoders use: the CNN's segment
channels and the rule that a single-segment input is never ``block`` need them.
"""

from __future__ import annotations

import dataclasses
import warnings
from typing import TYPE_CHECKING, Any, Callable, Sequence

import numpy as np

from ..core import args
from ..core.errors import ClassifierError
from ..core.labels import LABELS, SHORT
from ..core.maps import check_map
from ..core.plots import COLORS, head_grid_plot
from ..core.segments import SEPARATOR_TOKENS, separators

if TYPE_CHECKING:
    import pandas as pd
    from matplotlib.figure import Figure

def _numpy(x: Any) -> np.ndarray:
    """A torch tensor (any device, with or without grad) or an array-like -> a float32 numpy array."""
    if hasattr(x, "detach"):
        x = x.detach().float().cpu().numpy()
    return np.asarray(x, dtype=np.float32)


def check_maps(maps: list[np.ndarray], seps: list[list[int] | None] | None = None,
               name: Callable[[int], str] | None = None) -> None:
    """Every map, with its separators, passes :func:`patterncnn.core.maps.check_map` (the one check of a map,
    as the command line and the service run it); the first that does not stops with its reason. Maps the check
    only warns about (rows that do not sum to 1) are classified, with one :class:`MapWarning` naming how many and
    the first, as the ``classify`` command prints it. ``name``: what to call map i (default ``map i``), asked only
    for a map that is refused or warned about."""
    warned = []
    for i, m in enumerate(maps):
        errors, warns = check_map(m, seps=None if seps is None else seps[i])
        if errors:
            fix = ("pass separator positions inside the map (seps=None for one segment)" if "sep" in errors[0] else
                   "pass (T, T) attention maps (rows are softmax weights)")
            raise ClassifierError(f"{name(i) if name else f'map {i}'}: {errors[0]}; {fix}")
        if warns:
            warned.append((i, warns[0]))
    if warned:
        i, first = warned[0]
        warnings.warn(f"{len(warned)} of {len(maps)} map(s) warned, e.g. {name(i) if name else f'map {i}'}: "
                      f"{first.rstrip('?')}; they are "
                      f"classified as given", MapWarning, stacklevel=3)


def as_maps(maps: Any) -> tuple[list[np.ndarray], tuple[int, ...]]:
    """One map (T, T), an array of maps (..., T, T), or a list of (T_i, T_i) maps -> (N maps, leading shape)."""
    if isinstance(maps, (list, tuple)) and maps and np.ndim(maps[0]) == 2 and len({np.shape(m) for m in maps}) > 1:
        out = [_numpy(m) for m in maps]  # maps of several lengths
        return out, (len(out),)
    if isinstance(maps, (list, tuple)) and maps and all(hasattr(m, "detach") for m in maps):
        maps = [_numpy(m) for m in maps]  # torch tensors of one length: bf16, with grad or on a GPU, as one alone
    arr = _numpy(maps)
    if arr.ndim < 2 or arr.shape[-1] != arr.shape[-2]:
        raise ClassifierError(f"maps of shape {arr.shape} are not square (..., T, T); pass one map (T, T), an array "
                              f"(N, T, T) or (L, H, T, T), or a list of (T, T) maps")
    lead = arr.shape[:-2]
    flat = arr.reshape(-1, *arr.shape[-2:])
    return list(flat), lead


def per_map_seps(seps: Any, n: int) -> list[Any]:
    """``seps`` as one entry per map: None, one list of positions shared by all maps, or one list (or None) per map.

    Only the layout is read here; each map's entry is then checked with its map by :func:`check_maps`.
    """
    if seps is None:
        return [None] * n
    if isinstance(seps, np.ndarray):
        seps = seps.tolist()
    if not isinstance(seps, (list, tuple)):
        raise ClassifierError(f"seps must be a list of token positions (e.g. [5, 11]), one such list per map, or None; "
                              f"not {type(seps).__name__} {seps!r:.40}")
    if not any(s is None or isinstance(s, (list, tuple, np.ndarray)) for s in seps):
        return [list(seps)] * n  # one list for all maps
    if len(seps) != n:
        raise ClassifierError(f"got {len(seps)} separator lists for {n} maps; pass one list for all maps or one "
                              f"per map")
    return [s.tolist() if isinstance(s, np.ndarray) else s for s in seps]


def split_attentions(attentions: Any, attention_mask: Any = None, tokens: Sequence | None = None,
                     sep_token: str | None = None, special_tokens_mask: Any = None,
                     ) -> list[tuple[np.ndarray, list[int] | None, list[str] | None]]:
    """A model's attentions for a batch -> per example (maps (L, H, T, T) of its real tokens, seps, tokens).

    Args:
        attentions: ``outputs.attentions``: L tensors (B, H, T, T), or one array (B, L, H, T, T) or (L, H, T, T).
        attention_mask: (B, T) 1 for real tokens, 0 for padding; None: every position is real.
        tokens: per example its T tokens as the tokenizer gives them (padding included), or one list when B = 1;
            None: no separators (one segment assumed; the block rule is not applied).
        sep_token: the separator token; None: ``[SEP]`` or ``</s>``, whichever the tokens hold.
        special_tokens_mask: the batch's (B, T) special-tokens mask (the tokenizer's, with
            ``return_special_tokens_mask=True``): only the separators it marks end a segment, so that a text holding
            ``[SEP]`` stays one segment. None: every separator token ends one.

    Raises:
        ArgumentTypeError: a token that is not a str (token ids instead of ``convert_ids_to_tokens``'s strings).

    Warns:
        SeparatorWarning: tokens were given, but an example holds no separator token (e.g. ``sep_token="</s>"``
            with BERT's tokens): it is classified as one segment.
    """
    if attentions is None or (isinstance(attentions, (list, tuple)) and not attentions):
        raise ClassifierError("no attentions: call the model with output_attentions=True (and load it with "
                              "attn_implementation='eager' so that it returns them)")
    if isinstance(attentions, (list, tuple)):
        layers = [_numpy(a) for a in attentions]
        shapes = sorted({a.shape for a in layers})
        if len(shapes) > 1:  # a head-pruned model: layers of different head counts cannot be stacked
            raise ClassifierError(f"the layers' attentions have different shapes ({', '.join(map(str, shapes))}); "
                                  f"classify each layer on its own: classify_attentions([layer])")
        att = np.stack(layers, axis=1)  # (B, L, H, T, T)
    else:
        att = _numpy(attentions)
        if att.ndim == 4:
            att = att[None]
    if att.ndim != 5 or att.shape[-1] != att.shape[-2]:
        raise ClassifierError(f"attentions of shape {att.shape} are not L tensors (B, H, T, T); pass "
                              f"outputs.attentions of a model called with output_attentions=True")
    b, t = att.shape[0], att.shape[-1]
    mask = np.ones((b, t), dtype=bool) if attention_mask is None else _numpy(attention_mask).astype(bool)
    if mask.ndim == 1:
        mask = mask[None]
    if mask.shape != (b, t):
        hint = ("; if these attentions were stacked, stack them on dim 1 (torch.stack(outputs.attentions, 1): "
                "(B, L, H, T, T)) or pass outputs.attentions itself" if att.shape[1] == mask.shape[0] else "")
        raise ClassifierError(f"attention_mask of shape {mask.shape} does not match the attentions' batch and "
                              f"length ({b}, {t}); pass the mask the model was called with{hint}")
    if tokens is not None and len(tokens) and (isinstance(tokens[0], str) or np.ndim(tokens[0]) == 0):
        tokens = [tokens]  # one example's tokens (or its ids: refused below as such)
    if tokens is not None and len(tokens) != b:
        raise ClassifierError(f"got tokens for {len(tokens)} examples and attentions for {b}; pass one token list "
                              f"per example (tokenizer.convert_ids_to_tokens of each row of input_ids)")
    args.text("sep_token", sep_token, none=True)
    special = None if special_tokens_mask is None else _numpy(special_tokens_mask).astype(bool)
    if special is not None and special.ndim == 1:
        special = special[None]
    if special is not None and (tokens is None or special.shape != (b, t)):
        raise ClassifierError(f"special_tokens_mask of shape {special.shape} for attentions of ({b}, {t})"
                              + (" and no tokens; pass tokens too" if tokens is None else "; pass the mask the "
                                 "tokenizer gave for the padded batch the model saw"))
    out, unseparated = [], []
    for i in range(b):
        keep = np.flatnonzero(mask[i])
        if keep.size == 0:
            raise ClassifierError(f"example {i} has no real token in attention_mask")
        maps = att[i][:, :, keep][:, :, :, keep]  # (L, H, T_i, T_i)
        toks = seps = None
        if tokens is not None:
            if len(tokens[i]) != t:
                raise ClassifierError(f"example {i} has {len(tokens[i])} tokens for attentions over {t} positions; "
                                      f"pass the tokens of the padded batch the model saw")
            wrong = next((tok for tok in tokens[i] if not isinstance(tok, str)), None)
            if wrong is not None:
                raise args.ArgumentTypeError(
                    f"tokens must be strings, but example {i} holds {type(wrong).__name__} {wrong!r:.20} (token ids?); "
                    f"pass tokenizer.convert_ids_to_tokens(ids) of each row of input_ids")
            toks = [tokens[i][k] for k in keep]
            seps = separators(toks, sep_token, None if special is None else special[i][keep])
            if not seps:
                unseparated.append(i)
        out.append((maps, seps, toks))
    if unseparated:
        shown = ", ".join(map(str, unseparated[:5])) + (", ..." if len(unseparated) > 5 else "")
        warnings.warn(f"no separator token ({sep_token or ' or '.join(SEPARATOR_TOKENS)}) in the tokens of example(s) "
                      f"{shown}: each is classified as one segment (never block); pass sep_token=tokenizer."
                      f"sep_token if the tokenizer's separator is another", SeparatorWarning, stacklevel=3)
    return out


class MapWarning(UserWarning):
    """A map passed the check but with a warning (its rows do not sum to 1): it is classified as given."""


class SeparatorWarning(UserWarning):
    """Tokens were given but an example holds no separator token: it is classified as one segment."""


@dataclasses.dataclass
class Patterns:
    """The pattern of each classified map.

    Attributes:
        probs: (..., 5) probabilities in :data:`patterncnn.LABELS` order (the leading shape is the input's).
    """

    probs: np.ndarray

    @property
    def labels(self) -> np.ndarray | str:
        """(...) the most probable pattern of each map, as names (one name, a ``str``, for a single map)."""
        return np.asarray(LABELS, dtype=object)[self.probs.argmax(-1)]

    def frame(self) -> "pd.DataFrame":
        """One row per map: ``label`` and the probability of each pattern."""
        import pandas as pd

        flat = self.probs.reshape(-1, len(LABELS))
        df = pd.DataFrame(flat, columns=list(LABELS))
        df.insert(0, "label", np.asarray(LABELS, dtype=object)[flat.argmax(-1)])  # labels is a str for one map
        return df


@dataclasses.dataclass
class HeadPatterns(Patterns):
    """The pattern of every (example, layer, head) map of a batch.

    Attributes:
        probs: (B, L, H, 5) probabilities, :data:`patterncnn.LABELS` order.
        tokens: per example its real tokens (None when no tokens were given).
        seps: per example the separator positions found in its tokens.
    """

    tokens: list[list[str] | None] = dataclasses.field(default_factory=list)
    seps: list[list[int] | None] = dataclasses.field(default_factory=list)

    def frame(self) -> "pd.DataFrame":
        """One row per (example, layer, head): ``label`` and the probability of each pattern."""
        import pandas as pd

        b, layers, heads, _ = self.probs.shape
        idx = pd.MultiIndex.from_product([range(b), range(layers), range(heads)], names=["example", "layer", "head"])
        df = pd.DataFrame(self.probs.reshape(-1, len(LABELS)), index=idx, columns=list(LABELS))
        df.insert(0, "label", self.labels.reshape(-1))
        return df

    def shares(self) -> "pd.DataFrame":
        """Per example, the share of its heads whose most probable pattern is each one."""
        import pandas as pd

        lab = self.probs.argmax(-1).reshape(self.probs.shape[0], -1)  # (B, L*H)
        return pd.DataFrame([[float((row == k).mean()) for k in range(len(LABELS))] for row in lab],
                            columns=list(LABELS)).rename_axis("example")

    def plot(self, example: int = 0) -> "Figure":
        """The layer × head grid of one example (0 to B - 1): colour = pattern, shade = its probability."""
        p = self.probs[args.whole("example", example, most=len(self.probs) - 1)]
        return head_grid_plot(p, f"example {example}: pattern per head (shade = probability)")

    def __repr__(self) -> str:
        """A summary, not the probabilities: the grid's size and how many heads took each pattern."""
        b, layers, heads, _ = self.probs.shape
        counts = np.bincount(self.probs.argmax(-1).ravel(), minlength=len(LABELS))
        def n(count: int, noun: str) -> str:
            return f"{count} {noun}" if count == 1 else f"{count} {noun}s"

        return (f"HeadPatterns({n(b, 'example')} x {n(layers, 'layer')} x {n(heads, 'head')}: "
                + ", ".join(f"{n} {c}" for n, c in zip(LABELS, counts)) + "; .labels, .probs, .frame(), .plot())")

    def _repr_html_(self) -> str:
        from html import escape

        def luminance(rgb: list[float]) -> float:  # WCAG's relative luminance of an sRGB colour (0-255)
            lin = [c / 255 / 12.92 if c <= 10.31 else ((c / 255 + 0.055) / 1.055) ** 2.4 for c in rgb]
            return 0.2126 * lin[0] + 0.7152 * lin[1] + 0.0722 * lin[2]

        def cell(l: int, h: int, k: int, prob: float) -> str:
            # The colour fades with the probability, the letter does not; it is white or dark, whichever contrasts
            # more with the cell as shown (the colour over the white page).
            alpha, colour = 0.2 + 0.8 * prob, COLORS[LABELS[k]]
            rgb = [int(colour[i:i + 2], 16) for i in (1, 3, 5)]
            shown = luminance([alpha * c + (1 - alpha) * 255 for c in rgb])
            letter = "#fff" if 1.05 / (shown + 0.05) > (shown + 0.05) / (luminance([34] * 3) + 0.05) else "#222"
            return (f'<td style="background:rgba({",".join(map(str, rgb))},{alpha:.2f});color:{letter};'
                    f'text-align:center;padding:1px 3px" title="layer {l}, head {h}: {LABELS[k]} {prob:.2f}">'
                    f'{SHORT[LABELS[k]]}</td>')

        parts = []
        for i, p in enumerate(self.probs[:4]):
            words = " ".join(self.tokens[i]) if i < len(self.tokens) and self.tokens[i] else ""
            rows = "".join("<tr><th>{}</th>{}</tr>".format(l, "".join(
                cell(l, h, k, float(p[l, h, k])) for h, k in enumerate(p[l].argmax(-1)))) for l in range(p.shape[0]))
            parts.append(f"<p><b>example {i}</b> {escape(words[:300])}</p><table style='border-collapse:collapse;"
                         f"font:11px monospace'><tr><th></th>{''.join(f'<th>{h}</th>' for h in range(p.shape[1]))}"
                         f"</tr>{rows}</table>")
        more = f"<p>… and {len(self.probs) - 4} more examples</p>" if len(self.probs) > 4 else ""
        legend = ", ".join(f"{SHORT[n]} {n}" for n in LABELS)
        return f"<div>{''.join(parts)}{more}<p style='font:11px sans-serif'>rows: layers, columns: heads; " \
               f"{legend}</p></div>"
