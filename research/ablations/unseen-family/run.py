"""Share error of `count` on an encoder family the classifier never trained on.

usage (from the repository root): python research/ablations/unseen-family/run.py 0 1 2   (seeds)

For each seed and each direction, fits the CNN exactly as `patterncnn train`'s leave-one-encoder-out
does (same split, epochs cap 40, early stopping), predicts the uniformly drawn maps of the left-out
family (in `annotations/` and in `annotations/round5-heldout-uniform/`), and prints per encoder
(mean |error| over tasks and patterns, mean over patterns of |error of the task-pooled share| -- the
definition `patterncnn validate` uses --, and that per pattern in LABELS order). No segment rule is
applied (a single-segment map could be called block; none of the printed errors comes from that:
block's errors are <= 4.2 points).
"""
import dataclasses
import json
import sys

import numpy as np
import torch

torch.set_num_threads(2)
from patterncnn.classifier.model import CNNConfig
from patterncnn.labelling.sets import load_labelled
from patterncnn.training import evaluate as E
from patterncnn.training.fit import TrainConfig, fit, predict_proba

data = load_labelled("annotations")
test_sets = {"round5": load_labelled("annotations/round5-heldout-uniform")}
fams = E.families(data.ids)
uni = np.array([m.get("sampling") == "uniform" for m in data.meta])
enc = np.array([i.split("_")[0] for i in data.ids]); task = np.array([m["task"] for m in data.meta])
def share_err(y, p, tasks):
    errs = []
    for t in sorted(set(tasks)):
        k = tasks == t
        errs.append(np.bincount(p[k], minlength=5) / k.sum() - np.bincount(y[k], minlength=5) / k.sum())
    errs = np.array(errs)
    return (float(np.abs(errs).mean()), float(np.abs(errs.mean(0)).mean()), np.abs(errs.mean(0)).round(3).tolist())
r5 = test_sets["round5"]; r5enc = np.array([i.split("_")[0] for i in r5.ids]); r5task = np.array([m["task"] for m in r5.meta])
for seed in [int(s) for s in sys.argv[1:]]:
    for a, b in (("minilm", "mpnet"), ("mpnet", "minilm")):
        test = fams == b
        shared = (fams == a) & np.isin(data.groups, data.groups[test])
        pool = np.flatnonzero((fams == a) & ~shared)
        tr, va = E._split_train(data, pool, seed)
        model, ep, _ = fit(data, tr, va, CNNConfig(), dataclasses.replace(TrainConfig(seed=seed), max_epochs=40), seed=seed)
        out = {"seed": seed, "train": a, "test": b}
        for e in sorted(set(enc[test & uni])):
            k = np.flatnonzero(test & uni & (enc == e))
            p = predict_proba(model, data, k, CNNConfig()).argmax(1)
            out[e] = share_err(data.y[k], p, task[k])
        k = np.flatnonzero(np.array([E.encoder_family(i) == b for i in r5.ids]))
        p = predict_proba(model, r5, k, CNNConfig()).argmax(1)
        out["round5-" + b] = share_err(r5.y[k], p, r5task[k])
        print(json.dumps(out), flush=True)
