"""``patterncnn census``: pattern shares over GLUE dev sets; ``--compare`` two finished ones."""

from __future__ import annotations

import os

from ..encoders.backends import DEFAULT_BACKEND, VETTED
from ..shares.calibrate import SCOPES
from ..shares.estimate import ESTIMATORS
from .common import (
    add_classifier_args,
    add_device_arg,
    add_glue_args,
    add_max_length,
    add_overwrite,
    add_tasks_arg,
    classifier,
    device,
    given,
    glue_dir,
    in_path,
    model_name,
    out_path,
    positive_int,
    progress,
    truncation_note,
)


def register(sub) -> None:
    p = sub.add_parser("census", help="pattern shares over GLUE dev sets, overall and per layer x head",
                       description="Run an encoder over each task's dev set (up to --limit examples), classify every "
                                   "(example, layer, head) map and report each pattern's share (corrected for the "
                                   "classifier's errors with --estimator probs/adjusted) with a 95% interval over "
                                   "examples and the classifier (its calibration, or the validated share error that "
                                   "widens count), the per-head distribution, tables and plots. Interrupted runs "
                                   "resume when re-run with the same arguments. `--precision` stops each task once "
                                   "more examples cannot narrow its interval much. `--compare A B` compares two "
                                   "finished censuses.")
    add_tasks_arg(p)
    p.add_argument("--model", type=model_name, action="append",
                   help="encoder (repeatable; two models are compared). Default: minilm")
    add_max_length(p)
    p.add_argument("--limit", type=int, default=1000,
                   help="examples per task, as in the paper; with --precision, the most (default: %(default)s)")
    p.add_argument("--precision", type=given, metavar="P|Fx", default=None,
                   help="stop each task once the examples' part of its 95%% interval is within P share points on "
                        "every pattern (e.g. 1), or within a fraction F of the classifier's part (e.g. 0.33x: a third "
                        "of its band); examples are taken in a seeded random order and checked after each window of "
                        "64. Default: all --limit examples")
    p.add_argument("--out", type=out_path, default="runs/census", help="output folder (default: %(default)s)")
    add_classifier_args(p)
    p.add_argument("--batch-size", type=positive_int, default=16, help="encoder batch size (default: %(default)s)")
    p.add_argument("--save-maps", action="store_true", help="also write every map to OUT/maps/<task> (large)")
    add_overwrite(p, "finished or unfinished census")
    p.add_argument("--estimator", choices=ESTIMATORS, default=None,
                   help="how shares are estimated: count (argmax counting), probs (mean of temperature-scaled "
                        "probabilities) or adjusted (adjusted classify-and-count); default: the one that validated "
                        "best with the classifier (`patterncnn validate`) on the encoder or its family, count for a classifier "
                        "without validation; two --model whose defaults differ: count for both")
    p.add_argument("--calibration-scope", choices=SCOPES, default=None,
                   help="which labelled rows calibrate probs/adjusted: uniformly drawn rows of this encoder, all "
                        "uniformly drawn rows, or all rows (widened when too few); default: the validated best")
    p.add_argument("--backend", choices=VETTED, default=DEFAULT_BACKEND,
                   help="how the encoder's forward pass runs: torch (HF fp32 eager, the reference), onnx (exported "
                        "once to onnxruntime) or compile (torch.compile); each keeps the census within 0.5 points "
                        "of fp32 (docs/pages/commands/census.md, 'Faster census') (default: %(default)s, the fastest)")
    p.add_argument("--ray", type=given, metavar="auto|local|ADDRESS", default=None,
                   help="run on a Ray cluster (the extra patterncnn[ray]): 'auto' joins the cluster this machine "
                        "belongs to (`ray start`), 'local' starts one here, or give the head's HOST:PORT")
    p.add_argument("--workers", type=positive_int, default=None,
                   help="Ray workers (actors, each with --threads CPUs); default: as many as the cluster's CPUs fit")
    p.add_argument("--compare", type=in_path, nargs=2, metavar=("A", "B"),
                   help="compare two census results (folders or json)")
    p.add_argument("--report", action="store_true",
                   help="also write OUT/report.html, the self-contained HTML report (`patterncnn report`)")
    add_device_arg(p, classifier=True)
    add_glue_args(p)
    p.set_defaults(out_folder=True, func=run, resumable="windows", overwrite_restarts=True)


def run(args) -> int:
    # Idle OpenMP workers (torch's preprocessing) must not spin while onnxruntime runs the encoder or the CNN on
    # the same cores: busy-waiting cost the onnx census up to 2.5x (docs/pages/benchmarks.md). Set before torch loads.
    os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
    from ..census.results import census_text, compare, load_result
    from ..core.errors import truncated_inputs

    if args.compare:  # reads two results: no encoder, no classifier, nothing of torch
        print(compare(*(load_result(p) for p in args.compare))[0])
        return 0
    from ..census.run import run_censuses
    from ..core.glue import dev_splits
    from ..shares.precision import Precision

    if not args.task:
        raise ValueError("pass --task (e.g. --task sst2, repeatable, or --task all), or --compare A B")
    if args.limit is not None and args.limit < 1:
        raise ValueError(f"--limit must be at least 1 (got {args.limit})")
    precision = Precision.parse(args.precision) if args.precision is not None else None
    if args.ray and (args.save_maps or precision or args.device):
        raise ValueError("--save-maps, --precision and --device are for the local census, not --ray (on Ray each "
                         "worker takes a GPU when the cluster has one per worker); run it without --ray")
    clf = classifier(args)
    splits = dev_splits(args.task, glue_dir(args), args.limit, args.seed)
    results, models = [], args.model or ["minilm"]
    args.finished = []  # censuses of several encoders finished so far: an interruption names them (cli.main)
    common = dict(batch_size=args.batch_size, progress=progress(), overwrite=args.overwrite, finished=args.finished,
                  estimator=args.estimator, scope=args.calibration_scope, backend=args.backend, threads=args.threads)
    if args.ray:
        from ..census.ray import run_ray_censuses

        runs = run_ray_censuses(models, splits, clf, args.out, args.limit, args.seed,
                                args.max_length, address=args.ray, workers=args.workers, **common)
    else:  # what patterncnn.census() runs, once per model
        runs = run_censuses(models, splits, clf, args.out, args.limit, args.seed, args.max_length,
                            device=device(args), save_maps=args.save_maps, precision=precision, **common)
    for enc, out, result in runs:
        print("\n" + census_text(result, enc.name))
        trunc = truncated_inputs(result)
        if trunc:
            print(truncation_note(trunc, enc.max_length))
        print(f"wrote {out}/census.json, census.csv, heads.csv, census.png, heads.png, thumbnails.npz")
        if args.report:
            from ..report import write_report

            # the census's own folder, checked before the run (new, resumed or --overwrite): its report is replaced
            print(f"wrote {write_report(out, overwrite=True)}")
        results.append(result)
    if len(results) == 2:
        print("\n" + compare(*results)[0])
    return 0
