"""How much averaging leave-one-family-out fits of several seeds gains: an ensemble of seeds, scored on the held-out
family.

    python research/generalisation/seed_ensemble.py research/generalisation/probs/shipped-recipe-em-probs

Reads the posteriors `loeo.py --save-probs DIR` wrote (DIR/FAMILY-seedS.npz: the test maps' labels, the plain
posteriors and, with --em, the BCTS-corrected ones) and prints, per held-out family and per kind of posterior, the
accuracy and four-class macro-F1 (block maps left out, as loeo.py) of the mean posterior of m fits, averaged over
every set of m of the seeds (m = 1 is the single fits' mean, as loeo.py's rows).
"""

import glob
import itertools
import sys

import numpy as np
from loeo import scores as loeo_scores


def scores(y: np.ndarray, p: np.ndarray) -> tuple[float, float]:
    """(accuracy, four-class macro-F1 with the maps labelled block left out) of posteriors ``p``: loeo.py's scores."""
    s = loeo_scores(y, p.argmax(1), np.ones(len(y), dtype=bool))
    return s["accuracy"], s["macro_f1_4"]


def main(folder: str) -> None:
    for fam in ("e5", "minilm", "mpnet"):
        runs = [np.load(f) for f in sorted(glob.glob(f"{folder}/{fam}-seed*.npz"))]
        if not runs:
            continue
        y = runs[0]["y"]
        if any(not np.array_equal(r["ids"], runs[0]["ids"]) for r in runs):
            raise SystemExit(f"{folder}: the fits of {fam} scored different maps")
        for key in [k for k in ("probs", "bcts") if k in runs[0]]:
            p = [r[key] for r in runs]
            cells = []
            for m in sorted({1, 2, 3, len(p)}):
                s = [scores(y, np.mean([p[i] for i in c], 0)) for c in itertools.combinations(range(len(p)), m)]
                cells.append(f"{m} fits {np.mean([a for a, _ in s]):.3f} / {np.mean([f for _, f in s]):.3f}")
            print(f"{fam} held out, {key}: " + ", ".join(cells))


if __name__ == "__main__":
    main(sys.argv[1])
