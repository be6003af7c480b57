"""``patterncnn drift A B``: per layer x head, how similar two encoders' maps are (paper Fig. 5)."""

from __future__ import annotations

from .common import (
    add_device_arg,
    add_glue_args,
    add_max_length,
    add_overwrite,
    add_tasks_arg,
    device,
    glue_dir,
    model_name,
    out_path,
    positive_int,
    progress,
    truncation_as_note,
    truncation_note,
)


def register(sub) -> None:
    p = sub.add_parser("drift", help="cosine similarity of two encoders' maps per layer x head (what fine-tuning "
                                     "changed)",
                       description="Run two encoders with the same tokenizer (usually a pretrained model and its "
                                   "fine-tune) over each task's dev set and report, per layer x head, the cosine "
                                   "similarity of their flattened attention maps averaged over examples: a heatmap "
                                   "per task, CSV and JSON. Resumable.")
    p.add_argument("model_a", type=model_name, metavar="A", help="first encoder (e.g. minilm)")
    p.add_argument("model_b", type=model_name, metavar="B", help="second encoder (e.g. models-ft/minilm-rte)")
    add_tasks_arg(p, required=True)
    p.add_argument("--limit", type=positive_int, default=1000, help="examples per task (default: %(default)s)")
    add_max_length(p)
    p.add_argument("--batch-size", type=positive_int, default=16, help="encoder batch size (default: %(default)s)")
    p.add_argument("--out", type=out_path, default="runs/drift", help="output folder (default: %(default)s)")
    add_overwrite(p, "finished or unfinished run")
    add_device_arg(p)
    add_glue_args(p)
    p.set_defaults(out_folder=True, func=run, resumable="windows", overwrite_restarts=True)


def run(args) -> int:
    from ..core.errors import truncated_inputs
    from ..experiments.drift import drift, verdict

    with truncation_as_note():  # printed below
        res = drift(args.model_a, args.model_b, args.task, args.limit, glue_dir(args), args.out, seed=args.seed,
                    max_length=args.max_length, batch_size=args.batch_size, device=device(args),
                    overwrite=args.overwrite, progress=progress()).data
    print(f"drift {res['tag_a']} vs {res['tag_b']}: mean cosine similarity of the maps per layer (1 = unchanged)")
    for task, s in res["tasks"].items():
        layers = " ".join(f"{v:.4f}" for v in s["layer_mean"])
        # no layer changed: which two are lowest is noise, not worth naming
        lowest = f"; lowest layers {s['lowest_two_layers']} ->" if s["last_two_change_most"] is not None else ";"
        print(f"  {task:<6} ({s['examples']} ex.): {layers}{lowest} last two change most: {verdict(s)}")
    if cut := truncated_inputs(res):
        print(truncation_note(cut, res["max_length"]))
    print(f"wrote {args.out}/drift.json, drift.csv, drift.png")
    return 0
