"""Pretrain the CNN with an input option `patterncnn pretrain` does not offer, for loeo.py --init.

    python research/generalisation/pretrain_variant.py --row-channel OUT.pt [--maps 1000000] [--seed 0]

The same library call as `patterncnn pretrain` (same stream, schedule and defaults for a seed), with
``CNNConfig(row_channel=True)``: one more input channel, the map with each row scaled by its own maximum (the
guide's clarification 7: a column counts where it stands out in a row's own background). Resumable as `pretrain` is.
"""

from __future__ import annotations

import argparse

from patterncnn.classifier.model import CNNConfig
from patterncnn.training.pretrain import PretrainConfig, pretrain


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("out")
    ap.add_argument("--row-channel", action="store_true", help="add the row-scaled channel")
    ap.add_argument("--maps", type=int, default=PretrainConfig.maps)
    ap.add_argument("--seed", type=int, default=PretrainConfig.seed)
    args = ap.parse_args()
    rec = pretrain(args.out, CNNConfig(row_channel=args.row_channel), PretrainConfig(maps=args.maps, seed=args.seed))
    print(f"{args.out}: {rec['synthetic_maps']:,} synthetic maps, held-out accuracy {rec['held_out_accuracy']:.3f}")


if __name__ == "__main__":
    main()
