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
    p.set_defaults(func=run)


def run(args) -> int:
    from ..training.evaluate import EvalConfig
    from ..classifier.model import CNNConfig
    from ..training.train import TrainConfig, train_and_export

    cfg = CNNConfig(grid=args.grid, representation=args.representation,
                    segment_channel=not args.no_segment_channel, structure_channels=not args.no_structure_channels,
                    mass_channel=not args.no_mass_channel, members=args.members)
    tcfg = TrainConfig(folds=args.folds, seed=args.seed, max_epochs=args.max_epochs,
                       class_weight_power=args.class_weight_power)
    ecfg = EvalConfig(soft_labels=not args.no_soft_labels, leave_one_encoder_out=not args.no_leave_one_encoder_out,
                      loeo_max_epochs=args.loeo_max_epochs, loeo_seeds=args.loeo_seeds)
    m = train_and_export(args.annotations, args.out, cfg, tcfg, compare=args.compare, progress=progress(), ecfg=ecfg)
    cv = m["cv"]
    print(f"{m['data']['maps']} maps, {tcfg.folds}-fold grouped CV: macro-F1 {cv['macro_f1']:.3f} (folds "
          f"{cv['fold_macro_f1_mean']:.3f} ± {cv['fold_macro_f1_std']:.3f}), weighted-F1 {cv['weighted_f1']:.3f}")
    for name, b in m["baselines"].items():
        print(f"  baseline {name}: macro-F1 {b['macro_f1']:.3f}")
    print(("CNN beats" if m["cnn_beats_best_baseline"] else "CNN does NOT beat") + f" the best baseline "
          f"({m['best_baseline']}); ONNX parity max |dp| {m['onnx_parity_max_abs_diff']:.1e}")
    print(evaluation_summary(m["evaluation"]))
    print(estimator_summary(m["calibration"], m["validation"]))
    print(f"wrote {args.out}/patterncnn.pt, patterncnn.onnx, metrics.json, README.md")
    return 0


def evaluation_summary(e: dict) -> str:
    """Per encoder family, agreed maps, CNN vs baselines, soft vs hard labels, leave one encoder out: a few lines."""
    from ..training.evaluate import CNN

    lines = [f"annotator votes: {e['votes']['maps_with_several_votes']} maps with two or more, "
             f"{e['votes']['agreed_maps']} where two annotators agree"]
    for fam, r in e["per_encoder"].items():
        cnn, best = r["methods"][CNN], r["best_baseline"]
        agreed = f"{cnn['agreed']['macro_f1']:.3f} on {r['agreed_maps']} agreed" if cnn["agreed"] else "no agreed maps"
        lines.append(f"  {fam}: CNN macro-F1 {cnn['all']['macro_f1']:.3f} on {r['maps']} maps, {agreed}; best baseline "
                     f"{best} {r['methods'][best]['all']['macro_f1']:.3f}: CNN "
                     f"{'beats it' if r['cnn_beats_best_baseline'] else 'does NOT beat it'}")
    s = e["soft_labels"]
    lines.append(f"soft vs hard labels: macro-F1 {s['soft']['all']['macro_f1']:.3f} vs "
                 f"{s['hard']['all']['macro_f1']:.3f}"
                 if s["run"] else f"soft labels not trained: {s['reason']}")
    lo = e["leave_one_encoder_out"]
    for p in lo["pairs"]:
        f1, acc = p["cnn_over_seeds"]["macro_f1"], p["cnn_over_seeds"]["accuracy"]
        spread = (f" +- {f1['sd']:.3f} ({f1['min']:.3f}-{f1['max']:.3f} over {f1['n']} seeds)" if f1["n"] > 1
                  else " (one seed: no spread measured)")
        lines.append(f"leave one encoder out, train {p['train']} -> test {p['test']}: macro-F1 {f1['mean']:.3f}"
                     f"{spread}, accuracy {acc['mean']:.3f} ({p['methods'][CNN]['all']['maps']} maps)")
    if not lo["run"]:
        lines.append(f"leave one encoder out not run: {lo['reason']}")
    return "\n".join(lines)


def estimator_summary(c: dict, v: dict | None) -> str:
    """The calibration and the validated default estimator (overall and per encoder)."""
    from ..shares.estimate import best_result

    lines = [f"calibration for the census: {len(c['rows']['ids'])} out-of-fold rows ({c['uniform_rows']} drawn "
             f"uniformly), temperature {c['temperature']:.2f}"]
    if not v:
        return "\n".join(lines + ["share estimators not validated: the labelled set has no maps drawn with "
                                   "`sample --design uniform`"])
    b = best_result(v["results"])
    lines.append(f"share estimators validated on {v['maps']} uniformly drawn maps: default {b['estimator']}"
                 f"{'/' + b['scope'] if b['scope'] else ''}, worst encoder "
                 f"{100 * b['worst_encoder_mean_abs_error']:.1f} "
                 f"points per pattern, intervals hold the hand share in {100 * b['coverage']:.0f}% of cells")
    for enc, d in v.get("best_per_encoder", {}).items():
        lines.append(f"  census default for {enc}: {d['estimator']}{'/' + d['scope'] if d['scope'] else ''} "
                     f"({100 * d['mean_abs_error']:.1f} points per pattern, {100 * d['coverage']:.0f}% covered)")
    return "\n".join(lines)
