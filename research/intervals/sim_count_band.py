"""Does count's census interval (examples bootstrap + validated band in quadrature) hold the true share 95 % of the time?

Truth: a known confusion matrix R (row-normalised, per segment kind) = the shipped classifier's out-of-fold confusion on
its 900 uniformly drawn rows; known per-task true shares p_t = MiniLM's hand-labelled shares per task (30 maps each).
Each replicate:
  1. a validation like train's: two halves with MiniLM's per-task map counts (folds 0-2 / 3-4), hand labels ~ p_t,
     predictions ~ R[label]; band = error_band (largest |task-pooled signed error| per pattern over the halves,
     floored at 3/n) exactly as patterncnn.training.validate does;
  2. a census of each task with its dev-set size (capped 1000) x 144 maps; each example's maps drawn from its own
     Dirichlet(ALPHA * p_t) mix (maps of one sentence correlate), predictions ~ R[label];
  3. the code's own shares_with_intervals(..., band=segment_band(band, single)); is p_t inside?
Usage: python research/intervals/sim_count_band.py [reps] [stored|sim] [encoder tag] [own|all]   (stored: the band MiniLM stores, 5.1/1.7/2.7/1.7/2.6)
"""
import json
import sys

import numpy as np

sys.path.insert(0, ".")
from truth import confusion_by_kind, true_shares  # noqa: E402

from patterncnn.shares.calibrate import stored_rows  # noqa: E402
from patterncnn.shares.estimate import segment_band, shares_with_intervals  # noqa: E402

LABELS = ["vertical", "diagonal", "vertical+diagonal", "block", "heterogeneous"]
REPS = int(sys.argv[1]) if len(sys.argv) > 1 else 200
FIXED = len(sys.argv) > 2 and sys.argv[2] == "stored"
ENC = sys.argv[3] if len(sys.argv) > 3 else "minilm-53aa5117"  # whose hand shares (and, with OWN, confusion) are the truth
OWN = len(sys.argv) > 4 and sys.argv[4] == "own"  # R from that encoder's own uniform rows instead of all 900  # use MiniLM's stored band instead of a simulated validation
ALPHA = 30.0
M = 144
DEV = {"cola": 1000, "sst2": 872, "rte": 277, "mrpc": 408, "qnli": 1000, "stsb": 1000}

meta = json.load(open("models/metrics.json"))
rows = stored_rows(meta)
u = rows.subset(rows.uniform & (rows.encoder == ENC)) if OWN else rows.subset(rows.uniform)
R = confusion_by_kind(u)

mini = rows.subset(rows.uniform & (rows.encoder == ENC))
tasks, single, p_true = true_shares(mini)
half_of = (mini.fold >= 3).astype(int)
n_half = {(h, t): int(((half_of == h) & (mini.task == t)).sum()) for h in (0, 1) for t in tasks}
n_val = len(mini)

rng = np.random.default_rng(12345)


def draw_pred(y, kind):
    cum = R[kind][y].cumsum(1)
    return (rng.random(len(y))[:, None] > cum).sum(1).clip(0, 4)


def validation_band():
    errs = []
    for h in (0, 1):
        e = []
        for t in tasks:
            n = n_half[(h, t)]
            y = rng.choice(5, size=n, p=p_true[t])
            q = draw_pred(y, single[t])
            e.append(np.bincount(q, minlength=5) / n - np.bincount(y, minlength=5) / n)
        errs.append(np.mean(e, 0))
    return np.maximum(np.max(np.abs(errs), 0), 3.0 / n_val)  # validate.error_band


def census_sums(t):
    n = DEV[t]
    theta = rng.dirichlet(ALPHA * p_true[t] + 1e-6, size=n)  # (n, 5) each example's own mix
    y_counts = np.array([rng.multinomial(M, th) for th in theta])  # (n, 5)
    sums = np.zeros((n, 5))
    for k in range(5):
        sums += np.array([rng.multinomial(c, R[single[t]][k]) for c in y_counts[:, k]])
    return sums[None]


hits = {t: np.zeros(5) for t in tasks}
hits_ex = {t: np.zeros(5) for t in tasks}
bands = []
bias = {t: R[single[t]].T @ p_true[t] - p_true[t] for t in tasks}
for rep in range(REPS):
    band = validation_band()
    if FIXED:
        band = np.array([meta["validation"]["results"][0]["encoders"][ENC]["bias_band"][k] for k in LABELS])
    bands.append(band)
    for t in tasks:
        sums = census_sums(t)
        out = shares_with_intervals(sums, seed=rep, band=segment_band(band, np.full(DEV[t], single[t])))
        for i, k in enumerate(LABELS):
            lo, hi = out["ci95"][k]
            hits[t][i] += lo - 1e-12 <= p_true[t][i] <= hi + 1e-12
            lo, hi = out["ci95_parts"]["examples"][k]
            hits_ex[t][i] += lo - 1e-12 <= p_true[t][i] <= hi + 1e-12

bands = np.array(bands)
print(f"{REPS} replicates; truth R = the shipped classifier's OOF confusion on "
      f"{ENC + ' own' if OWN else 'its 900'} uniform rows; p_t = {ENC} hand shares per task; band "
      f"{'stored' if FIXED else 'simulated validation'}")
print("band per pattern (points): mean", np.round(100 * bands.mean(0), 2), " 5th pct", np.round(100 * np.percentile(bands, 5, 0), 2))
print("task-pooled bias R'p - p (points):", np.round(100 * np.mean([bias[t] for t in tasks], 0), 2))
print(f"{'task':6} " + " ".join(f"{k[:10]:>10}" for k in LABELS) + "   (coverage of the true share by ci95, %; [bias, points])")
allc = []
for t in tasks:
    c = 100 * hits[t] / REPS
    allc.append(c)
    print(f"{t:6} " + " ".join(f"{x:10.0f}" for x in c) + "   [" + " ".join(f"{100*b:+.1f}" for b in bias[t]) + "]")
allc = np.array(allc)
mask = np.array([[not (single[t] and i == 3) for i in range(5)] for t in tasks])
print(f"overall coverage of ci95 over (task, pattern) cells (block on single-segment tasks left out): "
      f"{allc[mask].mean():.1f} %; cells under 90 %: {(allc[mask] < 90).sum()} of {mask.sum()}; under 50 %: "
      f"{(allc[mask] < 50).sum()}")
ex = np.array([100 * hits_ex[t] / REPS for t in tasks])
print(f"examples part alone: {ex[mask].mean():.1f} %")
