"""Pretrain the CNN through `patterncnn pretrain`'s library call, with an input option the command does not offer.

    python research/generalisation/pretrain_variant.py OUT.pt [--row-channel] [--column-channel] [--faint-columns] \
        [--maps 1000000] [--seed 0]

``--row-channel``: ``CNNConfig(row_channel=True)``, one more input channel, the map with each row scaled by its own
maximum (the guide's clarification 7: a column counts where it stands out in a row's own background). The maps, their
order and augmentation are the seed's, as in `patterncnn pretrain`; the extra channel changes the first layer's
shape, so every random initial weight differs. ``--column-channel``: ``CNNConfig(column_channel=True)``, one more
input channel, the [CLS] and [SEP] columns' cells against their row's maximum, not averaged across the grid cell's
columns (a one-token column of a long map keeps its strength). ``--faint-columns``: the generator's research
variant (``synthetic.batch(faint_columns=True)``): some diagonal maps carry a column that stands out in most rows but
stays dark on the map's colour scale, and a vertical+diagonal map's column must be clearly lit. Without these, this is the same run as `patterncnn pretrain --maps N
--seed S` (``--maps`` other than 1,000,000 stretches the one-cycle schedule over them). No progress bar; resumable
from its ``.partial`` file as `pretrain` is, and an existing OUT is refused.
"""

from __future__ import annotations

import argparse

from patterncnn.classifier.model import CNNConfig
from patterncnn.training.pretrain import PretrainConfig, pretrain


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("out")
    ap.add_argument("--row-channel", action="store_true", help="add the row-scaled channel")
    ap.add_argument("--column-channel", action="store_true", help="add the [CLS]/[SEP] column-strength channel")
    ap.add_argument("--faint-columns", action="store_true", help="the generator's faint-column variant")
    ap.add_argument("--maps", type=int, default=PretrainConfig.maps)
    ap.add_argument("--seed", type=int, default=PretrainConfig.seed)
    args = ap.parse_args()
    cfg = CNNConfig(row_channel=args.row_channel, column_channel=args.column_channel)
    rec = pretrain(args.out, cfg, PretrainConfig(maps=args.maps, seed=args.seed, faint_columns=args.faint_columns))
    print(f"{args.out}: {rec['synthetic_maps']:,} synthetic maps, held-out accuracy {rec['held_out_accuracy']:.3f}")


if __name__ == "__main__":
    main()
