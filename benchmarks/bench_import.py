"""How long ``import patterncnn`` takes, and what the first use of an API name costs.

    python benchmarks/bench_import.py [--rounds 15]

Each figure is the median over ``--rounds`` fresh interpreters (alternating, so that the machine's load
falls on all of them alike) of the wall time of ``python -c CODE`` minus that of ``python -c pass``:

- ``import patterncnn``: the package and its public names, loaded lazily (PEP 562);
- ``... ; patterncnn.load_classifier``: the first use of a name, which imports torch and the classifier;
- ``import patterncnn.census.run``: the census and all it needs (encoders, classifier, estimators), as an eager
  ``import patterncnn`` would have. (``import patterncnn.census`` alone is the light API module now.)

Also prints Python's own ``-X importtime`` total for ``import patterncnn`` and which heavy modules it loads.
"""

import argparse
import re
import statistics
import subprocess
import sys
import time

CASES = {"python -c pass": "pass",
         "import patterncnn": "import patterncnn",
         "patterncnn.load_classifier (first use)": "import patterncnn; patterncnn.load_classifier",
         "import patterncnn.census.run (everything a census needs)": "import patterncnn.census.run"}
HEAVY = ("torch", "numpy", "onnxruntime", "transformers", "pandas", "matplotlib")


def wall(code: str) -> float:
    t0 = time.perf_counter()
    subprocess.run([sys.executable, "-c", code], check=True)
    return time.perf_counter() - t0


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--rounds", type=int, default=15)
    a = p.parse_args()
    times = {name: [] for name in CASES}
    for _ in range(a.rounds):
        for name, code in CASES.items():
            times[name].append(wall(code))
    base = statistics.median(times["python -c pass"])
    print(f"python -c pass: {1000 * base:.0f} ms (the interpreter itself; subtracted below)")
    for name in list(CASES)[1:]:
        print(f"{name}: {1000 * (statistics.median(times[name]) - base):.0f} ms (median of {a.rounds})")
    out = subprocess.run([sys.executable, "-X", "importtime", "-c", "import patterncnn"], capture_output=True,
                         text=True).stderr
    total = re.findall(r"import time:\s+\d+ \|\s+(\d+) \| patterncnn$", out, flags=re.M)
    print(f"-X importtime, import patterncnn: {int(total[-1]) / 1000:.1f} ms cumulative")
    loaded = subprocess.run([sys.executable, "-c", f"import sys, patterncnn; print([m for m in {HEAVY!r} "
                             "if m in sys.modules])"], capture_output=True, text=True).stdout.strip()
    print(f"heavy modules loaded by import patterncnn: {loaded}")


if __name__ == "__main__":
    main()
