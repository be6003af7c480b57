"""Weight-space ensembles of the pretrained and the fine-tuned CNN (WiSE-FT), measured by leaving one family out.

    python research/generalisation/wiseft.py NAME --init CKPT [--alphas 0 0.25 0.5 0.75 1] [--seeds 5] [--only F]

Wortsman et al. (2022), *Robust fine-tuning of zero-shot models*: fine-tuning a model that already generalises
(here the CNN pretrained on synthetic maps alone, right on 74-76 % of the MiniLM and MPNet maps it never saw) on a
few real domains raises its accuracy there and may lower it elsewhere; the weights
``(1 - alpha) * pretrained + alpha * fine-tuned`` often keep the best of both, at no cost at inference (one CNN).

Each fit is loeo.py's (its `held_out` split, early stopping on a grouped fifth of the training families' maps,
train's fine-tuning rate from --init). Every alpha is scored on all of the held-out family's maps, and on the
training families' early-stopping maps (``val``: in sample for the choice of the epoch, the one figure a user
without the held-out family could look at). BatchNorm running statistics are interpolated like the weights
(``bn: "interpolated"``) and, in a second score, re-estimated on the training maps (``bn: "refit"``).
One JSON line per (held-out family, seed) is appended to wiseft.jsonl beside this script.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np

from patterncnn.core.fileio import public_path, sha256_file
from patterncnn.training.evaluate import _split_train
from patterncnn.training.fit import INIT_LR, TrainConfig, fit_members, model_inputs, predict_proba, torch_threads

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from loeo import adabn, directions, load_pretrained, load_sets, scores  # noqa: E402


def interpolate(pre: dict, ft: dict, alpha: float) -> dict:
    """``(1 - alpha) * pre + alpha * ft`` for every floating tensor; integer ones (BatchNorm's batch counts) from
    ``ft``."""
    return {k: ((1 - alpha) * pre[k] + alpha * v) if v.is_floating_point() else v.clone() for k, v in ft.items()}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("name")
    ap.add_argument("--sets", nargs="+", default=["annotations", "annotations/round8-e5-uniform"])
    ap.add_argument("--init", required=True)
    ap.add_argument("--alphas", nargs="+", type=float, default=[0.0, 0.25, 0.5, 0.75, 1.0])
    ap.add_argument("--seeds", type=int, default=5)
    ap.add_argument("--max-epochs", type=int, default=40)
    ap.add_argument("--only")
    args = ap.parse_args()
    data, fams, votes = load_sets(args.sets)
    cfg, init = load_pretrained(args.init)
    tcfg = TrainConfig(max_epochs=args.max_epochs, lr=INIT_LR)
    with torch_threads(2), open(HERE / "wiseft.jsonl", "a") as out:
        for b, test, pool, te in directions(data, fams, args.only):
            for seed in range(args.seeds):
                t0 = time.time()
                tr, va = _split_train(data, pool, seed)
                model, epochs = fit_members(data, tr, va, cfg, tcfg, seed=seed, init=init)
                ft = {k: v.detach().clone() for k, v in model.state_dict().items()}
                val = np.zeros(len(data.y), dtype=bool)
                val[va] = True
                x_tr = model_inputs(data.maps, data.seps, tr, cfg)
                rows = []
                for alpha in args.alphas:
                    for bn in ("interpolated", "refit"):
                        model.load_state_dict(interpolate(init, ft, alpha))
                        if bn == "refit":
                            adabn(model, x_tr)
                        model.eval()
                        pred = np.full(len(data.y), -1)
                        both = np.concatenate([te, va])
                        pred[both] = predict_proba(model, data, both, cfg).argmax(1)
                        rows.append({"alpha": alpha, "bn": bn, "all": scores(data.y, pred, test),
                                     "agreed": scores(data.y, pred, test & votes.agreed),
                                     "val": scores(data.y, pred, val)})
                rec = {"name": args.name, "test": b, "train": sorted(set(fams[pool].tolist())), "seed": seed,
                       "best_epoch": int(np.median(epochs)), "alphas": rows, "seconds": round(time.time() - t0, 1),
                       "args": {**vars(args), "init": public_path(args.init)}, "init_sha256": sha256_file(args.init)}
                out.write(json.dumps(rec) + "\n")
                out.flush()
                print(f"{args.name} test {b} seed {seed}: " + " ".join(
                    f"a{r['alpha']:g}/{r['bn'][0]} {r['all']['accuracy']:.3f}|{r['all']['macro_f1_4']:.3f}"
                    for r in rows), flush=True)


if __name__ == "__main__":
    main()
