"""Saved leave-one-family-out posteriors (`loeo.py --save-probs`) scored by how many annotators gave the map's label.

    python research/generalisation/by_votes.py research/generalisation/probs/shipped-recipe-em-probs \
        [--sets annotations annotations/round8-e5-uniform] [--kind bcts]

For each held-out family: the maps whose label all three annotators gave, two of three, or fewer (a three-way
split resolved by Dawid-Skene), how many there are and the mean accuracy over the fits (seeds) on each; then the
commonest confusions on the unanimous maps, per fit (label -> prediction). Votes come from each set's votes.csv
(labels outside the five are not votes).
"""

import argparse
import csv
import glob
from collections import Counter, defaultdict
from pathlib import Path

import numpy as np

from patterncnn.core.labels import LABELS, SHORT


def read_votes(sets: list[str]) -> dict[str, list[str]]:
    """map id -> the labels its annotators gave, from each set's votes.csv (labels outside the five are not votes)."""
    votes: dict[str, list[str]] = defaultdict(list)
    for s in sets:
        with open(Path(s) / "votes.csv", newline="", encoding="utf-8") as f:
            for r in csv.DictReader(f):
                if r["label"] in LABELS:
                    votes[r["map_id"]].append(r["label"])
    return votes


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("probs")
    ap.add_argument("--sets", nargs="+", default=["annotations", "annotations/round8-e5-uniform"])
    ap.add_argument("--kind", default="bcts", choices=["bcts", "probs"])
    args = ap.parse_args()
    votes = read_votes(args.sets)
    for fam in ("e5", "minilm", "mpnet"):
        fits = [np.load(f) for f in sorted(glob.glob(f"{args.probs}/{fam}-seed*.npz"))]
        if not fits:
            continue
        right: dict[str, list[bool]] = defaultdict(list)
        confused: Counter = Counter()
        for r in fits:
            for m, y, p in zip(r["ids"], r["y"], r[args.kind].argmax(1)):
                n = Counter(votes[str(m)])[LABELS[y]]
                group = "3 of 3" if n >= 3 else "2 of 3" if n == 2 else "split"
                right[group].append(bool(p == y))
                if group == "3 of 3" and p != y:
                    confused[f"{SHORT[LABELS[y]]}->{SHORT[LABELS[p]]}"] += 1
        cells = [f"{g}: {len(right[g]) // len(fits)} maps, {np.mean(right[g]):.3f}"
                 for g in ("3 of 3", "2 of 3", "split") if right[g]]
        print(f"{fam} held out ({len(fits)} fits): " + "; ".join(cells))
        print("  unanimous maps, confusions per fit: "
              + ", ".join(f"{k} {v / len(fits):.1f}" for k, v in confused.most_common(6)))


if __name__ == "__main__":
    main()
