"""``patterncnn special-tokens``: attention given to [CLS], [SEP], punctuation and named token classes (Fig. 6, 7)."""

from __future__ import annotations

import argparse

from .common import (
    add_device_arg,
    add_glue_args,
    add_model_args,
    add_overwrite,
    add_tasks_arg,
    device,
    glue_dir,
    out_path,
    positive_int,
    progress,
    text,
    truncation_as_note,
    truncation_note,
)


def token_class(value: str) -> tuple[str, str]:
    """argparse type: NAME=REGEX."""
    name, sep, pattern = text(value).partition("=")
    if not sep or not name or not pattern:
        raise argparse.ArgumentTypeError(f"expected NAME=REGEX, e.g. digits='\\d+' (got {value!r})")
    from ..experiments.special_tokens import token_class_error  # the one check, shared with the Python API

    error = token_class_error(name, pattern)
    if error:
        raise argparse.ArgumentTypeError(f"{error} (got {value!r})")
    return name, pattern


def register(sub) -> None:
    p = sub.add_parser("special-tokens", help="attention to [CLS], [SEP], punctuation and regex token classes",
                       description="Per layer x head, the attention all tokens give to the tokenizer's [CLS] and "
                                   "[SEP] (<s>, </s> for MPNet), to punctuation and to token classes named by a regex, "
                                   "summed over queries and divided by the sequence length (the paper's Fig. 6), "
                                   "averaged over each task's dev examples; and how the last layer's [CLS] row spreads "
                                   "over those classes (Fig. 7). Heatmaps per task, CSV and JSON. Resumable.")
    add_tasks_arg(p, required=True)
    p.add_argument("--token-class", action="append", type=token_class, default=[], metavar="NAME=REGEX",
                   help="an extra class of tokens whose whole text (what the token reads as, without ##, ▁ or Ġ "
                        "word marks) matches REGEX (repeatable)")
    p.add_argument("--limit", type=positive_int, default=1000, help="examples per task (default: %(default)s)")
    p.add_argument("--batch-size", type=positive_int, default=16, help="encoder batch size (default: %(default)s)")
    p.add_argument("--out", type=out_path, default="runs/special-tokens", help="output folder (default: %(default)s)")
    add_overwrite(p, "finished or unfinished run")
    add_device_arg(p)
    add_model_args(p)
    add_glue_args(p)
    p.set_defaults(out_folder=True, func=run, resumable="windows", overwrite_restarts=True)


def run(args) -> int:
    from ..core.errors import truncated_inputs
    from ..experiments.special_tokens import special_tokens, task_figure

    classes: dict[str, str] = {}
    for name, pattern in args.token_class:
        if name in classes:  # a dict would keep only the last one
            raise ValueError(f"--token-class name {name!r} is given twice ({classes[name]!r} and {pattern!r}); give "
                             f"each class its own name, or join the two in one regex: {name}='{classes[name]}|{pattern}'")
        classes[name] = pattern
    with truncation_as_note():  # printed below
        res = special_tokens(args.model, args.task, args.limit, glue_dir(args), args.out,
                             token_classes=classes, seed=args.seed, max_length=args.max_length,
                             batch_size=args.batch_size, device=device(args), overwrite=args.overwrite,
                             progress=progress()).data
    names = res["classes"]["order"]
    print(f"{res['tag']}: attention given to each class, over T, mean per layer ({', '.join(names)})")
    for task, s in res["tasks"].items():
        print(f"  {task} ({s['examples']} ex.):")
        for k in names:
            print(f"    {k:<12} " + " ".join(f"{v:.3f}" for v in s["layer_mean"][k])
                  + f"   (tokens: {100 * s['token_fraction'][k]:.1f}%)")
        verdict = "yes" if s["cls_early_sep_late"] else "no"
        print(f"    [CLS] peaks in an early layer and [SEP] in a late one: {verdict}")
    if cut := truncated_inputs(res):
        print(truncation_note(cut, res["max_length"]))
    figures = ", ".join(task_figure(task) for task in res["tasks"])
    print(f"wrote {args.out}/special_tokens.json, special_tokens.csv, {figures}, cls-row.png")
    return 0
