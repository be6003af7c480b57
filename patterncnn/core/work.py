"""Resumable work for the census and the experiments: a stamped work folder of finished parts, one output writer.

Usage::

    out = prepare_out(out, "drift.json", overwrite, "drift")  # refuses another command's unfinished run in out
    work = work_dir(out, "rte", params, command="drift")     # out/.work/rte, refuses other arguments' leftovers
    parts = run_parts(work, names, compute, on_done)    # compute(name) -> dict of arrays, saved as name.npz
    parts = run_windows(work, examples, 64, compute, progress, "drift rte")   # the same, over windows of examples
    write_result(out, "drift.json", result, tables={"drift.csv": (header, rows)}, figures={"drift.png": png})

A part counts as done once its ``.npz`` lands (written atomically), so an interrupted run resumes
where it stopped and a resumed result equals an uninterrupted one. A part is read back through the
bounded reader (:mod:`patterncnn.core.arrayfile`) and checked; a damaged one (a truncated file, a
header that lies, arrays that do not fit) is computed again, with a warning, and so is a work folder
whose stamp is damaged. Every result file records what produced it with :func:`provenance`.

A work folder's stamp names the command that made it (census, drift, special-tokens, ...): several commands may
write their finished results into one folder, but only one of them can have an unfinished run there at a time, and
no command's ``overwrite`` drops another command's finished parts (:func:`prepare_out`). Two runs at once never
share a folder: the first holds its lock (:func:`patterncnn.core.fileio.hold`) and the second is refused, naming it.
"""

from __future__ import annotations

import contextlib
import csv
import hashlib
import io
import json
import logging
import os
import shutil
from pathlib import Path
from typing import Callable, Iterable, Iterator

import numpy as np

from . import args
from .arrayfile import PART_LIMITS, ArrayFileError, read_arrays
from .errors import DataError, PatternCNNError
from .fileio import hold, output_folder, parse_json, staged_outputs, write_bytes, write_json, write_text
from .version import __version__

log = logging.getLogger(__name__)

WORK = ".work"  # the work folder of finished parts inside a run's output folder


class RunError(PatternCNNError, RuntimeError):
    """A resumable run (census or experiment) cannot start as asked (output exists, arguments changed); the message says what to do."""


# The option behind each field of a run's stamp (census, drift, special-tokens, disable, finetune): what the refusal of an
# unfinished run with other arguments names.
OPTIONS = {"task": "--task", "split": "the split", "source": "--glue-dir (the GLUE file read)",
           "data": "the GLUE file's content", "limit": "--limit",
           "examples": "--limit (the examples drawn)", "seed": "--seed",
           "encoder": "--model (the encoder's weights or tokenizer)", "model": "--model (the encoder's weights or "
           "tokenizer)", "a": "A (the first encoder's weights or tokenizer)",
           "b": "B (the second encoder's weights or tokenizer)", "max_length": "--max-length", "backend": "--backend",
           "batch_size": "--batch-size", "classifier": "--classifier (the classifier's file)", "device": "--device",
           "order": "--precision (the examples' order)", "classes": "--token-class", "layers": "--no-layers",
           "epochs": "--epochs", "learning_rate": "--learning-rate", "max_train_examples": "--max-train-examples",
           "version": "the patterncnn version"}


def run_key(params: dict) -> str:
    return hashlib.sha256(json.dumps(params, sort_keys=True, default=str).encode()).hexdigest()[:16]


# the fields of a run's stamp that hold an encoder's fingerprint ({"model", "path", "sha256", ...})
ENCODER_FIELDS = ("encoder", "model", "a", "b")


def located(params: dict) -> dict:
    """``params`` whatever a path's spelling: a GLUE file (``source``) that exists, and an encoder's ``model`` and
    ``path`` that name a model folder (one with a config.json), are taken as their real paths, so that a run started
    with ``--glue-dir ../glue`` resumes under ``--glue-dir /data/glue`` (until 2026-11-29 it was refused, helper 104).
    A copy of a folder is still another encoder; a hub id, an embedded encoder's name (whatever folder of that name
    is here, such as ``--out minilm``) and a ``datasets:`` source are kept as they are."""

    def real(value, is_it=os.path.isfile):
        if isinstance(value, str) and not value.startswith("datasets:") and is_it(value):
            return os.path.realpath(value)
        return value

    def model_folder(value: str) -> bool:  # not an output folder named like an embedded encoder (helper 110)
        return os.path.isfile(os.path.join(value, "config.json"))

    out = {**params, **({"source": real(params["source"])} if "source" in params else {})}
    for field in ENCODER_FIELDS:
        if isinstance(out.get(field), dict):
            out[field] = {k: real(v, model_folder) if k in ("model", "path") else v for k, v in out[field].items()}
    return out


def prepare_out(out: str | Path, result_name: str, overwrite: bool, command: str | None = None,
                tasks: Iterable[str] | None = None) -> Path:
    """Check ``out`` before a run of ``command`` (:func:`patterncnn.core.fileio.output_folder`): a finished result
    there needs ``overwrite`` (which drops it and this command's leftovers); an unfinished run there is resumed. An
    unfinished run of another command with finished parts is refused, ``overwrite`` or not (:func:`other_runs`), and
    so, without ``overwrite``, is a run whose ``tasks`` leave out a task this command's unfinished run has finished
    parts of (:func:`finish` would drop them). The folder is locked first (:func:`patterncnn.core.fileio.hold`): a
    run writing there now refuses this one, rather than being taken for an unfinished run."""
    hold(out)
    if command is not None:
        refuse_other_runs(Path(out), command)
        if tasks is not None and not overwrite:
            refuse_left_out(Path(out), command, list(tasks))
    out = output_folder(out, (result_name,), overwrite)
    if overwrite:
        shutil.rmtree(out / WORK, ignore_errors=True)  # what is left there is this command's, or holds no parts
        (out / result_name).unlink(missing_ok=True)
    out.mkdir(parents=True, exist_ok=True)
    return out


def stamp_of(work: Path) -> dict | None:
    """The stamp (``run.json``) of a task's work folder, or None when it is missing or damaged."""
    try:
        stamp = parse_json((work / "run.json").read_bytes(), str(work / "run.json"), "")
    except (DataError, OSError):
        return None
    return stamp if isinstance(stamp, dict) and isinstance(stamp.get("key"), str) else None


def has_parts(work: Path, stamp: dict | None = None) -> bool:
    """Whether a task's work folder holds anything to keep: a finished part, or one of the paths its run writes as
    it goes (the stamp's ``kept``, relative to the run's output folder) exists."""
    stamp = stamp_of(work) if stamp is None else stamp
    kept = (stamp or {}).get("kept") if isinstance((stamp or {}).get("kept"), list) else []
    return (any(p.name != "run.json" for p in work.iterdir())
            or any(isinstance(k, str) and _written(work.parent.parent / k) for k in kept))


def _written(path: Path) -> bool:
    """Whether a path a run writes as it goes holds anything: a file, or a folder with more than a map store's empty
    start (its ``store.json``, which ``census --save-maps`` writes before the first window)."""
    if path.is_dir():
        return any(p.name != "store.json" for p in path.iterdir())
    return path.exists()


def other_runs(out: Path, command: str) -> list[tuple[str, str]]:
    """(command, task) of each unfinished run in ``out`` that another command than ``command`` made and that holds
    finished parts. A run that stopped before its first part holds nothing to keep: it is not listed."""
    found = []
    for work in sorted((Path(out) / WORK).glob("*/")) if (Path(out) / WORK).is_dir() else []:
        stamp = stamp_of(work)
        other = (stamp or {}).get("command")
        if isinstance(other, str) and other != command and has_parts(work, stamp):
            found.append((other, work.name))
    return found


def refuse_other_runs(out: Path, command: str) -> None:
    """Raise :class:`RunError` when ``out`` holds another command's unfinished run with finished parts: this run's
    ``overwrite`` or :func:`finish` would drop them."""
    found = other_runs(out, command)
    if found:
        other, task = found[0]
        raise RunError(f"{out} holds an unfinished `patterncnn {other}` run of {task} (its finished parts are in "
                       f"{out / WORK / task}); run that {other} command again to resume it, or give this {command} "
                       f"another --out (--overwrite never drops another command's work)")


ONE_TASK = ("disable",)  # commands of one --task: their left-out unfinished run is finished by its own command


def refuse_left_out(out: Path, command: str, tasks: list[str]) -> None:
    """Raise :class:`RunError` when ``out`` holds finished parts of an unfinished run of ``command`` on a task that
    ``tasks`` leave out: the run would finish without them and drop them. The message names the tasks to give (for a
    command of one task, the command to finish first)."""
    left = []
    for work in sorted((out / WORK).glob("*/")) if (out / WORK).is_dir() else []:
        stamp = stamp_of(work)
        if (work.name not in tasks and stamp is not None and stamp.get("command") in (command, None)
                and has_parts(work, stamp)):
            left.append(work.name)
    if left and command in ONE_TASK:  # "give both tasks" cannot be done: it takes one (helper 97's walk of the docs)
        raise RunError(f"{out} holds finished parts of an unfinished {command} run of {left[0]}; finish it first (the "
                       f"same command with --task {left[0]}), or give this run another --out, or pass --overwrite to "
                       f"drop it")
    if left:
        raise RunError(f"{out} holds finished parts of an unfinished {command} run of {', '.join(left)}, which this "
                       f"run leaves out; run it with those tasks too (--task: {', '.join(tasks + left)}) to finish "
                       f"them, or pass --overwrite to drop them")


def drop_unstarted(out: str | Path) -> None:
    """Remove the work folders of runs into ``out`` (or its subfolders, :func:`unfinished_runs`) that stopped before
    their first part (a stamp alone, nothing kept), then ``.work`` when it is left empty: a run interrupted that early
    leaves nothing behind, as it says."""
    for folder in unfinished_runs(out):
        for work in sorted((folder / WORK).glob("*/")):
            if not has_parts(work):
                shutil.rmtree(work, ignore_errors=True)
        if not any((folder / WORK).iterdir()):
            (folder / WORK).rmdir()


def work_dir(out: Path, task: str, params: dict, overwrite: bool = False, kept: Iterable[Path] = (),
             command: str | None = None) -> Path:
    """``out/.work/<task>``, stamped with the run's arguments and the ``command`` that runs it; finished parts of
    other arguments are refused, or with ``overwrite`` dropped (a run of other arguments stopped before its first
    part is restamped: it left nothing to keep, unless one of the paths in ``kept``, inside ``out``, where the run
    also writes as it goes, exists). Finished parts of the same arguments are kept, with ``overwrite`` too: the run
    resumes."""
    work = Path(out) / WORK / task
    stamp = work / "run.json"
    key = run_key(located(params))
    new = {"key": key, "params": params, "located": located(params), "command": command,
           "kept": [Path(p).relative_to(out).as_posix() for p in kept]}
    if stamp.exists():
        old = stamp_of(work)
        if old is None:
            log.warning("%s is damaged; the unfinished run of %s starts over", stamp, task)
            shutil.rmtree(work)
            return work_dir(out, task, params, kept=kept, command=command)
        other = old.get("command") if isinstance(old.get("command"), str) and old.get("command") != command else None
        # an older stamp (before 2026-11-29) is keyed by the paths as typed: the same typing, or the same real paths
        same = old.get("key") in (key, run_key(params)) or (
            "located" not in old and isinstance(old.get("params"), dict) and run_key(located(old["params"])) == key)
        if same and not other and (old.get("command") is None and command or old.get("key") != key):
            write_json(stamp, new)  # an older stamp (no command, or paths as typed): named and keyed as today's
        elif not same or other:
            what = f"`patterncnn {other}` run" if other else "run"
            if not has_parts(work, old) and not any(_written(Path(p)) for p in kept):
                log.info("%s: the unfinished %s of %s stopped before its first part; %s", out, what, task,
                         f"this {command} replaces it" if other else "it starts over with these arguments")
                write_json(stamp, new)
            elif other:  # prepare_out refuses it first; a caller without it is refused here
                raise RunError(f"{out} holds an unfinished {what} of {task}; run that {other} command again to "
                               f"resume it, or give this {command} another --out")
            elif not overwrite:
                raise RunError(f"{out} holds an unfinished run of {task} with other arguments "
                               f"({differences(old, params)}); run it as it was{_with_version(old)} to resume it, "
                               f"or pass --overwrite to start over")
            else:
                log.info("%s", args.spelled(f"{out}: --overwrite starts the unfinished run of {task} with other "
                                            f"arguments ({differences(old, params)}) over"))
                shutil.rmtree(work)
                return work_dir(out, task, params, kept=kept, command=command)
    else:
        write_json(stamp, new)
    return work


def _with_version(stamp: dict) -> str:
    """", with patterncnn X" when the unfinished run was made by another version (no option gives it back)."""
    params = stamp.get("params")
    was = params.get("version") if isinstance(params, dict) else None
    return f" (with patterncnn {was})" if was and was != __version__ else ""


def differences(stamp: dict, params: dict, options: dict[str, str] = OPTIONS) -> str:
    """What differs between an unfinished run's stamp and this run's ``params``, named by option (``options``: the
    option behind each field), with the earlier and the new value where they are short numbers or words. One line,
    whatever the stamp holds."""
    # the paths as the stopped run found them (a relative path read from another folder is another file, helper 108)
    old = (stamp["located"] if isinstance(stamp.get("located"), dict) else
           located(stamp["params"]) if isinstance(stamp.get("params"), dict) else {})
    if not old:
        return "which, its record does not say"
    new = json.loads(json.dumps(located(params), default=str))  # as stamps hold them: tuples lists, paths strings
    changed = {k for k in set(old) | set(new) if old.get(k) != new.get(k)}
    named = []
    for key in (k for k in options if k in changed):
        a, b = old.get(key), new.get(key)
        if all(v is None or (isinstance(v, (str, int, float)) and not isinstance(v, bool) and len(str(v)) <= 40
                             and str(v).isprintable()) for v in (a, b)):
            named.append(f"{options[key]}: was {'none' if a is None else a}, now {'none' if b is None else b}")
        else:
            named.append(options[key])
    if changed - set(options) or not named:
        named.append("what else it records (another patterncnn version?)")
    return "; ".join(named)


def write_result(out: Path, name: str, result: dict, tables: dict[str, tuple[list, Iterable[list]]] | None = None,
                 figures: dict[str, bytes] | None = None, files: dict[str, bytes] | None = None) -> None:
    """Write a finished run into ``out``: CSV tables, figures, then the JSON result ``name`` last (its presence
    marks the run finished), all staged (:func:`patterncnn.core.fileio.staged_outputs`): a failure or a stop while
    they are written leaves ``out`` as it was.

    Args:
        tables: {file name: (header, rows)}; each row a list of values, written by :mod:`csv` with ``\\n`` endings.
        figures: {file name: PNG bytes}.
        files: {file name: bytes}, any other output.
    """
    tables, others = tables or {}, {**(figures or {}), **(files or {})}
    with staged_outputs(out, [*dict.fromkeys([*tables, *others]), name]) as stage:
        for fname, (header, rows) in tables.items():
            buf = io.StringIO()
            w = csv.writer(buf, lineterminator="\n")
            w.writerow(header)
            w.writerows(rows)
            write_text(stage / fname, buf.getvalue())
        for fname, data in others.items():
            write_bytes(stage / fname, data)
        write_json(stage / name, result)


def save_part(path: Path, arrays: dict) -> None:
    buf = io.BytesIO()
    np.savez(buf, **arrays)
    write_bytes(path, buf.getvalue())


def read_part(path: Path, check: Callable[[dict], str | None] | None = None) -> dict | None:
    """A finished part read back (bounded) and checked, or None: not there yet, or damaged (then a warning says so,
    and the caller computes it again).

    Args:
        check: what is wrong with the part's arrays, or None when they are what it must hold.

    Raises:
        RunError: something that is not a regular file stands at ``path``.
    """
    if not path.exists():
        return None
    if not path.is_file():
        raise RunError(f"{path} is not a regular file; remove it and run the same command again")
    try:
        arrays = read_arrays(path, PART_LIMITS)
        why = check(arrays) if check else None
    except ArrayFileError as e:
        why = str(e)
    if why is None:
        return arrays
    log.warning("%s is damaged (%s); computing it again", path, why)
    return None


def run_parts(work: Path, names: Iterable[str], compute: Callable[[str], dict],
              on_done: Callable[[str, bool], None] | None = None,
              check: Callable[[str, dict], str | None] | None = None) -> dict[str, dict]:
    """Compute each named part once: finished ones are read back from ``work/<name>.npz`` (:func:`read_part`).

    Args:
        on_done: ``on_done(name, resumed)`` after each part, ``resumed`` True for a part read back from an earlier
            run (a progress bar that a part's computation ticks itself counts only those).
        check: ``check(name, arrays)``: what is wrong with a part read back, or None.

    Returns:
        name -> {array name: array}, in the order of ``names``.
    """
    parts = {}
    for name in names:
        path = work / f"{name}.npz"
        arrays = read_part(path, (lambda a, n=name: check(n, a)) if check else None)
        resumed = arrays is not None
        if not resumed:
            arrays = compute(name)
            save_part(path, arrays)
            arrays = read_part(path)  # as a resumed run reads it: the same dtypes either way
        parts[name] = arrays
        if on_done:
            on_done(name, resumed)
    return parts


@contextlib.contextmanager
def progress_bar(progress: Callable | None, total: int, desc: str, unit: str, **extra) -> Iterator:
    """A bar from a progress-bar factory (None: no bar, and None is yielded), closed however the block ends: before
    an interruption's message, never redrawn after it. ``extra`` goes to the factory (e.g. ``initial``)."""
    bar = progress(total=total, desc=desc, unit=unit, **extra) if progress else None
    try:
        yield bar
    finally:
        if bar is not None:  # a tqdm of total 0 is falsy
            bar.close()


def spread(parts: list[dict], squares: str, mean: np.ndarray, n: int) -> np.ndarray:
    """The standard deviation over ``n`` examples (population) of what :func:`run_windows`' parts sum, from their
    sums of squares under ``squares`` and the ``mean``: drift's cosines, special-tokens' shares."""
    return np.sqrt(np.clip(sum(p[squares] for p in parts) / n - mean**2, 0, None))


def truncated_examples(parts: list[dict]) -> int | None:
    """How many examples of :func:`run_windows`' parts (each counting its own as ``truncated``) were cut to
    max_length; None if a part was saved before drift and special-tokens counted them (2026-11-29, helper 95's
    review)."""
    return None if any("truncated" not in p for p in parts) else int(sum(int(p["truncated"]) for p in parts))


def run_windows(work: Path, examples: list, size: int, compute: Callable[[list, Callable | None], dict],
                progress: Callable | None, desc: str) -> list[dict]:
    """:func:`run_parts` over windows of ``size`` examples (parts ``window-00000``, ...): ``compute(window, tick)``
    calls ``tick`` (None without a bar) once per example it computes; a window read back moves the bar at once.

    Returns:
        Each window's arrays, in order.
    """
    chunks = windows(examples, size)
    names = [f"window-{w:05d}" for w in range(len(chunks))]
    with progress_bar(progress, len(examples), desc, "ex") as bar:
        tick = (lambda _: bar.update(1)) if bar else None  # each example as it is computed
        parts = run_parts(work, names, lambda name: compute(chunks[names.index(name)], tick),
                          (lambda name, resumed: resumed and bar.update(len(chunks[names.index(name)])))
                          if bar else None)
    return list(parts.values())


def provenance(**fields) -> dict:
    """The header every experiment result starts with: the producing version plus the given fields."""
    return {"created_by": f"patterncnn {__version__}", **fields}


def windows(items: list, size: int) -> list[list]:
    return [items[s : s + size] for s in range(0, len(items), size)]


def unfinished_runs(out: str | Path) -> list[Path]:
    """The folders holding an unfinished run's work folder: ``out``, or folders directly inside it (a census of
    several encoders writes one folder each)."""
    out = Path(out)
    return [f for f in (out, *sorted(out.glob("*/"))) if (f / WORK).is_dir()] if out.is_dir() else []


def run_command(folder: str | Path) -> str | None:
    """The command whose unfinished run is in ``folder`` (its work folder's stamps name it), or None: none there, or
    a stamp of an earlier version, which did not record it."""
    stamps = (stamp_of(w) for w in sorted((Path(folder) / WORK).glob("*/")))
    return next((s["command"] for s in stamps if s and isinstance(s.get("command"), str)), None)


def saved_parts(out: str | Path) -> bool:
    """Whether an interrupted run into ``out`` left finished parts to resume from: a part in the work folder
    (``.work/<task>/``) of one of its :func:`unfinished_runs`."""
    return any(next((f / WORK).glob("*/*.npz"), None) is not None for f in unfinished_runs(out))


def finish(out: Path) -> None:
    shutil.rmtree(Path(out) / WORK, ignore_errors=True)


def output_dir(out: str | Path | None, kind: str) -> Path:
    """Where a run called from Python writes: ``out``, or a new temporary folder when it is None."""
    if out is not None:
        return Path(out)
    import tempfile

    return Path(tempfile.mkdtemp(prefix=f"patterncnn-{kind}-"))


def progress_bars(progress: bool | Callable | None) -> Callable | None:
    """The progress-bar factory of a run called from Python: True for tqdm's, False/None for none, or the one given."""
    progress = args.progress("progress", progress)
    if progress is True:
        from tqdm.auto import tqdm

        return tqdm
    return progress or None
