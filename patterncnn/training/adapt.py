"""Adapt the classifier to an encoder it never saw: fine-tune it on the shipped set plus ~100 hand-labelled maps of
the new encoder, validated cross-fitted on those maps, so that its census gets a validated interval of its own.

Usage (what ``patterncnn adapt finish`` runs)::

    result = adapt("models/patterncnn.pt", None, "runs/adapt-x/labels", "runs/adapt-x/classifier")  # None: the
    # labelled sets it was trained on (the shipped one: annotations and annotations/round8-e5-uniform)
    result["new"]["accuracy"]          # out of fold, on the new encoder's maps; result["before"]: the shipped one's
    result["validation"]               # the new encoder's share errors and bands, merged with the shipped classifier's

The new maps must be drawn with ``patterncnn sample --design uniform`` (``patterncnn adapt start`` does), so that
their hand-labelled shares estimate the census's. Every fit starts from the classifier's weights and runs a fixed
number of epochs over the base set plus the new maps, the new maps repeated so that they make up a quarter of each
epoch. Cross-fitting: the new maps are split into folds grouped by input example; each fold is scored by a fit
that saw the other folds and the base set only, less the base maps of the fold's input examples (other encoders'
maps of the same sentence: the example is one group, as in train's CV and leave one encoder out), and those
out-of-fold scores validate the share estimators on the new encoder
(:func:`patterncnn.training.validate.validate_rows`) and join the calibration rows. The final classifier is one
more fit on everything. The base set's rows and validation are the classifier's own (from its
training, where no map scored itself), carried over unchanged.

A classifier of ``train --bias-correction`` carries a logit shift in its head (:func:`carried_shift`): every fit
starts from its weights with the shift taken out and gets it back (AdaptConfig.reapply_shift). ``epochs`` 0 keeps the
weights as they are: the classifier never saw the new maps, so its own scores of them are out of fold, and the
encoder gets its validated band without a fit.
"""

from __future__ import annotations

import dataclasses
import io
import json
import logging
import time
import warnings
from pathlib import Path

import numpy as np
import torch

from ..classifier.model import PatternCNN, config_from_dict, model_config_dict, read_checkpoint
from ..classifier.onnx import OnnxClassifier, export_onnx, parity_check
from ..core.errors import ClassifierError
from ..core.fileio import output_folder, public_path, sha256_file, staged_outputs, write_bytes, write_json
from ..core.labels import LABELS
from ..core.maps import families, tag_of
from ..core.scores import subset_scores
from ..core.segments import rule_out_block
from ..core.version import __version__
from ..core.work import progress_bar, run_key
from ..labelling.sets import Labelled, check_labelled_set, join_labelled, load_labelled
from ..shares.calibrate import Rows, calibration_record, map_rows, stored_rows
from .evaluate import shared_examples
from .fit import (
    TrainConfig,
    fit,
    predict_proba,
    recorded_shift,
    shift_head,
    shift_record,
    smallest_class,
    torch_threads,
)
from .validate import TRAINED_IDS, refuse_seen, seen_ids, validate_rows

log = logging.getLogger(__name__)

BLOCK = LABELS.index("block")
HELDOUT = "annotations/round5-heldout-uniform"  # a clone's held-out set of the shipped encoders: :func:`default_heldout`


@dataclasses.dataclass
class AdaptConfig:
    """How the classifier is fine-tuned on a new encoder's maps."""

    epochs: int = 20  # fixed: too few new maps to early-stop on. 0: keep the weights, only validate on the new maps
    # A third of training's rate from a random start: the weights start trained. The shipped classifier is now
    # fine-tuned from a pretrained CNN at 3e-4; 1e-4 instead was measured on a classifier of that recipe fitted
    # without MiniLM (3 fits per k, docs/pages/commands/adapt.md): a little higher macro-F1, a larger share error,
    # accuracy within the spread; not changed.
    lr: float = 1e-3
    new_share: float = 0.25  # the new maps' share of each epoch (repeated as needed)
    folds: int = 5  # cross-fitting folds over the new maps (fewer when the maps do not allow five)
    seed: int = 0
    # Keep the classifier's BatchNorm running statistics while fine-tuning (as `train --freeze-bn` does) instead of
    # re-estimating them on the adapting batches; the scales and shifts still learn. Off by default, also for a
    # classifier trained with --freeze-bn: with 100 labels of a held-out family it was 0.4 points of accuracy worse
    # on the mean of the three families (MiniLM +1.4, MPNet -0.8, E5 -2.0; docs/pages/commands/adapt.md).
    freeze_bn: bool = False
    # A classifier trained with `train --bias-correction` carries a logit shift in its head that undoes the tilt of
    # the class weights; fine-tuning with those weights brings the tilt back. Take the shift out of the head before
    # fine-tuning and put it back into every fit (the cross-fitted ones too). Chosen by a rule written before its fits
    # (research/generalisation/RULES.md): with 100 labels of a held-out family, docs/pages/commands/adapt.md.
    reapply_shift: bool = True


def _folds(data: Labelled, idx: np.ndarray, k: int, seed: int) -> list[np.ndarray]:
    """``idx`` split into ``k`` folds grouped by input example (stratified by label where the labels allow)."""
    from sklearn.model_selection import GroupKFold, StratifiedGroupKFold

    groups, y = data.groups[idx], data.y[idx]
    k = min(k, len(set(groups.tolist())))
    if k < 2:
        raise ClassifierError(f"the new labelled maps come from {k} input example(s); cross-fitting needs at least 2: "
                              f"label maps of more examples (`patterncnn adapt start --maps 100`)")
    name, g, has = smallest_class(y, groups)
    if g < k:  # scikit-learn would say so in a UserWarning of its own terms
        log.warning("the smallest class of the new maps, %s, has %s: fewer than the %d folds, so some folds score none "
                    "of it (they are stratified as far as the labels allow; every map is still scored by a fit that "
                    "never saw it); labelling more %s maps steadies the validation", name, has, k, name)
    largest = np.bincount(y).max()  # stratifying needs one class of k maps at least
    splitter = StratifiedGroupKFold(k, shuffle=True, random_state=seed) if largest >= k else GroupKFold(k)
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", "The least populated class", UserWarning)  # said above
        return [idx[te] for _, te in splitter.split(np.zeros(len(idx)), y, groups)]


def _train_index(base: np.ndarray, new: np.ndarray, share: float, rng: np.random.Generator) -> np.ndarray:
    """The base maps once and the new maps repeated (whole copies, then a random part) to ``share`` of the epoch."""
    if not len(new):
        return base
    want = share / (1 - share) * len(base)
    reps = max(1.0, want / len(new))
    whole = int(reps)
    extra = rng.choice(new, size=int(round((reps - whole) * len(new))), replace=False)
    return np.concatenate([base, np.tile(new, whole), extra])


def _fit(data: Labelled, train: np.ndarray, cfg, init: dict, acfg: AdaptConfig, seed: int,
         shift: np.ndarray | None = None):
    """A fine-tuning fit from ``init``; ``shift`` (the classifier's bias correction, taken out of ``init``) is put back
    into its head."""
    tcfg = TrainConfig(lr=acfg.lr, seed=seed, freeze_bn=acfg.freeze_bn)
    model = fit(data, train, None, cfg, tcfg, seed=seed, epochs=acfg.epochs, init=init)[0]
    if shift is not None:
        shift_head(model, shift)
    return model


def _own_metrics(metrics, ckpt: dict) -> bool:
    """Whether ``metrics`` (a ``metrics.json`` as read) is the one ``train`` wrote for the classifier ``ckpt``: the same
    labelled data and training config (another classifier's file copied beside it is not)."""
    if not isinstance(metrics, dict) or not isinstance(metrics.get("data"), dict) or ckpt.get("data_hash") is None:
        return False
    return (metrics["data"].get("data_hash") == ckpt["data_hash"]
            # the config as JSON holds it (tuples become lists)
            and metrics.get("train_config") == json.loads(json.dumps(ckpt.get("train_config"))))


def carried_shift(checkpoint: str | Path, ckpt: dict) -> np.ndarray | None:
    """The logit shift in the head of the classifier of ``checkpoint`` (loaded: ``ckpt``), None if it carries none.

    A classifier of ``train --bias-correction`` or of ``adapt`` records it in its ``.pt``; classifiers trained before
    the ``.pt`` recorded it (2026-11-26; the shipped ``9f40f2d2-r5d652c``) record it in the ``metrics.json`` beside
    it, taken only if that file names the same labelled data and training config.

    Raises:
        ClassifierError: it was trained with the correction and its record cannot be found; the message names the
            fixes (the classifier's own ``metrics.json``, or ``adapt finish --no-reapply-shift``)."""
    if "bias_correction" in ckpt:
        record = ckpt["bias_correction"]
    elif (ckpt.get("train_config") or {}).get("bias_correction"):
        try:
            metrics = json.loads(Path(checkpoint).with_name("metrics.json").read_text())
        except (OSError, ValueError) as e:
            raise ClassifierError(f"{checkpoint} was trained with --bias-correction, and its shift is recorded in the "
                                  f"metrics.json train wrote beside it, which cannot be read ({e}): put it back "
                                  f"beside the checkpoint, or fine-tune the head as it is (`adapt finish "
                                  f"--no-reapply-shift`)") from None
        if not _own_metrics(metrics, ckpt):
            raise ClassifierError(f"the metrics.json beside {checkpoint} is another classifier's (other labelled data "
                                  f"or training config), and it holds the classifier's bias shift: put the "
                                  f"metrics.json its `train` wrote beside it, or fine-tune the head as it is "
                                  f"(`adapt finish --no-reapply-shift`)")
        record = metrics.get("bias_correction")
    else:
        return None
    if not record:
        return None
    return recorded_shift(record)


def _without_shift(cfg, state: dict, shift: np.ndarray) -> dict:
    """``state`` with ``shift`` taken out of its head's bias."""
    model = PatternCNN(cfg)
    model.load_state_dict(state)
    shift_head(model, -shift)
    return model.state_dict()


def _scores(data: Labelled, idx: np.ndarray, pred: np.ndarray) -> dict:
    mask = np.zeros(len(data.y), dtype=bool)
    mask[idx] = True
    full = np.full(len(data.y), -1)
    full[idx] = pred
    four = subset_scores(data.y, full, mask & (data.y != BLOCK))
    return {"maps": int(len(idx)), "accuracy": float((data.y[idx] == pred).mean()),
            "four_class_macro_f1": None if four is None else four["macro_f1"]}


def default_heldout(checkpoint: str | Path) -> Path | None:
    """The held-out round 5 (240 uniformly drawn MiniLM and MPNet maps, never trained on) of the clone the checkpoint
    sits in (``models/`` beside ``annotations/``), or None when it is not there."""
    folder = Path(checkpoint).resolve().parent.parent / HELDOUT
    return folder if (folder / "labels.csv").is_file() else None


def heldout_check(heldout: str | Path, before, after, cfg, seen: set[str]) -> dict | None:
    """Per encoder family of the labelled set ``heldout``, the accuracy of the classifier ``before`` adapting and
    ``after`` (:func:`_scores`, the block rule applied). The other encoders keep the starting classifier's
    validation; this says whether adapting cost them labels it never measured. None, with a warning, when the set
    holds a map either classifier was fitted or calibrated on (``seen``): its scores would not be held out."""
    data = load_labelled(heldout)
    if shared := sorted(set(data.ids) & seen):
        log.warning("%s holds %d map(s) the classifier was fitted or calibrated on (e.g. %s): not scored as held out",
                    heldout, len(shared), shared[0])
        return None
    idx = np.arange(len(data.y))
    pred = {k: rule_out_block(predict_proba(m.eval(), data, idx, cfg).astype(np.float64), data.seps).argmax(1)
            for k, m in (("before", before), ("after", after))}
    fam = families(data.ids)
    return {"set": public_path(heldout), "families": {
        f: {k: _scores(data, idx[fam == f], pred[k][fam == f]) for k in pred} for f in sorted(set(fam.tolist()))}}


def merge_validation(base: dict | None, new: dict) -> dict:
    """The classifier's validation with the new encoder(s)' results added: per (estimator, scope), their per-encoder
    entries; their ``best_per_encoder``; everything of the base kept (the base encoders' figures are the base's)."""
    if not base:
        return new
    out = {**base, "results": [dict(r, encoders=dict(r["encoders"]), **({"cells": dict(r["cells"])} if isinstance(
               r.get("cells"), dict) else {})) for r in base["results"]],
           "best_per_encoder": dict(base.get("best_per_encoder") or {}), "adapted_to": sorted(new["encoders"])}
    for r in out["results"]:
        match = next((n for n in new["results"] if (n["estimator"], n["scope"]) == (r["estimator"], r["scope"])), None)
        if match:
            r["encoders"].update(match["encoders"])
            if isinstance(r.get("cells"), dict):  # an encoder's cells go with its figures: the base's were kept
                for enc in match["encoders"]:  # beside the new figures until 2026-11-29 (helper 97's walk)
                    r["cells"].pop(enc, None)
                    if enc in (match.get("cells") or {}):
                        r["cells"][enc] = match["cells"][enc]
            r["worst_encoder_mean_abs_error"] = max(e["mean_abs_error"] for e in r["encoders"].values())
    for enc in sorted(set(new.get("best_per_encoder") or {}) & set(base.get("best_per_encoder") or {})):
        before, now = _validated_maps(base, enc), _validated_maps(new, enc)
        if before and now and now < before:
            log.warning("%s was validated on %d hand-labelled maps; the adapted classifier's validation of it, which "
                        "the census will use, is on the %d new maps only, so its figures are less certain; label at "
                        "least as many for a validation as firm as before", enc, before, now)
    out["best_per_encoder"].update(new.get("best_per_encoder") or {})
    return out


def _validated_maps(validation: dict, encoder: str) -> int | None:
    """How many hand-labelled maps of ``encoder`` a validation scored (None when it does not say)."""
    return next((r["encoders"][encoder].get("maps") for r in validation.get("results", [])
                 if encoder in r["encoders"]), None)


def trained_on(checkpoint: str | Path, ckpt: dict | None = None) -> list[str] | None:
    """The labelled sets ``checkpoint`` was fitted on: for a classifier of ``train``, as the ``metrics.json`` beside it
    records them (paths relative to where train ran: a clone's root for the shipped classifier; a relative path that
    is not there but is beside the checkpoint's folder, as ``models/`` sits in a clone, is taken from there; a
    ``metrics.json`` of other labelled data or another training config is another classifier's, and not read); for
    an adapted classifier, its base sets and new set as its own record holds them. None without such a record, or
    when the checkpoint cannot be read (its record cannot then be told from another classifier's). ``ckpt``: the
    checkpoint as already loaded, to read it once."""
    checkpoint = Path(checkpoint)
    if ckpt is None:
        try:
            ckpt = read_checkpoint(checkpoint)
        except ClassifierError:
            return None
    try:
        metrics = json.loads(checkpoint.with_name("metrics.json").read_text())
        if not _own_metrics(metrics, ckpt):
            raise ValueError("another classifier's metrics.json")
        sets = metrics["data"]["annotations"]
    except (OSError, ValueError, KeyError, TypeError):
        try:
            done = ckpt["adapted"]
            sets = [*done["base_sets"], done["new_set"]]
        except (KeyError, TypeError):
            return None
    if isinstance(sets, str):  # one set is recorded as its path
        sets = [sets]
    if not isinstance(sets, list) or not sets or not all(isinstance(x, str) and x for x in sets):
        return None
    root = checkpoint.resolve().parent.parent
    return [x if Path(x).is_absolute() or Path(x).exists() or not (root / x).exists() else str(root / x) for x in sets]


@dataclasses.dataclass
class Start:
    """The classifier to adapt, read and checked (:func:`prepare`)."""

    ckpt: dict
    cfg: object  # its CNNConfig
    base_rows: Rows  # its calibration rows
    named: list[str] | None  # the labelled sets it records it was trained on (:func:`trained_on`)
    base_sets: list  # the sets to fine-tune on besides the new maps: those given, else ``named``
    out: Path


def prepare(checkpoint: str | Path, base_sets: list[str | Path] | None, out: str | Path, acfg: AdaptConfig,
            overwrite: bool = False) -> Start:
    """Check what :func:`adapt` is asked before any work (``adapt finish`` calls it before it pulls the labels): the
    config, the output folder, the checkpoint and the labelled sets it names.

    Raises:
        ClassifierError, OutputError: one line naming the fix.
    """
    if acfg.epochs < 0:
        raise ClassifierError(f"epochs {acfg.epochs}: give 0 (keep the weights, only validate) or more")
    if acfg.folds < 2:
        raise ClassifierError(f"folds {acfg.folds}: cross-fitting needs at least 2 (each fold scored by a fit on the "
                              f"others)")
    out = output_folder(out, ("patterncnn.onnx", "patterncnn.pt", "adapt.json"), overwrite, option="",
                        instead="move it away to keep it")
    ckpt = read_checkpoint(checkpoint)
    cfg = config_from_dict(ckpt["model_config"])
    if cfg.members != 1:
        raise ClassifierError(f"{checkpoint} is an ensemble of {cfg.members} CNNs; adapt a single CNN "
                              f"(models/patterncnn.pt)")
    base_rows: Rows | None = stored_rows(ckpt)
    if base_rows is None:
        raise ClassifierError(f"{checkpoint} stores no calibration rows; retrain it with `patterncnn train`")
    named = trained_on(checkpoint, ckpt)
    if base_sets is None:
        base_sets = named
        if base_sets is None:
            raise ClassifierError(f"{checkpoint} has no record of the labelled sets it was trained on (a metrics.json "
                                  f"beside it, or an adapted classifier's own record); name them with --annotations "
                                  f"(the shipped classifier's: annotations and annotations/round8-e5-uniform, in a "
                                  f"clone)")
    for folder in base_sets:
        check_labelled_set(folder)
    return Start(ckpt, cfg, base_rows, named, base_sets, out)


def adapt(checkpoint: str | Path, base_sets: list[str | Path] | None, new_set: str | Path, out: str | Path,
          acfg: AdaptConfig | None = None, progress=None, overwrite: bool = False,
          heldout: str | Path | None = None) -> dict:
    """Fine-tune the classifier of ``checkpoint`` on ``base_sets`` plus ``new_set``; write it into ``out``.

    ``base_sets`` None: the sets it was trained on (:func:`trained_on`). Sets that are not the ones it was trained
    on (another data hash) are used, with a warning: its stored calibration rows are of its own training maps.

    ``heldout``: a labelled set of other encoders that neither classifier saw (the shipped round 5:
    :func:`default_heldout`); both classifiers are scored on it per family (``result["heldout"]``), since the other
    encoders keep the starting classifier's validation (:func:`heldout_check`).

    Writes ``patterncnn.pt``, ``patterncnn.onnx`` (its metadata: the calibration rows of the base and the new maps,
    the merged validation, the ids of the maps it was fitted on besides those rows, which
    :func:`patterncnn.training.validate.seen_ids` reads) and ``adapt.json`` (what is returned) into ``out``, each
    atomically; an adapted classifier already there needs ``overwrite`` (:func:`patterncnn.core.fileio.output_folder`).

    Returns:
        {"new": out-of-fold scores on the new maps, "before": the starting classifier's on them, "encoders",
        "validation", "folds", ...}.
    """
    acfg = acfg or AdaptConfig()
    t0 = time.time()
    start = prepare(checkpoint, base_sets, out, acfg, overwrite)
    ckpt, cfg, base_rows, named, base_sets, out = (start.ckpt, start.cfg, start.base_rows, start.named,
                                                   start.base_sets, start.out)
    new = load_labelled(new_set)
    # maps it was trained or calibrated on would be scored in sample, yet called out of fold, and set its band
    seen = seen_ids(ckpt)
    refuse_seen(seen, new.ids, "adapt it on maps it never saw (`patterncnn adapt start` with another --seed draws "
                               "others); its validation already covers its own maps")
    base = load_labelled(base_sets)
    if ckpt.get("data_hash") and base.data_hash != ckpt["data_hash"] and "adapted" not in ckpt:
        same = named is not None and [str(x) for x in base_sets] == named
        log.warning("%s was trained on labelled data %s; %s hold%s other data (%s)%s. Adapting fine-tunes on the sets "
                    "given: maps it was trained on that they lack are not rehearsed, and its stored calibration rows "
                    "still describe its own training maps", checkpoint, ckpt["data_hash"][:8],
                    " + ".join(map(str, base_sets)), "s" if len(base_sets) == 1 else "", base.data_hash[:8],
                    ": they changed since it was trained" if same else
                    f"; it was trained on {' + '.join(named)}" if named else "")
    if not any(m.get("sampling") == "uniform" for m in new.meta):
        raise ClassifierError(f"no map of {new_set} was drawn uniformly at random, so its shares cannot validate the "
                              f"census; sample with `patterncnn adapt start` (or `sample --design uniform`)")
    data = join_labelled([base, new], [str(base_sets), str(new_set)])
    new_idx = np.arange(len(base.y), len(data.y))
    base_idx = np.arange(len(base.y))
    rng = np.random.default_rng(acfg.seed)
    shift = carried_shift(checkpoint, ckpt) if acfg.reapply_shift and acfg.epochs else None  # out, then back in
    start = ckpt["state_dict"] if shift is None else _without_shift(cfg, ckpt["state_dict"], shift)
    with torch_threads(2):
        before = PatternCNN(cfg)  # the classifier as it is, to score the new maps before adapting
        before.load_state_dict(ckpt["state_dict"])
        probs_before = predict_proba(before.eval(), data, new_idx, cfg)
        oof = np.zeros((len(new_idx), len(LABELS)))
        fold_of = np.full(len(new_idx), -1)
        dropped = []  # per fold: the base maps its fit leaves out, as sharing an input example with the fold
        parts = _folds(data, new_idx, acfg.folds, acfg.seed)
        with progress_bar(progress if acfg.epochs else None, len(parts) + 1, "adapt", "fit") as bar:
            for k, test in enumerate(parts):
                at = np.searchsorted(new_idx, test)
                if acfg.epochs:
                    train_new = np.setdiff1d(new_idx, test)
                    scored = np.zeros(len(data.y), dtype=bool)
                    scored[test] = True
                    shared = shared_examples(data.groups, scored)[base_idx]  # other encoders' maps of its inputs
                    dropped.append(int(shared.sum()))
                    model = _fit(data, _train_index(base_idx[~shared], train_new, acfg.new_share, rng), cfg, start,
                                 acfg, acfg.seed + k, shift)
                    oof[at] = predict_proba(model, data, test, cfg)
                else:  # the classifier as it is never saw the new maps: its own scores are out of fold
                    oof[at] = probs_before[at]
                fold_of[at] = k
                if bar:
                    bar.update(1)
            final = before if not acfg.epochs else _fit(data, _train_index(base_idx, new_idx, acfg.new_share, rng), cfg,
                                                         start, acfg, acfg.seed + len(parts), shift)
            if bar:
                bar.update(1)
        check = None if heldout is None else heldout_check(heldout, before, final, cfg, seen | set(data.ids))
    kept = shift  # the shift in the adapted head, if known
    if not acfg.epochs:  # the head is the classifier's: so is its shift, if its record can be found
        try:
            kept = carried_shift(checkpoint, ckpt)
        except ClassifierError as e:
            log.warning("the adapted classifier keeps the weights and so the bias shift of %s, but records none: %s",
                        checkpoint, e)
    seps = [data.seps[i] for i in new_idx]
    oof = rule_out_block(oof, seps)
    new_rows = map_rows([data.ids[i] for i in new_idx], data.y[new_idx], oof, fold_of,
                        [data.meta[i] for i in new_idx], seps)
    new_validation = validate_rows(new_rows, acfg.seed)
    validation = merge_validation(ckpt.get("validation"), new_validation)
    rows = Rows(*(np.concatenate([getattr(base_rows, f), getattr(new_rows, f)]) for f in
                  ("ids", "y", "probs", "fold", "encoder", "task", "group", "uniform", "single")))
    calibration = calibration_record(rows)
    # the maps its weights were fitted on that its rows lack (the extra base sets'), which validate --annotations
    # must refuse too; with no epochs the weights, and so what they saw, are the classifier's
    also = sorted(((seen | {str(i) for i in data.ids}) if acfg.epochs else seen) - set(rows.ids.tolist()))
    out.mkdir(parents=True, exist_ok=True)
    encoders = sorted({tag_of(data.ids[i]) for i in new_idx})
    started = sha256_file(checkpoint)  # the classifier it started from, by content
    result = {
        "created_by": f"patterncnn {__version__}",
        "adapted_from": {"checkpoint": public_path(checkpoint), "sha256": started,
                         "data_hash": ckpt.get("data_hash")},
        "base_sets": [str(s) for s in base_sets], "new_set": str(new_set), "encoders": encoders,
        "families": sorted(set(families([data.ids[i] for i in new_idx]).tolist())), "config": dataclasses.asdict(acfg),
        "folds": len(parts), "dropped_shared_examples": dropped, "new": _scores(data, new_idx, oof.argmax(1)),
        # the shift in the adapted classifier's head; None: none, or (--no-reapply-shift) fine-tuned into it
        "bias_shift": None if kept is None else dict(zip(LABELS, kept.tolist())),
        "before": _scores(data, new_idx, rule_out_block(probs_before.astype(np.float64), seps).argmax(1)),
        "validation_on_new": {e: new_validation["best_per_encoder"][e] for e in encoders
                              if e in new_validation["best_per_encoder"]},
        # part of the adapted classifier's version: the classifier it started from (by content) and how it was
        # adapted, so adaptations of two classifiers of the same maps on the same new set do not share a version
        "recipe": run_key({"from": started, "adapt": dataclasses.asdict(acfg)})[:12],
        **({"heldout": check} if check else {}), "seconds": None}
    buf = io.BytesIO()
    torch.save({"state_dict": final.state_dict(), "model_config": model_config_dict(cfg), "labels": list(LABELS),
                "data_hash": data.data_hash, "patterncnn_version": __version__, "calibration": calibration,
                "validation": validation, "adapted": result, TRAINED_IDS: also,
                **({"bias_correction": shift_record(kept, "the classifier it was adapted from")}
                   if kept is not None else {})}, buf)
    with staged_outputs(out, ("patterncnn.pt", "patterncnn.onnx", "adapt.json")) as stage:
        write_bytes(stage / "patterncnn.pt", buf.getvalue())
        export_onnx(final, stage / "patterncnn.onnx", {"data_hash": data.data_hash,
                                                        "trained_on": len(data.y) if acfg.epochs else len(base.y),
                                                        "calibration": calibration, "validation": validation,
                                                        "adapted_to": encoders, "recipe": result["recipe"],
                                                        TRAINED_IDS: also})
        result["onnx_parity_max_abs_diff"] = parity_check(final, stage / "patterncnn.onnx",
                                                          [data.maps[i] for i in new_idx], seps)
        result["classifier_version"] = OnnxClassifier(stage / "patterncnn.onnx").model_version
        result["seconds"] = round(time.time() - t0, 1)
        write_json(stage / "adapt.json", {**result, "validation": validation})
    return {**result, "validation": validation}
