"""Synthetic self-attention maps, labelled by construction, for pretraining the pattern CNN.

Every map is built the way real attention is: per-row logits (a sum of random components), then a
row softmax with a per-map sharpness (inverse temperature) and a small per-row jitter. So each row
sums to 1 and the picture has the texture of attention (heavy-tailed rows, a dark background with
speckle) rather than of a drawing. The classes, in the guide's fixed order
(``annotations/ANNOTATION_GUIDE.md`` v1.1): ``vertical``, ``diagonal``, ``vertical+diagonal``,
``block``, ``heterogeneous``. Every map is then *checked* against the guide (below) and rebuilt
when it falls between two labels, so no ambiguous map carries a confident label.

Usage::

    rng = np.random.default_rng(0)
    arr, seps = generate("block", rng)              # one (T, T) float32 map and its separators
    samples = batch(4000, rng)                      # balanced list of Sample(map, seps, label)
    samples = batch(4000, rng, proportions={"vertical": 0.5, "diagonal": 0.5}, max_t=128)
    for samples in iter_batches(256, rng): ...      # endless stream (generated 4096 at a time)

Generate a few thousand maps per call: maps are built in padded chunks of similar T, and a chunk
costs a few milliseconds whatever its size.

Layout (guide: "How to look at a map"; :mod:`patterncnn.core.segments`)
    T follows the real maps (quantile tables below, from the 1,505 labelled maps of
    ``annotations/``): pairs median 47 (13..128), single sentences median 13 (5..55); a 5 %
    tail of long pairs up to ``max_t`` (default 256) and a 2.5 % spike at 128 (truncated inputs).
    ``t_prior="class"`` uses each class's real share of pairs and length scale instead of one shared
    prior. Pairs are BERT ``[CLS] A [SEP] B [SEP]`` (seps ``[a+1, T-1]``) or MPNet/RoBERTa
    ``<s> A </s></s> B </s>`` (seps ``[a+1, a+2, T-1]``), split at the real distribution of
    boundary/T; single inputs have one separator at ``T-1``; token 0 is ``[CLS]``/``<s>``. Block
    maps are always pairs with two segments of at least 4 tokens.

Ingredients shared by every class (the background the guide asks annotators to look through)
    * speckle: Gaussian logit noise per cell, its level drawn per map;
    * token salience: a heavy-tailed (t4) logit per key column: faint stripes;
    * a smooth rank-2 texture: input-dependent blobs;
    * the special rows of real maps: the ``[CLS]`` row attending to itself (the bright top-left
      cell) or spread out; separator rows attending to themselves, to ``[CLS]`` or to the other
      separators (the bright bottom-right corner); the first rows attending to token 0, fading down
      the rows (clarification 7: it counts as a column only if it stands out in most rows);
    * single-cell logits grow as 0.8 log(T / 40), so a column or diagonal cell keeps its share of
      the row whatever the length.

Class recipes (parameters are drawn widely per map; the guide rule each follows)
    ``vertical`` (rule 1; clarifications 2, 5, 7, 8): one to three kinds of column out of the
        ``[CLS]`` column, the final separator, the first separator(s), each segment attending to
        its own separator (columns over one segment's rows, clar. 2), 1-5 punctuation-like random
        tokens, or many thin stripes with gaps; row profiles flat, linearly fading, fading to a
        floor (clar. 7) or ragged. A diagonal only when clearly faint or over fewer than half of
        the rows (rule 3, clar. 1).
    ``diagonal`` (rules 2, 3; clarifications 3, 4, 6, 7): a line at offset 0, -1, +1 (or +-2), one
        to three offsets wide, sometimes dotted, with per-row jitter and often a graded window glow
        beside it and a broad distance fall-off (local heads); sometimes a soft wide band that
        crosses the boundary (clar. 4: diagonal whatever its width). On top: the first rows'
        [CLS] fade, a faint full column (rule 3: dominant alone), a faint triangle inside the
        segments as background (clar. 3), clearly weaker cross-segment lines (clar. 6), a few hot
        cells.
    ``vertical+diagonal`` (rule 3; clarifications 1, 8): the column kinds of ``vertical`` and the
        diagonal kinds of ``diagonal`` drawn around one logit level (columns a little stronger, as
        in the real maps) so that both are seen without searching and both span most rows; tiny
        maps get a column that is the brightest cell of most rows and a diagonal a close second.
    ``block`` (rule 4; clarifications 2, 3, 4): the two segment squares raised against the cross
        area, with a diffuse interior: a triangle fading away from the diagonal inside each
        segment (the fine-tuned MPNet shape, clar. 3), blobs (MiniLM), or a band wider than three
        tokens cut at the boundary (clar. 4); optional own-separator columns over each segment's
        rows, weaker than the square mass away from them (clar. 2); leakage across the boundary.
    ``heterogeneous`` (rule 5; clarifications 5, 6): one or more of near-uniform haze, scattered
        hot cells that change column from row to row, cross-segment lines (a token attending to the
        same word in the other sentence) or far-offset lines, with a main diagonal no brighter than
        them (clar. 6), short line fragments, chunky blobs that ignore the squares, faint stripe
        haze, columns over a minority of rows (clar. 5), a faint broad glow along the diagonal that
        does not stand out as a line (seen in real heterogeneous maps).

The check (``_measure``, ``_accept``; ``judge`` applies it to any map)
    A column cell *stands out* when it is >= 4x its row's geometric mean (the row's background) and
    >= 20 % of the typical row maximum (median over rows of the row max; not the map max, so the
    bright top of a fading column does not hide the rest of it, clar. 7). For T <= 12 a column cell
    must be (nearly) the brightest of its row (clar. 8). A diagonal cell stands out at >= 6x the
    geometric mean (3x for T <= 12, rising to 6x at T = 48: short rows) and >= 4 % of the map max.

    * column coverage: share of rows in which a *persistent* column (one standing out, away from
      the diagonal band, in >= 50 % of all rows or >= 60 % of one segment's rows) stands out (rules
      1, 3; clar. 2, 5, 7); column strength: median of that column's cells / map max (how bright
      it looks);
    * diagonal coverage: best share of rows over offsets -2..+2 (or the -1..+1 band) in which the
      diagonal cell stands out, not counting [CLS], separator and persistent-column cells (rule 2);
      diagonal strength as for columns; crispness: the diagonal cell vs the cells 3 steps beside it;
    * squares (pairs): density inside the two squares vs outside, away from persistent columns;
      each segment's rows' mass in their own square; how lit the interior is; whether a band near
      the diagonal crosses the boundary (rule 4; clar. 2, 4);
    * lines: mean brightness of the constructed off-diagonal line cells vs the diagonal (clar. 6).

    Acceptance, with a gap between present and absent (coverage >= 0.65 / <= 0.40 for columns,
    >= 0.60 / <= 0.35 for the diagonal; a map in a gap is rebuilt):
    ``vertical``: columns present; diagonal absent or under 1/14 of the column strength; no squares
    (in-square density < 1.8x the outside, or columns outweighing the squares, clar. 2).
    ``diagonal``: diagonal present; columns absent or under 0.4x the diagonal strength (clearly
    faint); lines <= 0.35x the diagonal; if the squares hold the mass, the diagonal is crisp or the
    band crosses the boundary (crispness >= 2.5 or the band continues across it).
    ``vertical+diagonal``: both present; diagonal >= 0.15x and column >= 0.55x the other's strength;
    lines weak; the same square condition. ``block``: in-square density >= 2.5x the outside,
    >= 55 % of each segment's rows' mass in its own square, interior lit (>= 2 % of the max), no
    crisp diagonal (crispness <= 2), no band across the boundary, columns' mass under 0.6x the square
    mass away from them (clar. 2). ``heterogeneous``: columns absent; diagonal absent or lines >= 0.8x
    its brightness; no squares (density ratio < 1.8).
    The thresholds come from the guide's wording and were checked against the real labelled maps
    (``compare_stats.py`` prints how the check reads them).

The check redraws a rejected map's *parameters* on the same layout (T, pair, split), so it does not
skew the T distribution; only a layout rejected ``RETRIES`` times is replaced (this under-represents
tiny vertical+diagonal maps).
"""

from __future__ import annotations

import dataclasses
from typing import Iterator, NamedTuple

import numpy as np

from ..core.labels import LABELS

# Quantiles (0, 5, ..., 100 %) of T in the real labelled maps (annotations/, 1,505 maps).
PAIR_T_Q = np.array([13, 20, 25, 31, 34, 37, 39, 41, 44, 46, 47, 50, 53, 56, 60, 63, 68, 71, 79, 114, 128], float)
SINGLE_T_Q = np.array([5, 7, 8, 9, 9, 10, 11, 11, 12, 13, 13, 15, 17, 19, 21, 24, 27, 29, 34, 39, 55], float)
# Quantiles of (first token of segment B) / T in the real pairs.
BOUNDARY_Q = np.array([0.089, 0.223, 0.286, 0.365, 0.43, 0.455, 0.472, 0.49, 0.5, 0.519, 0.53, 0.542, 0.55,
                       0.569, 0.591, 0.621, 0.71, 0.755, 0.808, 0.889, 0.945])
PAIR_P = 0.73  # share of two-segment inputs in the real maps
# t_prior="class": per class, the real share of pairs and a scale on T (real diagonal maps are longer).
CLASS_PRIOR = {"vertical": (0.62, 0.95), "diagonal": (0.92, 1.25), "vertical+diagonal": (0.77, 1.0),
               "block": (1.0, 0.85), "heterogeneous": (0.89, 1.05)}
MPNET_P = 0.5  # share of the <s> A </s></s> B </s> layout among pairs

# The check (see the module docstring).
LOG_RHO_COL = float(np.log(4.0))  # a column cell stands out at >= 4x its row's geometric-mean background
NU_COL = 0.2  # ... and at >= 20 % of the typical row maximum (median over rows of the row max)
COL_REF = "rowmax"  # the reference of NU_COL ("max": the map maximum)
LOG_RHO_DIAG = float(np.log(6.0))  # the same for a diagonal cell
NU_DIAG = 0.04  # a continuous line shows at a lower brightness than a column
LOG_RHO_DIAG_TINY = float(np.log(3.0))  # T <= 12 (rising to LOG_RHO_DIAG at T = 48): in short rows the few
# structured cells dominate the row's geometric mean
CRISP_STEP = 3  # crispness: the diagonal cell against the cells this many steps beside it
TINY_T = 12  # clarification 8
COL_ON, COL_OFF = 0.65, 0.40
DIAG_ON, DIAG_OFF = 0.60, 0.35

f32 = np.float32


_POOL_SIZE = 1 << 22
_POOL: np.ndarray | None = None


def _noise(rng: np.random.Generator, B: int, P: int) -> np.ndarray:
    """(B, P, P) standard-normal speckle, cut at random offsets from a fixed pool of 4M normals (drawing
    fresh normals for every cell was half the run time); each map's slab is randomly transposed/flipped."""
    global _POOL
    if _POOL is None:
        _POOL = np.random.default_rng(20261125).standard_normal(_POOL_SIZE, dtype=f32)
    n = P * P
    out = np.empty((B, P, P), f32)
    starts = rng.integers(0, _POOL_SIZE - n, B)
    how = rng.integers(0, 4, B)
    for k in range(B):
        slab = _POOL[starts[k]:starts[k] + n].reshape(P, P)
        out[k] = slab.T if how[k] == 1 else slab[::-1] if how[k] == 2 else slab[:, ::-1] if how[k] == 3 else slab
    return out


class Sample(NamedTuple):
    """One generated map: ``map`` (T, T) float32 rows summing to 1, ``seps``, ``label`` (index in LABELS)."""

    map: np.ndarray
    seps: list[int]
    label: int


@dataclasses.dataclass
class _Chunk:
    """A batch of maps of one label padded to P tokens, with per-map layout arrays."""

    rng: np.random.Generator
    T: np.ndarray  # (B,) int
    pair: np.ndarray  # (B,) bool
    mpnet: np.ndarray  # (B,) bool
    bnd: np.ndarray  # (B,) first token of segment B (= T for single segments)
    sep_a: np.ndarray  # (B,) first separator (A's end; for single inputs T-1)
    sep_a2: np.ndarray  # (B,) MPNet's second </s> (== sep_a otherwise)
    sep_end: np.ndarray  # (B,) T-1
    P: int = 0
    Z: np.ndarray | None = None  # (B, P, P) logits
    lines: list | None = None  # (b, i, j) index arrays of the constructed off-diagonal line cells
    sharp: np.ndarray | None = None  # (B,) sharpness multiplier
    faint_columns: bool = False  # the research variant of the diagonal class (see _faint_column)

    def __post_init__(self):
        self.B = len(self.T)
        self.P = int(self.T.max())
        idx = np.arange(self.P)
        self.I = idx
        self.D = (idx[None, :] - idx[:, None]).astype(np.int32)  # j - i
        self._offsets = np.arange(-(self.P - 1), self.P).astype(f32)  # all offsets j - i, for Toeplitz tables
        self._dindex = self.D + (self.P - 1)  # (P, P) index of each cell's offset in such a table
        self._bcol = np.arange(self.B)[:, None]
        self._pos = (idx[None, :] / self.T[:, None]).astype(f32)  # (B, P) row position i / T
        self.valid = idx[None, :] < self.T[:, None]  # (B, P)
        self.seg = np.where(idx[None, :] >= self.bnd[:, None], 1, 0)  # (B, P)
        self.same = (self.seg[:, :, None] == self.seg[:, None, :])  # (B, P, P)
        self.is_sep = np.zeros((self.B, self.P), bool)
        b = np.arange(self.B)
        for s in (self.sep_a, self.sep_a2, self.sep_end):
            self.is_sep[b, s] = True
        self.Z = np.zeros((self.B, self.P, self.P), f32)
        self.lines = []
        self.sharp = np.ones(self.B, f32)
        self.tadj = (0.8 * np.log(self.T / 40.0)).astype(f32)

    def seps(self, k: int) -> list[int]:
        if not self.pair[k]:
            return [int(self.sep_end[k])]
        if self.mpnet[k]:
            return [int(self.sep_a[k]), int(self.sep_a2[k]), int(self.sep_end[k])]
        return [int(self.sep_a[k]), int(self.sep_end[k])]

    # ------------------------------------------------------------------ random helpers
    def u(self, lo: float, hi: float, n: int | None = None) -> np.ndarray:
        return self.rng.uniform(lo, hi, self.B if n is None else n).astype(f32)

    def cu(self, lo, hi) -> np.ndarray:
        """A single-cell logit U(lo, hi) for T = 40, shifted by 0.8 log(T / 40) (>= 0): a cell keeps its
        share of the row whatever the length, as in real heads."""
        return np.maximum(self.u(lo, hi) + self.tadj, 0).astype(f32)

    def p(self, prob: float) -> np.ndarray:
        return self.rng.random(self.B) < prob

    def rand_col(self, lo: int = 1, exclude_seps: bool = True) -> np.ndarray:
        """A random valid column per map in [lo, T-1), avoiding separators when possible."""
        c = lo + (self.rng.random(self.B) * np.maximum(self.T - 1 - lo, 1)).astype(int)
        c = np.minimum(c, self.T - 1)
        if exclude_seps:
            bad = self.is_sep[np.arange(self.B), c]
            c = np.where(bad & (c > lo), c - 1, c)
        return c

    def smooth(self, n: int, scale: np.ndarray) -> np.ndarray:
        """(B, n, P) smooth random fields (linear interpolation of N(0,1) knots every ``scale`` tokens)."""
        k = int(np.ceil(self.P / max(float(scale.min()), 1.0))) + 2
        knots = self.rng.standard_normal((self.B, n, k), dtype=f32)
        x = self.I[None, :] / scale[:, None]  # (B, P)
        x0 = np.floor(x).astype(int)
        w = (x - x0).astype(f32)[:, None, :]
        x0 = np.minimum(x0, k - 2)[:, None, :].repeat(n, axis=1)
        a = np.take_along_axis(knots, x0, axis=2)
        b = np.take_along_axis(knots, x0 + 1, axis=2)
        return a * (1 - w) + b * w

    # ------------------------------------------------------------------ components
    def row_profile(self, kind: np.ndarray) -> np.ndarray:
        """(B, P) row weights of a column: 0 flat, 1 linear fade, 2 exponential fade to a floor, 3 ragged."""
        B, P = self.B, self.P
        prof = self.rng.standard_normal((B, P), dtype=f32)
        prof *= f32(0.12)
        np.exp(prof, out=prof)
        if (kind == 1).any():
            sel = np.nonzero(kind == 1)[0]
            prof[sel] *= 1 - self.rng.uniform(0.2, 0.6, (len(sel), 1)).astype(f32) * self._pos[sel]
        if (kind == 2).any():
            sel = np.nonzero(kind == 2)[0]
            floor = self.rng.uniform(0.45, 0.8, (len(sel), 1)).astype(f32)
            lam = self.rng.uniform(0.05, 0.3, (len(sel), 1)).astype(f32) + f32(1.0) / self.T[sel, None]
            prof[sel] *= floor + (1 - floor) * np.exp(-self._pos[sel] / lam)
        if (kind == 3).any():
            sel = np.nonzero(kind == 3)[0]
            drop = self.rng.random((len(sel), P), dtype=f32) < self.rng.uniform(0.0, 0.25, (len(sel), 1))
            prof[sel] *= np.where(drop, f32(0.3), f32(1.0))
        return prof

    def _add(self, idx: np.ndarray, x: np.ndarray) -> None:
        """Z[idx] += x, by a slice-free path when idx is every map."""
        if len(idx) == self.B:
            self.Z += x
        else:
            self.Z[idx] += x

    def _add_toeplitz(self, idx: np.ndarray, table: np.ndarray, inside: bool = False) -> None:
        """Z[idx, i, j] += table[:, j - i + P - 1] (a function of the offset only), optionally only inside
        the segment squares: one gather instead of a chain of elementwise passes over P x P."""
        x = table.astype(f32)[:, self._dindex]  # (n, P, P)
        if inside:
            x *= self.same[idx]
        self._add(idx, x)

    def add_col(self, col: np.ndarray, amp: np.ndarray, prof: np.ndarray, rows: np.ndarray | None = None) -> None:
        """Z[b, i, col[b]] += amp[b] * prof[b, i] (only rows where ``rows`` is True)."""
        v = amp[:, None] * prof
        if rows is not None:
            v = v * rows
        self.Z[self._bcol, self.I[None, :], col[:, None]] += v.astype(f32)

    def add_diag(self, off: np.ndarray, amp: np.ndarray, rowmod: np.ndarray | None = None) -> None:
        """Z[b, i, i + off[b]] += amp[b] * rowmod[b, i] where the cell exists."""
        j = self.I[None, :] + off[:, None]
        ok = (j >= 0) & (j < self.T[:, None])
        v = amp[:, None] * (rowmod if rowmod is not None else 1.0) * ok
        self.Z[self._bcol, self.I[None, :], np.clip(j, 0, self.P - 1)] += v.astype(f32)

    def add_band(self, sel: np.ndarray, amp: np.ndarray, width: np.ndarray, center: np.ndarray,
                 inside: bool) -> None:
        """A Gaussian band around offset ``center`` of sd ``width``; ``inside``: cut at the segment boundary."""
        idx = np.nonzero(sel & (amp != 0))[0]
        if len(idx):
            d = self._offsets[None, :] - center[idx, None]
            self._add_toeplitz(idx, amp[idx, None] * np.exp(-0.5 * (d / width[idx, None]) ** 2), inside)

    def add_local(self, sel: np.ndarray, amp: np.ndarray, length: np.ndarray, center: np.ndarray,
                  ahead: np.ndarray) -> None:
        """A window glow beside offset ``center``: amp * exp(-(|d| - 1) / length) for d != 0; ``ahead``
        scales the side of later tokens (real heads favour the previous tokens)."""
        idx = np.nonzero(sel & (amp != 0))[0]
        if len(idx):
            d = self._offsets[None, :] - center[idx, None]
            w = amp[idx, None] * np.exp(-(np.abs(d) - 1) / length[idx, None]) * (d != 0)
            self._add_toeplitz(idx, np.where(d > 0, w * ahead[idx, None], w))

    def add_triangle(self, sel: np.ndarray, amp: np.ndarray, drop: np.ndarray, upper: np.ndarray) -> None:
        """Each token spreads over the later (upper) or earlier tokens of its own segment, fading by
        ``drop`` logits over half the map (clarification 3)."""
        idx = np.nonzero(sel & (amp != 0))[0]
        if len(idx):
            d = np.where(upper[idx, None], self._offsets[None, :], -self._offsets[None, :])
            slope = drop[idx, None] / (0.5 * self.T[idx, None])
            self._add_toeplitz(idx, (amp[idx, None] - slope * d) * (d >= 0), inside=True)

    def add_locality(self, sel: np.ndarray, gamma: np.ndarray) -> None:
        """Far keys fade: -gamma * log(1 + |i - j|) (the broad distance fall-off of local heads; it darkens the
        background far from the diagonal without drawing a line)."""
        idx = np.nonzero(sel & (gamma != 0))[0]
        if len(idx):
            self._add_toeplitz(idx, -gamma[idx, None] * np.log1p(np.abs(self._offsets))[None, :])

    def add_squares(self, sel: np.ndarray, amp: np.ndarray) -> None:
        """Raise the two segment squares by ``amp`` logits against the cross-segment cells."""
        idx = np.nonzero(sel & (amp != 0))[0]
        if len(idx):
            self._add(idx, amp[idx, None, None] * self.same[idx])

    def add_lowrank(self, sel: np.ndarray, amp: np.ndarray, scale: np.ndarray, rank: int = 2,
                    inside: bool = False) -> None:
        """Smooth rank-``rank`` texture u_i . v_j (blobs), optionally only inside the squares."""
        idx = np.nonzero(sel & (amp != 0))[0]
        if not len(idx):
            return
        u = self.smooth(rank, scale)[idx] * (amp[idx] / np.sqrt(rank)).astype(f32)[:, None, None]
        v = self.smooth(rank, scale)[idx]
        blob = np.matmul(u.transpose(0, 2, 1), v)
        if inside:
            blob *= self.same[idx]
        self._add(idx, blob)

    def add_cells(self, count: np.ndarray, amp_lo: float, amp_hi: float, rows_from: int = 0) -> None:
        """Scattered hot cells: ``count[b]`` random (i, j) cells of map b raised by U(amp_lo, amp_hi)."""
        k = int(count.max()) if len(count) else 0
        if k <= 0:
            return
        bi = np.repeat(np.arange(self.B), k)
        live = (np.arange(k)[None, :] < count[:, None]).ravel()
        T = self.T[bi]
        i = rows_from + (self.rng.random(len(bi)) * (T - rows_from)).astype(int)
        j = (self.rng.random(len(bi)) * T).astype(int)
        amp = np.maximum(self.rng.uniform(amp_lo, amp_hi, len(bi)) + self.tadj[bi], 0).astype(f32) * live
        np.add.at(self.Z, (bi, i, j), amp)

    def add_line(self, off: np.ndarray, amp: np.ndarray, r0: np.ndarray, r1: np.ndarray,
                 jlo: np.ndarray | None = None, jhi: np.ndarray | None = None, mark: bool = True) -> None:
        """A line Z[b, i, i + off[b]] for rows r0[b] <= i < r1[b] (and key columns in [jlo, jhi)),
        with per-cell jitter; recorded in ``lines`` for the check (clarification 6)."""
        j = self.I[None, :] + off[:, None]
        ok = (self.I[None, :] >= r0[:, None]) & (self.I[None, :] < r1[:, None]) & (j >= 0) & (j < self.T[:, None])
        if jlo is not None:
            ok &= (j >= jlo[:, None]) & (j < jhi[:, None])
        ok &= amp[:, None] != 0
        jit = np.exp(self.rng.normal(0, 0.15, ok.shape)).astype(f32)
        bb = np.broadcast_to(np.arange(self.B)[:, None], ok.shape)[ok]
        ii = np.broadcast_to(self.I[None, :], ok.shape)[ok]
        jj = j[ok]
        self.Z[bb, ii, jj] += (amp[:, None] * jit)[ok]
        if mark and len(bb):
            self.lines.append((bb, ii, jj))

    # ------------------------------------------------------------------ shared background
    def background(self, noise: tuple[float, float] = (0.35, 1.2), salience: tuple[float, float] = (0.15, 0.7),
                   texture: tuple[float, float] = (0.0, 0.9)) -> None:
        """Speckle, token salience (faint stripes), smooth texture: the background of every map."""
        B, P = self.B, self.P
        self.Z += self.u(*noise)[:, None, None] * _noise(self.rng, B, P)
        sal = self.rng.standard_t(4, (B, P)).astype(f32) * self.u(*salience)[:, None]
        self.Z += sal[:, None, :]
        self.add_lowrank(np.ones(B, bool), self.u(*texture), self.u(2, 8) + 0.05 * self.T, rank=2)

    def special_rows(self, cls_self: float = 0.45, sep_rows: float = 0.6, first_rows: float = 0.5,
                     first_amp: tuple[float, float] = (1.5, 5.0), first_len: tuple[float, float] = (0.03, 0.3)) -> None:
        """The [CLS] row, the separator rows and the first rows attending to token 0 (clarification 7)."""
        B, b = self.B, np.arange(self.B)
        m = self.p(cls_self)
        self.Z[b, 0, 0] += np.where(m, self.cu(2.0, 7.0), 0)
        spread = ~m & self.p(0.3)
        self.Z[spread, 0, :] *= 0.3
        for s in (self.sep_a, self.sep_a2, self.sep_end):
            mode = self.rng.integers(0, 4, B) * self.p(sep_rows)  # 0 none, 1 self, 2 -> [CLS], 3 -> other seps
            amp = self.cu(2.0, 6.0)
            self.Z[b, s, s] += np.where(mode == 1, amp, 0)
            self.Z[b, s, 0] += np.where(mode == 2, amp, 0)
            for s2 in (self.sep_a, self.sep_end):
                self.Z[b, s, s2] += np.where((mode == 3) & (s2 != s), amp, 0)
        # first rows attend to token 0, fading down the rows
        sel = self.p(first_rows)
        lam = self.u(*first_len) * self.T + 0.5
        prof = np.exp(-np.maximum(self.I[None, :] - 1, 0) / lam[:, None]) * (self.I[None, :] >= 1)
        self.add_col(np.zeros(B, int), np.where(sel, self.cu(*first_amp), 0), prof.astype(f32))


# ---------------------------------------------------------------------- layouts
def _from_quantiles(q: np.ndarray, u: np.ndarray) -> np.ndarray:
    return np.interp(u, np.linspace(0, 1, len(q)), q)


def _layouts(n: int, rng: np.random.Generator, label: str, t: int | None, max_t: int,
             pair_p: float, mpnet_p: float, t_scale: float = 1.0) -> dict:
    """Draw n input layouts (T, pair, layout, boundary) for one label."""
    block = label == "block"
    pair = np.ones(n, bool) if block else rng.random(n) < pair_p
    if t is not None:
        T = np.full(n, int(t))
    else:
        T = np.where(pair, _from_quantiles(PAIR_T_Q, rng.random(n)), _from_quantiles(SINGLE_T_Q, rng.random(n)))
        T = np.minimum(T * t_scale, 128) + rng.uniform(-1.5, 1.5, n)
        if max_t > 128:  # long tail up to max_t (pairs only), the real set stops at 128
            tail = pair & (rng.random(n) < 0.05)
            T = np.where(tail, np.exp(rng.uniform(np.log(100), np.log(max_t), n)), T)
        T = np.where(pair & (rng.random(n) < 0.025), 128, T)  # truncated inputs
        T = np.round(T).astype(int)
    min_seg = 4 if block else 1
    mpnet = pair & (rng.random(n) < mpnet_p) & (T >= 4 + 2 * min_seg)
    min_pair = np.where(mpnet, 4, 3) + 2 * min_seg  # [CLS] + seps + two segments
    if block and (T < min_pair).any():
        if t is not None:
            raise ValueError(f"block needs two segments of >= 4 tokens: T >= {int(min_pair.max())} (got {t})")
        T = np.maximum(T, min_pair)
    pair = pair & (T >= min_pair)
    if t is None:
        T = np.clip(T, 5, max_t)
    mpnet &= pair
    frac = _from_quantiles(BOUNDARY_Q, rng.random(n))
    if block:
        frac = np.clip(frac, 0.25, 0.75)
    nsep_a = np.where(mpnet, 2, 1)
    bnd = np.round(frac * T).astype(int)
    lo = 1 + min_seg + nsep_a  # [CLS] + A + sep(s)
    hi = T - 1 - min_seg
    bnd = np.where(pair, np.clip(bnd, lo, np.maximum(hi, lo)), T)
    sep_a = np.where(pair, bnd - nsep_a, T - 1)
    sep_a2 = np.where(mpnet, bnd - 1, sep_a)
    return dict(T=T, pair=pair, mpnet=mpnet, bnd=bnd, sep_a=sep_a, sep_a2=sep_a2, sep_end=T - 1)


# ---------------------------------------------------------------------- recipes
def _columns(c: _Chunk, amp_range: tuple, allow_stripes: bool = True,
             profile_p: tuple = (0.45, 0.2, 0.25, 0.1), tiny_edges_only: bool = False) -> None:
    """The column kinds of ``vertical`` (rule 1, clarifications 2, 5, 7), at least one per map.

    ``amp_range``: (lo, hi) of the column logits, floats or per-map arrays; ``profile_p``: the shares of
    the [CLS] column's row profiles (flat, linear fade, exponential fade, ragged); ``tiny_edges_only``: in
    maps of T <= 12 only the [CLS] and final-separator columns (a random column there sits on the diagonal).
    """
    B = c.B
    kinds = np.stack([c.p(0.75), c.p(0.3), c.p(0.12) & c.pair, c.p(0.2) & c.pair, c.p(0.25),
                      c.p(0.12 if allow_stripes else 0.0)], 1)
    if tiny_edges_only:
        kinds[c.T <= TINY_T, 2:] = False
    none = ~kinds.any(1)
    kinds[none, 0] = True  # at least one: [CLS] by default
    lo, hi = amp_range

    def amp():
        return c.cu(lo, hi)

    prof_kind = c.rng.choice(4, B, p=list(profile_p))
    c.add_col(np.zeros(B, int), np.where(kinds[:, 0], amp(), 0), c.row_profile(prof_kind))  # [CLS]
    c.add_col(c.sep_end, np.where(kinds[:, 1], amp(), 0), c.row_profile(c.rng.choice(4, B, p=[0.6, 0.2, 0.1, 0.1])))
    c.add_col(c.sep_a, np.where(kinds[:, 2], amp(), 0), c.row_profile(np.zeros(B, int)))
    both = c.mpnet & c.p(0.5)
    c.add_col(c.sep_a2, np.where(kinds[:, 2] & both, amp(), 0), c.row_profile(np.zeros(B, int)))
    # each segment attends to its own separator (clarification 2)
    a_amp = np.where(kinds[:, 3], amp(), 0)
    rows_a = (c.seg == 0).astype(f32)
    c.add_col(np.where(c.p(0.5), c.sep_a2, c.sep_a), a_amp, c.row_profile(np.zeros(B, int)), rows_a)
    c.add_col(c.sep_end, a_amp * c.u(0.8, 1.2), c.row_profile(np.zeros(B, int)), 1 - rows_a)
    # punctuation-like random tokens
    npunct = c.rng.integers(1, 6, B) * kinds[:, 4]
    for k in range(int(npunct.max())):
        c.add_col(c.rand_col(1), np.where(npunct > k, c.cu(0.8 * lo, hi), 0),
                  c.row_profile(c.rng.choice(4, B, p=[0.5, 0.2, 0.1, 0.2])))
    # many thin stripes (MiniLM texture): 10-35 % of the keys, each over most rows with gaps
    idx = np.nonzero(kinds[:, 5])[0]
    if len(idx):
        m, P = len(idx), c.P
        sel = c.rng.random((m, P)) < c.rng.uniform(0.1, 0.35, (m, 1))
        sel[:, 0] = False
        amp = np.maximum(c.rng.uniform(1.5, 3.0, (m, P)) + c.tadj[idx, None], 0) * sel * c.valid[idx]
        gaps = c.rng.random((m, P, P), dtype=f32) < c.rng.uniform(0.0, 0.25, (m, 1, 1)).astype(f32)
        c.Z[idx] += amp.astype(f32)[:, None, :] * np.where(gaps, f32(0.3), f32(1.0))


def _diag(c: _Chunk, amp_range: tuple, dotted_p: float = 0.3, band_p: float = 0.1,
          local_p: float = 0.4) -> tuple[np.ndarray, np.ndarray]:
    """The diagonal kinds of ``diagonal`` (rule 2, clarification 4). Returns the main offset and logit per map."""
    B = c.B
    off = c.rng.choice([0, -1, 1, -2, 2], B, p=[0.38, 0.3, 0.22, 0.05, 0.05])
    amp = c.cu(*amp_range)
    width = c.rng.choice([1, 2, 3], B, p=[0.6, 0.25, 0.15])
    dotted = c.p(dotted_p)
    keep = np.where(dotted, c.u(0.6, 0.9), 1.0)
    rowmod = np.exp(c.rng.normal(0, 0.35, (B, c.P))).astype(f32)
    rowmod *= np.where(c.rng.random((B, c.P)) < keep[:, None], 1.0, c.u(0.0, 0.4)[:, None])
    c.add_diag(off, amp, rowmod)
    side = np.where(c.p(0.5), 1, -1)
    c.add_diag(off + side, np.where(width >= 2, amp * c.u(0.6, 1.0), 0), rowmod)
    c.add_diag(off - side, np.where(width >= 3, amp * c.u(0.4, 0.8), 0), rowmod)
    # local attention: a graded glow that fades away from the line (real heads look at a window)
    local = c.p(local_p)
    c.add_local(local, amp * c.u(0.3, 0.75), c.u(1.5, 8.0), off, c.u(0.15, 0.9))
    # a wide soft band across the boundary (clarification 4: diagonal whatever its width)
    band = c.p(band_p)
    c.add_band(band, c.u(1.0, 2.5) * band, c.u(1.5, 4.0), off.astype(f32), inside=False)
    return off, amp


def _recipe_vertical(c: _Chunk) -> None:
    c.background(noise=(0.4, 1.5))
    c.special_rows(cls_self=0.25, sep_rows=0.4)
    level = c.u(1.9, 4.7)
    _columns(c, (level - 0.6, level + 0.6))
    B = c.B
    # a clearly faint diagonal (the hard case: one can find it, but it is far fainter than the columns), or
    # one in fewer than half of the rows (rule 3, clarification 1)
    faint = c.p(0.35)
    c.add_diag(c.rng.choice([0, -1, 1], B), np.where(faint, np.maximum(level + c.tadj - c.u(1.2, 2.8), 0), 0))
    partial = ~faint & c.p(0.15)
    rows = (c.I[None, :] < (c.u(0.1, 0.3) * c.T)[:, None]).astype(f32)
    c.add_diag(c.rng.choice([0, -1, 1], B), np.where(partial, c.cu(1.5, 3.5), 0), rows)
    c.sharp = c.u(0.7, 1.25)


def _recipe_diagonal(c: _Chunk) -> None:
    B = c.B
    c.background(noise=(0.4, 1.4))
    quiet = c.p(0.6) if c.faint_columns else None  # the variant's maps with a faint column (_faint_column) ...
    if quiet is not None:
        c.Z[quiet] *= c.u(0.3, 0.6)[quiet, None, None]  # ... have a quiet background, as the real ones do
    local = c.p(0.6)
    c.add_locality(local if quiet is None else local & ~quiet, c.u(0.3, 1.0))  # (a fall-off would fade the column)
    c.special_rows(first_rows=0.85, first_amp=(3.0, 6.0), first_len=(0.05, 0.25))
    off, amp = _diag(c, (0.9, 3.3), local_p=0.8)
    c.add_cells((c.p(0.3) * c.rng.integers(1, 5, B)), 2.5, 4.5)  # a few isolated bright cells
    # a faint full column next to the diagonal (rule 3: the dominant alone)
    # the hard case of rule 3: a column in most rows, but clearly faint next to the diagonal (its cells
    # ~1/5 of the diagonal's); the check keeps only maps where it is clearly faint or clearly absent
    faint = c.p(0.45)
    if quiet is not None:  # the variant's column replaces this one where it is drawn (logits of one column add up)
        _faint_column(c, quiet, off, amp)
        faint &= ~quiet
    c.add_col(np.where(c.p(0.7), 0, c.sep_end), np.where(faint, np.maximum(amp - c.u(0.8, 2.0), 0), 0),
              c.row_profile(np.zeros(B, int)))
    # triangle inside the segments as background (clarification 3)
    tri = c.p(0.25)
    c.add_triangle(tri, c.u(0.8, 1.8), c.u(0.5, 2.5), c.p(0.3))
    # off-diagonal lines, clearly weaker (clarification 6)
    _cross_lines(c, c.pair & c.p(0.12), c.cu(0.6, 1.4))
    c.sharp = c.u(0.7, 1.2)


FAINT_COL = 0.12  # faint_columns: a column under this share of the map's maximum is not seen at first glance ...
SEEN_COL = 0.17  # ... and one above this is (a gap between them: neither label is sure)


def _faint_column(c: _Chunk, sel: np.ndarray, off: np.ndarray, amp: np.ndarray) -> None:
    """A research variant of the diagonal class (``faint_columns``): a column that stands out in most rows, found by
    searching, but dark on the map's own colour scale under a diagonal whose brightest dots set that scale.

    The maps ``sel`` (60 % of the variant's diagonal maps; the recipe gives them a quiet background and no distance
    fall-off) get a ``[CLS]`` (or final separator) column 0.2-1.0 logits weaker than the diagonal, flat or ragged, and
    most of them 2-7 diagonal dots far brighter than the rest. Real diagonal maps that all three annotators agree on
    look like this (``research/generalisation/boundary.py``: MiniLM's have a column standing out in a median 76 % of
    their rows, at 0.11 of the map's maximum against 0.12 for the diagonal); the check keeps such a map only while the
    column stays under :data:`FAINT_COL` of the maximum (clarification 1: not noticed at first glance). About 9 % of
    the accepted diagonal maps then carry a column in most rows (0.2 % without the variant).
    """
    B, b = c.B, np.arange(c.B)
    npk = c.rng.integers(2, 8, B) * (sel & c.p(0.85))
    for k in range(int(npk.max())):
        i = (c.rng.random(B) * c.T).astype(int)
        j = np.clip(i + off, 0, c.T - 1)
        c.Z[b, i, j] += np.where(npk > k, c.u(1.2, 2.4), 0)
    prof = c.row_profile(np.where(c.p(0.5), 3, 0))
    c.add_col(np.where(c.p(0.7), 0, c.sep_end), np.where(sel, amp - c.u(0.2, 1.0), 0), prof)


def _recipe_vd(c: _Chunk) -> None:
    c.background(noise=(0.4, 1.4))
    c.Z *= np.where(c.T <= TINY_T, c.u(0.3, 0.6), 1.0)[:, None, None]  # tiny maps: a quieter background
    c.add_locality(c.p(0.3), c.u(0.3, 1.0))
    c.special_rows(first_rows=0.15)
    # both seen without searching (clarification 1): column and diagonal logits drawn around one level,
    # the columns a little stronger, as in the real maps (a column cell ~3x the diagonal cell)
    base = c.u(2.2, 4.0)
    tiny = c.T <= TINY_T  # clarification 8: the column is the row's brightest, the diagonal a close second
    _columns(c, (base + np.where(tiny, 0.6, 0.4), base + np.where(tiny, 1.2, 1.8)), allow_stripes=True,
             profile_p=(0.75, 0.2, 0.05, 0.0), tiny_edges_only=True)
    _diag(c, (base + np.where(tiny, 0.0, -0.4), base + np.where(tiny, 0.5, 0.6)), dotted_p=0.15, band_p=0.05)
    tri = c.p(0.25)
    c.add_triangle(tri, c.u(0.8, 1.8), c.u(0.5, 2.0), c.p(0.3))
    c.sharp = c.u(0.7, 1.2)


def _recipe_block(c: _Chunk) -> None:
    B = c.B
    c.background(noise=(0.25, 0.9), salience=(0.1, 0.5), texture=(0.0, 0.5))
    c.special_rows(cls_self=0.35, sep_rows=0.4, first_rows=0.35, first_amp=(1.0, 3.0), first_len=(0.02, 0.12))
    kind = c.rng.choice(3, B, p=[0.4, 0.35, 0.25])  # 0 triangle, 1 blobs, 2 wide band
    c.add_squares(np.ones(B, bool), c.u(0.3, 1.9))
    c.add_triangle(kind == 0, c.u(1.0, 2.5), c.u(0.3, 1.8), c.p(0.75))
    c.add_lowrank(kind == 1, c.u(1.0, 2.2), c.u(2.0, 6.0), rank=3, inside=True)
    c.add_band(kind == 2, c.u(1.5, 3.0), c.u(3.0, 7.0), np.zeros(B, f32), inside=True)
    # own-separator columns over each segment's rows (clarification 2), weaker than the squares
    own = c.p(0.6)
    rows_a = (c.seg == 0).astype(f32)
    amp = np.where(own, c.cu(1.5, 3.2), 0)
    flat = c.row_profile(np.zeros(B, int))
    c.add_col(np.where(c.mpnet & c.p(0.5), c.sep_a2, c.sep_a), amp, flat, rows_a)
    c.add_col(c.sep_end, amp * c.u(0.7, 1.2), flat, 1 - rows_a)
    # a faint [CLS] column
    c.add_col(np.zeros(B, int), np.where(c.p(0.2), c.cu(0.3, 1.0), 0), flat)
    c.sharp = c.u(0.7, 1.2)


def _cross_lines(c: _Chunk, sel: np.ndarray, amp: np.ndarray) -> None:
    """A token attending to the same word in the other sentence: lines parallel to the diagonal in the
    cross-segment quadrants (rule 5, clarification 6), over a random run of rows."""
    if not (sel & c.pair).any():
        return
    amp = np.where(sel & c.pair, amp, 0)
    la = c.bnd - 1  # tokens of A incl. [CLS]
    shift = c.rng.integers(-3, 4, c.B)
    off = c.bnd - 1 + shift
    start = (c.u(0.0, 0.4) * la).astype(int)
    stop = start + np.maximum(3, (c.u(0.5, 1.0) * la).astype(int))
    which = c.rng.choice(3, c.B)  # 0 A->B, 1 B->A, 2 both
    c.add_line(off, np.where(which != 1, amp, 0), start, stop, c.bnd, c.T)
    c.add_line(-off, np.where(which != 0, amp, 0), start + off, stop + off, np.zeros(c.B, int), c.bnd)


def _recipe_het(c: _Chunk) -> None:
    B = c.B
    kinds = np.stack([c.p(0.3), c.p(0.35), c.p(0.4) & c.pair, c.p(0.15), c.p(0.15), c.p(0.25)], 1)
    kinds[~kinds.any(1), 1] = True  # haze, speckle, cross lines, blobs, fragments, stripe haze
    haze = kinds[:, 0]
    c.background(noise=(0.3, 1.3), salience=(0.1, 0.5), texture=(0.0, 0.6))
    # stripe haze (MiniLM): many faint token stripes that do not stay bright over most rows (clarification 5)
    sal = c.rng.standard_t(4, (B, c.P)).astype(f32) * np.where(kinds[:, 5] & ~haze, c.u(0.4, 0.9), 0)[:, None]
    c.Z += sal[:, None, :]
    c.Z *= np.where(haze, c.u(0.2, 0.5), 1.0)[:, None, None]  # near-uniform: a flat background ...
    c.special_rows(cls_self=0.15, sep_rows=0.25, first_rows=0.5, first_amp=(1.5, 4.0),
                   first_len=(0.02, 0.1))  # ... under the usual (rarer) hot cells
    # speckle: each row picks a few random keys of its own (no persistent column, clarification 5)
    c.add_cells((kinds[:, 1] * c.T * c.u(0.3, 1.5)).astype(int), 1.2, 3.5, rows_from=1)
    # lines off the main diagonal, with a main diagonal no brighter than them (clarification 6)
    line_amp = c.cu(2.0, 4.5)
    _cross_lines(c, kinds[:, 2], line_amp)
    single_lines = kinds[:, 2] & ~c.pair | (c.p(0.12) & ~haze)
    far = np.maximum(5, (c.u(0.3, 0.6) * c.T).astype(int)) * np.where(c.p(0.5), 1, -1)
    c.add_line(far, np.where(single_lines, line_amp, 0), np.zeros(B, int), c.T)
    main = (kinds[:, 2] | single_lines) & c.p(0.4)
    c.add_diag(np.zeros(B, int), np.where(main, line_amp * c.u(0.5, 0.9), 0))
    # blobs that ignore the segment squares
    c.add_lowrank(kinds[:, 3], c.u(1.0, 2.2), c.u(1.5, 4.0), rank=3)
    # short line fragments away from the diagonal
    nfrag = c.rng.integers(2, 7, B) * kinds[:, 4]
    for k in range(int(nfrag.max())):
        r0 = (c.rng.random(B) * c.T).astype(int)
        ln = c.rng.integers(3, 9, B)
        off = (np.maximum(5, (c.u(0.1, 0.8) * c.T).astype(int)) * np.where(c.p(0.5), 1, -1))
        c.add_line(off, np.where(nfrag > k, c.cu(2.0, 4.0), 0), r0, r0 + ln)
    # a faint broad glow along the diagonal under the haze, too weak to stand out as a line (the check
    # rejects the map if it does: then it is diagonal, clarification 4)
    glow = c.p(0.2)
    c.add_band(glow, c.u(0.8, 1.6), c.u(3.0, 10.0), np.zeros(B, f32), inside=False)
    # partial columns: a column over a minority of rows (clarification 5: not persistent)
    part = c.p(0.3)
    r0 = (c.u(0.0, 0.6) * c.T).astype(int)
    rows = ((c.I[None, :] >= r0[:, None]) & (c.I[None, :] < (r0 + c.u(0.1, 0.3) * c.T)[:, None])).astype(f32)
    c.add_col(c.rand_col(0, False), np.where(part, c.cu(2.0, 4.0), 0), c.row_profile(np.zeros(B, int)), rows)
    c.sharp = c.u(0.6, 1.1)


_RECIPES = {"vertical": _recipe_vertical, "diagonal": _recipe_diagonal, "vertical+diagonal": _recipe_vd,
            "block": _recipe_block, "heterogeneous": _recipe_het}


# ---------------------------------------------------------------------- softmax and the check
def _softmax(c: _Chunk) -> tuple[np.ndarray, np.ndarray]:
    """Row softmax of the logits with the map's sharpness and a per-row jitter.

    Returns:
        (A, G): the maps (B, P, P), zero outside each map's T x T, and G (B, P) the geometric mean of
        each row over its T keys (the background a cell is compared with; 0 for rows past T).
    """
    B, P = c.B, c.P
    scale = c.sharp[:, None] * np.exp(c.rng.normal(0, 0.1, (B, P))).astype(f32)
    vf = c.valid.astype(f32)
    z = c.Z
    z *= scale[:, :, None]
    zmean = np.matmul(z, vf[:, :, None])[:, :, 0] / c.T[:, None]
    z += np.where(c.valid, 0.0, -np.inf).astype(f32)[:, None, :]
    zmax = z.max(axis=2, keepdims=True)
    z -= zmax
    a = np.exp(z, out=z)
    ssum = a.sum(axis=2)
    a *= (vf / ssum)[:, :, None]  # rows past T become 0
    geo = np.exp(zmean - zmax[:, :, 0] - np.log(ssum)) * vf  # exp(mean log A)
    c.Z = None  # the logits were scaled in place; the chunk is spent
    return a, geo.astype(f32)


def _median_rows(x: np.ndarray, ok: np.ndarray) -> np.ndarray:
    """Median over axis 1 of x where ok, per map (0 where nothing is ok); x, ok (B, P)."""
    y = np.where(ok, x, np.inf)
    y.sort(axis=1)
    n = ok.sum(1)
    lo = np.take_along_axis(y, np.maximum((n - 1) // 2, 0)[:, None], 1)[:, 0]
    hi = np.take_along_axis(y, np.maximum(n // 2, 0)[:, None], 1)[:, 0]
    return np.where(n > 0, 0.5 * (lo + hi), 0.0)


def _measure(c: _Chunk, A: np.ndarray, geo: np.ndarray) -> dict:
    """The guide's quantities for every map of the chunk (see the module docstring)."""
    B, P = c.B, c.P
    b = np.arange(B)
    vr = c.valid
    vf = vr.astype(f32)
    T = c.T.astype(f32)
    rowmax = A.max(2)
    mx = rowmax.max(1)
    # column cells (0 outside T x T): >= RHO_COL x the row's geometric mean, and visible against the typical
    # row's brightest cell (the median of the row maxima), not against the map's maximum, so a bright top
    # of a fading column does not hide the rest of it (clarification 7). One threshold per row, one pass.
    ref = _median_rows(rowmax, vr) if COL_REF == "rowmax" else mx
    thr = np.maximum(np.exp(LOG_RHO_COL) * geo, (NU_COL * ref)[:, None]).astype(f32)
    st = A > thr[:, :, None]
    tiny = c.T <= TINY_T
    if tiny.any():
        st_t = A >= 0.85 * rowmax[:, :, None]
        st_t &= vr[:, :, None] & vr[:, None, :]
        st = np.where(tiny[:, None, None], st_t, st)
    # the diagonal's contrast threshold grows from 3x (T <= 12) to 6x (T >= 48): in short rows the few
    # structured cells pull the geometric mean up
    ramp = np.clip((c.T - TINY_T) / 36.0, 0.0, 1.0)
    rho_d = (LOG_RHO_DIAG_TINY + ramp * (LOG_RHO_DIAG - LOG_RHO_DIAG_TINY)).astype(f32)
    ob = (np.abs(c.D) > 1).astype(f32)  # (P, P): off the band |i - j| <= 1
    stf = st.astype(f32)  # a column passes through the diagonal: its cells there count for coverage ...
    seg0 = (vr & (c.seg == 0)).astype(f32)
    seg1 = (vr & (c.seg == 1)).astype(f32)
    rows = np.stack([seg0, seg1], 1)  # (B, 2, P)
    k = np.matmul(rows, stf)  # (B, 2, P): standing-out rows per column and segment ...
    for d in (-1, 0, 1):  # ... but not for persistence (the diagonal must not make columns)
        i = np.arange(max(0, -d), min(P, P - d))
        k[:, :, i + d] -= rows[:, :, i] * stf[:, i, i + d][:, None, :]
    n = np.matmul(rows, ob)  # eligible rows per column and segment
    nr = rows.sum(2)  # (B, 2) rows per segment
    tot = k.sum(1) / np.maximum(n.sum(1), 1)
    frac = k / np.maximum(n, 1)
    pers = vr[:, None, :] & ((tot >= 0.5)[:, None, :] | ((frac >= 0.6) & (nr >= 4)[:, :, None]))  # (B, 2, P)
    persf = pers.astype(f32)
    hits = np.matmul(stf, persf.transpose(0, 2, 1))  # (B, P, 2): persistent columns standing out per row
    row_seg1 = c.seg == 1
    covered = np.where(row_seg1, hits[:, :, 1], hits[:, :, 0]) > 0
    colcov = (covered & vr).sum(1) / T
    # column strength: the best persistent column of each segment, median over its rows, / max
    score = np.where(pers, frac, -1.0)
    jbest = score.argmax(2)  # (B, 2)
    has = pers.any(2)
    jrow = np.where(row_seg1, jbest[:, 1:2], jbest[:, 0:1])
    hrow = np.where(row_seg1, has[:, 1:2], has[:, 0:1])
    colval = A[b[:, None], c.I[None, :], jrow]
    okc = vr & hrow & (np.abs(jrow - c.I[None, :]) > 1)
    colstr = np.where(has.any(1), _median_rows(colval / mx[:, None], okc), 0.0)
    pers_any = pers.any(1)
    # diagonal: offsets -2..2, not on [CLS], separators or persistent columns
    excl = c.is_sep | pers_any
    excl[:, 0] = True
    covs, strs, means, sds, oks = [], [], [], [], []
    for kk in (-2, -1, 0, 1, 2):
        j = c.I[None, :] + kk
        ok = vr & (j >= 0) & (j < c.T[:, None])
        jc = np.clip(j, 0, P - 1)
        ok &= ~excl[b[:, None], jc]
        v = A[b[:, None], c.I[None, :], jc]
        s = (v > np.exp(rho_d)[:, None] * geo) & (v > NU_DIAG * mx[:, None]) & ok
        if tiny.any():  # tiny maps: the diagonal cell must also compete with the row's brightest
            s &= ~tiny[:, None] | (v >= 0.35 * rowmax)
        nok = np.maximum(ok.sum(1), 1)
        covs.append(s.sum(1) / nok)
        strs.append(_median_rows(v / mx[:, None], ok))
        means.append((v * ok).sum(1) / nok / mx)
        sds.append(s)
        oks.append(ok)
    covs, strs, means = np.stack(covs, 1), np.stack(strs, 1), np.stack(means, 1)
    win = sds[1] | sds[2] | sds[3]
    wok = oks[1] | oks[2] | oks[3]
    covw = win.sum(1) / np.maximum(wok.sum(1), 1)
    kbest = covs.argmax(1)
    diagcov = np.maximum(covs.max(1), covw)
    diagstr = strs[b, kbest]
    diagmean = means[b, kbest]
    # crispness of the best diagonal: its cell vs the cells two steps beside it
    j0 = c.I[None, :] + (kbest - 2)[:, None]
    side = np.zeros((B, P), f32)
    for d in (-CRISP_STEP, CRISP_STEP):
        j = j0 + d
        okd = (j >= 0) & (j < c.T[:, None])
        side = np.maximum(side, np.where(okd, A[b[:, None], c.I[None, :], np.clip(j, 0, P - 1)], 0))
    okc = vr & (j0 >= 0) & (j0 < c.T[:, None])
    on = A[b[:, None], c.I[None, :], np.clip(j0, 0, P - 1)]
    crisp = _median_rows(on / np.maximum(side, 1e-9), okc)
    # does the band near the diagonal break at the boundary? (clarification 4: a band that crosses it is diagonal)
    near_in, near_out = np.zeros(B, f32), np.zeros(B, f32)
    n_in, n_out = np.zeros(B, f32), np.zeros(B, f32)
    for kk in range(-3, 4):
        j = c.I[None, :] + kk
        ok = vr & (j >= 0) & (j < c.T[:, None]) & ~c.is_sep
        jc = np.clip(j, 0, P - 1)
        ok &= ~excl[b[:, None], jc]  # not on [CLS], separator or persistent columns
        v = A[b[:, None], c.I[None, :], jc] * ok
        same_k = c.seg[b[:, None], jc] == c.seg
        near_in += (v * same_k).sum(1)
        near_out += (v * ~same_k).sum(1)
        n_in += (ok & same_k).sum(1)
        n_out += (ok & ~same_k).sum(1)
    bridge = np.where(c.pair & (n_out > 0), (near_out / np.maximum(n_out, 1)) / np.maximum(near_in / np.maximum(n_in, 1),
                                                                                    1e-12), 0.0)
    # block quantities (pairs), from per-row sums: mass in the own square, on persistent columns
    segm = np.stack([seg0, seg1, seg0 * pers_any, seg1 * pers_any], 2)  # (B, P, 4) key masks
    sums = np.matmul(A, segm)  # (B, P, 4)
    own = np.where(row_seg1, sums[:, :, 1], sums[:, :, 0]) * vf  # row mass in its own square
    pers_same = np.where(row_seg1, sums[:, :, 3], sums[:, :, 2]) * vf
    pers_other = np.where(row_seg1, sums[:, :, 2], sums[:, :, 3]) * vf
    n0, n1 = nr[:, 0], nr[:, 1]
    p0, p1 = (seg0 * pers_any).sum(1), (seg1 * pers_any).sum(1)
    cells_in = n0 * (n0 - p0) + n1 * (n1 - p1)
    cells_out = n0 * (n1 - p1) + n1 * (n0 - p0)
    mass_in = (own - pers_same).sum(1)
    mass_out = (vf - own - pers_other).sum(1)
    din = mass_in / np.maximum(cells_in, 1)
    dout = np.maximum(mass_out, 0) / np.maximum(cells_out, 1)
    contrast = np.where(c.pair, din / np.maximum(dout, 1e-12), 0.0)
    own0 = (own * seg0).sum(1) / np.maximum(n0, 1)
    own1 = (own * seg1).sum(1) / np.maximum(n1, 1)
    sqmin = np.where(c.pair, np.minimum(own0, own1), 0.0)
    bandness = np.where(c.pair, (near_in / np.maximum(n_in, 1)) / np.maximum(din, 1e-12), 0.0)  # band vs square
    sqvis = np.where(c.pair, din / mx, 0.0)  # how lit the squares' interior is on the 0..max scale
    colmass = (pers_same + pers_other).sum(1) / T
    awaymass = mass_in / T
    linemean, has_line = np.zeros(B, f32), np.zeros(B, bool)
    if c.lines:
        bb, ii, jj = (np.concatenate(x) for x in zip(*c.lines))
        keep = (ii < c.T[bb]) & (jj < c.T[bb])
        bb, ii, jj = bb[keep], ii[keep], jj[keep]
        cnt = np.bincount(bb, minlength=B)
        has_line = cnt > 0
        linemean = np.bincount(bb, A[bb, ii, jj], minlength=B) / np.maximum(cnt, 1) / mx
    return dict(colcov=colcov, colstr=colstr, diagcov=diagcov, diagstr=diagstr, diagmean=diagmean, crisp=crisp,
                contrast=contrast, sqmin=sqmin, sqvis=sqvis, bridge=bridge, bandness=bandness, colmass=colmass, awaymass=awaymass,
                linemean=linemean, has_line=has_line)


def _accept(label: str, m: dict, pair: np.ndarray, faint_columns: bool = False) -> np.ndarray:
    """Which maps carry ``label`` by the guide with a margin (see the module docstring).

    Every predicate below has a gap between "present" and "absent": a map in a gap is accepted as
    nothing and is rebuilt. ``faint_columns`` (the research variant): a diagonal map may also carry a column
    under :data:`FAINT_COL` of the map's maximum, and a vertical+diagonal map's column must reach :data:`SEEN_COL`.
    """
    col_on, col_off = m["colcov"] >= COL_ON, m["colcov"] <= COL_OFF  # rule 1, clar. 2, 5, 7, 8
    diag_on, diag_off = m["diagcov"] >= DIAG_ON, m["diagcov"] <= DIAG_OFF  # rule 2
    cs, ds = m["colstr"], m["diagstr"]
    lines_weak = ~m["has_line"] | (m["linemean"] <= 0.35 * m["diagmean"])  # clar. 6
    lines_bright = m["has_line"] & (m["linemean"] >= 0.8 * m["diagmean"])
    # rule 4 / clar. 2, 4: two squares hold most of the mass, outside clearly darker, interior lit
    cols_ok = (m["colcov"] <= COL_OFF) | (m["colmass"] <= 0.6 * m["awaymass"])
    squares = pair & (m["contrast"] >= 2.5) & (m["sqmin"] >= 0.55) & (m["sqvis"] >= 0.02) & cols_ok
    squares_maybe = pair & (m["contrast"] >= 1.8) & (m["sqmin"] >= 0.45) & (m["awaymass"] >= 0.6 * m["colmass"])
    band_crosses = (m["bridge"] >= 0.5) & (m["bandness"] >= 2.0)  # clar. 4: a band across the boundary
    crisp, diffuse = m["crisp"] >= 2.5, m["crisp"] <= 2.0  # rule 4: a crisp diagonal inside the squares
    not_block = ~squares_maybe | crisp | band_crosses
    if label == "vertical":
        return col_on & (diag_off | (ds <= cs / 14)) & ~squares_maybe
    if label == "diagonal":
        faint = (cs <= FAINT_COL) if faint_columns else False
        return diag_on & (col_off | (cs <= 0.4 * ds) | faint) & lines_weak & not_block
    if label == "vertical+diagonal":
        seen = (cs >= SEEN_COL) if faint_columns else True
        return col_on & diag_on & (ds >= 0.15 * cs) & (cs >= 0.55 * ds) & (ds >= 0.02) & lines_weak & not_block & seen
    if label == "block":
        return squares & diffuse & ((m["bridge"] <= 0.3) | (m["bandness"] < 2.0))
    if label == "heterogeneous":
        return col_off & (diag_off | lines_bright) & ~squares_maybe
    raise ValueError(f"unknown label {label!r}; valid labels are: {', '.join(LABELS)}")


# ---------------------------------------------------------------------- public API
CHUNK_CELLS = 1 << 18  # B * P^2 of one chunk (1 MB float32 arrays: they stay in cache)
RETRIES = 12  # a layout (T, pair, layout, split) is built this often before a fresh one replaces it
# rough acceptance of the check per class (a first guess, updated round by round)
ACCEPT_GUESS = {"vertical": 0.75, "diagonal": 0.7, "vertical+diagonal": 0.4, "block": 0.6, "heterogeneous": 0.6}


def _generate_label(label: str, n: int, rng: np.random.Generator, t: int | None, max_t: int, pair_p: float,
                    mpnet_p: float, with_stats: bool = False, max_rounds: int = 100, t_scale: float = 1.0,
                    faint_columns: bool = False) -> list:
    """n accepted maps of one label.

    Draws n layouts (T, pair/single, layout, split) and builds them with fresh parameters in padded
    chunks of similar T; a layout whose map fails the check is built again in the next round (when few
    are left, in several copies at once; the first copy that passes is kept). So the check redraws
    *parameters* on the *same* layout and does not skew the T distribution. After RETRIES builds a fresh
    layout replaces a stubborn one (the only place where the check can tilt the T distribution: tiny
    vertical+diagonal maps).
    """
    result: list = [None] * n
    slot = np.arange(n)  # the output slot each pending layout fills
    lay = _layouts(n, rng, label, t, max_t, pair_p, mpnet_p, t_scale)
    tries = np.zeros(n, int)
    acc = ACCEPT_GUESS.get(label, 0.5)
    for _ in range(max_rounds):
        m = len(slot)
        if m == 0:
            break
        # one copy per layout while many are pending; when few are left, enough copies to fill a chunk of
        # ~64 maps (a chunk costs a few ms whatever its size), at most what the acceptance rate calls for x 2
        k = int(min(max(1, np.ceil(64 / m)), max(1, np.ceil(2.5 / max(acc, 0.05)))))
        rep = np.repeat(np.arange(m), k)
        lay_r = {key: v[rep] for key, v in lay.items()}
        order = np.argsort(lay_r["T"], kind="stable")
        got = np.zeros(m, bool)
        n_ok, start, mr = 0, 0, len(rep)
        while start < mr:
            stop = start + 1  # grow the chunk while B * P^2 stays within the budget (at least 24 maps)
            while stop < mr and stop - start < 256 and (stop - start < 24 or
                                                        lay_r["T"][order[stop]] ** 2 * (stop - start + 1) <= CHUNK_CELLS):
                stop += 1
            idx = order[start:stop]
            c = _Chunk(rng, **{key: v[idx] for key, v in lay_r.items()}, faint_columns=faint_columns)
            _RECIPES[label](c)
            A, geo = _softmax(c)
            meas = _measure(c, A, geo)
            ok = _accept(label, meas, c.pair, faint_columns)
            n_ok += int(ok.sum())
            for j in np.nonzero(ok)[0]:
                u = rep[idx[j]]
                if got[u]:
                    continue
                got[u] = True
                t_j = int(c.T[j])
                arr = np.ascontiguousarray(A[j, :t_j, :t_j])
                item = (arr, c.seps(j))
                result[slot[u]] = item + ({key: v[j].item() for key, v in meas.items()},) if with_stats else item
            start = stop
        acc = 0.5 * acc + 0.5 * n_ok / mr
        keep = ~got
        slot, tries = slot[keep], tries[keep] + k
        lay = {key: v[keep] for key, v in lay.items()}
        stale = tries >= RETRIES
        if stale.any():
            fresh = _layouts(int(stale.sum()), rng, label, t, max_t, pair_p, mpnet_p, t_scale)
            for key in lay:
                lay[key] = lay[key].copy()
                lay[key][stale] = fresh[key]
            tries[stale] = 0
    if len(slot):
        raise RuntimeError(f"could not generate {n} {label} maps (T={t}): too many rejected")
    return result


def measure(arr: np.ndarray, seps: list[int]) -> dict:
    """The checker's quantities for any one map (real or synthetic), for diagnostics.

    Args:
        arr: a (T, T) attention map.
        seps: its separator positions.

    Returns:
        A dict of floats: the check's quantities (``colcov``, ``colstr``, ``diagcov``, ``diagstr``,
        ``diagmean``, ``crisp``, ``contrast``, ``sqmin``, ``sqvis``, ``bridge``, ``bandness``,
        ``colmass``, ``awaymass``, ``linemean``; see the module docstring), plus two that ignore
        visibility: ``faintcol``, the largest share of rows (off the diagonal band) in which one
        column is >= 4x its row's geometric mean, and ``faintdiag``, the largest share of rows in
        which the cell at one offset -2..+2 (not [CLS] or a separator) is >= 6x it. A map with a
        high ``faintcol`` but a low ``colcov`` has a column that stands out from the background in
        most rows but is too dim to be noticed (rule 3's "clearly faint"); likewise for the diagonal.
    """
    a = np.asarray(arr, np.float64)
    t = a.shape[0]
    s = sorted({int(p) for p in seps if 0 <= int(p) < t})
    runs = segment_runs(t, seps)
    pair = len(runs) >= 2
    bnd = runs[0] + 1 if pair else t
    first = [p for p in s if p < bnd] or [t - 1]
    c = _Chunk(np.random.default_rng(0), T=np.array([t]), pair=np.array([pair]), mpnet=np.array([len(first) > 1]),
               bnd=np.array([bnd]), sep_a=np.array([first[0]]), sep_a2=np.array([first[-1]]),
               sep_end=np.array([s[-1] if s else t - 1]))
    a32 = a.astype(f32)[None]
    geo = np.exp(np.log(np.maximum(a, 1e-30)).mean(1)).astype(f32)[None]
    m = {k: float(v[0]) for k, v in _measure(c, a32, geo).items() if k != "has_line"}
    g = geo[0].astype(np.float64)[:, None]
    i = np.arange(t)
    off = np.abs(i[:, None] - i[None, :]) > 1
    m["faintcol"] = float(((a >= 4.0 * g) & off).sum(0).max() / max(off.sum(0).max(), 1))
    excl = np.zeros(t, bool)
    excl[0] = True
    excl[s] = True
    best = 0.0
    for k in range(-2, 3):
        ii = i[(i + k >= 0) & (i + k < t)]
        ii = ii[~excl[ii + k]]
        if len(ii):
            best = max(best, float(np.mean(a[ii, ii + k] >= 6.0 * g[ii, 0])))
    m["faintdiag"] = best
    return m


def judge(arr: np.ndarray, seps: list[int]) -> dict[str, bool]:
    """Which labels the generator's check would accept for a map (real or synthetic), for diagnostics.

    The check accepts a label only with a margin, so a map may get no label (it sits between two). It
    is not a classifier: it cannot see off-diagonal lines in a map it did not build (clarification 6
    needs to know where they are), so a heterogeneous map whose lines are as bright as a main diagonal
    reads as diagonal here.

    Args:
        arr: a (T, T) attention map.
        seps: its separator positions.

    Returns:
        label -> bool, in LABELS order.
    """
    m = {k: np.array([v]) for k, v in measure(arr, seps).items()}
    m["has_line"] = np.array([False])
    m["linemean"] = np.array([0.0])
    pair = np.array([len(segment_runs(np.asarray(arr).shape[0], seps)) >= 2])
    return {lab: bool(_accept(lab, m, pair)[0]) for lab in LABELS}


def segment_runs(t: int, seps: list[int]) -> list[int]:
    """The last separator of each run of consecutive separators (each ends a segment)."""
    s = sorted({int(p) for p in seps if 0 <= int(p) < t})
    return [p for k, p in enumerate(s) if k + 1 == len(s) or s[k + 1] != p + 1]


def generate(label: str, rng: np.random.Generator, T: int | None = None,
             t_prior: str = "shared") -> tuple[np.ndarray, list[int]]:
    """One synthetic attention map of the given class.

    Args:
        label: one of :data:`LABELS`.
        rng: the random generator (the only source of randomness).
        T: the number of tokens; None draws it from the real distribution. ``block`` needs T >= 11
            (``[CLS]``, two segments of at least 4 tokens, two separators).
        t_prior: ``"shared"`` (one T and pair distribution for every class) or ``"class"`` (the real
            per-class share of pairs and length scale, :data:`CLASS_PRIOR`).

    Returns:
        (map, seps): a float32 (T, T) array whose rows sum to 1, and the separator positions
        (``[T-1]`` for one segment, ``[a, T-1]`` BERT pair, ``[a, a+1, T-1]`` MPNet pair).

    Raises:
        ValueError: unknown label or prior, or T too small for the label.
    """
    return batch(1, rng, {label: 1.0}, T=T, max_t=max(256, T or 0), t_prior=t_prior)[0][:2]


def batch(n: int, rng: np.random.Generator, proportions: dict[str, float] | None = None, T: int | None = None,
          max_t: int = 256, t_prior: str = "shared", pair_p: float | None = None, mpnet_p: float = MPNET_P,
          shuffle: bool = True, with_stats: bool = False, faint_columns: bool = False) -> list[Sample]:
    """n labelled synthetic maps, balanced over the five classes or in the given proportions.

    Args:
        n: the number of maps.
        rng: the random generator.
        proportions: label -> weight (normalised; missing labels get 0); None for balanced.
        T: a fixed number of tokens for every map; None draws T from the real distribution.
        max_t: the largest T drawn (the real set stops at 128; above it a 5 % tail of long pairs).
        t_prior: ``"shared"``: every class draws T and pair/single alike (the CNN cannot learn a class
            from the length); ``"class"``: each class its real share of pairs and length scale.
        pair_p: the share of two-segment inputs (block is always a pair); overrides ``t_prior``'s.
        mpnet_p: the share of the MPNet ``</s></s>`` layout among pairs.
        shuffle: mix the classes (otherwise grouped by class in LABELS order).
        with_stats: return (Sample, measurements dict) pairs, the checker's quantities per map.
        faint_columns: a research variant of the diagonal class with faint columns (:func:`_faint_column`); off,
            the stream is the same as before it existed.

    Returns:
        A list of :class:`Sample` (map, seps, label index), or (Sample, dict) pairs with ``with_stats``.
    """
    if t_prior not in ("shared", "class"):
        raise ValueError(f"unknown t_prior {t_prior!r}; use 'shared' or 'class'")
    if T is not None and T < 3:
        raise ValueError(f"T must be >= 3 (got {T})")
    if T is not None and T > max_t:
        raise ValueError(f"T={T} exceeds max_t={max_t}")
    weights = np.array([(proportions or {lab: 1.0 for lab in LABELS}).get(lab, 0.0) for lab in LABELS], float)
    if proportions is not None:
        unknown = set(proportions) - set(LABELS)
        if unknown:
            raise ValueError(f"unknown labels {sorted(unknown)}; valid labels are: {', '.join(LABELS)}")
    if weights.sum() <= 0 or (weights < 0).any():
        raise ValueError("proportions must be non-negative with a positive sum")
    counts = rng.multinomial(n, weights / weights.sum()) if proportions is not None else \
        np.bincount(rng.permutation(np.arange(n) % len(LABELS)), minlength=len(LABELS))
    out: list = []
    for k, lab in enumerate(LABELS):
        if counts[k] == 0:
            continue
        pp, scale = CLASS_PRIOR[lab] if t_prior == "class" else (PAIR_P, 1.0)
        pp = pp if pair_p is None else pair_p
        for item in _generate_label(lab, int(counts[k]), rng, T, max_t, pp, mpnet_p, with_stats, t_scale=scale,
                                    faint_columns=faint_columns):
            s = Sample(item[0], item[1], k)
            out.append((s, item[2]) if with_stats else s)
    if shuffle:
        out = [out[i] for i in rng.permutation(len(out))]
    return out


def iter_batches(batch_size: int, rng: np.random.Generator, pool: int = 4096, **kwargs) -> Iterator[list[Sample]]:
    """An endless stream of lists of ``batch_size`` maps.

    Maps are generated ``pool`` at a time with :func:`batch` (keyword arguments as for it) and handed
    out in slices, because one call to :func:`batch` has a fixed cost per chunk of maps. With
    balanced classes each slice is balanced in expectation (the pool is shuffled), not exactly.
    """
    if batch_size < 1:
        raise ValueError(f"batch_size must be >= 1 (got {batch_size})")
    buf: list[Sample] = []
    while True:
        while len(buf) < batch_size:
            buf.extend(batch(max(pool, batch_size), rng, **kwargs))
        out, buf = buf[:batch_size], buf[batch_size:]
        yield out


def pad_batch(samples: list[Sample], size: int | None = None) -> tuple[np.ndarray, np.ndarray, list[list[int]]]:
    """Stack samples into a zero-padded (N, size, size) array, with labels (N,) and seps.

    The CNN's preprocessing takes one T per call; group samples by T or resample before stacking
    when one array is needed. Padding with zeros keeps each map's rows summing to 1 over its own T.
    """
    size = size or max(s.map.shape[0] for s in samples)
    x = np.zeros((len(samples), size, size), f32)
    for k, s in enumerate(samples):
        t = s.map.shape[0]
        x[k, :t, :t] = s.map
    return x, np.array([s.label for s in samples], np.int64), [s.seps for s in samples]
