"""``patterncnn pretrain``: the CNN trained on synthetic maps labelled by construction, for ``train --init``."""

from __future__ import annotations

from .common import (
    add_cnn_args,
    add_overwrite,
    cnn_config,
    out_path,
    positive_float,
    positive_int,
    progress,
    seed,
)


def register(sub) -> None:
    p = sub.add_parser("pretrain", help="pretrain the CNN on synthetic maps (streamed), to start `train --init` from",
                       description="Train the 8-layer CNN on a stream of synthetic attention maps of the five "
                                   "patterns, each labelled by construction under the annotation guide 1.1 (never "
                                   "stored), and write its weights for `patterncnn train --init`. One million maps "
                                   "take about 20 minutes on two CPU cores.")
    p.add_argument("--out", type=out_path, default="models/pretrained-synthetic.pt", help="checkpoint file (default: %(default)s)")
    add_overwrite(p, "checkpoint, or a stopped run of other options (OUT.partial),")
    add_cnn_args(p)
    p.add_argument("--maps", type=positive_int, default=1_000_000,
                   help="synthetic maps streamed through the CNN (default: %(default)s)")
    p.add_argument("--batch-size", type=positive_int, default=128,
                   help="synthetic maps per step (default: %(default)s)")
    p.add_argument("--lr", type=positive_float, default=3e-3, help="peak learning rate of the one-cycle schedule "
                                                          "(default: %(default)s)")
    p.add_argument("--seed", type=seed, default=0,
                   help="seed of the synthetic maps and the initial weights (default: %(default)s)")
    p.add_argument("--max-t", type=positive_int, default=256,
                   help="the longest synthetic map, at most 512 (default: %(default)s)")
    p.set_defaults(func=run, resumable="steps (every 256)", saved=saved_steps)


def saved_steps(out: str) -> str | None:
    """Where an interrupted pretraining run into ``out`` saved steps to resume from (its ``.partial`` file, which the
    interruption's note names: until 2026-11-29 it named ``out``, which does not exist yet), else None."""
    from ..training.pretrain import partial_file  # torch: loaded only once a run is under way

    partial = partial_file(out)
    return str(partial) if partial.is_file() else None


def run(args) -> int:
    from ..training.pretrain import PretrainConfig, pretrain

    pcfg = PretrainConfig(maps=args.maps, batch_size=args.batch_size, lr=args.lr, seed=args.seed, max_t=args.max_t)
    rec = pretrain(args.out, cnn_config(args), pcfg, overwrite=args.overwrite, progress=progress())
    print(f"pretrained on {rec['synthetic_maps']:,} synthetic maps: {rec['held_out_accuracy']:.3f} accuracy on "
          f"{rec['held_out']:,} held-out synthetic maps; wrote {args.out} (start a fit from it: "
          f"`patterncnn train --init {args.out}`)")
    return 0
