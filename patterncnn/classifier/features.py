"""Hand-crafted features of an attention map, and the rule that pre-annotates from them.

The features describe where the mass sits, in the guide's terms: columns (``[CLS]``, ``[SEP]``,
any token), the main diagonal and its neighbours, the two segment squares, lines off the
diagonal, and spread (entropy). They feed two things:

* :func:`rule_scores`: a transparent rule that gives a *pre-annotation* (a starting point an
  annotator confirms or corrects by looking at the map; it never decides a label);
* the feature baseline that the CNN must beat (``patterncnn train``).

Usage::

    f = map_features(arr, seps)            # (len(FEATURE_NAMES),) float32
    probs = rule_scores(arr, seps)         # (5,) in LABELS order, sums to 1
"""

from __future__ import annotations

import numpy as np

from ..core.segments import is_pair, same_segment, valid_seps

FEATURE_NAMES: tuple[str, ...] = (
    "cls_col", "sep_cols", "top1_col", "top3_cols", "top_col_rows",
    "diag0", "diag_prev", "diag_next", "band1", "band3",
    "offdiag_line", "within_segments", "within_excess",
    "row_entropy", "row_max", "log_T", "is_pair", "top3_excess", "band1_excess",
)


def map_features(a: np.ndarray, seps: list[int] | None = None) -> np.ndarray:
    """Features of one (T, T) map; see FEATURE_NAMES. Rows are renormalised to sum to 1."""
    a = np.asarray(a, dtype=np.float64)
    t = a.shape[0]
    a = a / np.maximum(a.sum(1, keepdims=True), 1e-12)
    col = a.mean(0)  # share of all mass in each column
    order = np.argsort(col)[::-1]
    seps_in = valid_seps(t, seps)
    top = order[0]
    idx = np.arange(t)
    diag = lambda k: float(np.diagonal(a, k).sum() / t)  # noqa: E731 - mean mass on diagonal k
    dist = np.abs(idx[:, None] - idx[None, :])
    offdiag = max((diag(k) for k in range(-t + 1, t) if abs(k) > 3), default=0.0)
    mask, pair = same_segment(t, seps_in), is_pair(t, seps_in)
    within = float(a[mask].sum() / t)
    ent = -(a * np.log(np.maximum(a, 1e-12))).sum(1).mean() / max(np.log(t), 1e-12)
    band1 = float(a[dist <= 1].sum() / t)
    # Chance levels: a small map or a block has a lot of mass near the diagonal by mere size, so the
    # rule compares with a map uniform within each segment (uniform overall for single segments).
    seg_uniform = mask / mask.sum(1, keepdims=True)
    band1_chance = float(seg_uniform[dist <= 1].sum() / t)
    return np.array([
        col[0], col[seps_in].sum() if seps_in else 0.0, col[top], col[order[:3]].sum(),
        float((a.argmax(1) == top).mean()),
        diag(0), diag(-1), diag(1), band1, float(a[dist <= 3].sum() / t),
        offdiag, within, within - mask.mean(),
        ent, a.max(1).mean(), np.log(t), float(pair),
        col[order[:3]].sum() - min(3, t) / t, band1 - band1_chance,
    ], dtype=np.float32)


def rule_scores(a: np.ndarray, seps: list[int] | None = None) -> np.ndarray:
    """Pre-annotation scores in LABELS order (sum to 1), from a transparent rule on the features.

    vertical-ness = mass in the top-3 columns; diagonal-ness = mass within one token of the
    diagonal (both above chance); block-ness = within-segment mass above chance, for pairs only, when neither of the
    others is strong. What is left goes to heterogeneous.
    """
    f = dict(zip(FEATURE_NAMES, map_features(a, seps)))
    v = float(np.clip((f["top3_excess"] - 0.05) / 0.25, 0, 1))
    d = float(np.clip((f["band1_excess"] - 0.05) / 0.25, 0, 1))
    b = float(np.clip(f["within_excess"] / 0.35, 0, 1)) * (1 - v) * (1 - d) if f["is_pair"] else 0.0
    s = np.array([v * (1 - d), d * (1 - v), v * d, b, (1 - v) * (1 - d) * (1 - b)], dtype=np.float64) + 1e-3
    return (s / s.sum()).astype(np.float32)
