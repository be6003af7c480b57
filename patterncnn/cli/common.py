"""Arguments shared by several commands, their types (checked at parse time), and the environment reads."""

from __future__ import annotations

import argparse
import os


def positive_int(text: str) -> int:
    """argparse type: an integer >= 1."""
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be a whole number of at least 1 (got {text!r})")
    return value


def port(text: str) -> int:
    """argparse type: a TCP port, 1-65535."""
    value = int(text) if text.isdigit() else 0
    if not 1 <= value <= 65535:
        raise argparse.ArgumentTypeError(f"must be a port number from 1 to 65535 (got {text!r})")
    return value


def progress():
    """The progress-bar factory for long work (tqdm)."""
    from tqdm.auto import tqdm

    return tqdm


def add_model_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--model", default="minilm",
                   help="Hugging Face encoder: hub id (bert-base-uncased), local folder, or an embedded one that "
                        "works offline: 'minilm' (all-MiniLM-L6-v2) or 'mpnet' (all-mpnet-base-v2, the extra "
                        "patterncnn[mpnet]) (default: %(default)s)")
    p.add_argument("--max-length", type=positive_int, default=128,
                   help="cap on tokens per input; longer inputs are truncated and counted (default: %(default)s)")


def add_glue_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--glue-dir", default=None,
                   help="a glue_data folder (SST-2/dev.tsv, ...); default: $GLUE_DIR, else the Hugging Face "
                        "dataset nyu-mll/glue through `datasets` (needs internet)")
    p.add_argument("--seed", type=int, default=0, help="sampling seed (default: %(default)s)")


def add_classifier_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--classifier", default=None, help="ONNX classifier (default: the shipped patterncnn.onnx)")
    p.add_argument("--threads", type=positive_int, default=2,
                   help="onnxruntime (and torch) threads (default: %(default)s)")


def add_device_arg(p: argparse.ArgumentParser) -> None:
    p.add_argument("--device", choices=("auto", "cpu", "cuda"), default=None,
                   help="where the encoder (and the classifier) run: auto takes CUDA when torch sees a CUDA device "
                        "(onnxruntime's CUDA provider where installed, its CPU provider otherwise), else the CPU; "
                        "the CUDA path is untested (default: auto)")


def device(args) -> str:
    return getattr(args, "device", None) or "auto"


def glue_dir(args) -> str | None:
    return args.glue_dir or os.environ.get("GLUE_DIR") or None


def classifier(args):
    """The ONNX classifier named by --classifier, or the shipped one (on --device where the command has it)."""
    from ..classifier.onnx import load_classifier

    return load_classifier(args.classifier, threads=args.threads, device=device(args) if hasattr(args, "device") else "cpu")
