"""The classifier's calibration: fitted on its out-of-fold predictions, with a bootstrap of its uncertainty.

Usage::

    rows = oof_rows(data, oof_probs, fold)                 # train: one row per labelled map, scored out of fold
    cal = fit_calibration(rows.subset(scope_mask(rows, "encoder", "minilm-53aa5117")[0]), reps=200)
    cal.temperature[0], cal.adjust[0]                      # the fit on the rows as they are
    cal.temperature[1:], cal.adjust[1:]                    # refits on resamples of the rows

A row is one labelled map with the probabilities that a model *not trained on it* gave it (the
out-of-fold predictions of ``train``'s cross-validation, segment rule applied as in the census), its
fold, encoder, task, input example, and whether it was drawn uniformly at random (``sampling:
uniform`` in its metadata). Two things are fitted on rows:

- **temperature** T: the probabilities p^(1/T), renormalised, minimise the negative log-likelihood
  of the labels (Guo et al. 2017), searched on a fine log grid;
- **confusion matrix** C[i, j]: how many maps of label i the classifier called j, kept apart for
  single-segment inputs (one ``[SEP]``; never called ``block``) and two-segment inputs, and the
  matrix that adjusted classify-and-count applies (:func:`adjust_matrices`).

Replicate 0 is fitted on the rows as they are; replicates 1..R-1 on bootstrap resamples of the rows,
grouped by input example (the maps of one sentence are not independent).
"""

from __future__ import annotations

import dataclasses

import numpy as np

from ..core.errors import ClassifierError
from ..core.labels import LABELS, label_index
from ..core.maps import tag_of
from ..core.segments import is_pair, rule_out_block

CAL_BOOTSTRAP = 200  # calibration refits for its interval part
TEMPERATURES = np.geomspace(0.1, 10.0, 321)  # grid searched for T: steps of 1.45 %
PSEUDO = 0.5  # added to each diagonal cell: a class with no labelled rows is taken as recognised
RIDGE = 0.01  # ridge weight, pulling the adjusted solution toward the unadjusted shares
MIN_ROWS = 50  # a calibration scope with fewer rows falls back to the next wider one
SCOPES = ("encoder", "uniform", "all")  # narrow to wide; "encoder": uniformly drawn rows of that encoder
BLOCK = LABELS.index("block")
FIELDS = ("ids", "y", "probs", "fold", "encoder", "task", "group", "uniform", "single")


@dataclasses.dataclass
class Rows:
    """Out-of-fold classifier outputs on labelled maps, one row per map (M rows)."""

    ids: np.ndarray  # (M,) map ids
    y: np.ndarray  # (M,) label indices (hand labels)
    probs: np.ndarray  # (M, 5) out-of-fold probabilities, segment rule applied
    fold: np.ndarray  # (M,) outer CV fold that scored the row (-1: not from a CV)
    encoder: np.ndarray  # (M,) encoder tag of the map (``minilm-53aa5117``)
    task: np.ndarray  # (M,) GLUE task
    group: np.ndarray  # (M,) input example (task/split/example)
    uniform: np.ndarray  # (M,) bool: drawn uniformly over (example, layer, head)
    single: np.ndarray  # (M,) bool: single-segment input

    def __len__(self) -> int:
        return len(self.y)

    def subset(self, mask: np.ndarray) -> "Rows":
        return Rows(*(getattr(self, f)[mask] for f in FIELDS))

    def to_dict(self) -> dict:
        """Plain JSON types (for metrics.json, the checkpoint and the ONNX metadata)."""
        return {"ids": self.ids.tolist(), "label": [LABELS[i] for i in self.y],
                "probs": [[float(f"{p:.5g}") for p in row] for row in self.probs], "fold": self.fold.tolist(),
                "encoder": self.encoder.tolist(), "task": self.task.tolist(), "group": self.group.tolist(),
                "uniform": self.uniform.tolist(), "single": self.single.tolist()}

    @classmethod
    def from_dict(cls, d: dict) -> "Rows":
        return cls(np.array(d["ids"], dtype=str), np.array([label_index(x) for x in d["label"]], dtype=int),
                   np.array(d["probs"], dtype=np.float64).reshape(-1, len(LABELS)), np.array(d["fold"], dtype=int),
                   np.array(d["encoder"], dtype=str), np.array(d["task"], dtype=str),
                   np.array(d["group"], dtype=str), np.array(d["uniform"], dtype=bool),
                   np.array(d["single"], dtype=bool))


def map_rows(ids, y, probs: np.ndarray, fold, meta: list[dict], seps: list) -> Rows:
    """Rows for maps scored by a classifier: ``probs`` (M, 5) gets the segment rule, as in the census."""

    probs = rule_out_block(np.array(probs, dtype=np.float64), seps)
    return Rows(np.array(ids, dtype=str), np.asarray(y, dtype=int), probs, np.asarray(fold, dtype=int),
                np.array([tag_of(m["id"]) for m in meta], dtype=str),
                np.array([str(m.get("task")) for m in meta], dtype=str),
                np.array([f"{m.get('task')}/{m.get('split')}/{m.get('example')}" for m in meta], dtype=str),
                np.array([m.get("sampling") == "uniform" for m in meta], dtype=bool),
                np.array([s is not None and not is_pair(m.get("T"), s) for m, s in zip(meta, seps)], dtype=bool))


def oof_rows(data, probs: np.ndarray, fold: np.ndarray) -> Rows:
    """The out-of-fold rows of a labelled set (:class:`patterncnn.labelling.sets.Labelled`)."""
    return map_rows(data.ids, data.y, probs, fold, data.meta, data.seps)


def temper(probs: np.ndarray, t) -> np.ndarray:
    """p^(1/t), renormalised over the last axis; zero probabilities (the segment rule's block) stay zero.

    Args:
        probs: (..., 5) probabilities.
        t: a temperature, or an array broadcasting against ``probs[..., :1]``.
    """
    with np.errstate(divide="ignore"):
        z = np.log(probs) / t
    z = z - z.max(-1, keepdims=True)
    e = np.exp(z)
    return e / e.sum(-1, keepdims=True)


def group_weights(groups: np.ndarray, reps: int, rng: np.random.Generator) -> np.ndarray:
    """(reps, M) bootstrap weights: input examples resampled with replacement, each row weighted by its count."""
    keys, inverse = np.unique(groups, return_inverse=True)
    counts = rng.multinomial(len(keys), np.full(len(keys), 1 / len(keys)), size=reps)  # (reps, G)
    return counts[:, inverse].astype(np.float64)


def fit_temperature(probs: np.ndarray, y: np.ndarray, weights: np.ndarray) -> np.ndarray:
    """The temperature minimising the weighted NLL, per weight row.

    Args:
        probs: (M, 5); y: (M,) labels; weights: (R, M).

    Returns:
        (R,) temperatures from :data:`TEMPERATURES`.
    """
    p_true = temper(probs[None], TEMPERATURES[:, None, None])[:, np.arange(len(y)), y]  # (G, M)
    nll = -np.log(np.maximum(p_true, 1e-12))
    return TEMPERATURES[np.argmin(weights @ nll.T, axis=1)]


def confusion_counts(rows: Rows, weights: np.ndarray) -> np.ndarray:
    """(R, 2, 5, 5) weighted counts of (label, argmax prediction): [:, 0] single-, [:, 1] two-segment rows."""
    k = len(LABELS)
    pairs = np.eye(k * k)[rows.y * k + rows.probs.argmax(1)]  # (M, 25): one-hot (label, prediction)
    return np.stack([(weights * kind) @ pairs for kind in (rows.single, ~rows.single)], axis=1).reshape(-1, 2, k, k)


def adjust_matrices(confusion: np.ndarray) -> np.ndarray:
    """The linear map of adjusted classify-and-count, from confusion counts (..., 2, 5, 5).

    With R[i, j] = P(predicted j | label i) (diagonal pseudo-count :data:`PSEUDO`), argmax shares are
    q = Rᵀp. The estimate minimises |Rᵀp − q|² + λ|p − q|² (ridge toward q, λ = :data:`RIDGE`):
    p = A q with A = (R Rᵀ + λI)⁻¹ (R + λI). Single-segment inputs solve over the four classes other
    than block (their block share is 0 by the segment rule). Clipping and renormalising come after
    summing over maps (:func:`patterncnn.shares.estimate.finish`), so A stays linear.

    Returns:
        (..., 2, 5, 5): A per segment kind; column j is what one map predicted as j contributes.
    """
    out = np.zeros(confusion.shape)
    for kind, keep in ((0, [i for i in range(len(LABELS)) if i != BLOCK]), (1, list(range(len(LABELS))))):
        rows, cols = np.array(keep)[:, None], np.array(keep)[None, :]
        c = confusion[..., kind, :, :][..., rows, cols] + PSEUDO * np.eye(len(keep))
        r = c / c.sum(-1, keepdims=True)
        lam = RIDGE * np.eye(len(keep))
        out[..., kind, rows, cols] = np.linalg.solve(r @ np.swapaxes(r, -1, -2) + lam, r + lam)
    return out


@dataclasses.dataclass
class Calibration:
    """Temperatures and adjustment matrices: replicate 0 fitted on the rows, 1..R-1 on resamples."""

    temperature: np.ndarray  # (R,)
    confusion: np.ndarray  # (R, 2, 5, 5) weighted counts
    adjust: np.ndarray  # (R, 2, 5, 5)
    rows: int
    folds: list[int]  # the CV folds whose rows it was fitted on

    @property
    def replicates(self) -> int:
        return len(self.temperature)

    def first(self) -> "Calibration":
        """Replicate 0 alone: the fit on the rows as they are."""
        return Calibration(self.temperature[:1], self.confusion[:1], self.adjust[:1], self.rows, self.folds)


def fit_calibration(rows: Rows, reps: int = 0, seed: int = 0) -> Calibration:
    """Fit temperature and confusion on ``rows``, and on ``reps`` resamples of them (grouped by example)."""
    if not len(rows):
        raise ValueError("no labelled rows to calibrate on")
    weights = np.ones((1, len(rows)))
    if reps:
        weights = np.vstack([weights, group_weights(rows.group, reps, np.random.default_rng(seed))])
    conf = confusion_counts(rows, weights)
    return Calibration(fit_temperature(rows.probs, rows.y, weights), conf, adjust_matrices(conf), len(rows),
                       sorted(set(rows.fold.tolist())))


def scope_mask(rows: Rows, scope: str, encoder: str) -> tuple[np.ndarray, str]:
    """Which rows calibrate maps of ``encoder``: the scope asked for, widened while it has < MIN_ROWS rows.

    Scopes (:data:`SCOPES`): ``encoder`` = the uniformly drawn rows of that encoder, ``uniform`` =
    every uniformly drawn row, ``all`` = every row. Returns (mask (M,), the scope used).
    """
    if scope not in SCOPES:
        raise ValueError(f"unknown calibration scope {scope!r}; choose one of {', '.join(SCOPES)}")
    masks = {"encoder": rows.uniform & (rows.encoder == encoder), "uniform": rows.uniform,
             "all": np.ones(len(rows), dtype=bool)}
    for s in SCOPES[SCOPES.index(scope):]:
        if masks[s].sum() >= MIN_ROWS or s == "all":
            return masks[s], s
    raise AssertionError("unreachable: 'all' always returns")


def calibration_record(rows: Rows) -> dict:
    """What ``train`` stores with the model: the fit on all rows, and the rows themselves (to refit and bootstrap)."""
    cal = fit_calibration(rows)
    p_true = temper(rows.probs, np.array([[1.0], [cal.temperature[0]]])[:, :, None])[:, np.arange(len(rows)), rows.y]
    nll = -np.log(np.maximum(p_true, 1e-12)).mean(1)  # (2,): at T = 1 and at the fitted T
    return {"temperature": float(cal.temperature[0]), "nll_at_1": float(nll[0]), "nll": float(nll[1]),
            "confusion_single_segment": cal.confusion[0, 0].astype(int).tolist(),
            "confusion_two_segments": cal.confusion[0, 1].astype(int).tolist(),
            "confusion_order": list(LABELS), "rows": rows.to_dict(), "uniform_rows": int(rows.uniform.sum()),
            "encoders": {e: int((rows.encoder == e).sum()) for e in sorted(set(rows.encoder.tolist()))}}


def stored_rows(metadata: dict) -> Rows | None:
    """The rows stored with a classifier (its ONNX metadata or checkpoint), or None for an older one."""
    cal = metadata.get("calibration")
    return Rows.from_dict(cal["rows"]) if cal else None


def stored_labels(metadata: dict, name: str = "this classifier") -> dict[str, str]:
    """The out-of-fold label (argmax of the stored rows) of every map a classifier was trained on, by map id.

    Raises:
        ClassifierError: the classifier stores no rows (an older export).
    """
    rows = stored_rows(metadata)
    if rows is None:
        raise ClassifierError(f"{name} stores no out-of-fold predictions (an older export): retrain it with "
                              f"`patterncnn train`")
    return {m: LABELS[int(k)] for m, k in zip(rows.ids.tolist(), rows.probs.argmax(1))}
