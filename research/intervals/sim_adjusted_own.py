"""TASK_BAND.md's second candidate: `adjusted` calibrated on the census encoder's own uniform rows (the encoder scope),
when one confusion per segment kind holds for all of that encoder's tasks. Does its 95% interval hold the true share?

Truth (truth.py): the encoder's own confusion R per segment kind (from its uniform rows) and its hand shares per task.
Each replicate:
  1. calibration rows: the encoder's own uniform rows (labels, kinds, input examples) with predictions redrawn ~ R;
     fit_calibration(rows, CAL_BOOTSTRAP) as the census's encoder scope does;
  2. a census of each task (dev size capped at 1000, 72 maps per example, per-example Dirichlet mixes);
  3. the code's example_sums("adjusted", ...) and shares_with_intervals; is p_t inside ci95?
Usage: python research/intervals/sim_adjusted_own.py REPS ENCODER [noridge]
  (noridge: TASK_BAND.md's third candidate, the calibration's RIDGE set to 0)
"""
import json
import sys

import numpy as np

sys.path.insert(0, "research/intervals")
from truth import census_labels, confusion_by_kind, redrawn_rows, true_shares  # noqa: E402

import patterncnn.shares.calibrate as calibrate  # noqa: E402
from patterncnn.shares.calibrate import CAL_BOOTSTRAP, fit_calibration, stored_rows  # noqa: E402
from patterncnn.shares.estimate import example_sums, shares_with_intervals  # noqa: E402

LABELS = ["vertical", "diagonal", "vertical+diagonal", "block", "heterogeneous"]
REPS, ENC = int(sys.argv[1]), sys.argv[2]
NORIDGE = len(sys.argv) > 3 and sys.argv[3] == "noridge"
if NORIDGE:
    calibrate.RIDGE = 0.0  # adjust_matrices reads the module's RIDGE when it runs
ALPHA, M = 30.0, 72
DEV = {"cola": 1000, "sst2": 872, "rte": 277, "mrpc": 408, "qnli": 1000, "stsb": 1000}

rows = stored_rows(json.load(open("models/metrics.json")))
mine = rows.subset(rows.uniform & (rows.encoder == ENC))
R = confusion_by_kind(mine)
tasks, single, p_true = true_shares(mine)
rng = np.random.default_rng(4242)


def calibration(seed):
    return fit_calibration(redrawn_rows(rng, R, mine), CAL_BOOTSTRAP, seed)


def census(t):
    return census_labels(rng, R[single[t]], p_true[t], DEV[t], M, ALPHA)


hits = {t: np.zeros(5) for t in tasks}
err = {t: [] for t in tasks}
widths = []
for rep in range(REPS):
    cal = calibration(rep)
    for t in tasks:
        labels = census(t)
        sing = np.full(len(labels), single[t])
        sums = example_sums("adjusted", np.zeros(labels.shape + (5,)), labels, sing, cal)
        out = shares_with_intervals(sums, seed=rep)
        err[t].append(np.array([out["shares"][k] for k in LABELS]) - p_true[t])
        for i, k in enumerate(LABELS):
            lo, hi = out["ci95"][k]
            hits[t][i] += lo - 1e-12 <= p_true[t][i] <= hi + 1e-12
            if not (single[t] and i == 3):
                widths.append(hi - lo)

print(f"adjusted, encoder scope{', RIDGE 0' if NORIDGE else ''}: {REPS} replicates, {M} maps per example; truth: "
      f"{ENC}'s own confusion and hand shares; "
      f"calibration: its {len(mine)} uniform rows with predictions redrawn from the truth")
print(f"{'task':6} " + " ".join(f"{k[:10]:>10}" for k in LABELS)
      + "   coverage of ci95 %  | mean error of the point, points")
mask = np.array([[not (single[t] and i == 3) for i in range(5)] for t in tasks])
cov = np.array([100 * hits[t] / REPS for t in tasks])
for j, t in enumerate(tasks):
    print(f"{t:6} " + " ".join(f"{x:10.0f}" for x in cov[j]) + "   | "
          + " ".join(f"{x:+.1f}" for x in 100 * np.mean(err[t], 0)))
print(f"mean coverage {cov[mask].mean():.1f} % over {mask.sum()} cells; cells under 90 %: {(cov[mask] < 90).sum()}, "
      f"under 50 %: {(cov[mask] < 50).sum()}; lowest cell {cov[mask].min():.0f} %; mean width "
      f"{100 * np.mean(widths):.1f} points")
ok = cov[mask].mean() >= 90 and cov[mask].min() >= 50
print(f"rule of TASK_BAND.md (mean >= 90 %, no cell under 50 %): {'met' if ok else 'NOT met'}")
