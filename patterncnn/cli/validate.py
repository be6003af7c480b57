"""``patterncnn validate``: census share estimates against hand-labelled maps drawn uniformly at random."""

from __future__ import annotations

from .common import add_classifier_args, add_overwrite, classifier, in_path, out_path, seed


def register(sub) -> None:
    p = sub.add_parser("validate", help="check the census's share estimators against hand-labelled random maps",
                       description="Estimate the pattern shares of hand-labelled maps drawn uniformly at random "
                                   "(`sample --design uniform`) with each estimator (count, probs, adjusted) from the "
                                   "classifier's outputs alone, and compare with the hand labels per encoder and "
                                   "task: mean and worst share error per pattern, and how often the 95% interval "
                                   "holds the hand-labelled share. By default cross-validated on the out-of-fold "
                                   "rows `patterncnn train` stored with the classifier; --annotations scores an "
                                   "independent labelled set instead, and also scores the classifier's labels "
                                   "against its hand labels (macro-F1, accuracy, kappa, per encoder; all maps, "
                                   "uniformly drawn or not).")
    add_classifier_args(p)
    p.add_argument("--annotations", type=in_path, default=None,
                   help="an independent labelled set whose maps never trained this classifier: its uniformly "
                        "drawn maps validate the share estimators, and all its maps score the classifier's labels "
                        "(default: cross-validated on the classifier's stored out-of-fold rows)")
    p.add_argument("--out", type=out_path, default="runs/validate", help="output folder (default: %(default)s)")
    add_overwrite(p)
    p.add_argument("--seed", type=seed, default=0, help="bootstrap seed (default: %(default)s)")
    p.set_defaults(out_folder=True, func=run)


def run(args) -> int:
    from ..core.fileio import output_folder
    from ..training.validate import RESULTS, markdown_report, run_validation

    output_folder(args.out, RESULTS, args.overwrite)  # before any work
    v = run_validation(classifier(args), args.out, args.annotations, args.seed, args.overwrite)
    print(markdown_report(v))
    print(f"wrote {args.out}/validation.json, validation.md")
    return 0
