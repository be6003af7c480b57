"""``patterncnn train``: cross-validate, evaluate, calibrate and validate, fit on all maps, export, write the card.

Usage::

    metrics = train_and_export("annotations", "models", CNNConfig(), TrainConfig())   # what `patterncnn train` runs
    print(summary(metrics))                                                             # what it prints

The fitting machinery (folds, early-stopped fits, out-of-fold predictions) is :mod:`patterncnn.training.fit`;
the per-encoder reports (per encoder family and on agreed maps, soft vs hard labels, leave one encoder out,
the baselines) are :mod:`patterncnn.training.evaluate`'s. The out-of-fold predictions also calibrate the
census's share estimators (:mod:`patterncnn.shares.calibrate`) and, when the labelled set holds maps drawn
uniformly at random, validate them (:mod:`patterncnn.training.validate`); both are stored with the model.

Resumable: every finished cross-validation fold, leave-one-encoder-out fit and the final fit is kept in
``out/.work/train`` (:class:`patterncnn.training.fit.Work`) until the model is written; the same command
run again after an interruption reads them back and gives the same model, bit for bit.
"""

from __future__ import annotations

import dataclasses
import io
import logging
import platform
import time
from collections import Counter
from pathlib import Path

import numpy as np
import torch

from ..classifier.model import CNNConfig, count_conv_layers, model_config_dict
from ..classifier.onnx import export_onnx, parity_check
from ..core.fileio import output_folder, public_path, sha256_file, staged_outputs, write_bytes, write_json, write_text
from ..core.labels import LABELS
from ..core.maps import families
from ..core.version import __version__
from ..core.work import run_key
from ..labelling.sets import Labelled, load_labelled, tie_fix
from ..shares.calibrate import calibration_record, oof_rows
from ..shares.estimate import best_result
from .evaluate import CNN, EvalConfig, evaluate, load_votes, loeo_plan
from .fit import (
    OutOfFold,
    TrainConfig,
    TrainError,
    Work,
    cross_validate,
    cv_report,
    fit_final,
    load_init,
    out_of_fold,
    shift_record,
    throughput,
    torch_threads,
)
from .modelcard import model_card
from .pretrain import init_record
from .validate import validate_rows

log = logging.getLogger(__name__)

# Representations cross-validated by ``train --compare``: (representation, grid).
COMPARE = [("area", 16), ("bilinear", 16), ("area", 32), ("bilinear", 32), ("area", 64)]


def calibrate_and_validate(data: Labelled, oof: OutOfFold, seed: int) -> tuple[dict, dict | None]:
    """The calibration stored with the model, and the cross-validated validation of the share estimators.

    The validation needs maps drawn uniformly at random in the labelled set; without them it is None.
    """
    rows = oof_rows(data, oof.probs, oof.fold)
    validation = validate_rows(rows, seed) if rows.uniform.any() else None
    if validation is None:
        log.info("no uniformly drawn maps in the labelled set: the share estimators are not validated")
    return calibration_record(rows), validation


RESULTS = ("patterncnn.onnx", "patterncnn.pt", "metrics.json", "README.md")  # README.md: the model card


def recipe_hash(cfg: CNNConfig, tcfg: TrainConfig) -> str:
    """A short hash of how a classifier was trained: the CNN's config and the training config, the --init weights by
    content (two classifiers of the same maps by another recipe get other versions)."""
    t = {**dataclasses.asdict(tcfg), "init": sha256_file(tcfg.init) if tcfg.init else None}
    return run_key({"model_config": model_config_dict(cfg), "train_config": t})[:12]


def train_and_export(annotations: str | Path | list, out: str | Path, cfg: CNNConfig, tcfg: TrainConfig,
                     compare: bool = False, progress=None, ecfg: EvalConfig | None = None,
                     overwrite: bool = False) -> dict:
    """``patterncnn train``: cross-validate, compare, score the baselines, fit on all maps, export, write the card.

    Writes ``patterncnn.pt``, ``patterncnn.onnx``, ``metrics.json`` and ``README.md`` (the model card) into
    ``out``, each atomically; ``ecfg`` chooses the per-encoder reports (:mod:`patterncnn.training.evaluate`). A
    classifier already in ``out`` needs ``overwrite`` (:func:`patterncnn.core.fileio.output_folder`). Returns the
    metrics. Finished folds and fits are kept in ``out/.work/train`` until then (resumable, see the module docstring).
    """
    out = output_folder(out, RESULTS, overwrite)
    if tcfg.freeze_bn and not tcfg.init:
        raise TrainError("--freeze-bn keeps the BatchNorm statistics of the CNN every fit starts from: give --init a "
                         "pretrained CNN (`patterncnn pretrain`), or drop --freeze-bn")
    if tcfg.bias_correction and cfg.members > 1:
        raise TrainError("--bias-correction shifts one CNN's logits; an ensemble averages probabilities, which a "
                         "shift per member does not correct alike: drop --members, or --bias-correction")
    if tcfg.init:
        load_init(tcfg.init, cfg)  # a wrong --init is refused now, not after the folds
        if compare:
            raise TrainError("--compare cross-validates other CNN configs, which one --init checkpoint (pretrained "
                             "for one config) cannot start: drop --compare, or --init")
    with torch_threads(2):  # the thread count the shipped figures were measured with; restored after
        t0 = time.time()
        data = load_labelled(annotations)
        counts = np.bincount(data.y, minlength=len(LABELS))
        log.info("%d labelled maps: %s", len(data.y), dict(zip(LABELS, counts.tolist())))
        if missing := [name for name, n in zip(LABELS, counts) if n == 0]:
            log.warning("no map labelled %s: the classifier never learns %s, so a census with it never counts %s, "
                        "and macro-F1 averages a 0 for %s; label maps of %s (`patterncnn sample`, `annotate`) and "
                        "train again", " or ".join(missing), "them" if len(missing) > 1 else "it",
                        "them" if len(missing) > 1 else "it", "each" if len(missing) > 1 else "it",
                        "each" if len(missing) > 1 else "it")
        votes = load_votes(annotations, data.ids, data.y)  # a damaged votes.csv is refused now, not after the folds
        if data.unresolved:
            sets = annotations if isinstance(annotations, (str, Path)) else ", ".join(map(str, annotations))
            log.warning("left out %d map(s) whose annotators tied, unresolved in the labels.csv of %s (e.g. %s): %s",
                        len(data.unresolved), sets, data.unresolved[0], tie_fix())
        ecfg = ecfg or EvalConfig()
        # decided from the labels, before the first fit: a direction it cannot fit is said now, not after the CV
        loeo = loeo_plan(data, families(data.ids), ecfg.leave_one_encoder_out)
        out = Path(out)
        work = Work(out / ".work" / "train")
        oof = out_of_fold(data, cfg, tcfg, progress, work=work)  # corrected with --bias-correction, as the classifier
        shift = oof.shift  # will be: every report below scores those posteriors
        cv = cv_report(data, oof)
        calibration, validation = calibrate_and_validate(data, oof, tcfg.seed)
        comparison = {}

        def entry(c: CNNConfig, r: dict) -> dict:
            return {"macro_f1": r["macro_f1"], "fold_macro_f1_mean": r["fold_macro_f1_mean"],
                    "fold_macro_f1_std": r["fold_macro_f1_std"], "weighted_f1": r["weighted_f1"],
                    "torch_maps_per_s_T64_b512": round(throughput(c)), "cv_seconds": r["seconds"]}

        if compare:
            for rep, grid in COMPARE:
                c = dataclasses.replace(cfg, representation=rep, grid=grid)
                comparison[f"{rep}-{grid}"] = entry(c, cv if c == cfg else cross_validate(data, c, tcfg, progress,
                                                                                          work))
            for field in ("mass_channel", "segment_channel", "structure_channels"):
                c = dataclasses.replace(cfg, **{field: not getattr(cfg, field)})
                name = f"{cfg.representation}-{cfg.grid} {'without' if getattr(cfg, field) else 'with'} {field}"
                comparison[name] = entry(c, cross_validate(data, c, tcfg, progress, work))
        evaluation = evaluate(data, annotations, oof, cfg, tcfg, ecfg, progress, work, loeo, votes)
        base = evaluation.pop("baselines")
        unseen = evaluation["leave_one_encoder_out"].get("unseen_family")
        if validation is not None and unseen:  # the band a census uses on a family never validated
            validation["unseen_family"] = unseen
        model = fit_final(data, cfg, tcfg, cv["median_best_epoch"], progress, work, shift=shift)
        out.mkdir(parents=True, exist_ok=True)
        best_base = max((v["macro_f1"], k) for k, v in base.items())
        metrics = {
            "created_by": f"patterncnn {__version__}", "data": {
                "annotations": str(annotations) if isinstance(annotations, (str, Path)) else [str(a) for a in annotations],
                "maps": len(data.y), "data_hash": data.data_hash,
                "labels": dict(zip(LABELS, counts.tolist())), "uncertain": int(data.uncertain.sum()),
                "guides": dict(sorted(Counter(data.guides).items())),  # the guide version(s) behind the labels
                "groups": int(len(set(data.groups))),
                **({"left_out_unresolved_ties": len(data.unresolved)} if data.unresolved else {})},
            "model_config": model_config_dict(cfg),
            "train_config": {**dataclasses.asdict(tcfg), "init": public_path(tcfg.init)},
            "recipe": recipe_hash(cfg, tcfg),  # part of the classifier's version: data, then recipe
            "conv_layers": count_conv_layers(model), "parameters": int(sum(p.numel() for p in model.parameters())),
            "cv": cv, "baselines": base, "representation_comparison": comparison,
            "cnn_beats_best_baseline": bool(cv["macro_f1"] > best_base[0]), "best_baseline": best_base[1],
            "final_fit_epochs": cv["median_best_epoch"], "calibration": calibration, "validation": validation,
            "bias_correction": None if shift is None else shift_record(
                shift, f"{len(data.y)} out-of-fold posteriors (segment rule applied)"),
            "evaluation": evaluation,
            "init": init_record(tcfg.init) if tcfg.init else None,  # pretrained weights every fit started from
            "platform": platform.platform(),
            "torch": torch.__version__, "seconds": None,
        }
        buf = io.BytesIO()
        torch.save({"state_dict": model.state_dict(), "model_config": model_config_dict(cfg), "labels": list(LABELS),
                    "train_config": {**dataclasses.asdict(tcfg), "init": public_path(tcfg.init)},
                    "metrics": {"cv_macro_f1": cv["macro_f1"]},
                    "data_hash": data.data_hash, "patterncnn_version": __version__, "calibration": calibration,
                    "validation": validation, "bias_correction": metrics["bias_correction"]}, buf)
        with staged_outputs(out, RESULTS[:2] + ("README.md", "metrics.json")) as stage:
            write_bytes(stage / "patterncnn.pt", buf.getvalue())
            export_onnx(model, stage / "patterncnn.onnx", {"data_hash": data.data_hash, "cv_macro_f1": cv["macro_f1"],
                                                            "trained_on": len(data.y), "calibration": calibration,
                                                            "validation": validation, "recipe": metrics["recipe"]})
            metrics["onnx_parity_max_abs_diff"] = parity_check(model, stage / "patterncnn.onnx", data.maps, data.seps)
            metrics["seconds"] = round(time.time() - t0, 1)
            write_json(stage / "metrics.json", metrics)
            write_text(stage / "README.md", model_card(metrics))
        work.clear()
        if (out / ".work").is_dir() and not any((out / ".work").iterdir()):
            (out / ".work").rmdir()
        return metrics

def summary(m: dict) -> str:
    """What ``patterncnn train`` prints: the CV, the baselines, the per-encoder reports and the estimators."""
    cv = m["cv"]
    lines = [f"{m['data']['maps']} maps, {m['train_config']['folds']}-fold grouped CV: macro-F1 {cv['macro_f1']:.3f} "
             f"(folds {cv['fold_macro_f1_mean']:.3f} ± {cv['fold_macro_f1_std']:.3f}), weighted-F1 "
             f"{cv['weighted_f1']:.3f}"]
    if m["data"].get("left_out_unresolved_ties"):
        lines.append(f"left out {m['data']['left_out_unresolved_ties']} map(s) whose annotators tied (unresolved in "
                     f"labels.csv): {tie_fix()}")
    lines += [f"  baseline {name}: macro-F1 {b['macro_f1']:.3f}" for name, b in m["baselines"].items()]
    lines.append(("CNN beats" if m["cnn_beats_best_baseline"] else "CNN does NOT beat") + f" the best baseline "
                 f"({m['best_baseline']}); ONNX parity max |dp| {m['onnx_parity_max_abs_diff']:.1e}")
    lines.append(evaluation_summary(m["evaluation"]))
    lines.append(estimator_summary(m["calibration"], m["validation"]))
    return "\n".join(lines)


def evaluation_summary(e: dict) -> str:
    """Per encoder family, agreed maps, CNN vs baselines, soft vs hard labels, leave one encoder out: a few lines."""
    lines = [f"annotator votes: {e['votes']['maps_with_several_votes']} maps with two or more, "
             f"{e['votes']['agreed_maps']} where two annotators agree"]
    for fam, r in e["per_encoder"].items():
        cnn, best = r["methods"][CNN], r["best_baseline"]
        agreed = f"{cnn['agreed']['macro_f1']:.3f} on {r['agreed_maps']} agreed" if cnn["agreed"] else "no agreed maps"
        lines.append(f"  {fam}: CNN macro-F1 {cnn['all']['macro_f1']:.3f} on {r['maps']} maps, {agreed}; best baseline "
                     f"{best} {r['methods'][best]['all']['macro_f1']:.3f}: CNN "
                     f"{'beats it' if r['cnn_beats_best_baseline'] else 'does NOT beat it'}")
    s = e["soft_labels"]
    lines.append(f"soft vs hard labels: macro-F1 {s['soft']['all']['macro_f1']:.3f} vs "
                 f"{s['hard']['all']['macro_f1']:.3f}"
                 if s["run"] else f"soft labels not trained: {s['reason']}")
    lo = e["leave_one_encoder_out"]
    for p in lo["pairs"]:
        f1, acc = p["cnn_over_seeds"]["macro_f1"], p["cnn_over_seeds"]["accuracy"]
        spread = (f" +- {f1['sd']:.3f} ({f1['min']:.3f}-{f1['max']:.3f} over {f1['n']} seeds)" if f1["n"] > 1
                  else " (one seed: no spread measured)")
        lines.append(f"leave one encoder out, train {p['train']} -> test {p['test']}: macro-F1 {f1['mean']:.3f}"
                     f"{spread}, accuracy {acc['mean']:.3f} ({p['methods'][CNN]['all']['maps']} maps)")
    if not lo["run"]:
        lines.append(f"leave one encoder out not run: {lo['reason']}")
    else:
        lines += [f"leave one encoder out, train {s['train']} -> test {s['test']}: skipped, {s['reason']}"
                  for s in lo.get("skipped", [])]
    return "\n".join(lines)


def estimator_summary(c: dict, v: dict | None) -> str:
    """The calibration and the validated default estimator (overall and per encoder)."""
    lines = [f"calibration for the census: {len(c['rows']['ids'])} out-of-fold rows ({c['uniform_rows']} drawn "
             f"uniformly), temperature {c['temperature']:.2f}"]
    if not v:
        return "\n".join(lines + ["share estimators not validated: the labelled set has no maps drawn with "
                                   "`sample --design uniform`"])
    b = best_result(v["results"])
    lines.append(f"share estimators validated on {v['maps']} uniformly drawn maps: default {b['estimator']}"
                 f"{'/' + b['scope'] if b['scope'] else ''}, worst encoder "
                 f"{100 * b['worst_encoder_mean_abs_error']:.1f} "
                 f"points per pattern, intervals hold the hand share in {100 * b['coverage']:.0f}% of cells")
    for enc, d in v.get("best_per_encoder", {}).items():
        lines.append(f"  census default for {enc}: {d['estimator']}{'/' + d['scope'] if d['scope'] else ''} "
                     f"({100 * d['mean_abs_error']:.1f} points per pattern, {100 * d['coverage']:.0f}% covered)")
    return "\n".join(lines)
