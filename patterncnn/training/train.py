"""Train the CNN on a labelled set: grouped, stratified 5-fold CV with baselines, then a final fit.

Usage::

    metrics = train_and_export("annotations", "models", CNNConfig(), TrainConfig())   # what `patterncnn train` runs
    data = load_labelled("annotations")
    report = cross_validate(data, CNNConfig(), TrainConfig())       # honest, out-of-fold metrics
    oof = out_of_fold(data, CNNConfig(), TrainConfig())              # the predictions behind it, with folds
    model = fit_final(data, CNNConfig(), TrainConfig(), epochs=report["median_best_epoch"])

Honesty rules: folds are grouped by input example (the maps of one sentence or pair never sit on
both sides of a split) and stratified by label; early stopping watches a validation split carved
out of the *training* part of each fold, never the test fold; the feature baselines are scored on
the very same folds; the final model is trained on all data for the median early-stopped epoch
count. Augmentation only preserves labels: resampling the map to another length T (nearest) and a
gamma jitter of the intensities; no transposes or flips (a transpose turns vertical into
horizontal). The out-of-fold predictions also calibrate the census's share estimators
(:mod:`patterncnn.shares.calibrate`) and, when the labelled set holds maps drawn uniformly at random,
validate them (:mod:`patterncnn.training.validate`); both are stored with the model. The per-encoder reports
(per encoder family and on agreed maps, soft vs hard labels, leave one encoder out, the baselines) are
:mod:`patterncnn.training.evaluate`'s.
"""

from __future__ import annotations

import copy
import dataclasses
import io
import logging
import platform
import time
from pathlib import Path
from typing import Callable

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

from .. import __version__
from .evaluate import EvalConfig, baselines  # noqa: F401 - baselines: train's public API, kept where it was
from ..core.fileio import write_bytes, write_json, write_text
from ..classifier.onnx import export_onnx, parity_check
from ..labelling.sets import Labelled, load_labelled
from ..core.labels import LABELS
from ..classifier.model import (MEMBER_SEED_STEP, CNNConfig, PatternCNN, build_model, count_conv_layers, member_config,
                    model_config_dict, preprocess)

log = logging.getLogger(__name__)

# Representations cross-validated by ``train --compare``: (representation, grid).
COMPARE = [("area", 16), ("bilinear", 16), ("area", 32), ("bilinear", 32), ("area", 64)]


@dataclasses.dataclass
class TrainConfig:
    folds: int = 5
    seed: int = 0
    max_epochs: int = 80
    patience: int = 15
    batch_size: int = 16
    lr: float = 3e-3
    weight_decay: float = 1e-4
    resample_p: float = 0.5  # probability of resampling T in augmentation
    resample_range: tuple[float, float] = (0.7, 1.4)
    gamma_range: tuple[float, float] = (0.8, 1.25)
    label_smoothing: float = 0.05
    # Class weights (n / (K * count)) ** power: 1 balances the classes fully, 0 not at all. With a class of a
    # handful of maps (block: 6 of 1,075) full balancing weighs each of its maps ~85x a vertical one, and the
    # model then calls vertical maps block; the square root keeps the rare classes heard without that.
    class_weight_power: float = 0.5


def model_inputs(maps, seps, idx, cfg: CNNConfig, rng: np.random.Generator | None = None,
                 tcfg: TrainConfig | None = None) -> torch.Tensor:
    """Preprocess maps ``idx`` one by one (their T differ); with ``rng``, augment."""
    out = []
    for i in idx:
        t = maps[i].shape[0]
        resample = None
        if rng is not None and rng.random() < tcfg.resample_p:
            resample = max(4, int(round(t * rng.uniform(*tcfg.resample_range))))
        x = preprocess(torch.from_numpy(maps[i])[None], [seps[i]], cfg, resample_to=resample)
        if rng is not None:
            x[:, 0] = x[:, 0] ** float(rng.uniform(*tcfg.gamma_range))
        out.append(x)
    return torch.cat(out)


def macro_f1(y_true, y_pred) -> float:
    from sklearn.metrics import f1_score

    return float(f1_score(y_true, y_pred, average="macro", labels=range(len(LABELS)), zero_division=0))


def fit(data: Labelled, train_idx, val_idx, cfg: CNNConfig, tcfg: TrainConfig, seed: int,
        epochs: int | None = None, tick: Callable | None = None, targets: np.ndarray | None = None
        ) -> tuple[PatternCNN, int, list]:
    """Train one model. With ``val_idx``, early-stop on its macro-F1; else run ``epochs`` epochs.

    ``targets`` (N, 5), e.g. annotator vote shares, replace the hard labels as cross-entropy targets
    (class weights and early stopping still use the hard labels).

    Returns:
        (model with the best weights, best epoch (1-based), per-epoch history).
    """
    torch.manual_seed(seed)
    rng = np.random.default_rng(seed)
    model = PatternCNN(member_config(cfg))  # one CNN, also when it is a member of an ensemble
    opt = torch.optim.AdamW(model.parameters(), lr=tcfg.lr, weight_decay=tcfg.weight_decay)
    n_epochs = epochs or tcfg.max_epochs
    sched = torch.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=n_epochs)
    y = torch.as_tensor(data.y if targets is None else np.asarray(targets, dtype=np.float32))
    counts = np.bincount(data.y[train_idx], minlength=len(LABELS)).astype(np.float64)
    weights = torch.tensor((len(train_idx) / (len(LABELS) * np.maximum(counts, 1))) ** tcfg.class_weight_power,
                           dtype=torch.float32)
    x_val = model_inputs(data.maps, data.seps, val_idx, cfg) if val_idx is not None and len(val_idx) else None
    best = (-1.0, 0, None)
    history, stale = [], 0
    for epoch in range(1, n_epochs + 1):
        model.train()
        order = rng.permutation(train_idx)
        x_all = model_inputs(data.maps, data.seps, order, cfg, rng, tcfg)
        total = 0.0
        for s in range(0, len(order), tcfg.batch_size):
            xb, yb = x_all[s : s + tcfg.batch_size], y[order[s : s + tcfg.batch_size]]
            if len(yb) < 2:
                continue  # BatchNorm needs two samples
            loss = F.cross_entropy(model(xb), yb, weight=weights, label_smoothing=tcfg.label_smoothing)
            opt.zero_grad()
            loss.backward()
            opt.step()
            total += loss.item() * len(yb)
        sched.step()
        rec = {"epoch": epoch, "loss": total / len(order)}
        if x_val is not None:
            model.eval()
            with torch.inference_mode():
                pred = model(x_val).argmax(1).numpy()
            rec["val_macro_f1"] = macro_f1(data.y[val_idx], pred)
            if rec["val_macro_f1"] > best[0]:
                best, stale = (rec["val_macro_f1"], epoch, copy.deepcopy(model.state_dict())), 0
            else:
                stale += 1
        history.append(rec)
        if tick:
            tick()
        if x_val is not None and stale >= tcfg.patience:
            break
    if x_val is not None:
        model.load_state_dict(best[2])
        return model.eval(), best[1], history
    return model.eval(), n_epochs, history


def fit_members(data: Labelled, train_idx, val_idx, cfg: CNNConfig, tcfg: TrainConfig, seed: int,
                epochs: int | None = None, tick: Callable | None = None, targets: np.ndarray | None = None
                ) -> tuple[nn.Module, list[int]]:
    """The classifier ``cfg`` describes, fitted: ``cfg.members`` CNNs by :func:`fit`, each with its own seed.

    Returns:
        (one :class:`PatternCNN`, or a :class:`PatternEnsemble` of the members; each member's best epoch).
    """
    fits = [fit(data, train_idx, val_idx, cfg, tcfg, seed=seed + MEMBER_SEED_STEP * s, epochs=epochs, tick=tick,
                targets=targets) for s in range(cfg.members)]
    return build_model(cfg, [f[0] for f in fits]).eval(), [f[1] for f in fits]


def median_epoch(epochs) -> int:
    """The epoch count a fit without early stopping runs: the median of early-stopped ones, rounded down."""
    return int(np.median(epochs))


def predict_proba(model: nn.Module, data: Labelled, idx, cfg: CNNConfig) -> np.ndarray:
    with torch.inference_mode():
        return torch.softmax(model(model_inputs(data.maps, data.seps, idx, cfg)), dim=1).numpy()


def folds(data: Labelled, tcfg: TrainConfig) -> list[tuple[np.ndarray, np.ndarray, np.ndarray]]:
    """(train, val, test) index arrays per outer fold: grouped by example, stratified by label."""
    from sklearn.model_selection import StratifiedGroupKFold

    outer = StratifiedGroupKFold(n_splits=tcfg.folds, shuffle=True, random_state=tcfg.seed)
    out = []
    for k, (tr, te) in enumerate(outer.split(np.zeros(len(data.y)), data.y, data.groups)):
        inner = StratifiedGroupKFold(n_splits=5, shuffle=True, random_state=tcfg.seed + 100 + k)
        itr, iva = next(inner.split(np.zeros(len(tr)), data.y[tr], data.groups[tr]))
        out.append((tr[itr], tr[iva], te))
    return out


def classification_report(y_true: np.ndarray, y_pred: np.ndarray) -> dict:
    """Per-class precision/recall/F1/support, macro and weighted F1, accuracy, confusion matrix."""
    from sklearn.metrics import accuracy_score, confusion_matrix, f1_score, precision_recall_fscore_support

    labels = list(range(len(LABELS)))
    p, r, f, s = precision_recall_fscore_support(y_true, y_pred, labels=labels, zero_division=0)
    return {
        "per_class": {name: {"precision": float(p[i]), "recall": float(r[i]), "f1": float(f[i]), "support": int(s[i])}
                      for i, name in enumerate(LABELS)},
        "macro_f1": float(f1_score(y_true, y_pred, average="macro", labels=labels, zero_division=0)),
        "weighted_f1": float(f1_score(y_true, y_pred, average="weighted", labels=labels, zero_division=0)),
        "accuracy": float(accuracy_score(y_true, y_pred)),
        "confusion_matrix": confusion_matrix(y_true, y_pred, labels=labels).tolist(),
        "confusion_matrix_order": list(LABELS),
    }


@dataclasses.dataclass
class OutOfFold:
    """Out-of-fold CNN predictions: every map scored by the fold model that did not train on it."""

    probs: np.ndarray  # (N, 5) softmax probabilities
    fold: np.ndarray  # (N,) the outer fold of each map
    fold_macro_f1: list[float]
    best_epochs: list[int]  # per fold; fold-major, one per member, for an ensemble
    seconds: float


def out_of_fold(data: Labelled, cfg: CNNConfig, tcfg: TrainConfig, progress=None,
                targets: np.ndarray | None = None) -> OutOfFold:
    """Train one model per grouped stratified fold and score its test fold (``targets``: see :func:`fit`)."""
    oof = np.zeros((len(data.y), len(LABELS)), dtype=np.float32)
    fold_of = np.full(len(data.y), -1)
    fold_f1, best_epochs = [], []
    bar = progress(total=tcfg.folds * tcfg.max_epochs * cfg.members, desc=f"CV {cfg.representation}-{cfg.grid}",
                   unit="ep") if progress else None
    t0 = time.time()
    for k, (tr, va, te) in enumerate(folds(data, tcfg)):
        model, epochs = fit_members(data, tr, va, cfg, tcfg, seed=tcfg.seed + k, tick=bar.update if bar else None,
                                    targets=targets)
        oof[te] = predict_proba(model, data, te, cfg)
        fold_of[te] = k
        fold_f1.append(macro_f1(data.y[te], oof[te].argmax(1)))
        best_epochs.extend(epochs)
    if bar:
        bar.close()
    return OutOfFold(oof, fold_of, fold_f1, best_epochs, round(time.time() - t0, 1))


def cv_report(data: Labelled, oof: OutOfFold) -> dict:
    """The classification report of out-of-fold predictions, with the per-fold figures."""
    rep = classification_report(data.y, oof.probs.argmax(1))
    rep.update({"fold_macro_f1": oof.fold_macro_f1, "fold_macro_f1_mean": float(np.mean(oof.fold_macro_f1)),
                "fold_macro_f1_std": float(np.std(oof.fold_macro_f1)), "best_epochs": oof.best_epochs,
                "median_best_epoch": median_epoch(oof.best_epochs), "seconds": oof.seconds,
                "certain_only_macro_f1": macro_f1(data.y[~data.uncertain], oof.probs[~data.uncertain].argmax(1))})
    return rep


def cross_validate(data: Labelled, cfg: CNNConfig, tcfg: TrainConfig, progress=None) -> dict:
    """Out-of-fold CNN predictions over the grouped stratified folds, with the report."""
    return cv_report(data, out_of_fold(data, cfg, tcfg, progress))


def calibrate_and_validate(data: Labelled, oof: OutOfFold, seed: int) -> tuple[dict, dict | None]:
    """The calibration stored with the model, and the cross-validated validation of the share estimators.

    The validation needs maps drawn uniformly at random in the labelled set; without them it is None.
    """
    from ..shares.calibrate import calibration_record, oof_rows
    from .validate import validate_rows

    rows = oof_rows(data, oof.probs, oof.fold)
    validation = validate_rows(rows, seed) if rows.uniform.any() else None
    if validation is None:
        log.info("no uniformly drawn maps in the labelled set: the share estimators are not validated")
    return calibration_record(rows), validation


def fit_final(data: Labelled, cfg: CNNConfig, tcfg: TrainConfig, epochs: int) -> nn.Module:
    """Train on all labelled maps for a fixed number of epochs (chosen by CV early stopping); every member alike."""
    idx = np.arange(len(data.y))
    model, _ = fit_members(data, idx, None, cfg, tcfg, seed=tcfg.seed, epochs=max(1, epochs))
    return model


def throughput(cfg: CNNConfig, t: int = 64, n: int = 512, threads: int = 2) -> float:
    """Maps/s of preprocessing + forward pass in torch eager for one batch of (n, t, t) maps."""
    torch.set_num_threads(threads)
    model = build_model(cfg).eval()
    maps = torch.softmax(torch.randn(n, t, t), dim=-1)
    seps = [[t // 2, t - 1]] * n
    with torch.inference_mode():
        model(preprocess(maps[:8], seps[:8], cfg))
        t0 = time.perf_counter()
        model(preprocess(maps, seps, cfg))
        return n / (time.perf_counter() - t0)


def train_and_export(annotations: str | Path, out: str | Path, cfg: CNNConfig, tcfg: TrainConfig,
                   compare: bool = False, progress=None, ecfg: EvalConfig | None = None) -> dict:
    """``patterncnn train``: cross-validate, compare, score the baselines, fit on all maps, export, write the card.

    Writes ``patterncnn.pt``, ``patterncnn.onnx``, ``metrics.json`` and ``README.md`` (the model card) into
    ``out``, each atomically; ``ecfg`` chooses the per-encoder reports (:mod:`patterncnn.training.evaluate`). Returns the
    metrics.
    """
    from .evaluate import evaluate
    from .modelcard import model_card

    t0 = time.time()
    torch.set_num_threads(2)
    data = load_labelled(annotations)
    counts = np.bincount(data.y, minlength=len(LABELS))
    log.info("%d labelled maps: %s", len(data.y), dict(zip(LABELS, counts.tolist())))
    oof = out_of_fold(data, cfg, tcfg, progress)
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
            comparison[f"{rep}-{grid}"] = entry(c, cv if c == cfg else cross_validate(data, c, tcfg, progress))
        for field in ("mass_channel", "segment_channel", "structure_channels"):
            c = dataclasses.replace(cfg, **{field: not getattr(cfg, field)})
            name = f"{cfg.representation}-{cfg.grid} {'without' if getattr(cfg, field) else 'with'} {field}"
            comparison[name] = entry(c, cross_validate(data, c, tcfg, progress))
    evaluation = evaluate(data, annotations, oof, cfg, tcfg, ecfg or EvalConfig(), progress)
    base = evaluation.pop("baselines")
    model = fit_final(data, cfg, tcfg, cv["median_best_epoch"])
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    best_base = max((v["macro_f1"], k) for k, v in base.items())
    metrics = {
        "created_by": f"patterncnn {__version__}", "data": {
            "annotations": str(annotations), "maps": len(data.y), "data_hash": data.data_hash,
            "labels": dict(zip(LABELS, counts.tolist())), "uncertain": int(data.uncertain.sum()),
            "groups": int(len(set(data.groups)))},
        "model_config": model_config_dict(cfg), "train_config": dataclasses.asdict(tcfg),
        "conv_layers": count_conv_layers(model), "parameters": int(sum(p.numel() for p in model.parameters())),
        "cv": cv, "baselines": base, "representation_comparison": comparison,
        "cnn_beats_best_baseline": bool(cv["macro_f1"] > best_base[0]), "best_baseline": best_base[1],
        "final_fit_epochs": cv["median_best_epoch"], "calibration": calibration, "validation": validation,
        "evaluation": evaluation,
        "platform": platform.platform(),
        "torch": torch.__version__, "seconds": None,
    }
    buf = io.BytesIO()
    torch.save({"state_dict": model.state_dict(), "model_config": model_config_dict(cfg), "labels": list(LABELS),
                "train_config": dataclasses.asdict(tcfg), "metrics": {"cv_macro_f1": cv["macro_f1"]},
                "data_hash": data.data_hash, "patterncnn_version": __version__, "calibration": calibration,
                "validation": validation}, buf)
    write_bytes(out / "patterncnn.pt", buf.getvalue())
    export_onnx(model, out / "patterncnn.onnx", {"data_hash": data.data_hash, "cv_macro_f1": cv["macro_f1"],
                                                  "trained_on": len(data.y), "calibration": calibration,
                                                  "validation": validation})
    metrics["onnx_parity_max_abs_diff"] = parity_check(model, out / "patterncnn.onnx", data.maps, data.seps)
    metrics["seconds"] = round(time.time() - t0, 1)
    write_json(out / "metrics.json", metrics)
    write_text(out / "README.md", model_card(metrics))
    return metrics
