"""``patterncnn link``: per head, census pattern shares beside drift and disabling effect; the paper's hypothesis."""

from __future__ import annotations

from .common import add_overwrite, given, in_path, out_path, positive_int, seed


def register(sub) -> None:
    p = sub.add_parser("link", help="per head: pattern distribution, drift and disabling effect; a permutation test",
                       description="Join, per layer x head, a finished census (its per-head pattern shares), a drift "
                                   "result and a disable result of one task; test whether disabling heterogeneous "
                                   "heads costs more than disabling vertical ones (permutation test over heads). Writes "
                                   "link.csv, link.json and link.png (scatter plots).")
    p.add_argument("--task", type=given, required=True, help="GLUE task, present in all three results")
    p.add_argument("--census", type=in_path, required=True, help="census folder or census.json (`patterncnn census`)")
    p.add_argument("--disable", type=in_path, required=True,
                   help="disable folder or disable.json (`patterncnn disable`)")
    p.add_argument("--drift", type=in_path, default=None,
                   help="drift folder or drift.json (`patterncnn drift`); optional")
    p.add_argument("--permutations", type=positive_int, default=10000,
                   help="random permutations behind each p-value (default: %(default)s)")
    p.add_argument("--seed", type=seed, default=0, help="seed of the permutations (default: %(default)s)")
    p.add_argument("--out", type=out_path, default="runs/link", help="output folder (default: %(default)s)")
    add_overwrite(p)
    p.set_defaults(out_folder=True, func=run)


def run(args) -> int:
    from ..core.glue import get_task
    from ..experiments.link import link

    task = get_task(args.task).name
    res = link(args.census, args.disable, task, args.drift, args.out, permutations=args.permutations,
               seed=args.seed, overwrite=args.overwrite).data
    t = res["test"]
    print(f"{task}, {res['disable_model']} ({res['disable_examples']} dev examples, {res['metric']}):")
    for k, v in res["by_majority"].items():
        print(f"  {k:<18} {v['heads']:>3} heads, mean drop when disabled {100 * v['mean_drop']:+.2f} points")
    if t["difference"] is None:
        print(f"  no test: {t['note']}")
    else:
        print(f"  heterogeneous - vertical: {100 * t['difference']:+.2f} points, permutation p = {t['p_value']:.3f}")
    for what, r in (("heterogeneous share", res["rank_heterogeneous_share_vs_drop"]),
                    ("1 - drift cosine", res["rank_drift_vs_drop"])):
        if r is not None:
            print(f"  Spearman({what}, drop) = " + (f"{r['spearman']:+.3f}, p = {r['p_value']:.3f}"
                                                    if r["spearman"] is not None else f"none: {r['note']}"))
    for note in res.get("notes", []):
        print(f"note: {note}")
    print(f"wrote {args.out}/link.csv, link.json, link.png")
    return 0
