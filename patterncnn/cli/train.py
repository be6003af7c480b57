"""``patterncnn train``: the 8-layer CNN with grouped cross-validation, exported to ONNX."""

from __future__ import annotations

from pathlib import Path

from .common import (
    add_cnn_args,
    add_overwrite,
    cnn_config,
    fold_count,
    in_path,
    non_negative_float,
    out_path,
    positive_float,
    positive_int,
    progress,
    seed,
)


def register(sub) -> None:
    p = sub.add_parser("train", help="train the 8-layer CNN with grouped cross-validation, export ONNX",
                       description="Cross-validate (stratified, grouped by input example) the CNN and feature "
                                   "baselines on a labelled set, fit the final model, export ONNX with a parity "
                                   "check and write the model card.")
    p.add_argument("--annotations", type=in_path, action="append", default=None,
                   help="labelled set from `annotate pull`; repeat it to train on several sets at once (each keeps "
                        "its own resolved labels; e.g. the shipped annotations plus your own) (default: annotations)")
    p.add_argument("--out", type=out_path, default="models", help="output folder (default: %(default)s)")
    add_overwrite(p, "classifier")
    add_cnn_args(p)
    p.add_argument("--init", type=in_path, default=None, metavar="CKPT",
                   help="start every fit (folds, leave one encoder out, the final fit) from a CNN pretrained on "
                        "synthetic maps by `patterncnn pretrain` ('shipped': the one the shipped classifier started "
                        "from, models/pretrained-synthetic.pt in a clone, also in an installed package) instead of a "
                        "random initialisation (default: random)")
    p.add_argument("--freeze-bn", action="store_true",
                   help="with --init: keep the pretrained CNN's BatchNorm statistics while fine-tuning, instead of "
                        "re-estimating them on the labelled maps (its scales and shifts still learn)")
    p.add_argument("--bias-correction", action="store_true",
                   help="shift the CNN's logits per class, fitted on maps it did not train on (bias-corrected "
                        "temperature scaling): undoes the class weights' tilt toward the rare classes; one CNN only")
    p.add_argument("--compare", action="store_true",
                   help="also cross-validate area/bilinear x 16/32, area 64 and the channel choices, for the card")
    p.add_argument("--members", type=positive_int, default=1,
                   help="CNNs the classifier averages, each trained with its own seed; training and the "
                        "classifier's cost grow with it (default: %(default)s)")
    p.add_argument("--folds", type=fold_count, default=5, help="cross-validation folds (default: %(default)s)")
    p.add_argument("--max-epochs", type=positive_int, default=80,
                   help="the most epochs of a fit; early stopping usually ends it sooner (default: %(default)s)")
    p.add_argument("--seed", type=seed, default=0, help="seed of the folds and the fits (default: %(default)s)")
    p.add_argument("--lr", type=positive_float, default=None,
                   help="peak learning rate (default: 3e-3 from a random start, 3e-4 with --init)")
    p.add_argument("--class-weight-power", type=non_negative_float, default=0.5,
                   help="class weights (n / (5 * count)) ** POWER in the loss: 1 balances the classes fully, 0 not "
                        "at all (default: %(default)s)")
    p.add_argument("--no-soft-labels", action="store_true",
                   help="skip the second cross-validation with annotator vote shares as targets (about one CV)")
    p.add_argument("--no-leave-one-encoder-out", action="store_true",
                   help="skip training on one encoder family and testing on another (one fit per direction)")
    p.add_argument("--loeo-max-epochs", type=positive_int, default=40,
                   help="epoch cap of the leave-one-encoder-out fits, early-stopped as in CV (default: %(default)s)")
    p.add_argument("--loeo-seeds", type=positive_int, default=5,
                   help="CNN fits (seeds) per leave-one-encoder-out direction, reported as mean +- sd: one fit "
                        "moves by several points with its seed (default: %(default)s)")
    p.set_defaults(out_folder=True, func=run, resumable="folds and fits (in .work/train)")


def init_checkpoint(init: str | None) -> str | None:
    """``--init``: a path, or ``shipped`` (when no such path exists) for the pretrained CNN installed with patterncnn."""
    if init != "shipped" or Path(init).exists():
        return init
    from ..classifier.onnx import shipped_file

    return str(shipped_file("pretrained-synthetic.pt", "--init PATH/TO/pretrained.pt (`patterncnn pretrain`)"))


def run(args) -> int:
    from ..training.evaluate import EvalConfig
    from ..training.fit import TrainConfig
    from ..training.train import summary, train_and_export

    cfg = cnn_config(args, members=args.members)
    tcfg = TrainConfig(folds=args.folds, seed=args.seed, max_epochs=args.max_epochs,
                       class_weight_power=args.class_weight_power, init=init_checkpoint(args.init),
                       lr=args.lr, freeze_bn=args.freeze_bn, bias_correction=args.bias_correction)
    ecfg = EvalConfig(soft_labels=not args.no_soft_labels, leave_one_encoder_out=not args.no_leave_one_encoder_out,
                      loeo_max_epochs=args.loeo_max_epochs, loeo_seeds=args.loeo_seeds)
    sets = args.annotations or ["annotations"]
    m = train_and_export(sets[0] if len(sets) == 1 else sets, args.out, cfg, tcfg, compare=args.compare,
                         progress=progress(), ecfg=ecfg, overwrite=args.overwrite)
    print(summary(m))
    print(f"wrote {args.out}/patterncnn.pt, patterncnn.onnx, metrics.json, README.md")
    return 0
