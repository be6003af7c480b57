"""Census cost vs encoder cost, and memory, on 1000 QNLI dev examples.

    python benchmarks/bench_census.py --glue-dir ../shared/glue [--examples 1000] [--skip-bert]

For the embedded MiniLM and for a BERT-base-shaped encoder (a randomly initialised ``BertConfig()``:
12 layers x 12 heads x 768, the compute of bert-base-uncased, no download), prints
(a) encoder-only time (forward with attentions, maps streamed and dropped),
(b) census time (the same stream classified by the ONNX CNN), the ratio (b)/(a), and where the
census's extra time goes (preprocessing = resize to the grid, CNN = onnxruntime).
Then the peak RSS of a fresh census process on 100 vs 1000 examples (MiniLM).
Targets: ratio <= 1.5 (MiniLM), <= 1.25 (BERT-base shape); RSS ratio <= 1.2.
"""

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import torch


class TimedClassifier:
    """Wraps an OnnxClassifier, timing preprocessing (resize) and the CNN separately."""

    def __init__(self, clf):
        self.clf, self.pre, self.cnn = clf, 0.0, 0.0
        self.path, self.model_version, self.cfg = clf.path, clf.model_version, clf.cfg
        self.apply_segment_rule = clf.apply_segment_rule

    def prepare(self, maps, seps):
        t0 = time.perf_counter()
        x = self.clf.prepare(maps, seps)
        self.pre += time.perf_counter() - t0
        return x

    def run(self, x):
        t0 = time.perf_counter()
        p = self.clf.run(x)
        self.cnn += time.perf_counter() - t0
        return p


def bert_base_shape(folder: Path) -> str:
    from transformers import AutoTokenizer, BertConfig, BertModel

    from patterncnn.encoder import resolve_model

    torch.manual_seed(0)
    BertModel(BertConfig(architectures=["BertModel"])).save_pretrained(folder)
    AutoTokenizer.from_pretrained(resolve_model("minilm")).save_pretrained(folder)  # uncased WordPiece, 30522
    return str(folder)


def measure(model: str, examples, glue_dir: str, clf_path: str, batch: int) -> dict:
    from patterncnn.census import classify_task
    from patterncnn.encoder import load_encoder
    from patterncnn.infer import OnnxClassifier

    enc = load_encoder(model)
    t0 = time.perf_counter()
    for ea in enc.iter_attentions(examples.examples, batch_size=batch, window=64):
        pass
    encoder_s = time.perf_counter() - t0
    clf = TimedClassifier(OnnxClassifier(clf_path))
    with tempfile.TemporaryDirectory() as tmp:
        t0 = time.perf_counter()
        classify_task(enc, clf, examples, Path(tmp), {"bench": True}, batch_size=batch)
        census_s = time.perf_counter() - t0
    return {"model": model, "layers": enc.num_layers, "heads": enc.num_heads, "encoder_s": encoder_s,
            "census_s": census_s, "ratio": census_s / encoder_s, "preprocess_s": clf.pre, "cnn_s": clf.cnn,
            "examples": len(examples.examples)}


def rss_child(glue_dir: str, n: int, clf: str) -> float:
    code = (f"import resource, tempfile; from pathlib import Path\n"
            f"from patterncnn.glue import load_split; from patterncnn.encoder import load_encoder\n"
            f"from patterncnn.infer import OnnxClassifier; from patterncnn.census import run_census\n"
            f"s = load_split('qnli', 'dev', {glue_dir!r}, limit={n}, seed=0)\n"
            f"run_census(load_encoder('minilm'), OnnxClassifier({clf!r}), [s], tempfile.mkdtemp(), {n}, 0)\n"
            f"print(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    return float(out.stdout.strip().splitlines()[-1])


def main() -> None:
    from patterncnn.glue import load_split
    from patterncnn.infer import DEFAULT_CLASSIFIER

    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--glue-dir", default=os.environ.get("GLUE_DIR", "../shared/glue"))
    p.add_argument("--examples", type=int, default=1000)
    p.add_argument("--batch-size", type=int, default=16)
    p.add_argument("--classifier", default=str(DEFAULT_CLASSIFIER))
    p.add_argument("--skip-bert", action="store_true")
    p.add_argument("--skip-rss", action="store_true")
    a = p.parse_args()
    torch.set_num_threads(2)
    split = load_split("qnli", "dev", a.glue_dir, limit=a.examples, seed=0)
    models = ["minilm"]
    tmp = tempfile.TemporaryDirectory()
    if not a.skip_bert:
        models.append(bert_base_shape(Path(tmp.name) / "bert-base-shape"))
    print(f"QNLI dev, {len(split.examples)} examples, batch {a.batch_size}, 2 threads")
    for m in models:
        r = measure(m, split, a.glue_dir, a.classifier, a.batch_size)
        name = "MiniLM (6x12)" if m == "minilm" else f"BERT-base shape ({r['layers']}x{r['heads']}, random)"
        extra = r["census_s"] - r["encoder_s"]
        print(f"{name}: (a) encoder {r['encoder_s']:.1f} s ({r['examples'] / r['encoder_s']:.1f} ex/s), "
              f"(b) census {r['census_s']:.1f} s; ratio (b)/(a) = {r['ratio']:.3f}")
        maps = r["examples"] * r["layers"] * r["heads"]
        print(f"    census extra {extra:.1f} s: preprocessing (resize) {r['preprocess_s']:.1f} s, CNN "
              f"{r['cnn_s']:.1f} s for {maps} maps ({maps / max(r['cnn_s'], 1e-9):,.0f} maps/s in the CNN)")
    if not a.skip_rss:
        small, big = rss_child(a.glue_dir, 100, a.classifier), rss_child(a.glue_dir, a.examples, a.classifier)
        print(f"census peak RSS: 100 examples {small:.0f} MB, {a.examples} examples {big:.0f} MB; "
              f"ratio {big / small:.3f} (target <= 1.2)")


if __name__ == "__main__":
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    main()
