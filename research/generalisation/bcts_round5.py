"""Bias-corrected temperature scaling (BCTS) of the shipped classifier, scored on held-out round 5 (RULES.md, part 2).

    python research/generalisation/bcts_round5.py [--classifier models/patterncnn.onnx]
        [--annotations annotations/round5-heldout-uniform] [--out research/generalisation/bcts_round5.json]

BCTS (`loeo.bcts`: a temperature and a bias per class, by NLL) is fitted on the classifier's own cross-validation
out-of-fold posteriors (its ``metrics.json`` beside it, calibration rows: every training map, the segment rule
applied), then applied to its posteriors of the held-out set as `validate` computes them. Meant for a classifier
trained without `--bias-correction` (the committed `bcts_round5.json` is `9f40f2d2-rdc863f`'s, shipped before it: `git
show d4ce910:models/patterncnn.onnx`, with its `metrics.json` beside it). Both are scored the same
way (`patterncnn.training.validate.label_scores`: accuracy and macro-F1 per family, against one annotator), and the
pooled share error per family: the mean over the five patterns of |share of the predictions - share of the labels|,
in points. Writes one JSON file and prints a table.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np
from loeo import bcts, calibrated, share_error, shares_of

from patterncnn.classifier.onnx import load_classifier
from patterncnn.core.fileio import public_path, write_json
from patterncnn.core.labels import LABELS
from patterncnn.core.maps import families
from patterncnn.training.validate import label_scores, predict_labelled


def summary(data, probs: np.ndarray, annotations: str) -> dict:
    lab = label_scores(data, probs, annotations)
    pred, fams = probs.argmax(1), families(data.ids)
    out = {}
    for fam in [*sorted(set(fams.tolist())), "all"]:
        m = np.ones(len(pred), dtype=bool) if fam == "all" else fams == fam
        group = lab["groups"]["all" if fam == "all" else f"family {fam}"]["all"]
        yard = lab["against_one_annotator"].get(fam, {})
        out[fam] = {"maps": int(m.sum()), "accuracy": group["accuracy"], "macro_f1": group["macro_f1"],
                    "share_error_points": share_error(shares_of(pred[m]), shares_of(data.y[m])),
                    "against_one_annotator": yard.get("methods", {}).get("classifier", {}).get("agree"),
                    "annotator": yard.get("annotator", {}).get("agree"), "pairs": yard.get("pairs")}
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--classifier", default="models/patterncnn.onnx")
    ap.add_argument("--annotations", default="annotations/round5-heldout-uniform")
    ap.add_argument("--out", default=str(Path(__file__).resolve().parent / "bcts_round5.json"))
    args = ap.parse_args()
    rows = json.loads((Path(args.classifier).parent / "metrics.json").read_text())["calibration"]["rows"]
    oof = np.array(rows["probs"], dtype=np.float64)
    y_oof = np.array([LABELS.index(name) for name in rows["label"]])
    t, b = bcts(oof, y_oof)
    clf = load_classifier(args.classifier)
    data, probs = predict_labelled(clf, args.annotations)
    res = {"classifier": public_path(args.classifier), "version": clf.model_version, "annotations": args.annotations,
           "bcts": {"fitted_on": f"{len(y_oof)} out-of-fold posteriors", "temperature": t, "biases": b.tolist()},
           "plain": summary(data, probs, args.annotations),
           "bcts_applied": summary(data, calibrated(probs, t, b), args.annotations)}
    write_json(args.out, res)
    print(f"BCTS on {len(y_oof)} out-of-fold posteriors: T {t:.3f}, biases {np.round(b, 3).tolist()}")
    for fam, plain in res["plain"].items():
        cal = res["bcts_applied"][fam]
        print(f"{fam:7s} {plain['maps']:4d} maps  accuracy {plain['accuracy']:.3f} -> {cal['accuracy']:.3f}  macro-F1 "
              f"{plain['macro_f1']:.3f} -> {cal['macro_f1']:.3f}  share error {plain['share_error_points']:.1f} -> "
              f"{cal['share_error_points']:.1f}  against one annotator {plain['against_one_annotator']} -> "
              f"{cal['against_one_annotator']} (annotator {plain['annotator']})")


if __name__ == "__main__":
    main()
