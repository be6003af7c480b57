"""Leave one encoder family out, over seeds: the measure of issue 30 for one classifier configuration.

    python research/generalisation/loeo.py NAME [--row] [--init CKPT] [--adabn] [--seeds 5] [--sets annotations]

For each family F of the labelled set(s): train on every other family's maps (maps whose input example is also
among F's maps dropped, early stopping on a grouped fifth of the training maps, as `patterncnn train`'s leave one
encoder out), test on all of F's maps. One JSON line per (test family, seed) is appended to results.jsonl beside
this script: accuracy, four-class macro-F1 (the maps not labelled block, classes vertical, diagonal,
vertical+diagonal, heterogeneous), the same on maps where two annotators agree, and the confusion.

--init starts every fit from a pretrained CNN's weights (patterncnn.training.pretrain); --adabn also scores the
same fit after re-estimating its BatchNorm statistics on the test family's own maps, unlabelled (test-time
adaptation), as adabn_all / adabn_agreed.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import time
from pathlib import Path

import numpy as np
import torch

from patterncnn.classifier.model import CNNConfig, config_from_dict
from patterncnn.core.labels import LABELS
from patterncnn.core.maps import families
from patterncnn.labelling.sets import load_labelled
from patterncnn.training.evaluate import _split_train, load_votes
from patterncnn.training.fit import TrainConfig, fit_members, model_inputs, predict_proba, torch_threads

HERE = Path(__file__).resolve().parent
BLOCK = LABELS.index("block")


def adabn(model: torch.nn.Module, x: torch.Tensor, batch: int = 256) -> None:
    """Re-estimate every BatchNorm's running statistics on ``x`` (cumulative average), weights unchanged."""
    bns = [m for m in model.modules() if isinstance(m, torch.nn.BatchNorm2d)]
    for m in bns:
        m.reset_running_stats()
        m.momentum = None
    model.train()
    with torch.no_grad():
        for s in range(0, len(x), batch):
            model(x[s : s + batch])
    model.eval()


def scores(y: np.ndarray, pred: np.ndarray, mask: np.ndarray) -> dict:
    from sklearn.metrics import f1_score

    four = mask & (y != BLOCK)
    f1 = f1_score(y[four], pred[four], labels=[k for k in range(len(LABELS)) if k != BLOCK], average="macro",
                  zero_division=0)
    return {"maps": int(mask.sum()), "accuracy": float((y[mask] == pred[mask]).mean()), "macro_f1_4": float(f1)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("name")
    ap.add_argument("--sets", nargs="+", default=["annotations", "annotations/round8-e5-uniform"])
    ap.add_argument("--row", action="store_true", help="the row-scaled input channel")
    ap.add_argument("--init", help="pretrained weights (a .pt with state_dict and model_config)")
    ap.add_argument("--adabn", action="store_true")
    ap.add_argument("--seeds", type=int, default=5)
    ap.add_argument("--max-epochs", type=int, default=40)
    ap.add_argument("--only", help="test family to run (default: each in turn)")
    args = ap.parse_args()
    data = load_labelled(args.sets)
    fams = families(data.ids)
    votes = load_votes(args.sets, data.ids, data.y)
    cfg, init = CNNConfig(row_channel=args.row), None
    if args.init:
        ckpt = torch.load(args.init, map_location="cpu", weights_only=True)
        cfg, init = config_from_dict(ckpt["model_config"]), ckpt["state_dict"]
    tcfg = dataclasses.replace(TrainConfig(), max_epochs=args.max_epochs)
    with torch_threads(2), open(HERE / "results.jsonl", "a") as out:
        for b in sorted(set(fams.tolist())):
            if args.only and b != args.only:
                continue
            test = fams == b
            shared = ~test & np.isin(data.groups, data.groups[test])
            pool, te = np.flatnonzero(~test & ~shared), np.flatnonzero(test)
            x_te = model_inputs(data.maps, data.seps, te, cfg) if args.adabn else None
            for seed in range(args.seeds):
                t0 = time.time()
                tr, va = _split_train(data, pool, seed)
                model, epochs = fit_members(data, tr, va, cfg, tcfg, seed=seed, init=init)
                pred = np.full(len(data.y), -1)
                pred[te] = predict_proba(model, data, te, cfg).argmax(1)
                adapted = {}
                if args.adabn:  # the same fit, its BatchNorm statistics re-estimated on the test family
                    adabn(model, x_te)
                    pred_a = np.full(len(data.y), -1)
                    pred_a[te] = predict_proba(model, data, te, cfg).argmax(1)
                    adapted = {"adabn_all": scores(data.y, pred_a, test),
                               "adabn_agreed": scores(data.y, pred_a, test & votes.agreed)}
                rec = {"name": args.name, "test": b, "train": sorted(set(fams[pool].tolist())), "seed": seed,
                       "train_maps": int(len(pool)), "best_epoch": int(np.median(epochs)),
                       "all": scores(data.y, pred, test), "agreed": scores(data.y, pred, test & votes.agreed),
                       "confusion": np.bincount(data.y[te] * len(LABELS) + pred[te],
                                                minlength=len(LABELS) ** 2).reshape(len(LABELS), -1).tolist(),
                       **adapted, "seconds": round(time.time() - t0, 1), "args": vars(args)}
                out.write(json.dumps(rec) + "\n")
                out.flush()
                extra = f" adabn acc {adapted['adabn_all']['accuracy']:.3f}" if adapted else ""
                print(f"{args.name} test {b} seed {seed}: acc {rec['all']['accuracy']:.3f} "
                      f"F1-4 {rec['all']['macro_f1_4']:.3f}{extra} ({rec['seconds']} s)", flush=True)


if __name__ == "__main__":
    main()
