"""``patterncnn train`` end to end: compare representations, cross-validate, fit, export, write the model card.

Artifacts written to ``out`` (``models/``), each atomically:

* ``patterncnn.pt``: state dict + model config + label order + training config + metrics + data hash
  (``torch.load(..., weights_only=True)`` rebuilds it with :func:`load_checkpoint`);
* ``patterncnn.onnx``: the CNN, labels and preprocessing config in its metadata;
* ``metrics.json``: cross-validated CNN metrics, baselines, representation comparison, ONNX parity;
* ``README.md``: the model card, generated from the same numbers.
"""

from __future__ import annotations

import dataclasses
import io
import json
import logging
import platform
import time
from pathlib import Path

import numpy as np
import torch

from . import __version__
from .fileio import write_bytes, write_json, write_text
from .infer import config_from_dict, export_onnx, model_config_dict, parity_check
from .labels import LABELS
from .model import CNNConfig, PatternCNN, count_conv_layers
from .train import Labelled, TrainConfig, baselines, cross_validate, fit_final, load_labelled, throughput

log = logging.getLogger(__name__)

COMPARE = [("area", 16), ("bilinear", 16), ("area", 32), ("bilinear", 32), ("area", 64)]


def load_checkpoint(path: str | Path) -> tuple[PatternCNN, dict]:
    ckpt = torch.load(path, map_location="cpu", weights_only=True)
    model = PatternCNN(config_from_dict(ckpt["model_config"]))
    model.load_state_dict(ckpt["state_dict"])
    return model.eval(), ckpt


def train_and_ship(annotations: str | Path, out: str | Path, cfg: CNNConfig, tcfg: TrainConfig,
                   compare: bool = False, progress=None) -> dict:
    t0 = time.time()
    torch.set_num_threads(2)
    data = load_labelled(annotations)
    counts = np.bincount(data.y, minlength=len(LABELS))
    log.info("%d labelled maps: %s", len(data.y), dict(zip(LABELS, counts.tolist())))
    cv = cross_validate(data, cfg, tcfg, progress)
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
    base = baselines(data, tcfg)
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
        "final_fit_epochs": cv["median_best_epoch"], "platform": platform.platform(),
        "torch": torch.__version__, "seconds": None,
    }
    buf = io.BytesIO()
    torch.save({"state_dict": model.state_dict(), "model_config": model_config_dict(cfg), "labels": list(LABELS),
                "train_config": dataclasses.asdict(tcfg), "metrics": {"cv_macro_f1": cv["macro_f1"]},
                "data_hash": data.data_hash, "patterncnn_version": __version__}, buf)
    write_bytes(out / "patterncnn.pt", buf.getvalue())
    export_onnx(model, out / "patterncnn.onnx", {"data_hash": data.data_hash, "cv_macro_f1": cv["macro_f1"],
                                                  "trained_on": len(data.y)})
    metrics["onnx_parity_max_abs_diff"] = parity_check(model, out / "patterncnn.onnx", data.maps, data.seps)
    metrics["seconds"] = round(time.time() - t0, 1)
    write_json(out / "metrics.json", metrics)
    write_text(out / "README.md", model_card(metrics))
    return metrics


def _f(x: float) -> str:
    return f"{x:.3f}"


def model_card(m: dict) -> str:
    cv, base = m["cv"], m["baselines"]
    per_class = "\n".join(
        f"| `{name}` | {_f(v['precision'])} | {_f(v['recall'])} | {_f(v['f1'])} | {v['support']} |"
        for name, v in cv["per_class"].items())
    cm_rows = "\n".join(f"| **{LABELS[i]}** | " + " | ".join(str(c) for c in row) + " |"
                        for i, row in enumerate(cv["confusion_matrix"]))
    base_rows = "\n".join(f"| {k} | {_f(v['macro_f1'])} | {_f(v['weighted_f1'])} | {_f(v['accuracy'])} |"
                          for k, v in base.items())
    comp = m["representation_comparison"]
    comp_rows = "\n".join(
        f"| {k} | {_f(v['macro_f1'])} | {_f(v['fold_macro_f1_mean'])} ± {_f(v['fold_macro_f1_std'])} | "
        f"{v['torch_maps_per_s_T64_b512']} |" for k, v in comp.items()) or "| (not run: `patterncnn train --compare`) | | | |"
    mc = m["model_config"]
    mass = ("one more channel holds log2 of each cell's mass relative to a uniform row (T·a, clipped to "
            "[1/16, 64]), i.e. how concentrated the map is; " if mc.get("mass_channel") else "")
    data = m["data"]
    verdict = ("The CNN beats every baseline on macro-F1." if m["cnn_beats_best_baseline"] else
               f"**The CNN does not beat the best baseline ({m['best_baseline']}) on macro-F1.**")
    return f"""# patterncnn classifier — model card

Classifies one self-attention map into the five patterns of Kovaleva et al. (2019), in this order:
{", ".join(f"`{x}`" for x in LABELS)}. Generated by `patterncnn train` ({m['created_by']}) from
`metrics.json`; do not edit by hand.

## Data
{data['maps']} maps labelled by eye in Label Studio (`{data['annotations']}`, datasheet in its
README.md), from {data['groups']} distinct GLUE input examples. Labels: {", ".join(f"{k} {v}" for k, v in data['labels'].items())};
{data['uncertain']} marked uncertain. Data hash `{data['data_hash'][:16]}…`.

## Preprocessing
A T×T map becomes a {mc['grid']}×{mc['grid']} grid by **{mc['representation']}**
({'adaptive average pooling: mass-preserving, so one-token lines survive' if mc['representation'] == 'area' else 'bilinear interpolation'}),
scaled by its own maximum; {mass}{'a channel marks the two segment squares (from the first `[SEP]`)' if mc['segment_channel'] else 'no segment channel'}{'; two more mark the diagonal band (|i−j| ≤ 1) and the `[CLS]`/`[SEP]` columns' if mc.get('structure_channels') else ''}.
One function (`patterncnn.model.preprocess`) serves training and inference; the ONNX metadata carries
its parameters.

## Architecture
{m['conv_layers']} convolutional layers (3×3, widths {mc['widths']}), each BatchNorm + ReLU, 2×2 max-pool
after layers {[i + 1 for i in mc['pool_after']]}, global average pool, dropout {mc['dropout']}, linear head:
{m['parameters']:,} parameters.

## Training
AdamW (lr {m['train_config']['lr']}, weight decay {m['train_config']['weight_decay']}), cosine schedule,
class-weighted cross-entropy (label smoothing {m['train_config']['label_smoothing']}), batch
{m['train_config']['batch_size']}. Label-preserving augmentation only: resampling the map to another
length T (p={m['train_config']['resample_p']}, ×{m['train_config']['resample_range']}) and a gamma jitter
{m['train_config']['gamma_range']}; no transposes. Seed {m['train_config']['seed']}.

## Cross-validated results (honest)
{m['train_config']['folds']}-fold cross-validation, **stratified by label and grouped by input example**
(the maps of one sentence or pair never sit on both sides of a split). Early stopping (patience
{m['train_config']['patience']}) watches a validation split carved from each fold's training part,
never the test fold. The shipped model is then trained on all maps for the median early-stopped
epoch count ({m['final_fit_epochs']}).

**Macro-F1 {_f(cv['macro_f1'])}** (out-of-fold; per-fold {_f(cv['fold_macro_f1_mean'])} ± {_f(cv['fold_macro_f1_std'])}),
weighted-F1 {_f(cv['weighted_f1'])}, accuracy {_f(cv['accuracy'])}; on the maps not marked uncertain,
macro-F1 {_f(cv['certain_only_macro_f1'])}. The paper reports F1 0.86 on its ~400 maps.

| class | precision | recall | F1 | support |
| --- | --- | --- | --- | --- |
{per_class}

Confusion matrix (rows: label, columns: prediction, order {", ".join(LABELS)}):

| | {" | ".join(LABELS)} |
| --- | {" | ".join("---" for _ in LABELS)} |
{cm_rows}

## Baselines on the same folds
Hand-crafted features (mass on `[CLS]`/`[SEP]` and top columns, mass within |i−j|≤1 and ≤3, lines
off the diagonal, within-segment mass, row entropy, …; `patterncnn.features`), and the rule that
pre-annotates Label Studio tasks (untrained; scored on all maps).

| method | macro-F1 | weighted-F1 | accuracy |
| --- | --- | --- | --- |
| **CNN (this model)** | **{_f(cv['macro_f1'])}** | {_f(cv['weighted_f1'])} | {_f(cv['accuracy'])} |
{base_rows}

{verdict}

## Representation comparison
Cross-validated on the same folds; throughput is preprocessing + forward in torch eager, 2 threads,
batch 512 of T=64 maps (`benchmarks/bench_classify.py` measures onnxruntime).

| representation-grid | macro-F1 (out-of-fold) | per-fold macro-F1 | maps/s |
| --- | --- | --- | --- |
{comp_rows}

## Export
`patterncnn.onnx` (opset 17, dynamic batch). Torch vs onnxruntime max |Δp| on all labelled maps:
{m['onnx_parity_max_abs_diff']:.2e}.

## Limits
- Trained on maps of all-MiniLM-L6-v2 (pretrained and fine-tuned on GLUE tasks), not BERT-base; maps
  of other encoders may look different (the paper's were BERT-base fine-tuned on GLUE).
- Labels come from one annotator; see the datasheet's self-agreement and known ambiguities
  (faint `[CLS]` columns vs haze, cross-sentence lines vs diagonals, blobby squares vs bands).
- `block` is defined for two-segment inputs only; the classifier is told the segments by the
  segment channel. Few maps are `block` ({data['labels'].get('block')}), so its F1, and with it the
  macro-F1, moves by several points between training seeds.
"""
