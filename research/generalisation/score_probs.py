"""Score saved leave-one-family-out posteriors (`loeo.py --save-probs`) against other labels than the fit's own.

    python research/generalisation/score_probs.py research/generalisation/probs/shipped-recipe-em-probs \
        research/generalisation/probs/shipped-recipe-5votes \
        --labels annotations annotations/round8-e5-uniform --other runs/r9/main runs/r9/e5

For each folder of posteriors and each held-out family: the mean over the fits (seeds) of the accuracy and the
four-class macro-F1 (block maps left out) of the corrected posteriors (`bcts`; `--kind probs` for the plain ones),
scored against the labels of --labels, against those of --other, and against both on the maps where the two label
sets agree (the same maps and labels for every folder). --only SET ... scores only the maps those sets label (round
12's rule: a run trained and tested with more maps, compared on the maps both runs score).
"""

import argparse
import csv
import glob
from pathlib import Path

import numpy as np
from seed_ensemble import scores

from patterncnn.core.labels import LABELS


def labels_of(sets: list[str]) -> dict[str, int]:
    out = {}
    for s in sets:
        with open(Path(s) / "labels.csv", newline="", encoding="utf-8") as f:
            out |= {r["map_id"]: LABELS.index(r["label"]) for r in csv.DictReader(f)}
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("folders", nargs="+")
    ap.add_argument("--labels", nargs="+", required=True)
    ap.add_argument("--other", nargs="+", required=True)
    ap.add_argument("--kind", default="bcts", choices=["bcts", "probs"])
    ap.add_argument("--only", nargs="+", help="score only the maps these labelled sets hold")
    args = ap.parse_args()
    a, b = labels_of(args.labels), labels_of(args.other)
    only = set(labels_of(args.only)) if args.only else None
    for folder in args.folders:
        for fam in ("e5", "minilm", "mpnet"):
            fits = [np.load(f) for f in sorted(glob.glob(f"{folder}/{fam}-seed*.npz"))]
            if not fits:
                continue
            if args.kind not in fits[0]:
                raise SystemExit(f"{folder}: no {args.kind!r} posteriors (saved without loeo.py --em?); "
                                 "use --kind probs")
            if only is not None and not any(str(m) in only for m in fits[0]["ids"]):
                continue  # none of this family's maps is in --only
            cells = {"labels": [], "other": [], "agreed": []}
            for r in fits:
                ids, p = [str(m) for m in r["ids"]], r[args.kind]
                if only is not None:
                    keep = np.array([m in only for m in ids])
                    ids, p = [m for m, k in zip(ids, keep) if k], p[keep]
                ya, yb = np.array([a[m] for m in ids]), np.array([b[m] for m in ids])
                same = ya == yb
                cells["labels"].append(scores(ya, p))
                cells["other"].append(scores(yb, p))
                cells["agreed"].append(scores(ya[same], p[same]))
            print(f"{Path(folder).name} {fam} ({len(fits)} fits, {int(same.sum())} of {len(same)} maps agreed): "
                  + ", ".join(f"{k} {np.mean([s[0] for s in v]):.5f} / {np.mean([s[1] for s in v]):.3f}"
                              for k, v in cells.items()))


if __name__ == "__main__":
    main()
