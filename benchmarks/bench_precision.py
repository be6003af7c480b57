"""``census --precision`` against ``--limit 1000``: time, interval width, and whether the early-stopped intervals cover.

    python benchmarks/bench_precision.py --glue-dir ../shared/glue --work runs/bench-precision \
        --model mpnet --precision 0.33x --seeds 0 1 2 3 4

Runs ``patterncnn census`` (the command, in a subprocess, as a user would) on the five tasks of the
README's main job: once with ``--limit 1000 --seed 0`` and, for every seed, with ``--precision P``
(at most 1000 examples per task, taken in that seed's random order). SST-2, RTE and MRPC have fewer
than 1000 dev examples, so their 1000-example census is the whole dev set whatever the seed; STS-B and
QNLI draw a different 1000 per seed, so they get a ``--limit 1000`` run of their own for every seed.
Finished runs in ``--work`` are reused, so an interrupted benchmark resumes.

Prints, per seed: the census time of each run (``census.json``'s own clock, encoder and CNN only)
and its wall time, the examples each task used, and the mean width of the total and of the
examples' 95% interval over the (task, pattern) cells; then the coverage: how often the
early-stopped census's interval (the examples' part, and the total) holds the share that the
same seed's 1000-example census measured, over the cells where the census did stop early and over
all cells.
"""

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

TASKS = ("sst2", "rte", "mrpc", "stsb", "qnli")
SAMPLED = ("stsb", "qnli")  # the tasks with more than 1000 dev examples: their 1000 depend on the seed
LABELS = ("vertical", "diagonal", "vertical+diagonal", "block", "heterogeneous")


def census(out: Path, a, tasks, seed: int, extra: list[str]) -> tuple[dict, float | None]:
    """A finished census in ``out`` (run now unless it is there): its result and its wall time (None if reused)."""
    if (out / "census.json").is_file():
        return json.loads((out / "census.json").read_text()), None
    cmd = [sys.executable, "-m", "patterncnn.cli", "census", "--model", a.model, "--glue-dir", a.glue_dir,
           "--seed", str(seed), "--limit", "1000", "--out", str(out), *extra]
    for t in tasks:
        cmd += ["--task", t]
    t0 = time.perf_counter()
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, env={**os.environ, "HF_HUB_OFFLINE": "1"})
    return json.loads((out / "census.json").read_text()), time.perf_counter() - t0


def widths(result: dict) -> tuple[float, float]:
    """Mean width in points of the total and of the examples' 95% interval over the (task, pattern) cells."""
    tot = [s["ci95"][n][1] - s["ci95"][n][0] for s in result["tasks"].values() for n in LABELS]
    ex = [s["ci95_parts"]["examples"][n][1] - s["ci95_parts"]["examples"][n][0]
          for s in result["tasks"].values() for n in LABELS]
    return 100 * sum(tot) / len(tot), 100 * sum(ex) / len(ex)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--glue-dir", required=True)
    p.add_argument("--work", required=True, help="where the census folders go (reused when there)")
    p.add_argument("--model", default="mpnet")
    p.add_argument("--precision", default="0.33x")
    p.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2, 3, 4])
    a = p.parse_args()
    work = Path(a.work)
    full0, wall0 = census(work / "limit1000-seed0", a, TASKS, 0, [])
    print(f"{a.model}, --limit 1000, seed 0: census {full0['seconds']:.1f} s"
          + (f", wall {wall0:.1f} s" if wall0 else " (reused)")
          + "; examples " + ", ".join(f"{t} {s['examples']}" for t, s in full0["tasks"].items())
          + "; mean interval width: total {:.2f}, examples' part {:.2f} points".format(*widths(full0)))
    hits = {"early": [0, 0, 0], "all": [0, 0, 0]}  # cells, examples' part holds it, total holds it
    for seed in a.seeds:
        ref = full0
        if seed != 0:
            ref = {**full0, "tasks": dict(full0["tasks"])}
            sampled, _ = census(work / f"limit1000-seed{seed}-sampled", a, SAMPLED, seed, [])
            ref["tasks"].update(sampled["tasks"])
        res, wall = census(work / f"precision-{a.precision}-seed{seed}", a, TASKS, seed, ["--precision", a.precision])
        used = ", ".join(f"{t} {s['examples']}/{s['precision']['budget']}" for t, s in res["tasks"].items())
        print(f"seed {seed}, --precision {a.precision}: census {res['seconds']:.1f} s"
              + (f", wall {wall:.1f} s" if wall else " (reused)") + f"; examples {used}"
              + "; mean interval width: total {:.2f}, examples' part {:.2f} points".format(*widths(res)))
        for task, s in res["tasks"].items():
            truth = ref["tasks"][task]["shares"]
            for n in LABELS:
                ex, tot = s["ci95_parts"]["examples"][n], s["ci95"][n]
                cell = [1, ex[0] <= truth[n] <= ex[1], tot[0] <= truth[n] <= tot[1]]
                for key in ("all", "early") if s["precision"]["stopped_early"] else ("all",):
                    hits[key] = [h + c for h, c in zip(hits[key], cell)]
    for key, (n, ex, tot) in hits.items():
        what = "cells where the census stopped early" if key == "early" else "all cells"
        if n:
            print(f"coverage over {n} {what}: examples' part {100 * ex / n:.1f}%, total {100 * tot / n:.1f}% "
                  f"held the same seed's 1000-example share")


if __name__ == "__main__":
    main()
