"""What an ensemble costs: onnxruntime maps/s of the shipped architecture with 1, 2, 3 members, in one run.

    python benchmarks/bench_members.py [--members 1 2 3] [--repeat 7] [--threads 2]

Each classifier is the shipped configuration (grid, channels, widths) with another member count and
random weights (throughput does not depend on the weights), exported to ONNX and timed as the census
runs it: preprocessing in torch plus one onnxruntime call per batch of 512 maps, best of --repeat.
Prints maps/s at T=32 and T=128 and the ratio to one member (always timed, first). Target (issue 12): >= 20,000 maps/s.
"""

import argparse
import dataclasses
import os
import tempfile
import time
from pathlib import Path

import numpy as np
import torch

from patterncnn.classifier.model import build_model
from patterncnn.classifier.onnx import OnnxClassifier, default_classifier, export_onnx


def best_seconds(fn, repeat: int) -> float:
    fn()  # warm-up
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return min(times)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--members", type=int, nargs="+", default=[1, 2, 3])
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--repeat", type=int, default=7)
    a = p.parse_args()
    counts = [1] + [k for k in a.members if k != 1]  # one member first: the ratios are to it
    torch.set_num_threads(a.threads)
    shipped = OnnxClassifier(default_classifier(), threads=a.threads).cfg
    rng = np.random.default_rng(0)
    print(f"shipped architecture: grid {shipped.grid}, widths {list(shipped.widths)}, {shipped.members} member(s); "
          f"{a.threads} threads, batch 512, best of {a.repeat}")
    print(f"{'members':>7} {'T':>4} {'maps/s':>9} {'vs 1 member':>12}")
    with tempfile.TemporaryDirectory() as tmp:
        base: dict[int, float] = {}
        for k in counts:
            cfg = dataclasses.replace(shipped, members=k)
            path = Path(tmp) / f"m{k}.onnx"
            export_onnx(build_model(cfg).eval(), path)
            clf = OnnxClassifier(path, threads=a.threads)
            for t in (32, 128):
                x = rng.random((512, t, t), dtype=np.float32)
                x = torch.from_numpy(x / x.sum(-1, keepdims=True))
                seps = [[t // 2, t - 1]] * 512
                rate = 512 / best_seconds(lambda: clf.predict_same_length(x, seps), a.repeat)
                base.setdefault(t, rate)
                print(f"{k:>7} {t:>4} {rate:>9,.0f} {rate / base[t]:>12.2f}")


if __name__ == "__main__":
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    main()
