"""Coverage of the census's 95% interval over examples (the code's shares_with_intervals, no band) for a task of n
examples (--limit n or a small dev set): true share p, each example's 144 maps drawn from its own Dirichlet(30 p) mix,
labels taken as the truth (no classifier error), so only the examples' part is tested.
Usage: python research/intervals/sim_few_examples.py"""
import sys

import numpy as np

sys.path.insert(0, ".")
from patterncnn.shares.estimate import shares_with_intervals  # noqa: E402

LABELS = ["vertical", "diagonal", "vertical+diagonal", "block", "heterogeneous"]
p = np.array([0.55, 0.15, 0.17, 0.01, 0.12])
rng = np.random.default_rng(5)
REPS = 400
print("n examples | coverage of the true share, % (vertical, diagonal, v+d, block, heterogeneous) | mean width vertical, points")
for n in (1, 2, 3, 5, 10, 20, 64, 277):
    hits = np.zeros(5)
    w = []
    for r in range(REPS):
        theta = rng.dirichlet(30 * p, size=n)
        counts = np.array([rng.multinomial(144, th) for th in theta], dtype=float)
        out = shares_with_intervals(counts[None], seed=r)
        for i, k in enumerate(LABELS):
            lo, hi = out["ci95"][k]
            hits[i] += lo - 1e-12 <= p[i] <= hi + 1e-12
        w.append(out["ci95"]["vertical"][1] - out["ci95"]["vertical"][0])
    print(f"{n:6d} | " + " ".join(f"{100 * h / REPS:5.1f}" for h in hits) + f" | {100 * np.mean(w):.1f}")
