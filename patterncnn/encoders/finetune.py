"""Fine-tune an encoder on a GLUE task with transformers' Trainer, as the paper's maps came from.

Usage (what ``patterncnn finetune`` runs)::

    result = finetune("minilm", "sst2", glue_dir="glue_data", out="models/minilm-sst2",
                      max_train_examples=4000)
    result["dev"]   # {"accuracy": 0.85, ...}

Defaults follow the paper (BERT's recipe): batch 32, 3 epochs, learning rate 2e-5, max length
128, linear decay with 10% warm-up. STS-B gets a 1-output regression head. The folder written is a
normal Hugging Face checkpoint that ``--model`` accepts everywhere; ``patterncnn_finetune.json``
beside it records the settings, data, base model and dev scores.

Resumable: the Trainer saves a checkpoint (weights, optimizer, scheduler, random states) every
:data:`SAVE_STEPS` steps and at the last one into ``OUT/.work/<task>/``, stamped with the run's
arguments (:func:`patterncnn.core.work.work_dir`). The same call again continues from the last
complete checkpoint (on a CPU to the same weights as an uninterrupted run); other arguments are
refused while an unfinished run is there, and so is another task (``overwrite`` starts such a run over). The model
lands in ``OUT`` only once trained, saved and scored, replacing what was there (``overwrite``; :func:`_replace`);
the work folder goes with it.
"""

from __future__ import annotations

import contextlib
import dataclasses
import errno
import json
import logging
import os
import shutil
import tempfile
import time
from pathlib import Path

import numpy as np
import torch

from ..core.fileio import LOCK, OutputError, interrupts_held, output_folder, swap_into_place, write_json
from ..core.glue import GlueTask, get_task, load_split
from ..core.version import __version__
from ..core.work import WORK, RunError, work_dir
from .load import MANIFEST, EncoderError, bounded_texts, load_encoder, resolve_model

log = logging.getLogger(__name__)

SAVE_STEPS = 25  # optimizer steps between two checkpoints (and two loss logs): 20 s to 2 min of a CPU run
CHECKPOINT = "checkpoint-"  # the Trainer's checkpoint folders: checkpoint-<step>
TRAINER_STATE = "trainer_state.json"  # written last into a checkpoint: its presence marks the checkpoint complete


@dataclasses.dataclass
class FinetuneConfig:
    batch_size: int = 32
    epochs: float = 3.0
    learning_rate: float = 2e-5
    warmup_ratio: float = 0.1
    weight_decay: float = 0.01
    max_length: int = 128
    max_train_examples: int | None = None
    max_dev_examples: int | None = None
    seed: int = 42


def glue_metrics(task: GlueTask, preds: np.ndarray, labels: np.ndarray) -> dict[str, float]:
    """The dev metric(s) GLUE reports for the task.

    Args:
        preds: (N,) predicted class ids, or (N,) scores for STS-B.
        labels: (N,) gold labels.
    """
    from scipy.stats import pearsonr, spearmanr
    from sklearn.metrics import accuracy_score, f1_score, matthews_corrcoef

    if task.metric == "corr":
        return {"pearson": float(pearsonr(preds, labels)[0]), "spearman": float(spearmanr(preds, labels)[0])}
    m = {"accuracy": float(accuracy_score(labels, preds))}
    if task.metric == "f1":
        m["f1"] = float(f1_score(labels, preds))
    if task.metric == "mcc":
        m["mcc"] = float(matthews_corrcoef(labels, preds))
    return m


class _Encoded(torch.utils.data.Dataset):
    def __init__(self, tokenizer, examples, max_length: int, regression: bool):
        self.items = []
        for ex in examples:
            enc = tokenizer(*bounded_texts(ex.texts, max_length)[0], truncation=True, max_length=max_length)
            enc["labels"] = float(ex.label) if regression else int(ex.label)
            self.items.append(dict(enc))

    def __len__(self) -> int:
        return len(self.items)

    def __getitem__(self, i: int) -> dict:
        return self.items[i]


def _training_args(cfg: FinetuneConfig, folder: Path, progress: bool):
    from transformers import TrainingArguments

    return TrainingArguments(
        output_dir=str(folder), per_device_train_batch_size=cfg.batch_size,
        per_device_eval_batch_size=64, num_train_epochs=cfg.epochs, learning_rate=cfg.learning_rate,
        warmup_steps=cfg.warmup_ratio, weight_decay=cfg.weight_decay, seed=cfg.seed, save_strategy="steps",
        save_steps=SAVE_STEPS, save_total_limit=1, eval_strategy="no", logging_steps=SAVE_STEPS, report_to="none",
        use_cpu=not torch.cuda.is_available(), disable_tqdm=not progress,
    )


def last_checkpoint(work: Path) -> Path | None:
    """The newest complete Trainer checkpoint in ``work`` (one with its trainer state), or None."""
    steps = [(int(p.name.removeprefix(CHECKPOINT)), p) for p in work.glob(f"{CHECKPOINT}*")
             if p.name.removeprefix(CHECKPOINT).isdigit() and (p / TRAINER_STATE).is_file()]
    return max(steps)[1] if steps else None


def saved_checkpoints(out: str | Path) -> bool:
    """Whether an interrupted fine-tune into ``out`` left a checkpoint to resume from (``OUT/.work/<task>/``)."""
    return any(last_checkpoint(w) for w in (Path(out) / WORK).glob("*/"))


def _log_at_saves():
    """A Trainer callback that logs the loss whenever a checkpoint is saved, before it is saved: so every checkpoint's
    trainer state holds the losses of all the steps up to it, also the final one at a step that is not a multiple of
    the logging interval (:func:`_mean_loss` of a run resumed from it counts them all)."""
    from transformers import TrainerCallback

    class LogAtSaves(TrainerCallback):
        def on_step_end(self, args, state, control, **kwargs):
            if control.should_save:
                control.should_log = True
            return control

    return LogAtSaves()


def _mean_loss(history: dict | None, steps: int, loss: float) -> float:
    """The mean training loss over all ``steps``, also of a run resumed from a checkpoint whose trainer state is
    ``history`` (its Trainer's ``loss`` averages only the steps it ran): the steps before the checkpoint from the
    losses logged up to it (at every save, :func:`_log_at_saves`)."""
    if history is None:
        return loss
    done, total, last = history["global_step"], 0.0, 0
    for entry in history["log_history"]:
        if "loss" in entry and entry["step"] <= done:
            total += entry["loss"] * (entry["step"] - last)
            last = entry["step"]
    return (total + loss * (steps - done)) / max(steps, 1)


def _check_out(out: Path, task: str, overwrite: bool) -> Path:
    """Check ``out`` before any work. A model there needs ``overwrite`` (:func:`output_folder`); ``out`` holding only
    its work folder is an unfinished fine-tune, resumed by a run of its task. An unfinished fine-tune of another task
    with a checkpoint is refused unless ``overwrite``: this run, once finished, would replace ``out``, its checkpoints
    with it. (One without a checkpoint left nothing to keep.)"""
    if overwrite or not (out.is_dir() and (out / WORK).is_dir() and {p.name for p in out.iterdir()} - {LOCK} == {WORK}):
        out = output_folder(out, (), overwrite)
    real = Path(os.path.realpath(out))  # the model lands by renaming a folder into its place, beside it
    if os.path.ismount(real):
        raise OutputError(f"--out {out} is a mount point: the fine-tuned model is put in place by a rename, which "
                          f"cannot replace a mount point; give a folder inside it, such as {out / 'model'}")
    if real.parent.is_dir() and not os.access(real.parent, os.W_OK | os.X_OK):  # else made by this run
        raise OutputError(f"--out {out} is the folder {real}, and this user cannot write into {real.parent}, where "
                          f"the fine-tuned model is put in place by a rename; make it writable, or choose another "
                          f"--out")
    others = sorted(p.name for p in (out / WORK).glob("*/") if p.name != task and last_checkpoint(p))
    if others and not overwrite:
        raise RunError(f"{out} holds an unfinished fine-tune of {' and '.join(others)}; run it with its earlier "
                       f"arguments to resume it, pass --overwrite to start over, or choose another --out")
    return out


def _replace(out: Path, model_dir: Path) -> None:
    """Put the finished ``model_dir`` (inside ``out``'s work folder) at ``out`` in place of what is there, in one
    atomic exchange where the system has one (:func:`swap_into_place`): ``out`` is never missing, so a run starting
    meanwhile is refused by its lock. A Ctrl-C lands once that is done (:func:`interrupts_held`). If the
    model cannot be moved, it is put back in the work folder, where the same command run again finds it finished
    (its last checkpoint) and only scores and saves it again. A symlinked ``out`` keeps its link: the folder it
    points to is replaced."""
    out = Path(os.path.realpath(out))
    with interrupts_held():  # a Ctrl-C lands once the model is in place and what it replaced is gone
        aside = Path(tempfile.mkdtemp(prefix=f".{out.name}.", dir=out.parent))
        moved = aside / "model"
        with contextlib.suppress(OSError):  # the same lock file (one inode) in the new folder: out stays locked
            os.link(out / LOCK, model_dir / LOCK)
        try:
            model_dir.rename(moved)
            swap_into_place(moved, out)
        except OutputError as e:  # neither done nor undone (no atomic exchange here): nothing is removed
            raise OutputError(f"{e}; the fine-tuned model is in {moved}") from None
        except OSError as e:  # nothing swapped: the model goes back where it was saved
            for undo in (lambda: moved.rename(model_dir), (model_dir / LOCK).unlink, aside.rmdir):
                with contextlib.suppress(OSError):
                    undo()
            kept = model_dir if model_dir.is_dir() else moved
            fix = (f"give --out a folder inside {out}, which is a mount point or on another file system than its "
                   f"folder; the same command with that --out trains again" if e.errno in (errno.EXDEV, errno.EBUSY)
                   else "run the same command again to finish, it resumes from its last checkpoint")
            raise OutputError(f"the fine-tuned model could not be moved to {out} ({e}); it is kept in {kept}: "
                              f"{fix}") from None
        shutil.rmtree(aside, ignore_errors=True)  # what was at out, moved there by the swap


def _data_record(split) -> dict:
    return {"source": split.source, "examples": len(split.examples), "of": split.total, "skipped_rows": split.skipped}


def finetune(model: str, task: str, glue_dir: str | None, out: str | Path, cfg: FinetuneConfig | None = None,
             progress: bool = True, overwrite: bool = False) -> dict:
    """Fine-tune ``model`` on ``task``'s train split and score it on the dev split.

    Returns:
        The manifest written beside the model (settings, data, dev metrics, times).

    ``out`` is the model's folder: one already there needs ``overwrite`` (it is replaced only once the
    new model is saved; :func:`patterncnn.core.fileio.output_folder`), unless it holds only an unfinished run of
    the same task and arguments, which is resumed from its last checkpoint (:func:`_check_out`). ``overwrite``
    starts an unfinished run of other arguments or of another task over, and resumes one of the same arguments (an
    ``overwrite`` run interrupted beside the old model continues when called again the same way).

    Raises:
        OutputError: ``out`` already exists (without ``overwrite``), or is not a folder.
        RunError: ``out`` holds an unfinished run of other arguments (the message names them), or of another task.
        EncoderError / GlueDataError: bad model or data, with the fix in the message.
    """
    from transformers import AutoModelForSequenceClassification, AutoTokenizer, DataCollatorWithPadding, Trainer

    cfg = cfg or FinetuneConfig()
    bad = [f"{name} {value}" for name, value, ok in (
        ("epochs", cfg.epochs, cfg.epochs > 0), ("learning_rate", cfg.learning_rate, cfg.learning_rate > 0),
        ("batch_size", cfg.batch_size, cfg.batch_size >= 1), ("max_length", cfg.max_length, cfg.max_length >= 1))
        if not ok]
    if bad:  # checked before any work, as the command checks its options
        raise ValueError(f"cannot fine-tune with {', '.join(bad)}: epochs and learning_rate must be greater than 0, "
                         f"batch_size and max_length at least 1")
    t = get_task(task)
    out = _check_out(Path(out), t.name, overwrite)
    train = load_split(t, "train", glue_dir, limit=cfg.max_train_examples, seed=cfg.seed)
    dev = load_split(t, "dev", glue_dir, limit=cfg.max_dev_examples, seed=cfg.seed)
    base = load_encoder(model, max_length=cfg.max_length)  # validates the model, gives its fingerprint
    path = resolve_model(model)
    tokenizer = AutoTokenizer.from_pretrained(path)
    torch.manual_seed(cfg.seed)  # the new head's initial weights: the same whatever ran before in this process
    try:
        clf = AutoModelForSequenceClassification.from_pretrained(
            path, num_labels=t.num_labels, problem_type="regression" if t.is_regression else None)
    except (OSError, ValueError) as e:
        raise EncoderError(f"cannot add a classification head to {model!r}: {e}") from None
    train_ds = _Encoded(tokenizer, train.examples, cfg.max_length, t.is_regression)
    dev_ds = _Encoded(tokenizer, dev.examples, cfg.max_length, t.is_regression)

    def compute(p):
        logits = p.predictions[0] if isinstance(p.predictions, tuple) else p.predictions
        preds = logits.squeeze(-1) if t.is_regression else logits.argmax(-1)
        return glue_metrics(t, preds, p.label_ids)

    for other in [p for p in (out / WORK).glob("*/") if p.name != t.name and (overwrite or not last_checkpoint(p))]:
        log.warning("dropping the unfinished fine-tune of %s in %s: %s", other.name, out,
                    "discarded, as overwrite was given" if last_checkpoint(other)
                    else "it saved no checkpoint to resume from")
        shutil.rmtree(other)  # another task's unfinished run: started over, or it left nothing (this task's: work_dir)
    params = {"task": t.name, "source": train.source, "model": base.fingerprint, "version": __version__,
              **{k: v for k, v in dataclasses.asdict(cfg).items() if k != "max_dev_examples"}}  # dev: only scored
    if torch.cuda.is_available():
        params["device"] = "cuda"  # a CPU run never resumes from a GPU's checkpoint
    # resumed when its stamp is these arguments, even with overwrite
    work = work_dir(out, t.name, params, overwrite, command="finetune")
    for partial in {p for p in work.glob(f"{CHECKPOINT}*")} - {last_checkpoint(work)}:
        shutil.rmtree(partial)  # cut short while being written (or an older one the Trainer had not removed)
    resume = last_checkpoint(work)
    history = json.loads((resume / TRAINER_STATE).read_text()) if resume else None  # the Trainer removes it
    if resume is not None:
        log.info("resuming the fine-tune in %s from its checkpoint at step %s", out,
                 resume.name.removeprefix(CHECKPOINT))
    trainer = Trainer(model=clf, args=_training_args(cfg, work, progress), train_dataset=train_ds,
                      eval_dataset=dev_ds, data_collator=DataCollatorWithPadding(tokenizer), compute_metrics=compute,
                      callbacks=[_log_at_saves()])
    t0 = time.time()
    train_out = trainer.train(resume_from_checkpoint=str(resume) if resume else None)
    train_s = time.time() - t0
    t0 = time.time()
    scores = trainer.evaluate()
    eval_s = time.time() - t0
    dev_metrics = {k.removeprefix("eval_"): v for k, v in scores.items()
                   if k.removeprefix("eval_") in ("accuracy", "f1", "mcc", "pearson", "spearman")}
    model_dir = work / "model"
    shutil.rmtree(model_dir, ignore_errors=True)  # a model saved by a run stopped before it moved it to out
    trainer.save_model(str(model_dir))
    tokenizer.save_pretrained(str(model_dir))
    resumed = {"resumed_at_step": history["global_step"]} if history else {}
    manifest = {
        "created_by": f"patterncnn {__version__}", "task": t.name, "base_model": base.fingerprint,
        **({"base_weights": base.weights_note} if base.weights_note else {}),  # kept when the base folder moves
        "settings": dataclasses.asdict(cfg), "dev": dev_metrics,
        "train": {**_data_record(train), "loss": _mean_loss(history, trainer.state.global_step,
                                                             train_out.training_loss),
                  "seconds": round(train_s, 1), **resumed},
        "dev_data": {**_data_record(dev), "seconds": round(eval_s, 1)},
    }
    write_json(model_dir / MANIFEST, manifest)
    _replace(out, model_dir)
    return manifest
