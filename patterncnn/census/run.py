"""The census: how often each pattern occurs over a GLUE task's dev set, overall and per layer × head.

Usage (what ``patterncnn census`` runs)::

    result = run_census(encoder, classifier, split, out="runs/census", progress=tqdm)
    task = result["tasks"]["rte"]
    task["shares"]         # {"vertical": 0.41, ...} over all (example, layer, head) maps, by result["estimator"]
    task["ci95"]           # 95% interval: examples and the classifier (its calibration, or count's validated band)
    task["ci95_parts"]     # {"examples": ..., "classifier": ...}: each source alone
    task["heads"]          # per layer, per head: argmax label shares and the majority label

Every example streams through the encoder and every map straight into the classifier: no map
touches the disk (unless ``save_maps``) and memory stays flat. Examples are processed in fixed
windows of ``WINDOW`` (the encoder sorts by length within a window), and each finished window is
saved atomically to ``out/.work/<task>/``. Re-running the same command skips the finished windows;
because a window always batches the same examples the same way, the resumed result is identical to
an uninterrupted one. Shares and intervals come from :mod:`patterncnn.shares.estimate` (``count``,
``probs`` or ``adjusted``; by default the one that validated best with the classifier).
"""

from __future__ import annotations

import dataclasses
import json
import logging
import time
from pathlib import Path
from typing import Callable, Iterator, Protocol

import numpy as np
import torch

from ..core import args
from ..core.device import torch_threads
from ..core.fileio import public_fingerprint, public_path, public_source, sha256_file, weights_id
from ..core.glue import GlueSplit
from ..core.labels import LABELS
from ..core.maps import MapFormatError, MapStore, map_id, map_record
from ..core.plots import census_figure, heads_figure
from ..core.version import __version__
from ..core.work import RunError, finish, prepare_out, progress_bar, work_dir, write_result
from ..encoders.load import Encoder, load_encoder
from ..shares.estimate import default_estimator, few_examples_warning, plan_for, wilson
from ..shares.precision import Precision, PrecisionError
from .results import FILE, CensusError, compare, has_classifier_part, load_result, result_problem, table  # noqa: F401
from .thumbnails import FILE as THUMBNAILS
from .thumbnails import PER_HEAD, thumbnails_bytes
from .windows import (  # noqa: F401
    CNN_BATCH,
    WINDOW,
    classify_window,
    merge_windows,
    read_window,
    save_window,
    split_windows,
    window_name,
)

log = logging.getLogger(__name__)

RESULT = FILE  # census.json, written last: its presence marks a finished census
COMMAND = "census"  # what its work folder's stamp names (patterncnn.core.work.prepare_out)
# --precision is checked from two windows on: on fewer examples the bootstrap's own width is too noisy to stop on.
MIN_PRECISION_EXAMPLES = 2 * WINDOW



class Classifier(Protocol):
    """What the census needs of a classifier (:class:`patterncnn.classifier.onnx.OnnxClassifier` is one)."""

    path: Path
    model_version: str
    metadata: dict  # the classifier's stored calibration and validation, when it has them

    def prepare(self, maps: torch.Tensor, seps: list[list[int] | None]) -> torch.Tensor:
        """(N, T, T) maps of one length -> the CNN input (N, C, G, G)."""

    def run(self, x: torch.Tensor) -> np.ndarray:
        """(N, C, G, G) -> (N, 5) probabilities."""

    def apply_segment_rule(self, probs: np.ndarray, seps: list[list[int] | None]) -> np.ndarray:
        """(N, 5) probabilities with block ruled out for single-segment inputs."""


def classify_task(encoder: Encoder, classifier: Classifier, split: GlueSplit, out: Path, params: dict,
                  batch_size: int = 16, progress: Callable | None = None, save_maps: bool = False,
                  overlap: bool = True, stop: Callable[[dict], bool] | None = None) -> dict:
    """Label every (example, layer, head) map of ``split``, a window at a time; resumable.

    ``overlap``: classify in the calling thread while the encoder runs ahead in another (same result).
    ``stop``: asked after each window with the windows so far merged (:func:`merge_windows`, as stored on
    disk, so a resumed run decides exactly as an uninterrupted one); True ends the task there.

    Returns:
        The raw arrays of :func:`classify_window`, the windows used concatenated in example order, and
        ``computed``: how many examples' windows this call computed (the rest were read back from ``.work``).
    """

    maps = out / "maps" / split.task.name  # --save-maps writes here as it goes, before a window is saved
    work = work_dir(out, split.task.name, params, kept=[maps] if save_maps else [], command=COMMAND)
    windows = split_windows(split.examples)
    info = {"model": public_fingerprint(encoder.fingerprint), "max_length": encoder.max_length, "made_by": COMMAND,
            "seed": params.get("seed"), "limit": params.get("limit"), "order": params.get("order", "file"),
            "tasks": {split.task.name: {"split": split.split, "source": public_source(split.source),
                                        "examples": split.total, "data": split.digest()}},
            "layers": encoder.num_layers, "heads": encoder.num_heads}  # what sample's stores record, and the run's
    store = census_store(maps, info) if save_maps else None
    n_maps = encoder.num_layers * encoder.num_heads
    used, computed = [], 0
    with progress_bar(progress, len(split.examples), f"census {split.task.name}", "ex") as bar:
        for w, window in enumerate(windows):
            part = work / window_name(w)
            arrays = read_window(part, window, n_maps)  # a damaged window is computed again, with a warning
            if arrays is not None and store is not None and missing_maps(store, encoder, split, window):
                # finished before --save-maps was given (or by a run whose store was replaced): computed again for
                # its maps, the same arrays (until 2026-11-29 the store silently lacked it, helper 95's review)
                arrays = None
            if arrays is not None:
                if bar:
                    bar.update(len(window))
            else:
                if encoder.device != "cpu" and next(encoder.model.parameters()).device.type != encoder.device:
                    # a Ray census on GPUs (census/ray.py): the workers computed its windows on their GPUs, and this
                    # one went missing or was damaged since; the driver's model is on its CPU
                    raise CensusError(f"{split.task.name}: window {w + 1} of {len(windows)} must be computed again, "
                                      f"on {encoder.device} as its other windows were, and this machine's copy of "
                                      f"{encoder.name} is not there: run the same command again (with --ray) to "
                                      f"compute it on the cluster")
                records = []

                def seen(ea):
                    if store is not None:
                        records.extend((map_record(encoder, split.task.name, split.split, ea, layer, head),
                                        ea.maps[layer, head]) for layer in range(encoder.num_layers)
                                       for head in range(encoder.num_heads))
                    if bar:
                        bar.update(1)

                arrays = classify_window(encoder, classifier, window, batch_size, seen, overlap)
                computed += len(window)
                if store is not None:  # after a crash mid-window some of these may already be saved
                    store.append(r for r in records if r[0]["id"] not in store)
                save_window(part, arrays)
                arrays = read_window(part, window, n_maps)  # as stored: a resumed run decides exactly alike
                if arrays is None:
                    raise CensusError(f"{part} could not be read back after it was written; check the disk and run the "
                                      f"same command again")
            used.append(arrays)
            if stop is not None and stop(merge_windows(used, thumbnails=False)):
                break
    if store is None and (maps / "store.json").is_file():  # an earlier run wrote maps there, this one not
        examples = [e for window in windows[:len(used)] for e in window]
        earlier = MapStore(maps)
        if differ := store_differences(earlier, info):
            log.warning("%s holds the maps of another census (its %s differ), not this census's; run the same command "
                        "with --save-maps --overwrite to replace them, or remove the folder", maps, ", ".join(differ))
        elif missing := missing_maps(earlier, encoder, split, examples):
            log.warning("%s holds the maps of only %d of this census's %d %s examples (an earlier run of it had "
                        "--save-maps); run the same command with --save-maps --overwrite to complete it, or remove "
                        "the folder", maps, len(examples) - missing, len(examples), split.task.name)
    return {**merge_windows(used), "computed": computed}


def store_differences(store: MapStore, info: dict) -> list[str]:
    """The keys of a census's store ``info`` (encoder, max length, seed, limit, order, data) in which ``store``'s
    header differs: [] when a census of the same arguments wrote it."""
    wanted = json.loads(json.dumps(info, default=str))  # as store.json holds it
    return sorted(k for k in wanted if _spelled_alike(k, store.header.get(k)) != _spelled_alike(k, wanted[k]))


def _spelled_alike(key: str, value):
    """A store header's value as it identifies the maps: the encoder's ``model`` and ``path`` by their last part (as
    :func:`patterncnn.core.fileio.public_path` records an absolute path), so that the same folder given as a
    relative and an absolute path keeps its maps; its weights and tokenizer are compared by their digests."""
    if key != "model" or not isinstance(value, dict):
        return value
    return {k: Path(v).name if k in ("model", "path") and isinstance(v, str) else v for k, v in value.items()}


def census_store(root: Path, info: dict) -> MapStore:
    """A task's map store for a census with ``--save-maps``: the one in ``root`` if a census of the same ``info``
    (encoder, max length, seed, limit, order, data) wrote it, else a new one in its place. Until 2026-11-29 the old
    store was kept whatever made it, and a map whose id it held was never rewritten: after ``--overwrite
    --max-length 32`` every stored map was still the 128-token one (helper 95's review)."""
    if (root / "store.json").is_file():
        store = MapStore(root)
        differ = store_differences(store, info)
        if not differ:
            return store
        log.warning("%s held the maps of another census (its %s differ); replaced by this census's", root,
                    ", ".join(differ))
        return MapStore.create(root, info=info, replace=True)
    return MapStore.create(root, info=info)


def missing_maps(store: MapStore, encoder: Encoder, split: GlueSplit, examples: list) -> int:
    """How many of ``examples`` lack one of their maps in ``store``."""
    heads = [(layer, head) for layer in range(encoder.num_layers) for head in range(encoder.num_heads)]
    return sum(any(map_id(encoder.tag, split.task.name, split.split, e.index, layer, head) not in store
                   for layer, head in heads) for e in examples)


def _majority_interval(cell: dict) -> list[str]:
    """heads.csv's majority_low, majority_high and clear of a head cell (empty in a census.json of before)."""
    if "majority_ci95" not in cell:
        return ["", "", ""]
    return [f"{cell['majority_ci95'][0]:.4f}", f"{cell['majority_ci95'][1]:.4f}", str(cell["clear"])]


def summarize(labels: np.ndarray, num_layers: int, num_heads: int) -> dict:
    """Argmax counts and per-head distributions from (N, L*H) label ids (shares: :mod:`patterncnn.shares.estimate`)."""
    n, m = labels.shape
    counts = np.bincount(labels.ravel(), minlength=len(LABELS))
    heads = np.stack([(labels == k).mean(0) for k in range(len(LABELS))], axis=1)  # (L*H, 5)
    heads = heads.reshape(num_layers, num_heads, len(LABELS))
    return {
        "examples": int(n), "maps": int(n * m),
        "counts": {name: int(c) for name, c in zip(LABELS, counts)},
        "heads": [[_head_cell(heads[l, h], n) for h in range(num_heads)] for l in range(num_layers)],
    }


def _head_cell(shares: np.ndarray, n: int) -> dict:
    """One head's argmax shares over its ``n`` examples, its majority pattern and, when patterns tie for it,
    ``tied``: their names (the majority is then the first of them in :data:`LABELS` order); the majority share's
    95% interval over the examples (Wilson), and ``clear``: whether it lies above the runner-up's (a head whose
    majority the examples could overturn is not clear; since 2026-11-29: per-head shares had no interval)."""
    top = np.flatnonzero(shares == shares.max())
    second = float(np.sort(shares)[-2]) if len(shares) > 1 else 0.0
    low, high = wilson(float(shares.max()), n)
    cell = {"shares": {name: round(float(s), 4) for name, s in zip(LABELS, shares)},
            "majority": LABELS[int(top[0])], "majority_share": round(float(shares.max()), 4),
            "majority_ci95": [round(low, 4), round(high, 4)], "clear": bool(low > wilson(second, n)[1])}
    if len(top) > 1:
        cell["tied"] = [LABELS[int(k)] for k in top]
    return cell


def task_params(encoder: Encoder, split: GlueSplit, limit: int | None, seed: int, classifier_sha: str,
                batch_size: int, shuffled: bool = False) -> dict:
    """What a task's windows depend on: a work folder holding windows of other params is never resumed.

    ``shuffled``: the examples run in the seeded random order of ``--precision`` (:func:`shuffle`), not in file
    order; the target itself is not part of it (the windows are the same whatever it is)."""
    params = {"task": split.task.name, "split": split.split, "source": split.source, "data": split.digest(),
              "limit": limit, "seed": seed,
              "encoder": encoder.fingerprint, "max_length": encoder.max_length, "backend": encoder.backend,
              "batch_size": batch_size, "classifier": classifier_sha, "version": __version__}
    if encoder.device != "cpu":
        params["device"] = encoder.device  # numerics differ in the last bits: windows of two devices never mix
    if shuffled:
        params["order"] = "shuffled"
    return params


def shuffle(split: GlueSplit, seed: int) -> GlueSplit:
    """The split's examples in a seeded random order: any first n of them are a uniform random sample of the
    split, so a census that stops early has counted a random sample, not the head of the file."""
    order = np.random.default_rng([seed, 7]).permutation(len(split.examples))
    return dataclasses.replace(split, examples=[split.examples[i] for i in order])


def _stopper(plan, precision: Precision, single: bool, seed: int, record: dict) -> Callable[[dict], bool]:
    """The ``stop`` of :func:`classify_task` for ``--precision``: the examples' part at or under the target."""

    def stop(raw: dict) -> bool:
        n = len(raw["labels"])
        check = precision.check(plan.estimate(raw["probs"], raw["labels"], np.full(n, single), seed))
        record.update(check, used=n, checked=record.get("checked", 0) + 1)
        return n >= MIN_PRECISION_EXAMPLES and check["reached"]

    return stop


def _stop_record(precision: Precision, record: dict, budget: int) -> dict:
    """What census.json says about a task's early stop: the target, the examples used, why it stopped."""
    n, widest = record["used"], record["widest"]
    reached = record["reached"] and (n >= MIN_PRECISION_EXAMPLES or n == budget)
    why = (f"stopped after {n} of {budget} examples: {precision.describe()}" if reached and n < budget else
           f"reached on the last window ({n} of {budget} examples): {precision.describe()}" if reached else
           f"all {budget} examples used without reaching the target (widest: {widest}, "
           f"±{record['examples'][widest]:.2f} against ±{record['target'][widest]:.2f} points)")
    return {"target": str(precision), "reached": bool(reached), "examples_used": n, "budget": budget,
            "stopped_early": bool(n < budget), "reason": why, "examples_half_width": record["examples"],
            "target_half_width": record["target"]}


def run_census(encoder: Encoder, classifier: Classifier, splits: list[GlueSplit], out: str | Path, limit: int | None,
               seed: int, batch_size: int = 16, progress: Callable | None = None, save_maps: bool = False,
               overwrite: bool = False, estimator: str | None = None, scope: str | None = None,
               overlap: bool = True, precision: Precision | str | None = None, chosen_by: str | None = None) -> dict:
    """Census of each split into ``out`` (census.json, census.csv, heads.csv, census.png, heads.png, thumbnails.npz).

    Windows already in ``out/.work`` (from an interrupted run, local or on Ray) are reused.

    Args:
        estimator: ``count``, ``probs`` or ``adjusted``; None: the one validated best with the classifier.
        chosen_by: the reason census.json records for the estimator (default: the one its choice gives).
        scope: which calibration rows (:data:`patterncnn.shares.calibrate.SCOPES`); None: the validated best.
        precision: stop each task once the examples' part of its interval meets this target
            (:class:`patterncnn.shares.precision.Precision`: ``"1"`` point, or ``"0.33x"`` of the classifier's part),
            checked after each window of examples taken in a seeded random order; None: every example.
    """
    # the arguments are checked before --overwrite drops anything: a refused run leaves a finished census as it was
    plan = plan_for(getattr(classifier, "metadata", {}), estimator, scope, encoder.tag, seed, chosen_by)
    precision = Precision.parse(precision) if isinstance(precision, (str, int, float)) else precision
    if precision is not None and precision.needs_classifier_part() and not has_classifier_part(plan.describe()):
        raise PrecisionError(f"--precision {precision} is relative to the classifier's part of the interval, which "
                             f"this census does not have (no calibration, no validated band); give it in points, "
                             f"e.g. --precision 1")
    out = prepare_out(out, RESULT, overwrite, COMMAND, [s.task.name for s in splits])
    clf_file = Path(classifier.path)
    result = {"created_by": f"patterncnn {__version__}", "encoder": public_fingerprint(encoder.fingerprint),
              "encoder_tag": encoder.tag, **({"encoder_weights": encoder.weights_note} if encoder.weights_note else {}),
              "backend": encoder.backend, "layers": encoder.num_layers, "heads": encoder.num_heads,
              "max_length": encoder.max_length,
              "device": {"encoder": encoder.device, "classifier": list(getattr(classifier, "providers", ["cpu"]))},
              "classifier": {"path": public_path(clf_file), "sha256": sha256_file(clf_file),
                             "version": classifier.model_version}, "limit": limit, "seed": seed,
              "precision": None if precision is None else {"target": str(precision), "rule": precision.describe(),
                                                           "order": "seeded random", "checked": "after each window "
                                                           f"of {WINDOW} examples, from {MIN_PRECISION_EXAMPLES} on"},
              "estimator": plan.describe(), "labels": list(LABELS), "tasks": {}}
    t0 = time.time()
    thumbs = {}
    for split in splits:
        single = not split.task.is_pair
        if precision is not None:
            split = shuffle(split, seed)
        params = task_params(encoder, split, limit, seed, result["classifier"]["sha256"], batch_size,
                             shuffled=precision is not None)
        ts = time.time()
        record: dict = {}
        stop = _stopper(plan, precision, single, seed, record) if precision is not None else None
        raw = classify_task(encoder, classifier, split, out, params, batch_size, progress, save_maps, overlap, stop)
        summary = summarize(raw["labels"], encoder.num_layers, encoder.num_heads)
        summary.update(plan.estimate(raw["probs"], raw["labels"], np.full(len(raw["labels"]), single), seed))
        summary.update({"source": public_source(split.source), "data": split.digest(), "split": split.split,
                        "of": split.total,
                        "skipped_rows": split.skipped, "truncated": raw["truncated"], "seconds": round(time.time() - ts, 1),
                        # what `seconds` timed: the rest were read back (an interrupted run's windows, or Ray's)
                        "examples_computed_here": raw["computed"],
                        "mean_probability": {name: float(v) for name, v in zip(LABELS, raw["probs"].mean((0, 1)))}})
        if precision is not None:
            summary["precision"] = _stop_record(precision, record, len(split.examples))
        few = few_examples_warning(split.task.name, summary["examples"], split.total)
        if few:  # census_text prints it under the table
            summary["warning"] = few
        result["tasks"][split.task.name] = summary
        thumbs[split.task.name] = raw["thumbnails"]
    result["seconds"] = round(time.time() - t0, 1)
    result["thumbnails"] = {"file": THUMBNAILS, "per_head_and_pattern": PER_HEAD}
    write_outputs(out, result, thumbs)
    finish(out)
    return result


def run_censuses(models: list[str], splits: list[GlueSplit], classifier: Classifier, out: str | Path,
                 limit: int | None, seed: int, max_length: int = 128, backend: str = "torch", threads: int = 2,
                 device: str = "cpu", finished: list[str] | None = None, **kwargs
                 ) -> Iterator[tuple[Encoder, Path, dict]]:
    """Census of each encoder in turn (one folder per encoder tag when there are several); two encoders whose
    default estimators differ both take ``count`` unless ``estimator`` is given (:func:`same_estimator`).

    Keyword arguments go to :func:`run_census`. Yields (encoder, its output folder, its result). ``finished``, for a
    census of several: each finished census is added to it (:func:`note_finished`) as soon as it is kept or written.

    Raises:
        RunError: a model is given twice (checked before any work), or two names load the same encoder.
    """
    with torch_threads(threads):  # --threads bounds torch too (the torch backend, the classifier's preprocessing)
        check_models(models)
        tags: dict[str, str] = {}
        encoders = []
        for model in models:
            enc = load_encoder(model, max_length=max_length, backend=backend, threads=threads, device=device)
            if enc.tag in tags:
                raise RunError(f"--model {tags[enc.tag]} and --model {model} are the same encoder ({enc.tag}), whose "
                               f"census is in {output_folder(out, enc, len(models))}; give each encoder once")
            tags[enc.tag] = model
            encoders.append(enc)
        kwargs.update(same_estimator(classifier, encoders, kwargs.get("estimator")))
        kept = kept_censuses(out, encoders, classifier, splits, limit, seed, finished=finished, **kwargs)
        for enc, earlier in zip(encoders, kept):
            dest = output_folder(out, enc, len(models))
            if earlier is not None:  # the same command, interrupted after this encoder's census: resumed past it
                yield enc, dest, earlier
                continue
            result = run_census(enc, classifier, splits, dest, limit, seed, **kwargs)
            note_finished(finished, enc, dest, len(models))
            yield enc, dest, result


def kept_censuses(out: str | Path, encoders: list, classifier: Classifier, splits: list[GlueSplit],
                  limit: int | None, seed: int, finished: list[str] | None = None, **kwargs) -> list[dict | None]:
    """Per encoder of a census of several, its finished census that a rerun of the same command keeps
    (:func:`finished_earlier`; added to ``finished``), else None; all None for one encoder, whose finished census is
    refused as before. The local and the Ray census both ask here, before any window runs."""
    if len(encoders) < 2:
        return [None] * len(encoders)
    kept = []
    for enc in encoders:
        dest = output_folder(out, enc, len(encoders))
        kept.append(finished_earlier(dest, enc, classifier, splits, limit, seed, **kwargs))
        if kept[-1] is not None:
            note_finished(finished, enc, dest, len(encoders))
    return kept


def note_finished(finished: list[str] | None, encoder: Encoder, dest: Path, encoders: int) -> None:
    """Add a finished census of a census of several encoders to ``finished``: what ``patterncnn census``, interrupted,
    names as kept when the same command runs again (:func:`patterncnn.cli.main`)."""
    if finished is not None and encoders > 1:
        finished.append(f"the finished census of {encoder.name} in {dest}")


def finished_earlier(dest: Path, encoder: Encoder, classifier: Classifier, splits: list[GlueSplit],
                     limit: int | None, seed: int, overwrite: bool = False, estimator: str | None = None,
                     save_maps: bool = False, precision: Precision | str | None = None, scope: str | None = None,
                     **_) -> dict | None:
    """The finished census in ``dest`` when it is what :func:`run_census` would make with these arguments (the same
    encoder weights, tokenizer and backend, GLUE files' content, classifier, tasks, limit, seed, truncation,
    estimator, calibration scope when one is given, and precision; every map saved if asked), which is then kept
    with a warning, else None: a census of several encoders stopped after the first resumes past it (locally and on
    Ray), where ``dest`` would be refused."""
    if overwrite or not (dest / FILE).is_file():
        return None
    try:
        done = load_result(dest)
    except CensusError:
        return None
    plan = plan_for(getattr(classifier, "metadata", {}), estimator, scope, encoder.tag, seed)
    planned, planned_scope = plan.estimator, plan.scope  # the scope too: one name, two calibrations (helper 105)
    weights = weights_id(encoder.fingerprint)
    same = (weights is not None and weights_id(done["encoder"]) == weights
            and done["encoder"].get("tokenizer") == encoder.fingerprint.get("tokenizer")
            and all((done["tasks"].get(s.task.name) or {}).get("data") == s.digest() for s in splits)
            and done.get("classifier", {}).get("sha256") == sha256_file(Path(classifier.path))
            and list(done["tasks"]) == [s.task.name for s in splits] and done.get("limit") == limit
            and done.get("seed") == seed and done.get("max_length") == encoder.max_length
            and done["estimator"].get("name") == planned and done.get("backend") == encoder.backend
            and (done["estimator"].get("calibration") or {}).get("scope") == planned_scope
            and (done.get("precision") or {}).get("target") == (None if precision is None else str(precision))
            and (not save_maps or maps_saved(dest, done, encoder)))
    if not same:
        return None
    log.warning("%s", args.spelled(f"kept the finished census of {encoder.name} in {dest} (made with these arguments); "
                                   f"--overwrite recomputes it"))
    return done


def maps_saved(dest: Path, done: dict, encoder: Encoder) -> bool:
    """Whether a finished census in ``dest`` saved the maps of all the examples it used (a census resumed without
    ``--save-maps`` leaves a partial store, which a folder's mere existence was taken for until 2026-11-29)."""
    n_maps = encoder.num_layers * encoder.num_heads
    try:
        return all(len(MapStore(dest / "maps" / task).meta) >= r["examples"] * n_maps
                   for task, r in done["tasks"].items())
    except (MapFormatError, KeyError, TypeError):
        return False


def same_estimator(classifier: Classifier, encoders: list[Encoder], estimator: str | None) -> dict:
    """Keyword arguments that give two encoders' censuses one estimator, so that their shares compare.

    Each encoder's default (:func:`patterncnn.shares.estimate.plan_for`) can differ: a validated encoder may take
    ``adjusted`` where a fine-tune without validated maps takes ``count``, and the difference of their shares then
    holds the estimators' difference (11 points on RTE's diagonal for MiniLM and its RTE fine-tune). When the
    defaults differ and no estimator is given, both take ``count``, which every encoder has, with its band. Three or
    more encoders (a grid, not compared) each keep their own default.
    """
    if estimator is not None or len(encoders) != 2:
        return {}
    metadata = getattr(classifier, "metadata", {})
    defaults = {enc.tag: default_estimator(metadata, enc.tag) for enc in encoders}
    if len(set(defaults.values())) == 1:
        return {}
    return {"estimator": "count", "chosen_by": "the compared encoders' defaults differ ("
            + ", ".join(f"{tag} {e}" for tag, e in defaults.items()) + "): count for both"}


def check_models(models: list[str]) -> None:
    """Refuse a model given twice before any work: both censuses would go to one folder (:func:`output_folder`)."""
    twice = next((m for i, m in enumerate(models) if m in models[:i]), None)
    if twice is not None:
        raise RunError(f"--model {twice} is given twice; give each encoder once (two different models are compared)")


def output_folder(out: str | Path, encoder: Encoder, models: int) -> Path:
    """Where an encoder's census goes: ``out`` itself, or ``out/<encoder tag>`` when several are run."""
    return Path(out) if models == 1 else Path(out) / encoder.tag


def write_outputs(out: Path, result: dict, thumbnails: dict[str, dict] | None = None) -> None:
    """census.csv (shares and intervals per task and pattern), heads.csv, census.png, heads.png, thumbnails.npz (the
    example maps per head and pattern), then census.json."""
    shares = [[task, name, result["estimator"]["name"], *(f"{x:.5f}" for x in (
        s["shares"][name], *s["ci95"][name], *s["ci95_parts"]["examples"][name], *s["ci95_parts"]["classifier"][name],
        s["shares_by_estimator"]["count"][name])), s["counts"][name], s["examples"], s["maps"],
        f"{s['clipped_at_zero'][name]:.5f}" if name in (s.get("clipped_at_zero") or {}) else ""]
        for task, s in result["tasks"].items() for name in LABELS]
    heads = [[task, layer, head, *(f"{cell['shares'][n]:.4f}" for n in LABELS), cell["majority"],
              "|".join(cell.get("tied", ())), *_majority_interval(cell)]
             for task, s in result["tasks"].items() for layer, row in enumerate(s["heads"]) for head, cell in enumerate(row)]
    write_result(out, RESULT, result, tables={
        "census.csv": (["task", "label", "estimator", "share", "ci95_low", "ci95_high", "ci95_examples_low",
                        "ci95_examples_high", "ci95_classifier_low", "ci95_classifier_high", "count_share", "count",
                        "examples", "maps", "before_clipping"], shares),
        "heads.csv": (["task", "layer", "head", *LABELS, "majority", "tied", "majority_low", "majority_high",
                       "clear"], heads)},
        figures={"census.png": census_figure(result), "heads.png": heads_figure(result)},
        files={THUMBNAILS: thumbnails_bytes(thumbnails)} if thumbnails is not None else None)


