"""``patterncnn finetune``: fine-tune an encoder on a GLUE task."""

from __future__ import annotations

import time
from pathlib import Path

from .common import (
    add_glue_args,
    add_model_args,
    add_overwrite,
    given,
    glue_dir,
    out_path,
    positive_float,
    positive_int,
)


def register(sub) -> None:
    p = sub.add_parser("finetune", help="fine-tune an encoder on a GLUE task (transformers Trainer)",
                       description="Fine-tune an encoder on a GLUE task's train split with a classification head "
                                   "(regression for STS-B), report the GLUE dev metric, save a folder --model "
                                   "accepts. Defaults are the paper's: batch 32, 3 epochs, lr 2e-5. Saves checkpoints "
                                   "into OUT/.work as it trains: an interrupted run resumes when run again with the "
                                   "same arguments.")
    p.add_argument("--task", type=given, required=True, help="GLUE task, e.g. sst2, rte, stsb")
    p.add_argument("--out", type=out_path, required=True, help="folder to write the fine-tuned model to")
    add_overwrite(p, "model, or an unfinished fine-tune of other arguments or of another task,")
    p.add_argument("--batch-size", type=positive_int, default=32, help="training batch size (default: %(default)s)")
    p.add_argument("--epochs", type=positive_float, default=3.0,
                   help="passes over the training examples; a fraction stops part-way (default: %(default)s)")
    p.add_argument("--learning-rate", type=positive_float, default=2e-5,
                   help="peak learning rate: linear warm-up over the first 10%% of steps, then linear decay "
                        "(default: %(default)s)")
    p.add_argument("--max-train-examples", type=positive_int, default=None,
                   help="train on a seeded random sample of this many examples (to fit a CPU's time budget)")
    p.add_argument("--max-dev-examples", type=positive_int, default=None,
                   help="score on at most this many dev examples")
    add_model_args(p)
    add_glue_args(p)
    for action in p._actions:  # finetune's seed also seeds the Trainer and the new head, not only the sampling
        if action.dest == "seed":
            action.help = ("seed of the training sample, the Trainer (shuffling, dropout) and the new classification "
                           "head (default: %(default)s)")
    p.set_defaults(out_folder=True, func=run, seed=42, resumable="checkpointed training steps",
                   saved=saved_checkpoints)


def saved_checkpoints(out: str) -> bool:
    """Whether an interrupted fine-tune into ``out`` saved a checkpoint to resume from."""
    from ..encoders.finetune import saved_checkpoints as saved  # torch: loaded only once a run is under way

    return saved(out)


def run(args) -> int:
    from ..encoders.finetune import MANIFEST, FinetuneConfig, finetune

    cfg = FinetuneConfig(batch_size=args.batch_size, epochs=args.epochs, learning_rate=args.learning_rate,
                         max_length=args.max_length, max_train_examples=args.max_train_examples,
                         max_dev_examples=args.max_dev_examples, seed=args.seed)
    t0 = time.time()
    try:
        manifest = finetune(args.model, args.task, glue_dir(args), args.out, cfg, overwrite=args.overwrite)
    except KeyboardInterrupt:  # held while the model is put in place (fileio.interrupts_held): it may be there
        landed = Path(args.out) / MANIFEST
        if landed.is_file() and landed.stat().st_mtime >= t0:  # written by this run, not an old model's
            args.interrupt_note = (f"the fine-tuned model was already in place: saved to {args.out} (use it as "
                                   f"--model {args.out})")
        raise
    dev = ", ".join(f"{k} {v:.4f}" for k, v in manifest["dev"].items())
    train = manifest["train"]
    resumed = (f", resumed from its checkpoint at step {train['resumed_at_step']} (the Trainer's train_loss above "
               f"counts only the steps run now)" if "resumed_at_step" in train else "")
    print(f"fine-tuned {args.model} on {manifest['task']} ({train['examples']} train examples) in "
          f"{time.time() - t0:.0f}s{resumed}; mean training loss {train['loss']:.4f}; dev "
          f"({manifest['dev_data']['examples']} examples): {dev}")
    print(f"saved to {args.out} (use it as --model {args.out})")
    return 0
