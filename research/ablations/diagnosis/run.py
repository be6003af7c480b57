"""Where does the classifier's gap to one annotator come from? A learning curve and a capacity check.

Every run is the shipped recipe's 5-fold cross-validation (same folds, seeds, early stopping) on the
labelled set, scored out of fold against the resolved label and against one annotator
(patterncnn.training.evaluate.annotator_yardstick). Two questions:

* learning curve (``curve``): each fold's training maps cut to a fraction of its input examples (groups),
  the validation and test parts unchanged. If the score still rises steeply at 100 %, more labels help.
* capacity (``wide``): the same CV with every conv layer twice as wide (4x the FLOPs). If it does not
  help, the network's size is not what holds it back.

Usage (from the repository root; one torch job at a time on a small machine)::

    python research/ablations/diagnosis/run.py curve 1.0 0.25 0.5 0.75 > research/ablations/diagnosis/curve.txt
    python research/ablations/diagnosis/run.py wide > research/ablations/diagnosis/wide.txt
    python research/ablations/diagnosis/run.py votes > research/ablations/diagnosis/votes.txt

``votes`` trains nothing: the shipped model's out-of-fold predictions (``models/metrics.json``, its calibration
rows: the classifier as deployed, single-segment rule included) on the maps all three annotators agree on
and on the two-of-three maps.
"""

import json
import sys
import time

import numpy as np
import torch

from patterncnn.classifier.model import CNNConfig
from patterncnn.core.scores import macro_f1
from patterncnn.labelling.sets import load_labelled
from patterncnn.training import evaluate as ev
from patterncnn.training.fit import TrainConfig, fit_members, folds, predict_proba

ANNOTATIONS = "annotations"


def cv(data, cfg, tcfg, fraction=1.0, seed=0):
    """Out-of-fold probabilities, each fold's training part cut to ``fraction`` of its input examples."""
    oof = np.zeros((len(data.y), 5), dtype=np.float32)
    rng = np.random.default_rng(seed)
    for k, (tr, va, te) in enumerate(folds(data, tcfg)):
        if fraction < 1:
            groups = np.unique(data.groups[tr])
            keep = rng.choice(groups, int(round(fraction * len(groups))), replace=False)
            tr = tr[np.isin(data.groups[tr], keep)]
        model, _ = fit_members(data, tr, va, cfg, tcfg, seed=tcfg.seed + k)
        oof[te] = predict_proba(model, data, te, cfg)
    return oof, len(tr)


def scores(data, probs):
    pred = probs.argmax(1)
    fams = ev.families(data.ids)
    y = ev.annotator_yardstick(ev.load_votes(ANNOTATIONS, data.ids, data.y), data.ids, fams, {"CNN": pred})
    return {"macro_f1": round(macro_f1(data.y, pred), 3), "accuracy": round(float((pred == data.y).mean()), 3),
            **{f"vs one annotator, {f}": (round(r["methods"]["CNN"]["macro_f1"], 3),
                                          round(r["methods"]["CNN"]["agree"], 3)) for f, r in y.items()}}


def votes():
    from patterncnn.core.labels import LABELS

    rows = json.load(open("models/metrics.json"))["calibration"]["rows"]
    y = np.array([LABELS.index(x) for x in rows["label"]])
    top = ev.load_votes(ANNOTATIONS, rows["ids"], y).top
    right = np.array(rows["probs"]).argmax(1) == y
    for name, sel in (("all three agree", top == 3), ("two of three", top == 2)):
        print(json.dumps({"maps": name, "n": int(sel.sum()), "cnn_accuracy": round(float(right[sel].mean()), 3)}))


def main():
    torch.set_num_threads(2)
    what = sys.argv[1]
    if what == "votes":
        return votes()
    data = load_labelled(ANNOTATIONS)
    tcfg = TrainConfig()
    runs = ([("curve", float(f), CNNConfig()) for f in sys.argv[2:]] if what == "curve" else
            [("wide", 1.0, CNNConfig(widths=tuple(2 * w for w in CNNConfig().widths)))])
    for name, fraction, cfg in runs:
        t0 = time.time()
        probs, last_train = cv(data, cfg, tcfg, fraction)
        print(json.dumps({"run": name, "fraction": fraction, "widths": list(cfg.widths),
                          "last_fold_train_maps": int(last_train), **scores(data, probs),
                          "seconds": round(time.time() - t0)}), flush=True)


if __name__ == "__main__":
    main()
