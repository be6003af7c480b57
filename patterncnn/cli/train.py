"""``patterncnn train``: the 8-layer CNN with grouped cross-validation, exported to ONNX."""

from __future__ import annotations

import signal
import threading

from .common import add_overwrite, progress


def register(sub) -> None:
    p = sub.add_parser("train", help="train the 8-layer CNN with grouped cross-validation, export ONNX",
                       description="Cross-validate (stratified, grouped by input example) the CNN and feature "
                                   "baselines on a labelled set, fit the final model, export ONNX with a parity "
                                   "check and write the model card.")
    p.add_argument("--annotations", action="append", default=None,
                   help="labelled set from `annotate pull`; repeat it to train on several sets at once (each keeps "
                        "its own resolved labels; e.g. the shipped annotations plus your own) (default: annotations)")
    p.add_argument("--out", default="models", help="output folder (default: %(default)s)")
    add_overwrite(p, "classifier")
    p.add_argument("--grid", type=int, default=16, help="input grid size (default: %(default)s)")
    p.add_argument("--representation", choices=("area", "bilinear"), default="area",
                   help="how a TxT map becomes the grid (default: %(default)s)")
    p.add_argument("--no-segment-channel", action="store_true", help="do not give the segment squares as a channel")
    p.add_argument("--no-structure-channels", action="store_true",
                   help="do not give the diagonal band and [CLS]/[SEP] columns as channels")
    p.add_argument("--no-mass-channel", action="store_true",
                   help="do not give log mass relative to uniform as a channel (only the max-scaled map)")
    p.add_argument("--compare", action="store_true",
                   help="also cross-validate area/bilinear x 16/32, area 64 and the channel choices, for the card")
    p.add_argument("--members", type=int, default=1,
                   help="CNNs the classifier averages, each trained with its own seed; training and the "
                        "classifier's cost grow with it (default: %(default)s)")
    p.add_argument("--folds", type=int, default=5, help="(default: %(default)s)")
    p.add_argument("--max-epochs", type=int, default=80, help="(default: %(default)s)")
    p.add_argument("--seed", type=int, default=0, help="(default: %(default)s)")
    p.add_argument("--class-weight-power", type=float, default=0.5,
                   help="class weights (n / (5 * count)) ** POWER in the loss: 1 balances the classes fully, 0 not "
                        "at all (default: %(default)s)")
    p.add_argument("--no-soft-labels", action="store_true",
                   help="skip the second cross-validation with annotator vote shares as targets (about one CV)")
    p.add_argument("--no-leave-one-encoder-out", action="store_true",
                   help="skip training on one encoder family and testing on another (one fit per direction)")
    p.add_argument("--loeo-max-epochs", type=int, default=40,
                   help="epoch cap of the leave-one-encoder-out fits, early-stopped as in CV (default: %(default)s)")
    p.add_argument("--loeo-seeds", type=int, default=5,
                   help="CNN fits (seeds) per leave-one-encoder-out direction, reported as mean +- sd: one fit "
                        "moves by several points with its seed (default: %(default)s)")
    p.set_defaults(func=run, resumable="folds and fits (in .work/train)")


def _stopped(signum, frame):
    raise KeyboardInterrupt  # a time limit's SIGTERM ends the run as Ctrl-C does: finished folds stay, it says so


def run(args) -> int:
    from ..classifier.model import CNNConfig
    from ..training.evaluate import EvalConfig
    from ..training.fit import TrainConfig
    from ..training.train import summary, train_and_export

    cfg = CNNConfig(grid=args.grid, representation=args.representation,
                    segment_channel=not args.no_segment_channel, structure_channels=not args.no_structure_channels,
                    mass_channel=not args.no_mass_channel, members=args.members)
    tcfg = TrainConfig(folds=args.folds, seed=args.seed, max_epochs=args.max_epochs,
                       class_weight_power=args.class_weight_power)
    ecfg = EvalConfig(soft_labels=not args.no_soft_labels, leave_one_encoder_out=not args.no_leave_one_encoder_out,
                      loeo_max_epochs=args.loeo_max_epochs, loeo_seeds=args.loeo_seeds)
    main_thread = threading.current_thread() is threading.main_thread()
    before = signal.signal(signal.SIGTERM, _stopped) if main_thread else None
    try:
        sets = args.annotations or ["annotations"]
        m = train_and_export(sets[0] if len(sets) == 1 else sets, args.out, cfg, tcfg, compare=args.compare,
                             progress=progress(), ecfg=ecfg, overwrite=args.overwrite)
    finally:
        if main_thread:
            signal.signal(signal.SIGTERM, before)
    print(summary(m))
    print(f"wrote {args.out}/patterncnn.pt, patterncnn.onnx, metrics.json, README.md")
    return 0
