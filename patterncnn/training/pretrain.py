"""``patterncnn pretrain``: the CNN trained on synthetic maps labelled by construction, for ``train --init``.

Usage::

    ckpt = pretrain("models/pretrained-synthetic.pt", CNNConfig(), PretrainConfig(maps=1_000_000))
    # then: train_and_export(..., tcfg=TrainConfig(init="models/pretrained-synthetic.pt"))

Two or three encoder families are too few to learn what a pattern is apart from how one family draws it. The
maps here come from :mod:`patterncnn.training.synthetic`, a procedural generator of the five classes that follows
the annotation guide (version 1.1), with lengths, layouts, column and diagonal kinds, haze and sharpness drawn
widely. They are streamed, never stored: pool ``k`` of ``pool`` maps is drawn with the generator seeded by
``(seed, k)``, cut into batches, preprocessed by the classifier's own :func:`~patterncnn.classifier.model.preprocess`
with the training augmentation (length resampling, gamma), and fed to the 8-layer CNN with AdamW and a one-cycle
schedule over the whole stream.

Resumable: every :data:`SAVE_EVERY` steps the model, optimiser, schedule and step are written, atomically, to
``OUT.partial``; a run started again with the same arguments continues from there (one of other arguments is
refused with the options that differ, unless ``overwrite``, which starts over). Every random draw is derived
from (seed, step), so a resumed run ends with exactly the weights of an uninterrupted one. The finished checkpoint
(``state_dict``, ``model_config``, ``pretrained_on``) replaces ``OUT`` atomically and the partial file goes.

How far a pretrained CNN carries is measured in ``docs/pages/classifier.md`` (*Encoder families it never saw*).
"""

from __future__ import annotations

import dataclasses
import io
import json
import logging
import time
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F

from ..classifier.model import CNNConfig, PatternCNN, model_config_dict, preprocess, read_checkpoint
from ..core.errors import PatternCNNError
from ..core.fileio import output_file, sha256_file, write_bytes
from ..core.version import __version__
from ..core.work import differences, progress_bar
from . import synthetic
from .fit import CNN_OPTIONS, TrainConfig, torch_threads

log = logging.getLogger(__name__)

SAVE_EVERY = 256  # steps between two writes of the partial run
MAX_T = 512  # the longest map drawn at most: the position limit of BERT-family encoders (real maps stop at --max-length)
HELD_OUT_SEED = 10_000  # the held-out synthetic maps are drawn with (HELD_OUT_SEED + seed): never trained on


class PretrainError(PatternCNNError, ValueError):
    """Pretraining cannot run as asked; says what to do."""


def partial_file(out: str | Path) -> Path:
    """Where a pretraining run into ``out`` keeps its steps until it finishes: ``OUT.partial``."""
    out = Path(out)
    return out.with_name(out.name + ".partial")


@dataclasses.dataclass
class PretrainConfig:
    maps: int = 1_000_000  # synthetic maps streamed through the CNN (steps = maps // batch_size)
    batch_size: int = 128
    lr: float = 3e-3  # the one-cycle schedule's peak
    seed: int = 0
    max_t: int = 256  # the longest synthetic map
    held_out: int = 2000  # synthetic maps scored as it goes
    pool: int = 4096  # maps drawn per generator call (a call has a fixed cost per chunk of maps of similar lengths)
    faint_columns: bool = False  # the generator's research variant of the diagonal class (synthetic.batch)

    def __post_init__(self):
        if self.batch_size < 2 or self.batch_size > self.pool:
            raise PretrainError(f"--batch-size must be between 2 and {self.pool} (got {self.batch_size})")
        if self.maps < self.batch_size:
            raise PretrainError(f"--maps must be at least one batch ({self.batch_size}); got {self.maps}")
        if not 8 <= self.max_t <= MAX_T:  # memory grows as max_t squared: 100000 was killed by the kernel
            raise PretrainError(f"--max-t must be from 8 to {MAX_T}, the longest input a BERT-family encoder takes "
                                f"(got {self.max_t})")

    @property
    def steps(self) -> int:
        return self.maps // self.batch_size


def model_inputs(samples: list, cfg: CNNConfig, rng: np.random.Generator | None = None,
                 tcfg: TrainConfig | None = None) -> torch.Tensor:
    """The CNN inputs of synthetic samples, in their order; with ``rng``, the training augmentation.

    Maps of one length are preprocessed together (one length resampling drawn per length, a gamma per map):
    what makes millions of maps affordable, where :func:`patterncnn.training.fit.model_inputs` takes one at a time.
    """
    by_t: dict[int, list[int]] = {}
    for i, s in enumerate(samples):
        by_t.setdefault(s.map.shape[0], []).append(i)
    out: list = [None] * len(samples)
    for t, idx in sorted(by_t.items()):
        resample = None
        if rng is not None and rng.random() < tcfg.resample_p:
            resample = max(4, int(round(t * rng.uniform(*tcfg.resample_range))))
        maps = torch.from_numpy(np.stack([samples[i].map for i in idx]))
        x = preprocess(maps, [list(samples[i].seps) for i in idx], cfg, resample_to=resample)
        if rng is not None:
            x[:, 0] = x[:, 0] ** torch.from_numpy(rng.uniform(*tcfg.gamma_range, size=len(idx))).float()[:, None, None]
        for k, i in enumerate(idx):
            out[i] = x[k]
    return torch.stack(out)


def _batch(pcfg: PretrainConfig, step: int, pools: dict) -> list:
    """The synthetic maps of ``step``: its slice of pool ``step // per_pool``, drawn with seed (seed, pool)."""
    size = min(pcfg.pool, pcfg.steps * pcfg.batch_size)  # a short run draws only the maps it uses
    k, j = divmod(step, size // pcfg.batch_size)
    if k not in pools:
        pools.clear()  # one pool at a time
        pools[k] = synthetic.batch(size, np.random.default_rng([pcfg.seed, k]), max_t=pcfg.max_t,
                                   faint_columns=pcfg.faint_columns)
    return pools[k][j * pcfg.batch_size : (j + 1) * pcfg.batch_size]


# The option behind each field of a run's key (:func:`_changed`): what the refusal of a stopped run names.
OPTIONS = {"maps": "--maps", "batch_size": "--batch-size", "lr": "--lr", "seed": "--seed", "max_t": "--max-t",
           "pool": "pool (the maps drawn per generator call)", "held_out": "held_out (the held-out synthetic maps)",
           "faint_columns": "faint_columns (the generator's research variant)",
           **CNN_OPTIONS, "patterncnn": "the patterncnn version", "torch": "the torch version",
           "numpy": "the numpy version",
           "generator": "the synthetic map generator"}


def _changed(old, key: dict) -> str:
    """What differs between a stopped run's key (as its partial file holds it) and this run's, named by option."""
    def flat(k) -> dict:
        k = k if isinstance(k, dict) else {}
        nested = [v for v in (k.get("model_config"), k.get("pretrain_config")) if isinstance(v, dict)]
        return {**{f: v for f, v in k.items() if f not in ("model_config", "pretrain_config")},
                **{f: v for d in nested for f, v in d.items()}}

    as_stamped = json.loads(json.dumps(flat(old), default=str))  # as differences() takes them: tuples are lists
    return differences({"params": as_stamped}, flat(key), OPTIONS)


def _state(model, opt, sched, step: int, history: list, key: dict) -> bytes:
    buf = io.BytesIO()
    torch.save({"state_dict": model.state_dict(), "optimizer": opt.state_dict(), "scheduler": sched.state_dict(),
                "step": step, "history": history, "key": key}, buf)
    return buf.getvalue()


def pretrain(out: str | Path, cfg: CNNConfig, pcfg: PretrainConfig, overwrite: bool = False,
             progress=None) -> dict:
    """Pretrain one CNN of ``cfg`` on ``pcfg.maps`` synthetic maps; write the checkpoint to ``out``.

    Args:
        out: the checkpoint file (``.pt``); an existing one needs ``overwrite``, and so does a stopped run of other
            options in its partial file (:func:`partial_file`; a stopped run of the same options is resumed).
        progress: a ``tqdm``-like factory (one bar of maps).

    Returns:
        The checkpoint's ``pretrained_on`` record (maps, seed, held-out synthetic accuracy, seconds, ...).
    """
    if cfg.members != 1:
        raise PretrainError("pretraining makes one CNN; the members of an ensemble each start from it (--members "
                            "belongs to `patterncnn train`)")
    out = output_file(out, overwrite)
    partial = partial_file(out)
    tcfg = TrainConfig()
    key = {"model_config": model_config_dict(cfg), "pretrain_config": dataclasses.asdict(pcfg),
           "augmentation": {k: getattr(tcfg, k) for k in ("resample_p", "resample_range", "gamma_range")},
           "label_smoothing": tcfg.label_smoothing, "weight_decay": tcfg.weight_decay, "patterncnn": __version__,
           "torch": str(torch.__version__), "numpy": np.__version__,
           "generator": sha256_file(synthetic.__file__)}  # a changed generator must not continue an old stream
    with torch_threads(2):
        torch.manual_seed(pcfg.seed)
        model = PatternCNN(cfg)
        opt = torch.optim.AdamW(model.parameters(), lr=pcfg.lr, weight_decay=tcfg.weight_decay)
        sched = torch.optim.lr_scheduler.OneCycleLR(opt, max_lr=pcfg.lr, total_steps=pcfg.steps, pct_start=0.05)
        start, history = 0, []
        if partial.is_file():
            try:
                state = torch.load(partial, map_location="cpu", weights_only=True)
                if not isinstance(state, dict) or not {"key", "state_dict", "optimizer", "scheduler", "step",
                                                        "history"} <= set(state):
                    raise ValueError("not a partial pretraining run")
            except Exception as e:  # a damaged partial file: start again rather than stop
                log.warning("%s is damaged or not a stopped pretraining run (torch.load: %s): starting again",
                            partial, type(e).__name__)  # torch's text advises weights_only=False: not for this
                state = None
            if state is not None and state.get("key") != key:
                if not overwrite:
                    raise PretrainError(f"{partial} is a stopped run with other options ({_changed(state['key'], key)}): "
                                        f"run with the options it was started with to resume it, or pass --overwrite "
                                        f"to start over")
                log.info("%s: a stopped run with other options; --overwrite starts over", partial)
                partial.unlink()
                state = None
            if state is not None:
                model.load_state_dict(state["state_dict"])
                opt.load_state_dict(state["optimizer"])
                sched.load_state_dict(state["scheduler"])
                start, history = int(state["step"]), list(state["history"])
                log.info("resuming %s at %d of %d maps", out, start * pcfg.batch_size, pcfg.steps * pcfg.batch_size)
        held = synthetic.batch(pcfg.held_out, np.random.default_rng(HELD_OUT_SEED + pcfg.seed), max_t=pcfg.max_t,
                              faint_columns=pcfg.faint_columns)
        x_held = model_inputs(held, cfg)
        y_held = torch.tensor([s.label for s in held])
        t0, pools, loss_sum, n_loss = time.time(), {}, 0.0, 0

        def held_out_accuracy() -> float:
            model.eval()
            with torch.inference_mode():
                return float((model(x_held).argmax(1) == y_held).float().mean())

        with progress_bar(progress, pcfg.steps * pcfg.batch_size, "pretrain", "map", initial=start * pcfg.batch_size,
                          unit_scale=True) as bar:
            for step in range(start, pcfg.steps):
                samples = _batch(pcfg, step, pools)
                rng = np.random.default_rng([pcfg.seed, 1, step])
                torch.manual_seed(pcfg.seed * 1_000_003 + step)  # dropout: a function of (seed, step) too
                x = model_inputs(samples, cfg, rng, tcfg)
                y = torch.tensor([s.label for s in samples])
                model.train()
                loss = F.cross_entropy(model(x), y, label_smoothing=tcfg.label_smoothing)
                opt.zero_grad()
                loss.backward()
                opt.step()
                sched.step()
                loss_sum, n_loss = loss_sum + loss.item(), n_loss + 1
                if bar:
                    bar.update(len(samples))
                if (step + 1) % SAVE_EVERY == 0 and step + 1 < pcfg.steps:
                    history.append({"maps": (step + 1) * pcfg.batch_size, "loss": round(loss_sum / n_loss, 4),
                                    "held_out_accuracy": round(held_out_accuracy(), 4)})
                    if bar:
                        bar.set_postfix_str(f"held-out synthetic accuracy {history[-1]['held_out_accuracy']:.3f}")
                    loss_sum, n_loss = 0.0, 0
                    write_bytes(partial, _state(model, opt, sched, step + 1, history, key))
        acc = held_out_accuracy()
        record = {"synthetic_maps": pcfg.steps * pcfg.batch_size, **dataclasses.asdict(pcfg),
                  "held_out_accuracy": round(acc, 4), "history": history,
                  "seconds_this_run": round(time.time() - t0, 1), "patterncnn": __version__,
                  "generator": "patterncnn.training.synthetic (annotation guide 1.1)",
                  "generator_sha256": key["generator"]}  # which version of it drew the maps (since 2026-11-29)
        buf = io.BytesIO()
        torch.save({"state_dict": model.state_dict(), "model_config": model_config_dict(cfg),
                    "pretrained_on": record}, buf)
        write_bytes(out, buf.getvalue())
        partial.unlink(missing_ok=True)
        return record


def init_record(path: str | Path) -> dict:
    """What the model card says about a ``--init`` checkpoint: its file, hash and what it was pretrained on."""
    ckpt = read_checkpoint(path, "pretrained")
    on = {k: v for k, v in ckpt["pretrained_on"].items() if k != "history"}
    return {"path": Path(path).name, "sha256": sha256_file(path), "pretrained_on": on}
