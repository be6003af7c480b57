"""The shipped model's out-of-fold errors on maps all three annotators agree on, against the mass of the
[CLS] column (mean attention to token 0 over rows) and the share of rows where that column is at least half
the map's maximum. Output: cls.txt (python research/ablations/diagnosis/cls.py > research/ablations/diagnosis/cls.txt).
"""
import json

import numpy as np

from patterncnn.core.labels import LABELS
from patterncnn.labelling.sets import load_labelled
from patterncnn.training import evaluate as ev

data = load_labelled("annotations")
rows = json.load(open("models/metrics.json"))["calibration"]["rows"]
assert rows["ids"] == list(data.ids)
pred = np.array(rows["probs"]).argmax(1); y = data.y
top = ev.load_votes("annotations", data.ids, y).top
cls = np.array([m[:, 0].mean() for m in data.maps])           # mean attention to token 0
colfrac = np.array([(m[:, 0] >= 0.5 * m.max()).mean() for m in data.maps])  # rows where col 0 >= half the max
U = top == 3
bins = [0, 0.1, 0.2, 0.3, 0.5, 0.7, 1.01]
print("unanimous maps: CNN accuracy by the [CLS] column's mean mass")
for lo, hi in zip(bins, bins[1:]):
    s = U & (cls >= lo) & (cls < hi)
    if s.sum():
        lab = {LABELS[k]: int((y[s] == k).sum()) for k in range(5) if (y[s] == k).any()}
        print(f"  [{lo:.1f},{hi:.1f}) n={s.sum():4d} acc={np.mean(pred[s]==y[s]):.3f} labels={lab}")
V, D, VD, B, H = range(5)
for t, p in ((D, VD), (H, V), (VD, V), (V, H), (V, VD)):
    s = U & (y == t); e = s & (pred == p); r = s & (pred == t)
    print(f"unanimous {LABELS[t]:>18} called {LABELS[p]:<18} n={e.sum():3d}: [CLS] mass {cls[e].mean():.3f}, rows with col0>=max/2 {colfrac[e].mean():.2f} | right n={r.sum()}: {cls[r].mean():.3f}, {colfrac[r].mean():.2f}")
