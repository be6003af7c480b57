"""``patterncnn train``: the 8-layer CNN with grouped cross-validation, exported to ONNX."""

from __future__ import annotations

from .common import progress


def register(sub) -> None:
    p = sub.add_parser("train", help="train the 8-layer CNN with grouped cross-validation, export ONNX",
                       description="Cross-validate (stratified, grouped by input example) the CNN and feature "
                                   "baselines on a labelled set, fit the final model, export ONNX with a parity "
                                   "check and write the model card.")
    p.add_argument("--annotations", default="annotations",
                   help="labelled set from `annotate pull` (default: %(default)s)")
    p.add_argument("--out", default="models", help="output folder (default: %(default)s)")
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
    p.add_argument("--folds", type=int, default=5, help="(default: %(default)s)")
    p.add_argument("--max-epochs", type=int, default=80, help="(default: %(default)s)")
    p.add_argument("--seed", type=int, default=0, help="(default: %(default)s)")
    p.set_defaults(func=run)


def run(args) -> int:
    from ..estimate import best_result
    from ..model import CNNConfig
    from ..train import TrainConfig, train_and_export

    cfg = CNNConfig(grid=args.grid, representation=args.representation,
                    segment_channel=not args.no_segment_channel, structure_channels=not args.no_structure_channels,
                    mass_channel=not args.no_mass_channel)
    tcfg = TrainConfig(folds=args.folds, seed=args.seed, max_epochs=args.max_epochs)
    m = train_and_export(args.annotations, args.out, cfg, tcfg, compare=args.compare, progress=progress())
    cv = m["cv"]
    print(f"{m['data']['maps']} maps, {tcfg.folds}-fold grouped CV: macro-F1 {cv['macro_f1']:.3f} (folds "
          f"{cv['fold_macro_f1_mean']:.3f} ± {cv['fold_macro_f1_std']:.3f}), weighted-F1 {cv['weighted_f1']:.3f}")
    for name, b in m["baselines"].items():
        print(f"  baseline {name}: macro-F1 {b['macro_f1']:.3f}")
    print(("CNN beats" if m["cnn_beats_best_baseline"] else "CNN does NOT beat") + f" the best baseline "
          f"({m['best_baseline']}); ONNX parity max |dp| {m['onnx_parity_max_abs_diff']:.1e}")
    c, v = m["calibration"], m["validation"]
    print(f"calibration for the census: {len(c['rows']['ids'])} out-of-fold rows ({c['uniform_rows']} drawn uniformly), "
          f"temperature {c['temperature']:.2f}")
    if v:
        b = best_result(v["results"])
        print(f"share estimators validated on {v['maps']} uniformly drawn maps: default {b['estimator']}"
              f"{'/' + b['scope'] if b['scope'] else ''}, worst encoder {100 * b['worst_encoder_mean_abs_error']:.1f} "
              f"points per pattern, intervals hold the hand share in {100 * b['coverage']:.0f}% of cells")
    else:
        print("share estimators not validated: the labelled set has no maps drawn with `sample --design uniform`")
    print(f"wrote {args.out}/patterncnn.pt, patterncnn.onnx, metrics.json, README.md")
    return 0
