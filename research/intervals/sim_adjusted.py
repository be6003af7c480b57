"""Does `adjusted`'s census interval hold the true share 95 % of the time when its assumption holds exactly?

Truth: a known confusion matrix R per segment kind (the shipped classifier's OOF confusion on its 900 uniform rows),
the SAME for the calibration rows and the census maps (the correction's assumption met exactly); true task shares
p_t = MiniLM's hand shares per task. Each replicate:
  1. calibration rows: the 900 stored uniform rows' hand labels, segment kinds and example groups, with predictions
     redrawn ~ R[label]; fit_calibration(rows, CAL_BOOTSTRAP=200) exactly as the census does (uniform scope);
  2. a census of each task (dev size capped at 1000, 144 maps per example, per-example Dirichlet mixes);
  3. the code's example_sums("adjusted", ...) and shares_with_intervals; is p_t inside ci95?
Usage: python research/intervals/sim_adjusted.py [reps] [maps-per-example] [encoder tag: its own confusion as the truth]
"""
import json
import sys

import numpy as np

sys.path.insert(0, ".")
from truth import census_labels, confusion_by_kind, redrawn_rows, true_shares  # noqa: E402

from patterncnn.shares.calibrate import CAL_BOOTSTRAP, fit_calibration, stored_rows  # noqa: E402
from patterncnn.shares.estimate import example_sums, shares_with_intervals  # noqa: E402

LABELS = ["vertical", "diagonal", "vertical+diagonal", "block", "heterogeneous"]
REPS = int(sys.argv[1]) if len(sys.argv) > 1 else 100
M = int(sys.argv[2]) if len(sys.argv) > 2 else 144
# optional: truth = one encoder's OWN confusion and hand shares; calibration = the real stored uniform rows as they are
# (what a census with the uniform scope does), instead of rows redrawn from the truth
ENC = sys.argv[3] if len(sys.argv) > 3 else None
ALPHA = 30.0
DEV = {"cola": 1000, "sst2": 872, "rte": 277, "mrpc": 408, "qnli": 1000, "stsb": 1000}

meta = json.load(open("models/metrics.json"))
rows = stored_rows(meta)
u = rows.subset(rows.uniform)
src = rows.subset(rows.uniform & (rows.encoder == ENC)) if ENC else u
R = confusion_by_kind(src)

mini = rows.subset(rows.uniform & (rows.encoder == (ENC or "minilm-53aa5117")))
tasks, single, p_true = true_shares(mini)

rng = np.random.default_rng(777)


def calibration(seed):
    if ENC:
        return fit_calibration(u, CAL_BOOTSTRAP, seed)  # the real rows, as the census's uniform scope fits them
    return fit_calibration(redrawn_rows(rng, R, u), CAL_BOOTSTRAP, seed)


def census(t):
    return census_labels(rng, R[single[t]], p_true[t], DEV[t], M, ALPHA)  # (n, M) argmax labels


hits = {t: np.zeros(5) for t in tasks}
hits_clf = {t: np.zeros(5) for t in tasks}
err = {t: [] for t in tasks}
width = {t: [] for t in tasks}
for rep in range(REPS):
    cal = calibration(rep)
    for t in tasks:
        labels = census(t)
        sing = np.full(len(labels), single[t])
        probs = np.zeros(labels.shape + (5,))  # unused by adjusted
        out = shares_with_intervals(example_sums("adjusted", probs, labels, sing, cal), seed=rep)
        pt = np.array([out["shares"][k] for k in LABELS])
        err[t].append(pt - p_true[t])
        for i, k in enumerate(LABELS):
            lo, hi = out["ci95"][k]
            hits[t][i] += lo - 1e-12 <= p_true[t][i] <= hi + 1e-12
            width[t].append(hi - lo)
            lo, hi = out["ci95_parts"]["classifier"][k]
            hits_clf[t][i] += lo - 1e-12 <= p_true[t][i] <= hi + 1e-12

print(f"{REPS} replicates, {M} maps per example; " + (f"truth = {ENC}'s own confusion and hand shares, calibration = the "
      f"900 real uniform rows (uniform scope)" if ENC else "confusion the same in calibration and census (assumption met)"))
print(f"{'task':6} " + " ".join(f"{k[:10]:>10}" for k in LABELS) + "   coverage of ci95 %  | mean error of the point, points")
allc = []
for t in tasks:
    c = 100 * hits[t] / REPS
    allc.append(c)
    e = 100 * np.mean(err[t], 0)
    print(f"{t:6} " + " ".join(f"{x:10.0f}" for x in c) + "   | " + " ".join(f"{x:+.1f}" for x in e))
allc = np.array(allc)
mask = np.array([[not (single[t] and i == 3) for i in range(5)] for t in tasks])
print(f"overall ci95 coverage {allc[mask].mean():.1f} % over {mask.sum()} cells; under 90 %: {(allc[mask] < 90).sum()}; "
      f"mean width {100*np.mean([w for t in tasks for w in width[t]]):.1f} points")
