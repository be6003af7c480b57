"""The census on a Ray cluster: (encoder, task, window) units spread over worker actors.

Usage (what ``patterncnn census --ray auto`` runs; needs the extra ``patterncnn[ray]``)::

    for enc, out, result in run_ray_censuses(["minilm", "mpnet"], splits, classifier, "runs/census",
                                             limit=None, seed=0, address="auto"):
        ...   # the same results, files and folders as the local run_censuses

Each worker is an actor that loads the classifier once (its bytes travel from the driver) and each
encoder once, on first use. The driver hands out one window at a time, writes each returned window
atomically to the very file the local census would (:mod:`patterncnn.census.windows`), and ticks one
progress bar. Windows already on disk are skipped, so an interrupted Ray run resumes (locally or on
Ray) like a local one. A worker that dies has its window re-run by a fresh actor, placed wherever
the cluster has room. Once every window is on disk, :func:`patterncnn.census.run_census` merges
them exactly as after a local run: the result is identical to a local census's.
"""

from __future__ import annotations

import collections
import dataclasses
import logging
import os
import signal
import socket
import tempfile
import threading
from pathlib import Path
from typing import Callable, Iterator

from ..classifier.onnx import OnnxClassifier
from ..core.fileio import sha256_file
from ..core.glue import GlueSplit
from ..core.work import prepare_out, progress_bar, work_dir
from ..encoders.load import load_encoder
from ..shares.estimate import plan_for
from .results import CensusError
from .run import (
    COMMAND,
    RESULT,
    check_models,
    kept_censuses,
    note_finished,
    output_folder,
    run_census,
    same_estimator,
    task_params,
)
from .windows import classify_window, read_window, save_window, split_windows, window_name

log = logging.getLogger(__name__)

MAX_RESTARTS = 3  # per worker: dead actors replaced before the run gives up


@dataclasses.dataclass
class Unit:
    """One window of one task for one encoder, and the file its result goes to. ``model`` is what the workers load
    (:func:`worker_model`), ``identity`` what they must find there (:func:`identity`)."""

    model: str
    examples: list
    path: Path
    identity: dict = dataclasses.field(default_factory=dict)


def worker_model(name: str) -> str:
    """The ``--model`` a worker loads: a folder on the driver by its absolute path (a worker resolves a relative one
    from where its ``ray start`` ran, not where the census runs: helper 100's review), else the name as given (a hub
    id, an embedded encoder)."""
    return str(Path(name).resolve()) if Path(name).is_dir() else name


def identity(fingerprint: dict) -> dict:
    """What makes a census's maps an encoder's: its weights (SHA-256, or the hub revision) and its tokenizer."""
    return {k: fingerprint.get(k) for k in ("sha256", "revision", "tokenizer")}


class Worker:
    """A Ray actor's state: the classifier and every encoder it has used, each loaded once."""

    def __init__(self, classifier: bytes, max_length: int, backend: str, threads: int, gpu: bool = False):
        import torch

        torch.set_num_threads(threads)
        fd, path = tempfile.mkstemp(suffix=".onnx")
        try:
            with os.fdopen(fd, "wb") as f:
                f.write(classifier)
            self.classifier = OnnxClassifier(path, threads=threads)
        finally:  # onnxruntime has read it: one copy per actor stayed in /tmp (helper 100 found 550 of them)
            os.unlink(path)
        self.options = {"max_length": max_length, "backend": backend, "threads": threads}
        self.gpu = gpu
        self.encoders: dict = {}

    def window(self, model: str, examples: list, batch_size: int, expected: dict | None = None) -> dict:
        """The arrays of :func:`patterncnn.census.windows.classify_window` for one window.

        Raises:
            CensusError: the encoder this worker loads under ``model`` is not the driver's (``expected``,
                :func:`identity`): another folder or hub cache of that name on this machine.
        """
        if model not in self.encoders:
            try:
                enc = load_encoder(model, **self.options)
            except Exception as e:  # noqa: BLE001 - said in one line by the driver, naming this machine
                raise CensusError(f"a Ray worker on {socket.gethostname()} cannot load {model!r}: "
                                  f"{str(e).splitlines()[0] if str(e) else type(e).__name__}") from None
            found = identity(enc.fingerprint)
            if expected and found != expected:
                differ = ", ".join(k for k in expected if found.get(k) != expected[k])
                raise CensusError(f"a Ray worker on {socket.gethostname()} loads another encoder as {model!r} than "
                                  f"the driver does (its {differ} differ): give every machine of the cluster the "
                                  f"same weights and tokenizer at that path, or run the census without --ray")
            if self.gpu:  # the torch backend follows the model to the GPU Ray gave this actor
                enc.model.to("cuda")
                enc.device = "cuda"
            self.encoders[model] = enc
        return classify_window(self.encoders[model], self.classifier, examples, batch_size)

    def pid(self) -> int:
        return os.getpid()


def connect(address: str):
    """Join (``auto`` or ``HOST:PORT``) or start (``local``) a Ray cluster; returns the ``ray`` module."""
    try:
        import ray
    except ImportError:
        raise CensusError("--ray needs Ray: pip install 'patterncnn[ray]'") from None
    if ray.is_initialized():
        return ray
    _check_reachable(address)
    main_thread = threading.current_thread() is threading.main_thread()
    sigterm = signal.getsignal(signal.SIGTERM) if main_thread else None
    try:
        if address == "local":
            ray.init(include_dashboard=False, logging_level=logging.WARNING)
        else:
            ray.init(address=address, logging_level=logging.WARNING)
    except (ConnectionError, RuntimeError, ValueError) as e:
        raise CensusError(f"cannot join the Ray cluster at {address!r} ({str(e).splitlines()[0]}); start one with "
                          f"`ray start --head`, pass its address (HOST:6379), or --ray local for one on this "
                          f"machine") from None
    finally:
        if sigterm is not None:  # ray.init puts its own handler over the command's: SIGTERM aborted (exit 134)
            signal.signal(signal.SIGTERM, sigterm)  # instead of stopping as Ctrl-C does (helper 101's review)
    return ray


def _check_reachable(address: str, timeout: float = 5.0) -> None:
    """Refuse a ``HOST:PORT`` nothing answers at, within ``timeout`` seconds: Ray itself retries such an address for
    minutes, logging as it goes, before it gives up."""
    host, sep, port = address.rpartition(":")
    if address in ("auto", "local") or "://" in address or not sep or not port.isdigit():
        return  # Ray's own forms, and what Ray itself refuses with a message of its own
    try:
        socket.create_connection((host.strip("[]"), int(port)), timeout=timeout).close()
    except OSError as e:
        raise CensusError(f"nothing answers at the Ray address {address!r} ({e.strerror or e}); start the cluster "
                          f"with `ray start --head` on that machine and pass the address it prints (HOST:6379), or "
                          f"--ray local for one on this machine") from None


def plan_units(encoders: list, folders: list[Path], splits: list[GlueSplit], limit, seed, classifier_sha: str,
               batch_size: int, overwrite: bool) -> tuple[list[Unit], int]:
    """Every window of ``encoders`` (each with its output folder) not yet on disk, and how many examples are
    already done."""
    units, done = [], 0
    for enc, folder in zip(encoders, folders):
        dest = prepare_out(folder, RESULT, overwrite, COMMAND, [s.task.name for s in splits])
        for split in splits:
            work = work_dir(dest, split.task.name, task_params(enc, split, limit, seed, classifier_sha, batch_size),
                            command=COMMAND)
            for w, examples in enumerate(split_windows(split.examples)):
                if read_window(work / window_name(w), examples, enc.num_layers * enc.num_heads) is not None:
                    done += len(examples)
                else:
                    units.append(Unit(worker_model(enc.name), examples, work / window_name(w),
                                      identity(enc.fingerprint)))
    return units, done


def run_units(ray, units: list[Unit], start_worker: Callable, workers: int, batch_size: int, bar=None) -> int:
    """Run ``units`` on ``workers`` actors, one window each at a time; returns how many actors died."""
    todo = collections.deque(units)
    actors = [start_worker() for _ in range(min(workers, len(units)))]
    idle, pending, deaths = list(actors), {}, 0
    try:
        while todo or pending:
            while todo and idle:
                actor, unit = idle.pop(), todo.popleft()
                pending[actor.window.remote(unit.model, unit.examples, batch_size, unit.identity)] = (actor, unit)
            (ref,), _ = ray.wait(list(pending), num_returns=1)
            actor, unit = pending.pop(ref)
            try:
                arrays = ray.get(ref)
            except ray.exceptions.RayTaskError as e:  # the worker's own error (its traceback, many lines): its line
                cause = getattr(e, "cause", None)
                if isinstance(cause, CensusError):
                    raise CensusError(str(cause)) from None
                raise CensusError(f"a Ray worker failed on window {unit.path.name}: {type(cause or e).__name__}: "
                                  f"{str(cause or e).splitlines()[0][:300]}") from None
            except ray.exceptions.RayActorError as e:
                deaths += 1
                if deaths > MAX_RESTARTS * max(workers, 1):
                    raise CensusError(f"{deaths} Ray workers died; last: {str(e).splitlines()[0]}") from None
                log.warning("a Ray worker died (%s); its window %s goes to a new worker", type(e).__name__,
                            unit.path.name)
                todo.appendleft(unit)
                actors.append(start_worker())
                idle.append(actors[-1])
                continue
            save_window(unit.path, arrays)
            idle.append(actor)
            if bar:
                bar.update(len(unit.examples))
    finally:
        for actor in actors:
            ray.kill(actor)
    return deaths


def run_ray_censuses(models: list[str], splits: list[GlueSplit], classifier, out: str | Path, limit: int | None,
                     seed: int, max_length: int = 128, address: str = "auto", workers: int | None = None,
                     backend: str = "torch", threads: int = 2, batch_size: int = 16, progress: Callable | None = None,
                     overwrite: bool = False, estimator: str | None = None,
                     scope: str | None = None, finished: list[str] | None = None
                     ) -> Iterator[tuple[object, Path, dict]]:
    """The census of every model x task on Ray; yields (encoder, output folder, result) like ``run_censuses``, and
    adds each finished census to ``finished`` as it does.

    Args:
        address: ``auto`` (the cluster this machine joined), ``local`` (start one here) or ``HOST:PORT``.
        workers: actors, each asking for ``threads`` CPUs; None: as many as the cluster's CPUs hold.
            With ``backend="torch"`` on a cluster with a GPU per worker, each actor also asks for one GPU and
            runs its encoder there (not tested here: this machine has none).
    """

    check_models(models)
    ray = connect(address)
    # The driver needs each encoder's fingerprint and shape only; its backend is built lazily, never here.
    encoders = [load_encoder(m, max_length=max_length, backend=backend, threads=threads) for m in models]
    clf_file = Path(classifier.path)
    same = same_estimator(classifier, encoders, estimator) or {"estimator": estimator}
    for enc in encoders:  # each census's estimate, checked before --overwrite drops anything or a window runs
        plan_for(getattr(classifier, "metadata", {}), same["estimator"], scope, enc.tag, seed, same.get("chosen_by"))
    folders = [output_folder(out, enc, len(encoders)) for enc in encoders]
    # the same command, interrupted after an encoder's census was written: kept, as run_censuses does
    kept = kept_censuses(out, encoders, classifier, splits, limit, seed, finished=finished, overwrite=overwrite,
                         scope=scope, **same)
    todo = [(enc, dest) for enc, dest, k in zip(encoders, folders, kept) if k is None]
    workers = workers or max(1, int(ray.cluster_resources().get("CPU", 1) // threads))
    gpu = ray.cluster_resources().get("GPU", 0) >= workers and backend == "torch"
    if gpu:  # the workers' maps are CUDA's: keyed and recorded as such, never mixed with CPU windows on a resume
        for enc, _ in todo:
            enc.device = "cuda"
    units, done = plan_units([e for e, _ in todo], [d for _, d in todo], splits, limit, seed, sha256_file(clf_file),
                             batch_size, overwrite)
    blob = clf_file.read_bytes()
    actor_class = ray.remote(num_cpus=threads, num_gpus=1 if gpu else 0, max_restarts=0,  # as cli/census.py
                             runtime_env={"env_vars": {"OMP_WAIT_POLICY": "PASSIVE"}})(Worker)

    def start_worker():
        return actor_class.remote(blob, max_length, backend, threads, gpu)

    total = done + sum(len(u.examples) for u in units)
    with progress_bar(progress, total, f"census on Ray ({workers} workers)", "ex", initial=done) as bar:
        run_units(ray, units, start_worker, workers, batch_size, bar)
    for enc, dest, earlier in zip(encoders, folders, kept):
        if earlier is not None:
            yield enc, dest, earlier
            continue
        result = run_census(enc, classifier, splits, dest, limit, seed, batch_size=batch_size, scope=scope, **same)
        note_finished(finished, enc, dest, len(encoders))
        yield enc, dest, result
