"""The CNN's fitting machinery: grouped, stratified folds, early-stopped fits, out-of-fold predictions.

Usage::

    tcfg = TrainConfig()
    oof = out_of_fold(data, CNNConfig(), tcfg)                     # every map scored by a fold model not trained on it
    report = cv_report(data, oof)                                  # honest, out-of-fold metrics
    model = fit_final(data, CNNConfig(), tcfg, epochs=report["median_best_epoch"])

Honesty rules: folds are grouped by input example (the maps of one sentence or pair never sit on
both sides of a split) and stratified by label; early stopping watches a validation split carved
out of the *training* part of each fold, never the test fold; the final model is trained on all
data for the median early-stopped epoch count. Augmentation only preserves labels: resampling the
map to another length T (nearest) and a gamma jitter of the intensities; no transposes or flips (a
transpose turns vertical into horizontal).

Grouped, stratified K-fold CV needs every class in K input examples at least, so that each test
fold holds one of its maps (:func:`check_folds` says which class allows how many folds).

Resumable: given a work folder (:class:`Work`), every finished fold (and the final fit) is kept
there, named by what determines it (the data's hash, the configs, the fold, the targets), and a
run started again with the same arguments reads it back instead of fitting it again. Each fit
seeds itself, so a resumed run gives exactly what an uninterrupted one gives.
"""

from __future__ import annotations

import copy
import dataclasses
import hashlib
import io
import shutil
import time
from pathlib import Path
from typing import Callable

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

from ..classifier.model import (
    MEMBER_SEED_STEP,
    CNNConfig,
    PatternCNN,
    build_model,
    config_from_dict,
    member_config,
    model_config_dict,
    preprocess,
    read_checkpoint,
)
from ..core.device import torch_threads
from ..core.errors import ClassifierError, PatternCNNError
from ..core.fileio import sha256_file
from ..core.labels import LABELS
from ..core.scores import classification_report, macro_f1
from ..core.segments import rule_out_block
from ..core.version import __version__
from ..core.work import progress_bar, run_key, run_parts
from ..labelling.sets import Labelled

INNER_SPLITS = 5  # early stopping watches one fifth of each fold's training part
# The learning rate of fits that start from pretrained weights (`train --init`): a tenth of a random start's, so
# fine-tuning on two or three encoder families keeps what the synthetic maps taught (docs/pages/classifier.md).
INIT_LR = 3e-4
RANDOM_START_LR = 3e-3


class TrainError(PatternCNNError, ValueError):
    """The labelled set cannot be trained on as asked (too few maps of a class for the folds); says what to do."""


class Work:
    """The finished parts of a training run: ``root/<name>.npz``, each named by what determines it.

    A part is written atomically once computed and read back by a later run with the same inputs
    (:func:`patterncnn.core.work.run_parts`); ``None`` as root keeps nothing (every part is computed). ``root`` is
    made with the first part written, so a run stopped before leaves no empty folder behind.
    """

    def __init__(self, root: str | Path | None):
        self.root = Path(root) if root is not None else None

    def part(self, kind: str, inputs: dict, compute: Callable[[], dict]) -> tuple[dict, bool]:
        """(the part's arrays, whether it was read back from an earlier run)."""
        if self.root is None:
            return compute(), False
        name = f"{kind}-{run_key({**inputs, 'patterncnn': __version__, 'torch': torch.__version__})}"
        done = (self.root / f"{name}.npz").is_file()
        return run_parts(self.root, [name], lambda _: compute())[name], done

    def clear(self) -> None:
        """Drop the parts (the run is finished and its outputs written)."""
        if self.root is not None:
            shutil.rmtree(self.root, ignore_errors=True)


NO_WORK = Work(None)


def inputs(data: Labelled, cfg: CNNConfig, tcfg: TrainConfig, **more) -> dict:
    """What determines a part of training: the data, the configs, the --init weights and ``more`` (fold, seed, ...).

    ``data_hash`` covers each map's id, label and values only; a map's separators (an input channel of the CNN) and
    its input example (the folds group by it) come from its metadata, so they are keyed here too: a set pulled again
    with other metadata but the same maps must not resume the parts fitted on the old.
    """
    t = dataclasses.asdict(tcfg)
    if tcfg.init:  # the checkpoint's content, not its path: a renamed checkpoint still resumes
        t["init"] = sha256_file(tcfg.init)
    layout = hashlib.sha256(repr((data.seps, data.groups.tolist())).encode()).hexdigest()[:16]
    return {"data": data.data_hash, "layout": layout, "cfg": dataclasses.asdict(cfg), "tcfg": t, **more}


def array_hash(a: np.ndarray | None) -> str | None:
    return None if a is None else hashlib.sha256(np.ascontiguousarray(a).tobytes()).hexdigest()[:16]


@dataclasses.dataclass
class TrainConfig:
    folds: int = 5
    seed: int = 0
    max_epochs: int = 80
    patience: int = 15
    batch_size: int = 16
    lr: float | None = None  # None: 3e-3 from a random start, INIT_LR with init (resolved when the config is made)
    weight_decay: float = 1e-4
    resample_p: float = 0.5  # probability of resampling T in augmentation
    resample_range: tuple[float, float] = (0.7, 1.4)
    gamma_range: tuple[float, float] = (0.8, 1.25)
    label_smoothing: float = 0.05
    # Class weights (n / (K * count)) ** power: 1 balances the classes fully, 0 not at all. With a class of a
    # handful of maps (block: 6 of 1,075) full balancing weighs each of its maps ~85x a vertical one, and the
    # model then calls vertical maps block; the square root keeps the rare classes heard without that.
    class_weight_power: float = 0.5
    # A checkpoint of `patterncnn pretrain` (a CNN pretrained on synthetic maps) every fit starts from, instead of
    # a random initialisation; None: random. Its hash goes into every resumable part's name.
    init: str | None = None
    # Keep the BatchNorm running statistics the fit starts from (the pretrained CNN's, from synthetic maps) instead
    # of re-estimating them on the labelled maps' batches; the BatchNorm scales and shifts still learn. Only with
    # init: a random start has no statistics to keep.
    freeze_bn: bool = False
    # Correct the fitted CNN's logits by a shift per class, fitted on maps it did not train on (bias-corrected
    # temperature scaling, :func:`bcts`): the class weights above tilt the posteriors toward the rare classes, and
    # the shift, fitted without weights, tilts them back. A held-out fit is corrected on its early-stopping maps,
    # the final fit on the cross-validation's out-of-fold posteriors (:func:`corrected_out_of_fold`). One CNN
    # (members 1): an ensemble averages probabilities, which one shift per member does not correct alike.
    bias_correction: bool = False

    def __post_init__(self):
        if self.lr is None:
            self.lr = INIT_LR if self.init else RANDOM_START_LR


def class_weights(y: np.ndarray, power: float) -> np.ndarray:
    """The loss weight of each class for training labels ``y``: (n / (K * count)) ** power (see
    TrainConfig.class_weight_power); a class with no map weighs as one with one."""
    counts = np.bincount(y, minlength=len(LABELS)).astype(np.float64)
    return (len(y) / (len(LABELS) * np.maximum(counts, 1))) ** power


def train_mode(model: nn.Module, freeze_bn: bool = False) -> None:
    """Put ``model`` in training mode; with ``freeze_bn`` its BatchNorm layers stay in eval mode: they normalise
    with the statistics they hold and do not update them (TrainConfig.freeze_bn)."""
    model.train()
    if freeze_bn:
        for m in model.modules():
            if isinstance(m, nn.BatchNorm2d):
                m.eval()


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


# CNNConfig's fields as the options of `train` and `pretrain` set them (cli/common.py add_cnn_args)
CNN_OPTIONS = {"grid": "--grid", "representation": "--representation", "segment_channel": "--no-segment-channel",
               "structure_channels": "--no-structure-channels", "mass_channel": "--no-mass-channel"}


def _spelled(field: str, was, now) -> str:
    """One difference between a checkpoint's CNN and this one, as the option that makes it: "--grid: was 32, now
    16", "--no-mass-channel: given for the checkpoint, not now"."""
    option = CNN_OPTIONS.get(field)
    if option is None:
        return f"{field}: was {was}, now {now}"
    if option.startswith("--no-"):
        return f"{option}: {'given for the checkpoint, not now' if now else 'given now, not for the checkpoint'}"
    return f"{option}: was {was}, now {now}"


def load_init(path: str | Path, cfg: CNNConfig) -> dict:
    """The state dict of a pretrained checkpoint (``patterncnn pretrain``) to start a fit of ``cfg`` from.

    Raises:
        TrainError: the file is missing or not a pretrained checkpoint (:func:`~patterncnn.classifier.model.read_checkpoint`:
            a trained classifier is not one), or its CNN differs from ``cfg``'s.
    """
    path = Path(path)
    try:
        ckpt = read_checkpoint(path, "pretrained")
    except ClassifierError as e:
        raise TrainError(f"--init {e}") from None
    theirs, state = config_from_dict(ckpt["model_config"]), ckpt["state_dict"]
    mine = member_config(cfg)
    if model_config_dict(theirs) != model_config_dict(mine):
        theirs_d = model_config_dict(theirs)
        diff = sorted(_spelled(k, theirs_d.get(k), v) for k, v in model_config_dict(mine).items() if theirs_d.get(k) != v)
        raise TrainError(f"--init {path} was pretrained for another CNN ({'; '.join(diff)}): pretrain one with the "
                         f"same options as this `train` (`patterncnn pretrain --help`), or give this `train` the "
                         f"checkpoint's")
    try:
        with torch.random.fork_rng():  # checking the weights must not move the caller's random state
            PatternCNN(mine).load_state_dict(state)
    except (RuntimeError, TypeError, AttributeError) as e:
        raise TrainError(f"--init {path}: its weights do not fit its own model config ({str(e).splitlines()[0]}); "
                         f"pretrain it again with `patterncnn pretrain --out {path}`") from None
    return state


def fit(data: Labelled, train_idx, val_idx, cfg: CNNConfig, tcfg: TrainConfig, seed: int,
        epochs: int | None = None, tick: Callable | None = None, targets: np.ndarray | None = None,
        init: dict | None = None) -> tuple[PatternCNN, int, list]:
    """Train one model. With ``val_idx``, early-stop on its macro-F1; else run ``epochs`` epochs.

    ``targets`` (N, 5), e.g. annotator vote shares, replace the hard labels as cross-entropy targets
    (class weights and early stopping still use the hard labels). ``init``: a state dict to start from (a
    pretrained CNN of the same config, :mod:`patterncnn.training.pretrain`) instead of a random initialisation;
    without it, ``tcfg.init``'s checkpoint when set.

    Returns:
        (model with the best weights, best epoch (1-based), per-epoch history).
    """
    torch.manual_seed(seed)
    rng = np.random.default_rng(seed)
    model = PatternCNN(member_config(cfg))  # one CNN, also when it is a member of an ensemble
    if init is None and tcfg.init:
        init = load_init(tcfg.init, cfg)
    if init is not None:
        model.load_state_dict(init)
    if tcfg.freeze_bn and init is None:
        raise TrainError("freezing the BatchNorm statistics keeps those of the weights a fit starts from: "
                         "give --init a pretrained CNN, or drop --freeze-bn")
    opt = torch.optim.AdamW(model.parameters(), lr=tcfg.lr, weight_decay=tcfg.weight_decay)
    n_epochs = epochs or tcfg.max_epochs
    sched = torch.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=n_epochs)
    y = torch.as_tensor(data.y if targets is None else np.asarray(targets, dtype=np.float32))
    weights = torch.tensor(class_weights(data.y[train_idx], tcfg.class_weight_power), dtype=torch.float32)
    x_val = model_inputs(data.maps, data.seps, val_idx, cfg) if val_idx is not None and len(val_idx) else None
    best = (-1.0, 0, None)
    history, stale = [], 0
    for epoch in range(1, n_epochs + 1):
        train_mode(model, tcfg.freeze_bn)
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
                epochs: int | None = None, tick: Callable | None = None, targets: np.ndarray | None = None,
                init: dict | None = None) -> tuple[nn.Module, list[int]]:
    """The classifier ``cfg`` describes, fitted: ``cfg.members`` CNNs by :func:`fit`, each with its own seed.

    Returns:
        (one :class:`PatternCNN`, or a :class:`PatternEnsemble` of the members; each member's best epoch).
    """
    fits = [fit(data, train_idx, val_idx, cfg, tcfg, seed=seed + MEMBER_SEED_STEP * s, epochs=epochs, tick=tick,
                targets=targets, init=init) for s in range(cfg.members)]
    return build_model(cfg, [f[0] for f in fits]).eval(), [f[1] for f in fits]


def median_epoch(epochs) -> int:
    """The epoch count a fit without early stopping runs: the median of early-stopped ones, rounded down."""
    return int(np.median(epochs))


def predict_proba(model: nn.Module, data: Labelled, idx, cfg: CNNConfig) -> np.ndarray:
    with torch.inference_mode():
        return torch.softmax(model(model_inputs(data.maps, data.seps, idx, cfg)), dim=1).numpy()


def bcts(probs: np.ndarray, y: np.ndarray, l2: float = 1e-4) -> tuple[float, np.ndarray]:
    """(temperature T, bias per class b) of bias-corrected temperature scaling (BCTS, Alexandari et al. 2020), fitted
    on posteriors ``probs`` (N, 5) of maps labelled ``y``: softmax(log p / T + b) minimises the negative log-likelihood
    (L-BFGS from T = 1, b = 0; ``l2`` on b keeps the bias of a class absent from ``y`` finite)."""
    from scipy.optimize import minimize

    z = np.log(np.clip(probs, 1e-12, None))

    def nll(theta: np.ndarray) -> float:
        s = z / np.exp(theta[0]) + theta[1:]
        s = s - s.max(1, keepdims=True)
        lp = s - np.log(np.exp(s).sum(1, keepdims=True))
        return float(-lp[np.arange(len(y)), y].mean() + l2 * (theta[1:] ** 2).sum())

    theta = minimize(nll, np.zeros(z.shape[1] + 1), method="L-BFGS-B").x
    return float(np.exp(theta[0])), theta[1:]


def bias_shift(probs: np.ndarray, y: np.ndarray) -> np.ndarray:
    """The logit shift (5,) of :func:`bcts` fitted on ``probs`` and ``y``: argmax(log p / T + b) = argmax(log p + T b),
    so T b is the part that changes predictions (the temperature alone never does)."""
    t, b = bcts(probs, y)
    return t * b


def shifted(probs: np.ndarray, shift: np.ndarray) -> np.ndarray:
    """softmax(log p + shift) of probabilities ``probs`` (..., 5): what a head shifted by ``shift`` gives; a zero
    probability (the segment rule's block) stays zero."""
    with np.errstate(divide="ignore"):
        z = np.log(probs) + shift
    z = z - z.max(-1, keepdims=True)
    e = np.exp(z)
    return e / e.sum(-1, keepdims=True)


def shift_head(model: nn.Module, shift: np.ndarray) -> None:
    """Add ``shift`` to the logits of one CNN (its head's bias): the correction costs nothing at inference."""
    if not isinstance(model, PatternCNN):
        raise TrainError("the bias correction shifts one CNN's logits; an ensemble (--members > 1) averages "
                         "probabilities, which a shift per member does not correct alike: train with --members 1")
    with torch.no_grad():
        model.head[-1].bias += torch.as_tensor(shift, dtype=model.head[-1].bias.dtype)


def shift_record(shift: np.ndarray, fitted_on: str) -> dict:
    """How a classifier records the shift in its head (``bias_correction`` of its ``metrics.json`` and ``.pt``)."""
    return {"logit_shift": dict(zip(LABELS, np.asarray(shift).tolist())), "fitted_on": fitted_on}


def recorded_shift(record: dict) -> np.ndarray:
    """The shift (5,) of a :func:`shift_record`."""
    return np.array([record["logit_shift"][name] for name in LABELS], dtype=np.float64)


def correct_on(model: nn.Module, data: Labelled, idx: np.ndarray, cfg: CNNConfig) -> np.ndarray:
    """Fit the bias correction on ``model``'s posteriors of maps ``idx`` (labels ``data.y``; the segment rule applied,
    as the census applies it), shift ``model``'s head by it, and return the shift."""
    probs = rule_out_block(predict_proba(model, data, idx, cfg).astype(np.float64), [data.seps[i] for i in idx])
    shift = bias_shift(probs, data.y[idx])
    shift_head(model, shift)
    return shift


def corrected_out_of_fold(data: Labelled, oof: "OutOfFold") -> tuple["OutOfFold", np.ndarray]:
    """(the out-of-fold posteriors with each fold's rows corrected by a shift fitted on the other folds' rows, and their
    per-fold macro-F1; the shift fitted on every row, for the final fit). The shifts are fitted on the posteriors with
    the segment rule applied, as the census scores, and applied to them as they were; a fold's own rows never enter
    its shift (the other folds' rows were scored by models that trained on it, as in any cross-fitting)."""
    raw = oof.probs.astype(np.float64)
    ruled = rule_out_block(raw.copy(), data.seps)
    out, fold_f1 = np.zeros(raw.shape, dtype=np.float32), []
    for k in np.unique(oof.fold):
        mine = oof.fold == k
        out[mine] = shifted(raw[mine], bias_shift(ruled[~mine], data.y[~mine]))
        fold_f1.append(macro_f1(data.y[mine], out[mine].argmax(1)))
    shift = bias_shift(ruled, data.y)
    return dataclasses.replace(oof, probs=out, fold_macro_f1=fold_f1, shift=shift), shift


def check_folds(y: np.ndarray, groups: np.ndarray, n_folds: int) -> None:
    """Raise a one-line :class:`TrainError` unless grouped, stratified ``n_folds``-fold CV can put a map of every
    class in every test fold: each class needs maps from ``n_folds`` input examples at least.

    The message names the smallest class (by input examples) and the folds it allows.
    """
    if n_folds < 2:
        raise TrainError(f"--folds must be at least 2 (got {n_folds})")
    name, g, has = smallest_class(y, groups)
    if g >= n_folds:
        return
    if g < 2:
        raise TrainError(f"the smallest class, {name}, has {has}: it allows no cross-validation (--folds K needs every "
                         f"class in K input examples, one per test fold, and K >= 2; asked for {n_folds}); label more "
                         f"{name} maps")
    raise TrainError(f"the smallest class, {name}, has {has}: it allows at most --folds {g} (one of its examples per "
                     f"test fold), not {n_folds}; pass --folds {g} or label more {name} maps")


def smallest_class(y: np.ndarray, groups: np.ndarray) -> tuple[str, int, str]:
    """The class whose maps come from the fewest input examples (grouped folds can put it in at most that many test
    folds): (its label, its input examples, "N map(s) from G input example(s)" as the messages say it)."""
    present = sorted(set(y.tolist()))
    examples = {k: len(set(groups[y == k].tolist())) for k in present}
    smallest = min(present, key=lambda k: (examples[k], k))
    n, g = int((y == smallest).sum()), examples[smallest]
    return LABELS[smallest], g, f"{n} map(s)" + (f" from {g} input example(s)" if g != n else "")


def folds(data: Labelled, tcfg: TrainConfig) -> list[tuple[np.ndarray, np.ndarray, np.ndarray]]:
    """(train, val, test) index arrays per outer fold: grouped by example, stratified by label.

    The validation part is one grouped, stratified fifth of the training part (:data:`INNER_SPLITS`), a larger
    share when the training part is too small to split in five (fewer than 5 examples, or of its largest class).

    Raises:
        TrainError: the set is too small for ``tcfg.folds`` folds (:func:`check_folds`).
    """
    from sklearn.model_selection import StratifiedGroupKFold

    check_folds(data.y, data.groups, tcfg.folds)
    outer = StratifiedGroupKFold(n_splits=tcfg.folds, shuffle=True, random_state=tcfg.seed)
    out = []
    for k, (tr, te) in enumerate(outer.split(np.zeros(len(data.y)), data.y, data.groups)):
        n_inner = min(INNER_SPLITS, int(np.bincount(data.y[tr]).max()), len(set(data.groups[tr].tolist())))
        if n_inner < 2:
            raise TrainError(f"fold {k + 1} of {tcfg.folds} trains on {len(tr)} map(s), too few to hold some out for "
                             f"early stopping (it needs two of one class, from two input examples); label more maps "
                             f"or pass fewer --folds")
        # sklearn takes seeds below 2**32, which --seed reaches (its top values failed after the folds: helper 99)
        inner = StratifiedGroupKFold(n_splits=n_inner, shuffle=True, random_state=(tcfg.seed + 100 + k) % 2**32)
        itr, iva = next(inner.split(np.zeros(len(tr)), data.y[tr], data.groups[tr]))
        out.append((tr[itr], tr[iva], te))
    return out


@dataclasses.dataclass
class OutOfFold:
    """Out-of-fold CNN predictions: every map scored by the fold model that did not train on it."""

    probs: np.ndarray  # (N, 5) softmax probabilities
    fold: np.ndarray  # (N,) the outer fold of each map
    fold_macro_f1: list[float]
    best_epochs: list[int]  # per fold; fold-major, one per member, for an ensemble
    seconds: float
    shift: np.ndarray | None = None  # with TrainConfig.bias_correction: the final fit's (:func:`corrected_out_of_fold`)


def out_of_fold(data: Labelled, cfg: CNNConfig, tcfg: TrainConfig, progress=None,
                targets: np.ndarray | None = None, work: Work = NO_WORK, name: str = "CV") -> OutOfFold:
    """Train one model per grouped stratified fold and score its test fold (``targets``: see :func:`fit`); with
    ``tcfg.bias_correction``, the posteriors come corrected (:func:`corrected_out_of_fold`) and carry the final fit's
    shift.

    Args:
        progress: a ``tqdm``-like factory: one bar of epochs, its description naming the fold.
        work: where finished folds are kept; a fold found there is read back, not fitted again.
        name: what the bar calls this cross-validation.
    """
    oof = np.zeros((len(data.y), len(LABELS)), dtype=np.float32)
    fold_of = np.full(len(data.y), -1)
    fold_f1, best_epochs = [], []
    per_fold = tcfg.max_epochs * cfg.members
    desc = f"{name} {cfg.representation}-{cfg.grid}"
    splits = folds(data, tcfg)
    t0 = time.time()
    with progress_bar(progress, tcfg.folds * per_fold, desc, "ep") as bar:
        for k, (tr, va, te) in enumerate(splits):
            if bar:
                bar.set_description(f"{desc} fold {k + 1}/{tcfg.folds}")

            def compute(tr=tr, va=va, te=te, k=k) -> dict:
                model, epochs = fit_members(data, tr, va, cfg, tcfg, seed=tcfg.seed + k,
                                            tick=bar.update if bar else None, targets=targets)
                return {"probs": predict_proba(model, data, te, cfg), "epochs": np.array(epochs)}

            part, resumed = work.part("cv", inputs(data, cfg, tcfg, fold=k, targets=array_hash(targets)), compute)
            oof[te] = part["probs"]
            fold_of[te] = k
            fold_f1.append(macro_f1(data.y[te], oof[te].argmax(1)))
            best_epochs.extend(int(e) for e in part["epochs"])
            if bar:  # early stopping ends a fold before its epoch cap; a resumed fold is done at once
                bar.update((k + 1) * per_fold - bar.n)
                if resumed:
                    bar.set_postfix_str(f"fold {k + 1} resumed")
    out = OutOfFold(oof, fold_of, fold_f1, best_epochs, round(time.time() - t0, 1))
    return corrected_out_of_fold(data, out)[0] if tcfg.bias_correction else out


def cv_report(data: Labelled, oof: OutOfFold) -> dict:
    """The classification report of out-of-fold predictions, with the per-fold figures."""
    rep = classification_report(data.y, oof.probs.argmax(1))
    rep.update({"fold_macro_f1": oof.fold_macro_f1, "fold_macro_f1_mean": float(np.mean(oof.fold_macro_f1)),
                "fold_macro_f1_std": float(np.std(oof.fold_macro_f1)), "best_epochs": oof.best_epochs,
                "median_best_epoch": median_epoch(oof.best_epochs), "seconds": oof.seconds,
                "certain_only_macro_f1": macro_f1(data.y[~data.uncertain], oof.probs[~data.uncertain].argmax(1))})
    return rep


def cross_validate(data: Labelled, cfg: CNNConfig, tcfg: TrainConfig, progress=None, work: Work = NO_WORK) -> dict:
    """Out-of-fold CNN predictions over the grouped stratified folds, with the report."""
    return cv_report(data, out_of_fold(data, cfg, tcfg, progress, work=work))


def fit_final(data: Labelled, cfg: CNNConfig, tcfg: TrainConfig, epochs: int, progress=None,
              work: Work = NO_WORK, shift: np.ndarray | None = None) -> nn.Module:
    """Train on all labelled maps for a fixed number of epochs (chosen by CV early stopping); every member alike.

    Args:
        progress: a ``tqdm``-like factory (a bar of epochs).
        work: where the fitted weights are kept (a second run with the same inputs reads them back).
        shift: the bias correction to add to the fitted CNN's logits (:func:`corrected_out_of_fold`); None: none.
    """
    idx = np.arange(len(data.y))
    epochs = max(1, epochs)
    fitted = []
    with progress_bar(progress, epochs * cfg.members, f"final fit on {len(idx)} maps", "ep") as bar:
        def compute() -> dict:
            model, _ = fit_members(data, idx, None, cfg, tcfg, seed=tcfg.seed, epochs=epochs,
                                   tick=bar.update if bar else None)
            fitted.append(model)
            buf = io.BytesIO()
            torch.save(model.state_dict(), buf)
            return {"state_dict": np.frombuffer(buf.getvalue(), dtype=np.uint8)}

        part, resumed = work.part("final", inputs(data, cfg, tcfg, epochs=epochs), compute)
        if bar:
            bar.update(bar.total - bar.n)
    if resumed:
        with torch.random.fork_rng():  # a fresh model's initialisation must not move the caller's random state
            model = build_model(cfg)
        model.load_state_dict(torch.load(io.BytesIO(part["state_dict"].tobytes()), weights_only=True))
    else:
        model = fitted[0]
    if shift is not None:  # the kept part is the fit itself; the shift is added on reading it back too
        shift_head(model, shift)
    return model.eval()


def throughput(cfg: CNNConfig, t: int = 64, n: int = 512, threads: int = 2) -> float:
    """Maps/s of preprocessing + forward pass in torch eager for one batch of (n, t, t) maps."""
    model = build_model(cfg).eval()
    maps = torch.softmax(torch.randn(n, t, t), dim=-1)
    seps = [[t // 2, t - 1]] * n
    with torch_threads(threads), torch.inference_mode():
        model(preprocess(maps[:8], seps[:8], cfg))
        t0 = time.perf_counter()
        model(preprocess(maps, seps, cfg))
        return n / (time.perf_counter() - t0)
