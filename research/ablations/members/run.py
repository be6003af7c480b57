"""How much does averaging several CNNs help? The evidence behind `patterncnn train --members 2`.

usage (from the repository root): python research/ablations/members/run.py cv 0 1 2 3 4     (~2.5 min per seed)
                                  python research/ablations/members/run.py heldout 5        (~35 s per seed)

cv: for each seed s, the out-of-fold CV of one CNN on the training set's folds (`train.folds` with
seed 0, as `patterncnn train` uses), every fold model fitted with seed k + 1000·s -- exactly member s
of `train.fit_members` -- and then the mean of the first K seeds' probabilities (K = 1, 2, 3, 5), the
out-of-fold prediction of a K-member ensemble. Prints macro-F1, accuracy, and macro-F1 on the agreed
maps of each family, and the per-class F1.

heldout: for seeds 0..N-1, one CNN fitted on all training maps for 25 epochs (the final fit's
epoch count of the single-CNN classifier) with seed 1000·s, scored alone and as the mean of the
first K on the held-out test set `annotations/round5-heldout-uniform/` (accuracy, all / MiniLM / MPNet).
"""
import sys

import numpy as np
import torch

from patterncnn.classifier.model import MEMBER_SEED_STEP, CNNConfig
from patterncnn.core.labels import LABELS
from patterncnn.core.scores import classification_report, macro_f1
from patterncnn.labelling.sets import load_labelled
from patterncnn.training import evaluate as ev
from patterncnn.training.fit import TrainConfig, fit, folds, predict_proba

torch.set_num_threads(2)
data = load_labelled("annotations")
cfg, tcfg = CNNConfig(), TrainConfig()


def cv(seeds: list[int]) -> None:
    fams = ev.families(data.ids)
    agreed = ev.load_votes("annotations", data.ids, data.y).agreed
    probs = []
    for s in seeds:
        p = np.zeros((len(data.y), len(LABELS)), dtype=np.float32)
        for k, (tr, va, te) in enumerate(folds(data, tcfg)):
            model, _, _ = fit(data, tr, va, cfg, tcfg, seed=tcfg.seed + k + MEMBER_SEED_STEP * s)
            p[te] = predict_proba(model, data, te, cfg)
        probs.append(p)
        report("seed", s, p, fams, agreed)
    for n in (1, 2, 3, 5):
        if n <= len(probs):
            report("mean of", n, np.mean(probs[:n], axis=0), fams, agreed)


def report(what: str, n: int, p: np.ndarray, fams, agreed) -> None:
    pred = p.argmax(1)
    per = classification_report(data.y, pred)["per_class"]
    fam = " ".join(f"{f} agreed {ev.subset_scores(data.y, pred, (fams == f) & agreed)['macro_f1']:.3f}"
                   for f in ("minilm", "mpnet"))
    print(f"{what} {n}: macro-F1 {macro_f1(data.y, pred):.3f} accuracy {(pred == data.y).mean():.3f} {fam} | "
          + " / ".join(f"{v['f1']:.2f}" for v in per.values()), flush=True)


def heldout(n: int) -> None:
    test = load_labelled("annotations/round5-heldout-uniform")
    fams = ev.families(test.ids)
    idx, te, probs = np.arange(len(data.y)), np.arange(len(test.y)), []
    for s in range(n):
        model, _, _ = fit(data, idx, None, cfg, tcfg, seed=tcfg.seed + MEMBER_SEED_STEP * s, epochs=25)
        probs.append(predict_proba(model, test, te, cfg))
        for what, p in (("seed", probs[-1]), ("mean of", np.mean(probs, axis=0))):
            pred = p.argmax(1)
            accs = [(pred[m] == test.y[m]).mean() for m in (np.ones(len(pred), bool), fams == "minilm", fams == "mpnet")]
            print(f"{what} {s if what == 'seed' else len(probs)}: accuracy all / MiniLM / MPNet "
                  + " / ".join(f"{a:.3f}" for a in accs), flush=True)


if __name__ == "__main__":
    cv([int(s) for s in sys.argv[2:]]) if sys.argv[1] == "cv" else heldout(int(sys.argv[2]))
