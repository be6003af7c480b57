"""Attention-extraction throughput and memory for the embedded MiniLM on QNLI dev.

    python benchmarks/bench_extract.py --glue-dir ../shared/glue [--examples 1000] [--batch-size 16]

Prints examples/s over 1000 QNLI dev examples (SST-2 dev has only 872), and the peak RSS of a
fresh process that streams 100 vs 1000 examples. Target: peak RSS ratio 1000/100 <= 1.2
(extraction streams maps example by example, so memory must not grow with the number of examples).
"""

import argparse
import json
import os
import resource
import subprocess
import sys
import time


def run(glue_dir: str, n: int, batch_size: int, model: str) -> dict:
    import torch

    from patterncnn.core.glue import load_split
    from patterncnn.encoders.load import load_encoder

    examples = load_split("qnli", "dev", glue_dir, limit=n, seed=0).examples
    enc = load_encoder(model)
    rss_loaded = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    t0 = time.perf_counter()
    maps = tokens = 0
    for ea in enc.iter_attentions(examples, batch_size=batch_size):
        maps += ea.maps.shape[0] * ea.maps.shape[1]
        tokens += len(ea.tokens)
    dt = time.perf_counter() - t0
    return {"examples": len(examples), "seconds": dt, "examples_per_s": len(examples) / dt, "maps": maps,
            "mean_T": tokens / len(examples), "threads": torch.get_num_threads(), "truncated": enc.truncations,
            "peak_rss_mb_after_load": rss_loaded / 1024,
            "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}


def child(glue_dir: str, n: int, batch_size: int, model: str) -> dict:
    out = subprocess.run([sys.executable, __file__, "--glue-dir", glue_dir, "--examples", str(n), "--batch-size",
                          str(batch_size), "--model", model, "--child"], capture_output=True, text=True, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--glue-dir", default=os.environ.get("GLUE_DIR", "../shared/glue"))
    p.add_argument("--examples", type=int, default=1000)
    p.add_argument("--batch-size", type=int, default=16)
    p.add_argument("--model", default="minilm")
    p.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    a = p.parse_args()
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    if a.child:
        print(json.dumps(run(a.glue_dir, a.examples, a.batch_size, a.model)))
        return
    small = child(a.glue_dir, 100, a.batch_size, a.model)
    big = child(a.glue_dir, a.examples, a.batch_size, a.model)
    print(f"model {a.model}, QNLI dev, batch {a.batch_size}, {big['threads']} torch threads")
    print(f"{big['examples']} examples (mean T {big['mean_T']:.1f}, {big['maps']} maps, {big['truncated']} truncated): "
          f"{big['seconds']:.1f} s = {big['examples_per_s']:.1f} examples/s = {big['maps'] / big['seconds']:.0f} maps/s")
    print(f"peak RSS: {small['examples']} examples {small['peak_rss_mb']:.0f} MB, {big['examples']} examples "
          f"{big['peak_rss_mb']:.0f} MB; ratio {big['peak_rss_mb'] / small['peak_rss_mb']:.3f} (target <= 1.2)")


if __name__ == "__main__":
    main()
