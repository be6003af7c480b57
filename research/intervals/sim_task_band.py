"""The per-task band of TASK_BAND.md (its rule was written before this ran): does widening the census's interval by
it make the interval hold the true share?

Truth (truth.py): a confusion matrix R per segment kind, and per-task true shares p_t from one encoder's hand labels.
Each replicate:
  1. that encoder's validation: two halves with its real per-task map counts (folds 0-2 / 3-4), hand labels ~ p_t,
     predictions ~ R[label]; per map d = the estimator's vector (count: one-hot argmax; adjusted: the calibration's
     adjust matrix times it) - one-hot(label); per cell e = mean d, v = var(d) / n; band = 1.96 sqrt(max(0,
     mean(e^2 - v))), floored at 3 / the encoder's maps;
  2. a census of each task (dev size capped at 1000, 72 maps per example, per-example Dirichlet mixes);
  3. the code's example_sums and shares_with_intervals, the total interval widened by the band in quadrature (block's
     band 0 on single-segment tasks, segment_band); is p_t inside?
For adjusted the calibration is the 900 real uniform rows (the census's uniform scope), refitted each replicate with
its bootstrap.
Usage: python research/intervals/sim_task_band.py ESTIMATOR REPS ENCODER [own|all]
  (own: R from the encoder's own uniform rows; all: from all 900)
"""
import json
import sys

import numpy as np

sys.path.insert(0, "research/intervals")
from truth import census_labels, confusion_by_kind, true_shares  # noqa: E402

from patterncnn.shares.calibrate import CAL_BOOTSTRAP, fit_calibration, stored_rows  # noqa: E402
from patterncnn.shares.estimate import example_sums, segment_band, shares_with_intervals  # noqa: E402

LABELS = ["vertical", "diagonal", "vertical+diagonal", "block", "heterogeneous"]
EST, REPS, ENC = sys.argv[1], int(sys.argv[2]), sys.argv[3]
OWN = len(sys.argv) <= 4 or sys.argv[4] == "own"
ALPHA, M, Z = 30.0, 72, 1.96
DEV = {"cola": 1000, "sst2": 872, "rte": 277, "mrpc": 408, "qnli": 1000, "stsb": 1000}

meta = json.load(open("models/metrics.json"))
rows = stored_rows(meta)
u = rows.subset(rows.uniform)
mine = rows.subset(rows.uniform & (rows.encoder == ENC))
R = confusion_by_kind(mine if OWN else u)
tasks, single, p_true = true_shares(mine)
half_of = (mine.fold >= 3).astype(int)
n_half = {(h, t): int(((half_of == h) & (mine.task == t)).sum()) for h in (0, 1) for t in tasks}
rng = np.random.default_rng(2026)


def draw_pred(y, kind):
    cum = R[kind][y].cumsum(1)
    return (rng.random(len(y))[:, None] > cum).sum(1).clip(0, 4)


def vectors(pred, kind, cal):
    """Per-map vectors (n, 5) of the estimator, calibration replicate 0."""
    onehot = np.eye(5)[pred]
    return onehot if EST == "count" else onehot @ cal.adjust[0, 0 if kind else 1].T


def band(cal):
    e, v = [], []
    for h in (0, 1):
        for t in tasks:
            n = n_half[(h, t)]
            if n < 2:
                continue
            y = rng.choice(5, size=n, p=p_true[t])
            d = vectors(draw_pred(y, single[t]), single[t], cal) - np.eye(5)[y]
            e.append(d.mean(0))
            v.append(d.var(0, ddof=1) / n)
    s2 = np.clip((np.array(e) ** 2 - np.array(v)).mean(0), 0, None)
    return np.maximum(Z * np.sqrt(s2), 3.0 / len(mine))


def census(t):
    return census_labels(rng, R[single[t]], p_true[t], DEV[t], M, ALPHA)  # (n, M) argmax labels


def widen(out, b):
    ci = {}
    for name, bk in zip(LABELS, b):
        p, (lo, hi) = out["shares"][name], out["ci95"][name]
        ci[name] = [max(p - np.hypot(p - lo, bk), 0.0), min(p + np.hypot(hi - p, bk), 1.0)]
    return ci


hits = {t: np.zeros(5) for t in tasks}
hits_old = {t: np.zeros(5) for t in tasks}
widths, bands = [], []
for rep in range(REPS):
    cal = fit_calibration(u, CAL_BOOTSTRAP, rep) if EST == "adjusted" else None
    b = band(cal)
    bands.append(b)
    for t in tasks:
        labels = census(t)
        sing = np.full(len(labels), single[t])
        out = shares_with_intervals(example_sums(EST, np.zeros(labels.shape + (5,)), labels, sing, cal), seed=rep)
        new = widen(out, segment_band(b, sing))
        for i, k in enumerate(LABELS):
            hits[t][i] += new[k][0] - 1e-12 <= p_true[t][i] <= new[k][1] + 1e-12
            hits_old[t][i] += out["ci95"][k][0] - 1e-12 <= p_true[t][i] <= out["ci95"][k][1] + 1e-12
            if not (single[t] and i == 3):
                widths.append(new[k][1] - new[k][0])

bands = np.array(bands)
print(f"{EST}, {REPS} replicates, {M} maps per example; truth: {ENC}'s hand shares, confusion of "
      f"{ENC + ' own' if OWN else 'all 900'} uniform rows" + ("; calibration: the 900 real uniform rows" if EST ==
                                                            "adjusted" else ""))
print("band per pattern (points): mean", np.round(100 * bands.mean(0), 1), " 5th pct",
      np.round(100 * np.percentile(bands, 5, 0), 1), " 95th pct", np.round(100 * np.percentile(bands, 95, 0), 1))
print(f"{'task':6} " + " ".join(f"{k[:10]:>10}" for k in LABELS) + "   coverage %, widened (without the band)")
mask = np.array([[not (single[t] and i == 3) for i in range(5)] for t in tasks])
new_c = np.array([100 * hits[t] / REPS for t in tasks])
old_c = np.array([100 * hits_old[t] / REPS for t in tasks])
for j, t in enumerate(tasks):
    print(f"{t:6} " + " ".join(f"{a:4.0f} ({b:3.0f})" for a, b in zip(new_c[j], old_c[j])))
print(f"mean coverage {new_c[mask].mean():.1f} % (without the band {old_c[mask].mean():.1f} %) over {mask.sum()} "
      f"cells; "
      f"cells under 90 %: {(new_c[mask] < 90).sum()}, under 50 %: {(new_c[mask] < 50).sum()}; lowest cell "
      f"{new_c[mask].min():.0f} %; mean width {100 * np.mean(widths):.1f} points")
ok = new_c[mask].mean() >= 90 and new_c[mask].min() >= 50
print(f"rule of TASK_BAND.md (mean >= 90 %, no cell under 50 %): {'met' if ok else 'NOT met'}")
