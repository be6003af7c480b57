"""``patterncnn disable``: the dev metric with one head, then one layer, attending uniformly (paper Fig. 8, 9)."""

from __future__ import annotations

from .common import (
    add_device_arg,
    add_glue_args,
    add_model_args,
    add_overwrite,
    device,
    given,
    glue_dir,
    out_path,
    positive_int,
    progress,
)


def register(sub) -> None:
    p = sub.add_parser("disable", help="dev metric with each head / layer disabled (uniform attention)",
                       description="Disable one head at a time, then all heads of one layer, of a fine-tuned model "
                                   "(`patterncnn finetune`): the head attends with 1/L to each of the input's L real "
                                   "tokens (the paper's definition, not head_mask). Reports the task's metric against "
                                   "the undisabled model with a paired bootstrap 95% interval on each change. "
                                   "Resumable: re-run the same command after an interruption.")
    p.add_argument("--task", type=given, required=True, help="GLUE task the model was fine-tuned on, e.g. rte")
    p.add_argument("--limit", type=positive_int, default=None,
                   help="score on a seeded sample of this many dev examples (default: all)")
    p.add_argument("--out", type=out_path, default=None, help="output folder (default: runs/disable-<task>)")
    p.add_argument("--batch-size", type=positive_int, default=32, help="encoder batch size (default: %(default)s)")
    p.add_argument("--bootstrap", type=positive_int, default=1000, help="bootstrap resamples (default: %(default)s)")
    p.add_argument("--no-layers", action="store_true", help="disable single heads only, not whole layers")
    add_overwrite(p, "finished or unfinished run")
    add_device_arg(p)
    add_model_args(p)
    add_glue_args(p)
    p.set_defaults(out_folder=True, func=run, resumable="heads", overwrite_restarts=True)


def run(args) -> int:
    from ..core.glue import get_task
    from ..experiments.disable import ALPHA, TOLD_FROM_NOISE, disable

    out = args.out = args.out or f"runs/disable-{get_task(args.task).name}"  # main() names it when interrupted
    res = disable(args.model, args.task, args.limit, glue_dir(args), out, seed=args.seed, max_length=args.max_length,
                  batch_size=args.batch_size, bootstrap=args.bootstrap, layers=not args.no_layers,
                  device=device(args), overwrite=args.overwrite, progress=progress()).data
    b = res["baseline"]
    cells = [c for row in res["heads"] for c in row]
    second = res.get("second_metric")  # GLUE's other metric of the task (accuracy beside F1, Spearman beside Pearson)
    also = f"; {second} {b['second']:.4f}" if second else ""
    print(f"{res['tag']} on {res['task']} ({res['examples']} dev examples): baseline {res['metric']} "
          f"{b['metric']:.4f} [{b['ci95'][0]:.4f}, {b['ci95'][1]:.4f}]{also} (brackets: 95% bootstrap intervals over "
          f"the examples)")
    print(f"heads whose change is {TOLD_FROM_NOISE}: {sum(c['outside'] for c in cells)} of {len(cells)} (about "
          f"{ALPHA * len(cells):.1f} or fewer expected by chance if no head mattered); best change "
          f"{max(c['change'] for c in cells):+.4f}, worst {min(c['change'] for c in cells):+.4f}")
    for l, c in enumerate(res["layers"]):
        also = f"; {second} {c['second']:.4f} ({c['second_change']:+.4f})" if second else ""
        print(f"  layer {l} off: {res['metric']} {c['metric']:.4f} ({c['change']:+.4f} [{c['ci95'][0]:+.4f}, "
              f"{c['ci95'][1]:+.4f}]){also}")
    print(f"wrote {out}/disable.json, disable.csv, disable.png")
    return 0
