"""Does gradient boosting gain from hand-made statistics of the [CLS] column (its mass, spottiness, the rows where
it is bright relative to the map or the row, against the brightest other column) and of the diagonal, added to
patterncnn.classifier.features? Same folds as train; scored against the resolved label and against one annotator.
Output: clsfeat.txt.
"""
import numpy as np

from patterncnn.core.scores import macro_f1
from patterncnn.labelling.sets import load_labelled
from patterncnn.training import evaluate as ev
from patterncnn.training.fit import TrainConfig

data = load_labelled("annotations"); fams = ev.families(data.ids)
F = ev.feature_matrix(data)
def colfeats(m, s):
    t = m.shape[0]; mx = m.max(); c = m[:, 0]; rowmax = m.max(1)
    other = m[:, 1:].copy()
    # brightest other column's mean, to compare
    oc = other.mean(0).max() if t > 1 else 0
    rel = c / np.maximum(rowmax, 1e-12)   # col 0 relative to each row's max
    bg = np.median(m, 1)
    return [c.mean(), c.std() / max(c.mean(), 1e-9), np.median(c) / mx, *(np.mean(c >= f * mx) for f in (0.25, 0.5, 0.75)),
            np.mean(rel >= 0.99), np.mean(rel >= 0.5), np.mean(c > 4 * bg), oc, c.mean() / max(oc, 1e-9),
            np.mean(np.diag(m)) / mx, np.mean(np.diag(m) >= 0.5 * rowmax)]
C = np.array([colfeats(m, s) for m, s in zip(data.maps, data.seps)])
tcfg = TrainConfig()
for name, feats in (("features", F), ("features+cls", np.hstack([F, C]))):
    preds, _ = ev.baseline_predictions(data, tcfg, feats)
    p = preds["features+gboost"]
    y = ev.annotator_yardstick(ev.load_votes("annotations", data.ids, data.y), data.ids, fams, {"gb": p})
    print(name, "macro %.3f acc %.3f" % (macro_f1(data.y, p), (p == data.y).mean()),
          {f: "%.3f/%.3f" % (r["methods"]["gb"]["macro_f1"], r["methods"]["gb"]["agree"]) for f, r in y.items()})
