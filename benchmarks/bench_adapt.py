"""How long `adapt finish` takes after the pull: the default fine-tuning (folds + 1 fits) against `--epochs 0`, one run.

    python benchmarks/bench_adapt.py [--new annotations/round5-heldout-uniform] [--epochs 20] [--folds 5]

Runs :func:`patterncnn.training.adapt.adapt` as `adapt finish` does (the shipped classifier, the labelled sets it was
trained on, the default config) into a temporary folder that is then removed: the adapted classifier is thrown
away, and nothing is written into the repository. ``--new`` is any labelled set of uniformly drawn maps; an epoch
is the base sets once plus the new maps repeated to a quarter of it, so a fit's time hardly depends on how many new
maps there are. Prints the seconds of each fit (from the progress bar's ticks), the total, and the same call
with ``--epochs 0``, with the load average before and after: this machine's speed moves, so a figure is one run's.
"""

import argparse
import dataclasses
import os
import tempfile
import time
from pathlib import Path

from patterncnn.training.adapt import AdaptConfig, adapt

REPO = Path(__file__).resolve().parents[1]


class Ticks:
    """A progress-bar factory that records when each fit ends."""

    def __init__(self):
        self.times: list[float] = []

    def __call__(self, **kwargs):
        self.times.append(time.perf_counter())
        return self

    def update(self, n=1):
        self.times.append(time.perf_counter())

    def close(self):
        pass


def run(new: Path, acfg: AdaptConfig) -> tuple[float, list[float], dict]:
    ticks = Ticks()
    with tempfile.TemporaryDirectory() as tmp:
        t0 = time.perf_counter()
        res = adapt(REPO / "models" / "patterncnn.pt", None, new, Path(tmp) / "adapted", acfg, progress=ticks)
        total = time.perf_counter() - t0
    fits = [b - a for a, b in zip(ticks.times, ticks.times[1:])]
    return total, fits, res


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--new", type=Path, default=REPO / "annotations" / "round5-heldout-uniform",
                   help="a labelled set of uniformly drawn maps, as `adapt finish` pulls (default: held-out round 5)")
    p.add_argument("--epochs", type=int, default=AdaptConfig.epochs)
    p.add_argument("--folds", type=int, default=AdaptConfig.folds)
    a = p.parse_args()
    print(f"load average before: {os.getloadavg()[0]:.2f}; {os.cpu_count()} CPUs; new maps: {a.new}")
    acfg = AdaptConfig(epochs=a.epochs, folds=a.folds)
    total, fits, res = run(a.new, acfg)
    print(f"default ({a.epochs} epochs, {res['folds']} folds + the final fit; {res['new']['maps']} new maps): "
          f"{total:.0f} s in all; fits " + ", ".join(f"{s:.0f}" for s in fits) + " s")
    total0, _, _ = run(a.new, dataclasses.replace(acfg, epochs=0))
    print(f"--epochs 0 (validate only): {total0:.1f} s; the default is {total / total0:.0f}x that")
    print(f"load average after: {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
