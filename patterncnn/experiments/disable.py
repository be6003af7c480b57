"""Which heads can be turned off (paper Fig. 8 and 9): the dev metric with one head, then one layer, disabled.

Usage (what ``patterncnn disable`` runs)::

    res = disable("models-ft/minilm-rte", task="rte", glue_dir="glue_data")      # the Python API
    result = run_disable("models-ft/minilm-rte", split, out="runs/disable-rte", progress=tqdm)
    result["heads"][4][2]   # {"metric": 0.58, "change": -0.011, "ci95": [-0.036, 0.014], "outside": False, ...}
    result["layers"][4]     # the same for all heads of layer 4 at once

Disabling is the paper's (:mod:`patterncnn.encoders.uniform_heads`): the head attends with 1/L to each
real token. Each unit (a head, or a layer's heads together) is one evaluation of the split. Disabling a
head of layer l cannot change what the layers below l compute, so :class:`CachedClassifier` records the
inputs of every layer once (pre-hooks on the layer modules, checked against a full pass at start) and
replays only the layers from the unit's layer up: a head of the last layer costs one layer, a head of
the first layer a full pass; the task head is the model's own modules applied to the last layer's output.
Any sequence classifier of a family ``UniformHeads`` supports (BERT, RoBERTa, XLM-R, ELECTRA,
DistilBERT, MPNet, DeBERTa, ...) runs; one whose replay differs from its own logits is refused at start, not
mis-scored. Each unit's predictions are saved as they finish, so an interrupted run resumes. The change
of the task's own metric against the undisabled model gets a paired bootstrap 95% interval over examples
(the same resamples for every unit), so a 0.3-point gain on 277 examples is not read as real. ``outside``
marks a change told from noise: its interval excludes 0 and, on a classification task, the exact paired test of
the examples whose correctness the unit changed (McNemar's exact test: its gains against its losses) gives p < 0.05.
The bootstrap alone is not enough where single heads live: a head that changes 4 of 200 predictions, all one way,
has an interval that excludes 0 (the resamples that miss all four are 1.8%), while the exact test gives p = 0.125
(helper 91's review, 2026-11-29).
"""

from __future__ import annotations

import logging
import math
import time
from pathlib import Path
from typing import Callable

import numpy as np
import torch
from torch import nn

from ..core import args
from ..core.fileio import public_fingerprint
from ..core.glue import GlueDataError, GlueSplit, GlueTask, get_task, load_split
from ..core.plots import disable_plot, png
from ..core.work import (
    finish,
    output_dir,
    prepare_out,
    progress_bar,
    progress_bars,
    provenance,
    run_parts,
    work_dir,
    write_result,
)
from ..encoders.load import MANIFEST, EncoderError, bounded_texts, finetune_manifest, load_encoder, resolve_model
from ..encoders.uniform_heads import SUPPORTED, DisableError, UniformHeads, encoder_layers
from .result import ExperimentResult

log = logging.getLogger(__name__)

PRIMARY = {"accuracy": "accuracy", "f1": "f1", "mcc": "mcc", "corr": "pearson"}
# GLUE reports a second metric for MRPC and QQP (accuracy beside F1) and STS-B (Spearman beside Pearson): recorded
# beside the primary one, which alone decides the intervals, ``outside``, the figure and ``link``.
SECOND = {"f1": "accuracy", "corr": "spearman"}
RESULT = "disable.json"


# Replaying only the layers at and above a disabled head (the layer cache).

def _logits_from_sequence(model, seq: torch.Tensor) -> torch.Tensor:
    """The model's own task head applied to the last layer's output (B, T, D) -> logits (B, C).

    The head modules are the model's; what is assumed is how transformers' sequence classifiers wire them:
    a ``pre_classifier`` on the first token (DistilBERT); a pooler on the model or its base model, then
    dropout and ``classifier`` (BERT, ERNIE); otherwise a ``classifier`` that reads the sequence itself
    (RoBERTa, XLM-R, CamemBERT, ELECTRA, MPNet). A model wired otherwise gives other logits than its own
    forward pass, and :class:`CachedClassifier` refuses it at start.
    """
    dropout = getattr(model, "dropout", None) or nn.Identity()
    if hasattr(model, "pre_classifier"):
        return model.classifier(dropout(torch.relu(model.pre_classifier(seq[:, 0]))))
    pooler = getattr(model, "pooler", None) or getattr(model.base_model, "pooler", None)
    if pooler is not None:
        return model.classifier(dropout(pooler(seq)))
    return model.classifier(seq)


class CachedClassifier:
    """A sequence classifier run once over fixed, length-sorted batches, with every layer's inputs cached.

    Args:
        model: ``AutoModelForSequenceClassification`` (eager attention, eval mode) whose family
            :class:`patterncnn.encoders.uniform_heads.UniformHeads` supports.
        tokenizer: its tokenizer.
        texts: one tuple of 1 or 2 strings per example.
        max_length: truncation, as in fine-tuning.
        batch_size: examples per forward pass.
    """

    def __init__(self, model, tokenizer, texts: list[tuple[str, ...]], max_length: int = 128, batch_size: int = 32):
        self.model = model
        device = next(model.parameters()).device
        self.layers = encoder_layers(model)
        # DebertaV2Encoder runs a convolution (v2 xlarge and xxlarge) after layer 0, outside the layers: a replay
        # from layer 0 applies it as the encoder does, to layer 0's input and output and the batch's padding mask.
        self.conv = getattr(getattr(getattr(model, "base_model", model), "encoder", None), "conv", None)
        texts = [bounded_texts(t, max_length)[0] for t in texts]
        lengths = [len(tokenizer(*t, truncation=True, max_length=max_length)["input_ids"]) for t in texts]
        self.order = sorted(range(len(texts)), key=lambda i: lengths[i])  # length bucketing
        self.batches = []
        for s in range(0, len(texts), batch_size):
            idx = self.order[s : s + batch_size]
            cols = list(zip(*(texts[i] for i in idx)))
            self.batches.append(tokenizer(*cols, truncation=True, max_length=max_length, padding=True,
                                          return_tensors="pt").to(device))
        self.cache: list[list[tuple]] = [[] for _ in self.layers]  # layer -> per batch (args, kwargs)
        self.baseline = self._full_pass(record=True)
        try:
            check = self.run(0)
            same = check.shape == self.baseline.shape and torch.allclose(check, self.baseline, atol=1e-4)
        except DisableError:
            raise
        except (AttributeError, TypeError, IndexError, RuntimeError) as e:  # a head wired otherwise (see above)
            log.debug("replay failed: %s", e)
            same = False
        if not same:
            raise DisableError(f"replaying the cached layers and the task head of {type(model).__name__} does not "
                               f"reproduce the model's own logits (its head or its layers are wired in a way disable "
                               f"does not know); use {SUPPORTED.replace(' model', ' classifier')}")

    def _full_pass(self, record: bool) -> torch.Tensor:
        handles = []
        if record:
            for k, layer in enumerate(self.layers):
                handles.append(layer.register_forward_pre_hook(self._recorder(k), with_kwargs=True))
        try:
            with torch.inference_mode():
                out = [self.model(**batch).logits for batch in self.batches]
        finally:
            for h in handles:
                h.remove()
        return self._unsort(out)

    def _recorder(self, k: int):
        def hook(module, args, kwargs):
            self.cache[k].append((args, dict(kwargs)))

        return hook

    def _unsort(self, per_batch: list[torch.Tensor]) -> torch.Tensor:
        logits = torch.cat(per_batch).cpu()
        out = torch.empty_like(logits)
        out[torch.tensor(self.order)] = logits
        return out

    def run(self, from_layer: int) -> torch.Tensor:
        """Logits (N, C) in example order, recomputing layers ``from_layer``.. from their cached inputs.

        Run it inside a :class:`patterncnn.encoders.uniform_heads.UniformHeads` block to score disabled heads:
        the cached inputs hold each batch's attention mask, which is where the heads read the real tokens from.
        """
        out = []
        with torch.inference_mode():
            for b in range(len(self.batches)):
                args, kwargs = self.cache[from_layer][b]
                hidden = args[0]
                for k, layer in enumerate(self.layers[from_layer:], start=from_layer):
                    res = layer(hidden, *args[1:], **kwargs)
                    out_k = res[0] if isinstance(res, tuple) else res
                    if k == 0 and self.conv is not None:
                        out_k = self.conv(hidden, out_k, self.batches[b]["attention_mask"])
                    hidden = out_k
                out.append(_logits_from_sequence(self.model, hidden))
        return self._unsort(out)

    def full(self) -> torch.Tensor:
        """Logits (N, C) of a full forward pass with whatever hooks are active (no cache): the reference."""
        return self._full_pass(record=False)


def primary_metric(task: GlueTask) -> str:
    return PRIMARY[task.metric]


def resampled_metric(task: GlueTask, preds: np.ndarray, labels: np.ndarray, idx: np.ndarray) -> np.ndarray:
    """The task's primary metric on each bootstrap resample.

    Args:
        preds: (N,) class ids (or scores for STS-B); labels: (N,) gold; idx: (B, N) resample indices.

    Returns:
        (B,) metric values (F1 and MCC of the positive class 1, as GLUE scores them).
    """
    p, y = preds[idx], labels[idx]  # (B, N)
    if task.metric == "corr":
        pc, yc = p - p.mean(1, keepdims=True), y - y.mean(1, keepdims=True)
        return (pc * yc).sum(1) / np.sqrt((pc**2).sum(1) * (yc**2).sum(1)).clip(min=1e-12)
    if task.metric == "accuracy":
        return (p == y).mean(1)
    tp = ((p == 1) & (y == 1)).sum(1).astype(float)
    fp = ((p == 1) & (y != 1)).sum(1).astype(float)
    fn = ((p != 1) & (y == 1)).sum(1).astype(float)
    if task.metric == "f1":
        return 2 * tp / np.clip(2 * tp + fp + fn, 1, None)
    tn = idx.shape[1] - tp - fp - fn
    den = np.sqrt((tp + fp) * (tp + fn) * (tn + fp) * (tn + fn))
    return np.where(den > 0, (tp * tn - fp * fn) / np.where(den > 0, den, 1), 0.0)


def metric(task: GlueTask, preds: np.ndarray, labels: np.ndarray) -> float:
    return float(resampled_metric(task, preds, labels, np.arange(len(labels))[None])[0])


def second_metric(task: GlueTask) -> str | None:
    """The second metric GLUE reports for ``task`` (``accuracy`` for MRPC/QQP, ``spearman`` for STS-B), or None."""
    return SECOND.get(task.metric)


def second_value(task: GlueTask, preds: np.ndarray, labels: np.ndarray) -> float:
    """The task's :func:`second_metric` (which must exist): accuracy, or Spearman's correlation (Pearson's of the
    ranks, ties averaged; 0 for constant scores, as :func:`metric` gives Pearson)."""
    if task.metric == "corr":
        from scipy.stats import rankdata

        return metric(task, rankdata(preds), rankdata(labels))
    return float((preds == labels).mean())


def chance_level(task: GlueTask, labels: np.ndarray) -> float:
    """The task's metric for the best constant prediction: always the same class (the commonest for accuracy, the
    positive class for F1; 0 for MCC); 0 for a correlation, which a constant does not have."""
    if task.is_regression:
        return 0.0
    return max(metric(task, np.full(len(labels), c), labels) for c in range(task.num_labels))


def chance_warning(result: dict) -> str | None:
    """What a disable result's baseline at chance means (``baseline.at_chance``; a result without it did not check),
    or None when it is above chance: the one wording the library's log, ``link``'s notes and the report use."""
    b = result.get("baseline") or {}
    if "at_chance" not in b:  # a run from before 2026-11-27 did not check: unknown, not above chance
        return ("this run predates the check of whether the undisabled model is above chance (2026-11-27), so "
                "whether disabling a head can show anything on it is unchecked; run it again")
    if not b["at_chance"]:
        return None
    try:
        regression = get_task(result["task"]).is_regression
    except (KeyError, ValueError):
        regression = False
    chance = "no correlation with the gold scores" if regression else "always predicting one label"
    return (f"the undisabled model's {result['metric']} is within its 95% interval of chance ({b['chance']:.4f}, "
            f"{chance}): disabling a head cannot show what it does. Check that the model was "
            f"fine-tuned on {result['task']} (`patterncnn finetune --task {result['task']}`), or score more examples "
            f"(--limit N)")


def change_interval(task: GlueTask, base: np.ndarray, off: np.ndarray, labels: np.ndarray,
                    idx: np.ndarray) -> tuple[float, float]:
    """Paired bootstrap 95% interval of metric(off) - metric(base) over the resamples ``idx`` (B, N)."""
    d = resampled_metric(task, off, labels, idx) - resampled_metric(task, base, labels, idx)
    lo, hi = np.percentile(d, [2.5, 97.5])
    return float(lo), float(hi)


ALPHA = 0.05  # the exact paired test's level for ``outside``
TOLD_FROM_NOISE = ("told from noise (its 95% interval excludes 0 and, on a classification task, the exact paired test "
                   "of the predictions it changed gives p < 0.05)")


OLD_RULE = ("flagged by the 95% interval alone (a run from before 2026-11-29, without the exact paired test, which "
            "flags a head that changed 4 predictions one way; run it again for today's rule)")


def outside_rule(result: dict) -> str:
    """What ``outside`` means in a disable ``result``: :data:`TOLD_FROM_NOISE`, or :data:`OLD_RULE` for a run of a
    classification task whose units hold no paired test (made before 2026-11-29)."""
    try:
        regression = get_task(result["task"]).is_regression
    except (KeyError, ValueError):
        regression = False
    cells = [c for row in result.get("heads") or [] for c in row]
    return OLD_RULE if cells and not regression and not any("paired_p" in c for c in cells) else TOLD_FROM_NOISE


def paired_test(task: GlueTask, base: np.ndarray, off: np.ndarray, labels: np.ndarray) -> dict:
    """McNemar's exact test of a unit's change on a classification task: ``gains`` (examples the undisabled model got
    wrong and the unit right), ``losses`` (the reverse) and the two-sided ``paired_p`` of a fair coin giving that
    split ({} for a regression task, whose every prediction moves)."""
    if task.is_regression:
        return {}
    right, right_off = base == labels, off == labels
    gains, losses = int((right_off & ~right).sum()), int((right & ~right_off).sum())
    return {"gains": gains, "losses": losses, "paired_p": exact_paired_p(gains, losses)}


def exact_paired_p(gains: int, losses: int) -> float:
    """Two-sided exact sign test (McNemar's exact test): the chance that a fair coin splits ``gains + losses`` changes
    at least as unevenly, to four significant digits."""
    n = gains + losses
    tail = sum(math.comb(n, i) for i in range(min(gains, losses) + 1)) / 2**n
    return float(f"{min(1.0, 2 * tail):.4g}")  # four significant digits: a strong effect's p is not rounded to 0


def told_from_noise(ci95, test: dict) -> bool:
    """``outside``: the interval ``ci95`` excludes 0 and, when ``test`` holds one (:func:`paired_test`), its
    ``paired_p`` is under ALPHA with its gains and losses on the same side (on F1 or MCC, which count errors unequally,
    a unit can lose F1 while it gains correct predictions: not told from noise then)."""
    if not (ci95[0] > 0 or ci95[1] < 0):
        return False
    if not test:
        return True
    same_side = (test["gains"] > test["losses"]) == (ci95[0] > 0)
    return bool(test["paired_p"] < ALPHA and same_side)


def _predictions(task: GlueTask, logits, order: list[int] | None = None) -> np.ndarray:
    """Predictions in the task's label indices: ``order`` (:func:`label_order`) puts a head's outputs in them."""
    x = logits.float().numpy()
    return x[:, 0] if task.is_regression else x[:, order or slice(None)].argmax(1)


def _label_key(name) -> str:
    return str(name).strip().lower().replace("-", "_").replace(" ", "_")


def label_order(task: GlueTask, config, name: str) -> tuple[list[int] | None, str]:
    """(the head's output for each of ``task``'s labels, or None when they are in the task's order or cannot be
    checked; what the result records of it), from the head's label names (``config.id2label``).

    Hub classifiers do not all use GLUE's label order (``roberta-large-mnli`` puts contradiction first): names that
    match the task's label names (case, ``-`` and spaces aside) are mapped to them. Names of another vocabulary
    (``LABEL_0``, ``negative``/``positive`` for SST-2's ``0``/``1``) cannot be checked, and the outputs are taken in
    the task's order, as ``patterncnn finetune`` writes them.

    Raises:
        EncoderError: names that match some of the task's labels but not all (another task's head).
    """
    if task.is_regression or task.label_names is None:
        return None, "regression" if task.is_regression else "by position"
    names = [_label_key((getattr(config, "id2label", None) or {}).get(i, f"label_{i}")) for i in range(task.num_labels)]
    want = [_label_key(n) for n in task.label_names]
    if names == want:
        return None, "by name, the task's order"
    if sorted(names) == sorted(want):
        order = [names.index(w) for w in want]
        return order, f"by name: the head's outputs {', '.join(names)} read as the task's {', '.join(want)}"
    if set(names) & set(want):
        raise EncoderError(f"{name!r}'s head names its outputs {', '.join(names)} (config.id2label), which are not "
                           f"{task.name}'s labels {', '.join(want)}: it was fine-tuned on another task; pass the task "
                           f"it was fine-tuned on")
    return None, (f"by position: the head's names ({', '.join(names)}) are not the task's ({', '.join(want)}), so "
                  f"its outputs are taken in the task's order")


def load_task_model(name: str, max_length: int = 128, device: str = "cpu", task: GlueTask | None = None):
    """(encoder record, sequence classifier, tokenizer) of a fine-tuned model folder (``patterncnn finetune``).

    With ``task``, the model must have been fine-tuned on it: the task its ``patterncnn_finetune.json`` names, and
    a head with the task's number of outputs (1 for a regression task), else an error that names the fix; a warning
    when ``max_length`` cuts inputs elsewhere than the fine-tune did.
    """
    from transformers import AutoModelForSequenceClassification

    enc = load_encoder(name, max_length=max_length, device=device)  # validates, fingerprints, caps max_length
    archs = enc.model.config.architectures or []
    if not any(a.endswith("ForSequenceClassification") for a in archs):
        raise EncoderError(f"{name!r} has no task head (architectures {archs}); disable needs a fine-tuned model: "
                           f"run `patterncnn finetune --task T --out models-ft/NAME` and pass --model models-ft/NAME")
    if task is not None:
        folder = Path(resolve_model(name))
        try:
            manifest = finetune_manifest(folder) or {}
            tuned = manifest.get("task")
            tuned_task = get_task(tuned) if tuned else None
        except (ValueError, AttributeError, TypeError, GlueDataError):
            raise EncoderError(f"{folder / MANIFEST} is not the record `patterncnn finetune` writes (a JSON object "
                               f"naming a GLUE task); fine-tune the model again, or delete that file") from None
        # mnli and mnli-mm share their training set and head: compare the task a model is trained on
        if tuned_task and tuned_task.hf_config != task.hf_config:
            raise EncoderError(f"{name!r} was fine-tuned on {tuned} (its {MANIFEST}), not on {task.name}: pass "
                               f"--task {tuned}, or fine-tune it on {task.name} first (`patterncnn finetune --task "
                               f"{task.name}`)")
        outputs = enc.model.config.num_labels
        if outputs != task.num_labels:
            raise EncoderError(f"{name!r} has a head of {outputs} output(s), and {task.name} needs "
                               f"{task.num_labels}: it was not fine-tuned on {task.name}; pass the task it was "
                               f"fine-tuned on, or fine-tune it on {task.name} (`patterncnn finetune --task "
                               f"{task.name}`)")
        settings = manifest.get("settings")
        tuned_length = settings.get("max_length") if isinstance(settings, dict) else None  # before the model's cap
        if isinstance(tuned_length, int) and min(tuned_length, enc.length_limit or tuned_length) != enc.max_length:
            log.warning("%s was fine-tuned on inputs cut at %d tokens (its %s) and is scored here on inputs cut at "
                        "%d: its dev score can differ from the fine-tune's; pass %s", name, tuned_length, MANIFEST,
                        enc.max_length, args.spelled(f"--max-length {tuned_length}"))
    clf = AutoModelForSequenceClassification.from_pretrained(resolve_model(name), attn_implementation="eager")
    clf.eval().to(enc.device)
    return enc, clf, enc.tokenizer


def units(num_layers: int, num_heads: int, layers: bool = True) -> list[str]:
    """Unit names: ``L2H5`` (one head) for every head, then ``L2`` (all heads of layer 2)."""
    names = [f"L{l}H{h}" for l in range(num_layers) for h in range(num_heads)]
    return names + ([f"L{l}" for l in range(num_layers)] if layers else [])


def parse_unit(name: str, num_heads: int) -> tuple[int, list[int]]:
    layer, _, head = name[1:].partition("H")
    return int(layer), ([int(head)] if head else list(range(num_heads)))


def _second(task: GlueTask, preds: np.ndarray, labels: np.ndarray, base: float | None = None) -> dict:
    """``second`` (:func:`second_value`) and, against the undisabled model's ``base``, ``second_change``; {} for a task
    with one metric."""
    if second_metric(task) is None:
        return {}
    v = second_value(task, preds, labels)
    return {"second": round(v, 5), **({} if base is None else {"second_change": round(v - base, 5)})}


def _summarize(task: GlueTask, parts: dict, base: np.ndarray, labels: np.ndarray, idx: np.ndarray,
               num_layers: int, num_heads: int) -> tuple[list, list]:
    base_metric = metric(task, base, labels)
    base_second = second_value(task, base, labels) if second_metric(task) else None

    def cell(name):
        off = parts[name]["preds"]
        m = metric(task, off, labels)
        lo, hi = change_interval(task, base, off, labels, idx)
        test = paired_test(task, base, off, labels)
        # a regression's scores all move a little when anything is disabled: a count of changed ones says nothing
        changed = {} if task.is_regression else {"changed_predictions": int((off != base).sum())}
        return {"metric": round(m, 5), "change": round(m - base_metric, 5), "ci95": [round(lo, 5), round(hi, 5)],
                "outside": told_from_noise((lo, hi), test), **changed, **test,
                **_second(task, off, labels, base_second)}

    heads = [[cell(f"L{l}H{h}") for h in range(num_heads)] for l in range(num_layers)]
    layers = [cell(f"L{l}") for l in range(num_layers) if f"L{l}" in parts]
    return heads, layers


def run_disable(model: str, split: GlueSplit, out: str | Path, seed: int = 0, max_length: int = 128,
                batch_size: int = 32, boot: int = 1000, progress: Callable | None = None,
                overwrite: bool = False, layers: bool = True, device: str = "cpu") -> dict:
    """Disable each head, then each layer, of a fine-tuned ``model``; score on ``split`` (resumable).

    Returns:
        The result written to ``out/disable.json`` (also ``disable.csv``, ``disable.png``).
    """

    out = prepare_out(out, RESULT, overwrite, "disable", [split.task.name])
    task = split.task
    enc, clf, tok = load_task_model(model, max_length, device, task)
    order, order_note = label_order(task, clf.config, model)
    labels = np.array([ex.label for ex in split.examples], dtype=float if task.is_regression else int)
    params = {"task": task.name, "model": enc.fingerprint, "examples": [ex.index for ex in split.examples],
              "data": split.digest(),
              "max_length": enc.max_length, "layers": layers, **({"label_order": order} if order else {})}
    if enc.device != "cpu":
        params["device"] = enc.device  # numerics differ in the last bits: units of two devices never mix
    work = work_dir(out, task.name, params, command="disable")
    t0 = time.time()
    runner = CachedClassifier(clf, tok, [ex.texts for ex in split.examples], enc.max_length, batch_size)
    base = _predictions(task, runner.baseline, order)
    t_base = time.time() - t0
    names = units(enc.num_layers, enc.num_heads, layers)

    def compute(name):
        layer, hs = parse_unit(name, enc.num_heads)
        with UniformHeads(clf, {layer: hs}):
            return {"preds": _predictions(task, runner.run(layer), order)}

    t1 = time.time()
    with progress_bar(progress, len(names), f"disable {task.name}", "unit") as bar:
        parts = run_parts(work, names, compute, (lambda *_: bar.update(1)) if bar else None)
    idx = np.random.default_rng(seed).integers(0, len(labels), size=(boot, len(labels)))
    heads, layer_cells = _summarize(task, parts, base, labels, idx, enc.num_layers, enc.num_heads)
    base_lo, base_hi = np.percentile(resampled_metric(task, base, labels, idx), [2.5, 97.5])
    chance = chance_level(task, labels)
    result = provenance(
        experiment="disable", model=public_fingerprint(enc.fingerprint), tag=enc.tag, task=task.name,
        **({"encoder_weights": enc.weights_note} if enc.weights_note else {}),
        split=split.split, examples=len(labels), of=split.total, seed=seed, max_length=enc.max_length,
        device=enc.device,
        metric=primary_metric(task), **({"second_metric": second_metric(task)} if second_metric(task) else {}),
        label_order=order_note, bootstrap=boot, layers_count=enc.num_layers,
        heads_count=enc.num_heads,
        baseline={"metric": round(metric(task, base, labels), 5), "ci95": [round(base_lo, 5), round(base_hi, 5)],
                  "chance": round(chance, 5), "at_chance": bool(base_lo <= chance), **_second(task, base, labels)},
        heads=heads, layers=layer_cells, seconds={"baseline": round(t_base, 1), "units": round(time.time() - t1, 1)})
    write_outputs(out, result)
    finish(out)
    if warning := chance_warning(result):
        log.warning(args.spelled(warning))  # patterncnn.disable(...) names its keyword: limit=N
    return result


def disable(model: str, task: str, limit: int | None = None, glue_dir: str | Path | None = None,
            out: str | Path | None = None, *, seed: int = 0, max_length: int = 128, batch_size: int = 32,
            bootstrap: int = 1000, layers: bool = True, device: str = "auto", overwrite: bool = False,
            progress: bool | Callable = False) -> ExperimentResult:
    """The dev metric with each head, then each layer, of a fine-tuned model attending uniformly (paper Fig. 8, 9).

    What ``patterncnn disable`` runs; each change has a paired bootstrap 95% interval over examples.

    Args:
        model: a fine-tuned sequence classifier (a folder written by ``patterncnn finetune``).
        task: the GLUE task it was fine-tuned on; limit: a seeded sample of that many dev examples (None: all).
        out: the result folder (resumable); None: a new temporary folder.
        layers: also disable every head of one layer at a time.
        device: ``auto``, ``cpu`` or ``cuda`` (untested).

    Returns:
        :class:`ExperimentResult`: ``.frame`` (one row per head and layer: metric, change, interval), ``.plot()``.

    Example::

        >>> res = patterncnn.disable("models-ft/minilm-rte", task="rte", glue_dir="../shared/glue")
        >>> res.frame.sort_values("change").head(3)      # the heads whose loss hurts most
    """
    args.check(model=model, task=task, limit=limit, glue_dir=glue_dir, out=out, seed=seed, max_length=max_length,
               batch_size=batch_size, bootstrap=bootstrap, layers=layers, overwrite=overwrite, progress=progress)
    split = load_split(get_task(task), "dev", glue_dir, limit=limit, seed=seed)
    folder = output_dir(out, f"disable-{split.task.name}")
    result = run_disable(model, split, folder, seed=seed, max_length=max_length, batch_size=batch_size,
                         boot=bootstrap, progress=progress_bars(progress), overwrite=overwrite, layers=layers,
                         device=device)
    return ExperimentResult(result, folder, disable_plot, rows)


def rows(result: dict) -> tuple[list[str], list[list]]:
    """(header, rows) of disable.csv: one row per head, then per layer. Columns a run does not record are empty:
    ``changed_predictions`` and the paired test on a regression task, the second metric on a task with one (and in
    runs from before 2026-11-29)."""
    units = [(l, h, c) for l, row in enumerate(result["heads"]) for h, c in enumerate(row)]
    units += [(l, "all", c) for l, c in enumerate(result["layers"])]
    second = result.get("second_metric", "")
    return ["task", "unit", "layer", "head", "metric", "change", "ci95_low", "ci95_high", "outside",
            "changed_predictions", "gains", "losses", "paired_p", "baseline", "second_metric", "second",
            "second_change", "second_baseline"], [
        [result["task"], f"L{l}H{h}" if h != "all" else f"L{l}", l, h, c["metric"], c["change"], *c["ci95"],
         int(c["outside"]), *(c.get(k, "") for k in ("changed_predictions", "gains", "losses", "paired_p")),
         result["baseline"]["metric"], second, c.get("second", ""), c.get("second_change", ""),
         result["baseline"].get("second", "")] for l, h, c in units]


def write_outputs(out: Path, result: dict) -> None:
    """disable.csv (one row per head and per layer), disable.png, then disable.json."""
    write_result(out, RESULT, result, tables={"disable.csv": rows(result)},
                 figures={"disable.png": png(disable_plot(result))})
