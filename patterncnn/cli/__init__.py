"""The ``patterncnn`` command: one subcommand per pipeline step. The only package that reads argv or env.

    patterncnn sample --task rte --task sst2 --per-task 50 --glue-dir glue_data --out exports/demo
    patterncnn census --task rte --glue-dir glue_data --out runs/census

Each module here registers one command (or one group) beside its handler: ``register(sub)`` adds
the arguments, and the handler parses nothing and calls one library function. Run
``patterncnn COMMAND --help`` for each command's options.

A command whose ``--out`` is a folder locks it for as long as it runs (:func:`patterncnn.core.fileio.hold`):
a second command on the same folder is refused at once, naming the first.

Exit codes: 0 done; 2 refused (bad arguments or input: one line on stderr that names the fix);
130 interrupted; 70 an internal error (a bug: one line, and the traceback with ``-v``).
"""

from __future__ import annotations

import argparse
import contextlib
import logging
import os
import shlex
import sys
import threading
import traceback
from pathlib import Path

from ..core.errors import PatternCNNError
from ..core.fileio import drop_lock_file, hold, outermost_missing, writer_scope
from ..core.version import __version__
from ..core.work import drop_unstarted, saved_parts
from . import (
    adapt,
    analyze,
    annotate,
    census,
    classify,
    disable,
    drift,
    finetune,
    link,
    pretrain,
    report,
    sample,
    serve,
    special_tokens,
    train,
    validate,
)
from .common import sigterm_as_interrupt

COMMANDS = (sample, finetune, annotate, pretrain, train, adapt, validate, classify, census, drift, special_tokens, disable,
            link, report, analyze, serve)  # in pipeline order
EXIT_REFUSED, EXIT_BUG = 2, 70
NOISY_LOGGERS = ("transformers", "datasets", "huggingface_hub", "urllib3", "httpx", "filelock", "matplotlib")
# torch keeps its warnings (torch.compile's fallbacks, helper 110) but not its INFO lines (FakeTensor cache stats,
# logged at exit after a Ctrl-C during its import)
WARNING_LOGGERS = ("torch",)


class Parser(argparse.ArgumentParser):
    """argparse, whose errors are one line like every other refusal (the usage is one ``--help`` away)."""

    def error(self, message: str):
        self.exit(EXIT_REFUSED, f"{self.prog}: error: {message}; see {self.prog} --help\n")


def build_parser() -> argparse.ArgumentParser:
    parser = Parser(
        prog="patterncnn",
        description="Classify BERT-family self-attention maps into the five patterns of Kovaleva et al. (2019).")
    parser.add_argument("--version", action="version", version=f"patterncnn {__version__}")
    parser.add_argument("-v", "--verbose", action="store_true", help="log debug messages")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for module in COMMANDS:
        module.register(sub)
    return parser


def _quiet_libraries(verbose: bool) -> None:
    for name in NOISY_LOGGERS:
        logging.getLogger(name).setLevel(logging.DEBUG if verbose else logging.ERROR)
    for name in WARNING_LOGGERS:
        logging.getLogger(name).setLevel(logging.DEBUG if verbose else logging.WARNING)
    if "transformers" in sys.modules:
        from transformers.utils import logging as hf_logging

        hf_logging.set_verbosity_error()
        hf_logging.disable_progress_bar()
    else:  # importing transformers takes 2 s: a command that never loads it must not pay for it
        os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
        os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    logging.basicConfig(level=logging.DEBUG if args.verbose else logging.INFO,
                        format="%(levelname)s %(name)s: %(message)s")
    _quiet_libraries(args.verbose)
    out = getattr(args, "out", None)
    made = new_folder(out)
    with writer_scope(shlex.join(["patterncnn", *_without_secrets(sys.argv[1:] if argv is None else argv)])):
        return _run(args, made)


SECRETS = ("--api-key", "--api-token")  # options whose value is a credential


def _without_secrets(argv: list[str]) -> list[str]:
    """The command line with credentials replaced by ``***``: the lock records it, and another run's refusal
    prints it."""
    shown, hide = [], False
    for arg in argv:
        option = arg.split("=", 1)[0]
        secret = len(option) >= 4 and any(s.startswith(option) for s in SECRETS)  # argparse takes "--api-k" too
        shown.append("***" if hide else f"{option}=***" if secret and "=" in arg else arg)
        hide = secret and "=" not in arg
    return shown


def _run(args: argparse.Namespace, made: Path | None) -> int:
    """Run the command, every output folder it takes locked (main's :func:`writer_scope`): its refusal,
    interruption or failure said in one line, and the folder it made and left empty removed."""
    try:
        if getattr(args, "out_folder", False) and args.out is not None:  # a command whose --out is a folder
            hold(args.out)  # locked at once, before the encoder loads: another run there refuses this one now
        # A time limit's SIGTERM (kill, timeout, a scheduler) stops a command as Ctrl-C does: what it keeps is kept
        # and said, what it began is removed (a killed `sample` left half a store; helper 100's review). The
        # service handles its own signals.
        with contextlib.nullcontext() if getattr(args, "own_signals", False) else sigterm_as_interrupt():
            return args.func(args)
    except BrokenPipeError:  # output piped into `head` and the like
        sys.stderr.close()
        return 0
    except (PatternCNNError, OSError, MemoryError, ValueError) as e:
        if args.verbose:
            raise
        print(f"patterncnn {args.command}: error: {describe(e)}", file=sys.stderr)
        drop_empty(made)
        return EXIT_REFUSED
    except KeyboardInterrupt:
        return _interrupted(args, made)
    except Exception as e:  # noqa: BLE001 - the last line of defence, as the service's CatchAll: one line, not a traceback
        if _caused_by_interrupt(e) and not args.verbose:  # Ctrl-C while a C extension loads: pybind11's ImportError
            return _interrupted(args, made)
        if args.verbose:
            raise
        frame = traceback.extract_tb(e.__traceback__)[-1] if e.__traceback__ else None
        where = f" at {frame.filename.rsplit('/', 1)[-1]}:{frame.lineno}" if frame else ""
        print(f"patterncnn {args.command}: internal error: {type(e).__name__}: {str(e)[:200]}{where}; this is a "
              f"bug: run again with -v for the traceback and report it", file=sys.stderr)
        drop_empty(made)
        return EXIT_BUG


def _caused_by_interrupt(e: BaseException) -> bool:
    """Whether a KeyboardInterrupt is behind ``e`` (its cause or context, at any depth): onnxruntime's import
    stopped by Ctrl-C raised "ImportError: initialization failed", which was called a bug (helper 104's review)."""
    seen = set()
    while e is not None and id(e) not in seen:
        if isinstance(e, KeyboardInterrupt):
            return True
        seen.add(id(e))
        e = e.__cause__ or e.__context__
    return False


def _interrupted(args: argparse.Namespace, made: Path | None) -> int:
    """A command stopped by Ctrl-C or SIGTERM: what it kept and how to go on, in one line; exit 130."""
    resumable, out = getattr(args, "resumable", None), getattr(args, "out", None)
    note = ""
    if resumable and out:
        saved = getattr(args, "saved", saved_parts)  # a command that keeps its parts elsewhere says where
        kept = saved(out)
        where = kept if isinstance(kept, str) else out  # a command that keeps its parts in one file names it
        if not kept:
            drop_unstarted(out)  # the stamp of a run stopped before its first part: nothing is left behind
        finished = getattr(args, "finished", [])  # whole results of a command of several, kept when run again
        restarts = getattr(args, "overwrite", False) and getattr(args, "overwrite_restarts", False)
        if kept and restarts:  # its --overwrite drops the unfinished run too (core/work.py prepare_out)
            note = (f": finished {resumable} are saved under {where}; run the same command again without "
                    f"--overwrite to resume (with it, the run starts over)")
        elif kept:
            note = f": finished {resumable} are saved under {where}; run the same command again to resume"
        elif finished:
            note = f": no {resumable} of the rest had finished; run the same command again to go on from there"
        else:
            note = (f": no {resumable} had finished, so nothing is saved under {out}; the same command starts "
                    f"from the beginning")
        if finished:
            note += (f" (without --overwrite it keeps {' and '.join(finished)})" if getattr(args, "overwrite", False)
                     else f" (it keeps {' and '.join(finished)})")
    if getattr(args, "interrupt_note", None):  # a command that says itself what an interruption keeps
        note = f": {args.interrupt_note}"
    print(f"patterncnn {args.command}: interrupted{note}", file=sys.stderr)
    drop_empty(made)
    if getattr(args, "abandons_threads", False) and any(
            t.is_alive() and not t.daemon for t in threading.enumerate() if t is not threading.main_thread()):
        # serve: an inference its shutdown grace abandoned keeps nothing, and Python would wait for it at exit
        # (8.8 s measured, helper 90's review)
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(130)
    return 130


def new_folder(out: object) -> Path | None:
    """The outermost folder of ``out`` (a command's ``--out``) that does not exist yet, else None."""
    if not isinstance(out, str) or out in ("", "-"):
        return None
    return outermost_missing(out)


def drop_empty(made: Path | None) -> None:
    """Remove the output folder a refused or interrupted command made (:func:`new_folder`, with the parents it made),
    when it holds nothing but empty folders (and the command's own lock files): the command says nothing was left
    behind. A folder that existed before the command is never touched."""
    if made is None or not made.is_dir() or made.is_symlink():
        return
    for folder, _, _ in sorted(os.walk(made), key=lambda w: len(w[0]), reverse=True):  # the deepest first
        drop_lock_file(folder)  # the command's own lock, when it is all the folder holds
        with contextlib.suppress(OSError):
            os.rmdir(folder)  # only an empty one goes


def describe(e: BaseException) -> str:
    """One line for an error: our own errors say what to do; the OS's get the fix added."""
    if isinstance(e, PermissionError) and e.filename:
        from ..encoders.embedded import cache_root

        cache = cache_root()
        if Path(e.filename).is_relative_to(cache):  # the encoders' cache, not a path the user gave (helper 106)
            return (f"cannot write or read {e.filename}: permission denied; patterncnn keeps its assembled encoders "
                    f"and ONNX exports in {cache}: set PATTERNCNN_CACHE to a folder you may write to")
        return f"cannot write or read {e.filename}: permission denied; choose a path you may write to (e.g. --out)"
    if isinstance(e, OSError) and e.strerror and e.filename:
        return f"{e.filename}: {e.strerror}"
    if isinstance(e, MemoryError):
        return "out of memory; use smaller inputs or batches"
    return str(e) or type(e).__name__

