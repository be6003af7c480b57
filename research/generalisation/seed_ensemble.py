"""How much averaging leave-one-family-out fits gains: an ensemble of seeds, or of pretraining streams, scored on the
held-out family.

    python research/generalisation/seed_ensemble.py research/generalisation/probs/shipped-recipe-em-probs
    python research/generalisation/seed_ensemble.py DIR1 DIR2 DIR3 DIR4     # across runs (pretraining streams)

Reads the posteriors `loeo.py --save-probs DIR` wrote (DIR/FAMILY-seedS.npz: the test maps' labels, the plain
posteriors and, with --em, the BCTS-corrected ones) and prints, per held-out family and per kind of posterior, the
accuracy and four-class macro-F1 (block maps left out, as loeo.py) of:

- with one DIR: the mean posterior of m fits, for every m from 1 to the number of seeds, averaged over every set of
  m of the seeds (m = 1 is the single fits' mean, as loeo.py's rows);
- with several: the mean posterior of the runs' fits of one seed (one fit per run), averaged over the seeds every
  run has; then, for each run alone, the same as with one DIR at m = the number of runs (as many fits of one run).
"""

import glob
import itertools
import sys
from pathlib import Path

import numpy as np
from loeo import scores as loeo_scores


def scores(y: np.ndarray, p: np.ndarray) -> tuple[float, float]:
    """(accuracy, four-class macro-F1 with the maps labelled block left out) of posteriors ``p``: loeo.py's scores."""
    s = loeo_scores(y, p.argmax(1), np.ones(len(y), dtype=bool))
    return s["accuracy"], s["macro_f1_4"]


def fits(folder: str, fam: str) -> dict[int, np.lib.npyio.NpzFile]:
    """{seed: the fit's posteriors} of one held-out family in one run's folder."""
    return {int(Path(f).stem.rsplit("seed", 1)[1]): np.load(f)
            for f in sorted(glob.glob(f"{folder}/{fam}-seed*.npz"))}


def mean_of_sets(y: np.ndarray, p: list[np.ndarray], m: int) -> tuple[float, float]:
    """Accuracy and macro-F1 of the mean of m of the posteriors ``p``, averaged over every set of m."""
    s = [scores(y, np.mean([p[i] for i in c], 0)) for c in itertools.combinations(range(len(p)), m)]
    return float(np.mean([a for a, _ in s])), float(np.mean([f for _, f in s]))


def main(folders: list[str]) -> None:
    for fam in ("e5", "minilm", "mpnet"):
        runs = [fits(d, fam) for d in folders]
        if not all(runs):
            continue
        first = next(iter(runs[0].values()))
        y = first["y"]
        if any(not np.array_equal(r["ids"], first["ids"]) for run in runs for r in run.values()):
            raise SystemExit(f"{folders}: the fits of {fam} scored different maps")
        for key in [k for k in ("probs", "bcts") if k in first]:
            if len(runs) == 1:
                p = [r[key] for r in runs[0].values()]
                cells = [f"{m} fits {a:.3f} / {f:.3f}" for m in range(1, len(p) + 1) for a, f in [mean_of_sets(y, p, m)]]
                print(f"{fam} held out, {key}: " + ", ".join(cells))
                continue
            seeds = sorted(set.intersection(*(set(run) for run in runs)))
            s = [scores(y, np.mean([run[k][key] for run in runs], 0)) for k in seeds]
            cells = [f"across the {len(runs)} runs (seeds {seeds}) {np.mean([a for a, _ in s]):.3f} / "
                     f"{np.mean([f for _, f in s]):.3f}"]
            for d, run in zip(folders, runs):
                a, f = mean_of_sets(y, [r[key] for r in run.values()], len(runs))
                cells.append(f"{Path(d).name} {len(runs)} seeds {a:.3f} / {f:.3f}")
            print(f"{fam} held out, {key}: " + "; ".join(cells))


if __name__ == "__main__":
    main(sys.argv[1:])
