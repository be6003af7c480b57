"""Classification throughput: onnxruntime vs torch eager, 2 CPU threads.

    python benchmarks/bench_classify.py [--classifier models/patterncnn.onnx] [--repeat 5]

Prints maps/s (preprocessing + CNN, best of --repeat) at batch 1, 64 and 512 for maps of T=32 and
T=128, and the onnxruntime/torch ratio. Target: >= 5,000 maps/s at batch 512 with onnxruntime.
"""

import argparse
import os
import time

import numpy as np
import torch

from patterncnn.classifier.model import build_model, preprocess
from patterncnn.classifier.onnx import OnnxClassifier, default_classifier


def maps_per_s(fn, n: int, repeat: int) -> float:
    fn()  # warm-up
    best = min(_timed(fn) for _ in range(repeat))
    return n / best


def _timed(fn) -> float:
    t0 = time.perf_counter()
    fn()
    return time.perf_counter() - t0


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--classifier", default=str(default_classifier()))
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--repeat", type=int, default=5)
    a = p.parse_args()
    torch.set_num_threads(a.threads)
    clf = OnnxClassifier(a.classifier, threads=a.threads)
    model = build_model(clf.cfg).eval()  # same architecture (one CNN or the ensemble); weights do not matter
    print(f"classifier {a.classifier}: grid {clf.cfg.grid}, {clf.cfg.representation}, {clf.cfg.in_channels} channels; "
          f"{a.threads} threads; best of {a.repeat}")
    print(f"{'T':>4} {'batch':>6} {'onnxruntime maps/s':>19} {'torch eager maps/s':>19} {'ratio':>6}")
    rng = np.random.default_rng(0)
    for t in (32, 128):
        for b in (1, 64, 512):
            x = rng.random((b, t, t), dtype=np.float32)
            x /= x.sum(-1, keepdims=True)
            seps = [[t // 2, t - 1]] * b
            xt = torch.from_numpy(x)

            def ort():
                clf.predict_same_length(xt, seps)

            def eager():
                with torch.inference_mode():
                    torch.softmax(model(preprocess(xt, seps, clf.cfg)), 1)

            o, e = maps_per_s(ort, b, a.repeat), maps_per_s(eager, b, a.repeat)
            print(f"{t:>4} {b:>6} {o:>19,.0f} {e:>19,.0f} {o / e:>6.2f}")


if __name__ == "__main__":
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    main()
