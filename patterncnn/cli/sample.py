"""``patterncnn sample``: sample maps from GLUE inputs for annotation."""

from __future__ import annotations

import logging
import os

from .common import (
    add_glue_args,
    add_labelled_args,
    add_model_args,
    add_overwrite,
    given,
    glue_dir,
    labelled_set,
    out_path,
    positive_int,
    progress,
    truncation_note,
)

log = logging.getLogger("patterncnn")


def register(sub) -> None:
    p = sub.add_parser("sample",
                       help="sample attention maps from GLUE inputs for annotation (map store + PNGs)",
                       description="Sample random (example, layer, head) maps from GLUE inputs, stratified so "
                                   "every layer is represented; write a map store and one PNG per map.")
    p.add_argument("--task", type=given, action="append", required=True,
                   help="GLUE task (repeat for several): cola, sst2, mrpc, stsb, qqp, mnli, mnli-mm, qnli, rte, wnli")
    p.add_argument("--per-task", type=positive_int, default=50, help="maps per task (default: %(default)s)")
    p.add_argument("--out", type=out_path, required=True, help="output folder for the map store")
    add_overwrite(p, "map store")
    p.add_argument("--split", default="dev", choices=("dev", "train"), help="GLUE split (default: %(default)s)")
    p.add_argument("--batch-size", type=positive_int, default=16, help="encoder batch size (default: %(default)s)")
    p.add_argument("--no-png", action="store_true", help="skip the PNG per map")
    p.add_argument("--design", choices=("stratified", "uniform"), default="stratified",
                   help="'stratified': every layer represented, for annotation rounds; 'uniform': uniform over all "
                        "(example, layer, head) maps, so hand-label shares estimate the census (default: %(default)s)")
    add_labelled_args(p, "draw others in place of")
    add_model_args(p)
    add_glue_args(p)
    p.set_defaults(out_folder=True, func=run)


def run(args) -> int:
    from ..core.fileio import output_folder
    from ..core.glue import get_task, load_split
    from ..encoders.load import load_encoder
    from ..labelling.sample import sample_maps

    tasks = [get_task(t) for t in args.task]  # fail on a bad name before loading anything
    names = [t.name for t in tasks]
    if twice := sorted({n for n in names if names.count(n) > 1}):  # its maps' ids would clash after the work
        raise ValueError(f"--task {twice[0]} is given twice (task names in any spelling); give each task once")
    output_folder(args.out, ("store.json",), args.overwrite)
    target, labelled = labelled_set(args)
    splits = [load_split(t, args.split, glue_dir(args)) for t in tasks]
    enc = load_encoder(args.model, max_length=args.max_length)
    log.info("encoder %s: %d layers x %d heads (%s)", args.model, enc.num_layers, enc.num_heads, enc.tag)
    summary = sample_maps(enc, splits, args.per_task, args.seed, args.out, batch_size=args.batch_size,
                          pngs=not args.no_png, progress=progress(), design=args.design, overwrite=args.overwrite,
                          labelled=labelled, skip_labelled=args.skip_labelled)
    n = sum(summary["tasks"].values())
    print(f"wrote {n} maps ({', '.join(f'{k}: {v}' for k, v in summary['tasks'].items())}) to {args.out}"
          + ("" if args.no_png else f", PNGs in {os.path.join(args.out, 'png')}"))
    already = summary["already_labelled"]
    if already:
        print(f"note: {len(already)} of these maps {'is' if len(already) == 1 else 'are'} already labelled in "
              f"{target} (e.g. {already[0]}); their new labels would join the earlier ones: pass --skip-labelled to "
              f"draw others in their place")
    elif target and args.skip_labelled:
        print(f"none of these maps is labelled in {target} yet (maps it labels were not drawn)")
    if summary["truncated"]:
        print(truncation_note(summary["truncated"], enc.max_length))
    return 0
