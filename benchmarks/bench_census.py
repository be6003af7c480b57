"""Census backends, CNN overlap and Ray overhead, on QNLI dev examples.

    python benchmarks/bench_census.py --glue-dir ../shared/glue --model mpnet [--examples 1000]
    python benchmarks/bench_census.py --glue-dir ../shared/glue --ray-only --examples 256

For one encoder (``minilm`` or ``mpnet``, the BERT-base shape: 12 x 12 x 768) and every backend of
:mod:`patterncnn.encoders.backends`, prints
(a) extraction: the encoder alone (forward with attentions, maps streamed and dropped),
(b) census: the same examples classified by the shipped ONNX CNN, overlapped with the encoder,
the ratio (b)/(a), the speed-up of (b) over today's census (HF fp32 eager, CNN serial), and the
drift from fp32: the maps' mean absolute difference and the largest per-class share difference in
points (gate: <= 1e-3 and <= 0.5). Slow backends (bf16, int8) run on ``--slow-examples`` only.
Variants alternate (each backend's extraction, then its census, before the next backend's; the
order reverses every round) and the best of ``--rounds`` is shown.
Then (or with --ray-only) the same census work locally (one process, 2 threads) and on a local Ray
with 2 workers of 1 thread: their times and ratio (target <= 1.15).
"""

import argparse
import dataclasses
import os
import tempfile
import time
from pathlib import Path

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")  # as `patterncnn census` sets it; before torch loads
import numpy as np  # noqa: E402
import torch  # noqa: E402

from patterncnn.core.labels import LABELS


def extraction(enc, examples, ref: dict | None) -> tuple[float, float]:
    """Seconds to stream every map; mean |maps - ref maps| (ref: example index -> maps; filled when empty)."""
    total, cells, filling, checking = 0.0, 0, ref is not None and not ref, 0.0
    t0 = time.perf_counter()
    for ea in enc.iter_attentions(examples, batch_size=16, window=64):
        if ref is None:
            continue
        t1 = time.perf_counter()  # the comparison is not extraction: its time is taken out
        if filling:
            ref[ea.example.index] = ea.maps
        else:
            d = np.abs(ea.maps - ref[ea.example.index])
            total, cells = total + float(d.sum()), cells + d.size
        checking += time.perf_counter() - t1
    return time.perf_counter() - t0 - checking, total / cells if cells else 0.0


def census(enc, clf, split, overlap: bool) -> tuple[float, np.ndarray]:
    from patterncnn.census.run import classify_task

    with tempfile.TemporaryDirectory() as tmp:
        t0 = time.perf_counter()
        raw = classify_task(enc, clf, split, Path(tmp), {"bench": True}, batch_size=16, overlap=overlap)
        return time.perf_counter() - t0, raw["labels"], raw["index"]


def shares(labels: np.ndarray) -> np.ndarray:
    return np.array([(labels == k).mean() for k in range(len(LABELS))])


def bench_backends(a, clf) -> None:
    from patterncnn.core.glue import load_split
    from patterncnn.encoders.load import load_encoder

    split = load_split("qnli", "dev", a.glue_dir, limit=a.examples, seed=0)
    small = dataclasses.replace(split, examples=split.examples[: a.slow_examples])
    backends = a.backends.split(",")
    if "torch" not in backends:  # the serial torch census is the reference of every speed-up and drift
        raise SystemExit(f"--backends {a.backends}: include torch, the reference (e.g. --backends torch,{a.backends})")
    ref_maps: dict = {}
    encs, warm, mad, labels, t = {}, {}, {}, {}, {b: {"ext": [], "cen": [], "serial": []} for b in backends}
    print(f"{a.model} on QNLI dev, {len(split.examples)} examples (bf16/int8: {len(small.examples)}), batch 16, "
          f"2 threads, {a.rounds} rounds alternating the backends; load average {os.getloadavg()[0]:.2f} at start")
    for rnd in range(a.rounds):
        for backend in backends if rnd % 2 == 0 else backends[::-1]:
            s = small if backend in ("bf16", "int8") else split
            if rnd and s is small:
                continue  # the slow ones: one round
            if backend not in encs:
                t0 = time.perf_counter()
                encs[backend] = load_encoder(a.model, backend=backend)
                for _ in encs[backend].iter_attentions(s.examples[:16], batch_size=16, window=16):
                    pass  # export / compile / warm up
                warm[backend] = time.perf_counter() - t0
            ext, m = extraction(encs[backend], s.examples, ref_maps if rnd == 0 else None)
            t[backend]["ext"].append(ext)
            mad.setdefault(backend, m)
            if backend == "torch":
                serial, labels["serial"], index = census(encs[backend], clf, s, overlap=False)
                t[backend]["serial"].append(serial)
                labels["small"] = labels["serial"][np.isin(index, [e.index for e in small.examples])]
            cen, labels[backend], _ = census(encs[backend], clf, s, overlap=True)
            t[backend]["cen"].append(cen)
            print(f"round {rnd}: {backend} extraction {ext:.1f} s, census {cen:.1f} s", flush=True)
    base = min(t["torch"]["serial"])
    print(f"best of the rounds; today's census (torch, CNN serial): {base:.1f} s; overlapped labels bit-identical "
          f"to serial: {np.array_equal(labels['torch'], labels['serial'])}")
    print(f"{'backend':<9}{'examples':>9}{'(a) extract s':>15}{'(b) census s':>14}{'(b)/(a)':>9}"
          f"{'speed-up':>10}{'map MAD':>10}{'drift pts':>10}  gate")
    for backend in backends:
        s = small if backend in ("bf16", "int8") else split
        ext, cen = min(t[backend]["ext"]), min(t[backend]["cen"])
        ref_labels = labels["serial"] if s is split else labels["small"]
        drift = 100 * float(np.abs(shares(labels[backend]) - shares(ref_labels)).max())
        speed = base * len(s.examples) / len(split.examples) / cen  # scaled for the slow backends' subset
        ok = mad[backend] <= 1e-3 and drift <= 0.5
        print(f"{backend:<9}{len(s.examples):>9}{ext:>15.1f}{cen:>14.1f}{cen / ext:>9.3f}{speed:>9.2f}x"
              f"{mad[backend]:>10.1e}{drift:>10.2f}  {'pass' if ok else 'FAIL'}   (load/export/compile "
              f"{warm[backend]:.1f} s)")
    print(f"load average {os.getloadavg()[0]:.2f} at end")


def bench_ray(a, clf_path: str) -> None:
    import ray

    from patterncnn.census.ray import run_ray_censuses
    from patterncnn.census.run import run_censuses
    from patterncnn.classifier.onnx import OnnxClassifier
    from patterncnn.core.glue import load_split

    splits = [load_split(t, "dev", a.glue_dir, limit=a.ray_examples, seed=0) for t in ("qnli", "rte")]
    clf = OnnxClassifier(clf_path, threads=2)
    ray.init(num_cpus=2, include_dashboard=False, runtime_env={"env_vars": {"HF_HUB_OFFLINE": "1"}})
    times = {"local": [], "ray": []}
    results = {}
    with tempfile.TemporaryDirectory() as tmp:
        for rnd in range(a.rounds):
            for kind in ("local", "ray") if rnd % 2 == 0 else ("ray", "local"):
                out = Path(tmp) / f"{kind}-{rnd}"
                t0 = time.perf_counter()
                if kind == "local":
                    runs = run_censuses([a.model], splits, clf, out, a.ray_examples, 0, backend=a.ray_backend)
                else:
                    runs = run_ray_censuses([a.model], splits, clf, out, a.ray_examples, 0, workers=2, threads=1,
                                            backend=a.ray_backend)
                results[kind] = [r for _, _, r in runs][0]
                times[kind].append(time.perf_counter() - t0)
    ray.shutdown()
    same = all(results["local"]["tasks"][t]["counts"] == results["ray"]["tasks"][t]["counts"] and
               results["local"]["tasks"][t]["shares"] == results["ray"]["tasks"][t]["shares"] for t in ("qnli", "rte"))
    lo, ry = min(times["local"]), min(times["ray"])
    print(f"Ray vs local, {a.model} ({a.ray_backend}), QNLI + RTE x {a.ray_examples} examples, best of {a.rounds} "
          f"alternated: local (1 process, 2 threads) {lo:.1f} s, Ray (2 workers x 1 thread) {ry:.1f} s, "
          f"ratio {ry / lo:.3f} (target <= 1.15); results identical: {same}; all times local "
          f"{[round(t, 1) for t in times['local']]}, Ray {[round(t, 1) for t in times['ray']]}")


def main() -> None:
    from patterncnn.classifier.onnx import OnnxClassifier, default_classifier
    from patterncnn.encoders.backends import BACKENDS

    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--glue-dir", default=os.environ.get("GLUE_DIR", "../shared/glue"))
    p.add_argument("--model", default="mpnet")
    p.add_argument("--examples", type=int, default=1000)
    p.add_argument("--slow-examples", type=int, default=64, help="examples for bf16 and int8")
    p.add_argument("--backends", default=",".join(BACKENDS))
    p.add_argument("--classifier", default=str(default_classifier()))
    p.add_argument("--ray-only", action="store_true")
    p.add_argument("--skip-ray", action="store_true")
    p.add_argument("--ray-examples", type=int, default=256)
    p.add_argument("--ray-backend", default="onnx")
    p.add_argument("--rounds", type=int, default=2, help="rounds of every variant, alternated (best is shown)")
    a = p.parse_args()
    torch.set_num_threads(2)
    if not a.ray_only:
        bench_backends(a, OnnxClassifier(a.classifier, threads=2))
    if not a.skip_ray:
        bench_ray(a, a.classifier)


if __name__ == "__main__":
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    main()
