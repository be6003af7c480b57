"""The yardstick for the best combinations at hand: means of the five seed fits of ../members (their
out-of-fold probabilities, `run.py cv` there, saved as oof_ens_s{0..4}.npy) and gradient-boosted features
(the same folds, oof_gboost.npy). Those .npy files were written by the experiment scripts of that stop and
are not committed (30-60 kB each, regenerable with ../members/run.py and evaluate.baseline_predictions into runs/diagnosis/;
blend.txt is this script's output.
"""
import numpy as np

from patterncnn.labelling.sets import load_labelled
from patterncnn.training import evaluate as ev

data = load_labelled("annotations"); fams = ev.families(data.ids)
S = [np.load(f"runs/diagnosis/oof_ens_s{s}.npy") for s in range(5)]; G = np.load("runs/diagnosis/oof_gboost.npy")
preds = {"cnn s0": S[0].argmax(1), "mean2": np.mean(S[:2], 0).argmax(1), "mean3": np.mean(S[:3], 0).argmax(1),
         "mean5": np.mean(S, 0).argmax(1), "gboost": G.argmax(1), "mean2+gb": (0.5*np.mean(S[:2],0)+0.5*G).argmax(1),
         "mean5+gb": (0.5*np.mean(S,0)+0.5*G).argmax(1), "s0+gb": (0.5*S[0]+0.5*G).argmax(1)}
y = ev.annotator_yardstick(ev.load_votes("annotations", data.ids, data.y), data.ids, fams, preds)
for f, r in y.items():
    print(f, "annotator %.3f/%.3f" % (r["annotator"]["macro_f1"], r["annotator"]["agree"]),
          "  ".join("%s %.3f/%.3f" % (k, v["macro_f1"], v["agree"]) for k, v in r["methods"].items()))
