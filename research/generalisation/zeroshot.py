"""Score a CNN pretrained on synthetic maps only (pretrain.py), never fine-tuned, on every labelled family.

    python research/generalisation/zeroshot.py NAME CKPT [--sets annotations annotations/round8-e5-uniform]

No real map has been seen by such a model, so every family is out of sample for it. One JSON line per family is
appended to results.jsonl (seed: the pretraining seed), in loeo.py's format.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np
import torch
from loeo import confusion, scores

from patterncnn.classifier.model import PatternCNN, config_from_dict
from patterncnn.core.fileio import public_path, sha256_file
from patterncnn.core.maps import families
from patterncnn.labelling.sets import load_labelled
from patterncnn.training.evaluate import load_votes
from patterncnn.training.fit import predict_proba, torch_threads

HERE = Path(__file__).resolve().parent


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("name")
    ap.add_argument("ckpt")
    ap.add_argument("--sets", nargs="+", default=["annotations", "annotations/round8-e5-uniform"])
    args = ap.parse_args()
    ckpt = torch.load(args.ckpt, map_location="cpu", weights_only=True)
    cfg = config_from_dict(ckpt["model_config"])
    model = PatternCNN(cfg)
    model.load_state_dict(ckpt["state_dict"])
    model.eval()
    data = load_labelled(args.sets)
    fams = families(data.ids)
    votes = load_votes(args.sets, data.ids, data.y)
    with torch_threads(2):
        pred = predict_proba(model, data, np.arange(len(data.y)), cfg).argmax(1)
    with open(HERE / "results.jsonl", "a") as out:
        for b in sorted(set(fams.tolist())):
            test = fams == b
            rec = {"name": args.name, "test": b, "train": ["synthetic"], "seed": ckpt["pretrained_on"]["seed"],
                   "pretrained_on": ckpt["pretrained_on"], "all": scores(data.y, pred, test),
                   "agreed": scores(data.y, pred, test & votes.agreed),
                   "confusion": confusion(data.y[test], pred[test]).tolist(),
                   "args": {**vars(args), "ckpt": public_path(args.ckpt)}, "ckpt_sha256": sha256_file(args.ckpt)}
            out.write(json.dumps(rec) + "\n")
            print(f"{args.name} test {b}: acc {rec['all']['accuracy']:.3f} F1-4 {rec['all']['macro_f1_4']:.3f}")


if __name__ == "__main__":
    main()
