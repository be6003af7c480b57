"""``patterncnn report RUN_DIR``: one self-contained HTML file per finished census, to look at in a browser."""

from __future__ import annotations

from .common import add_overwrite, in_path, out_path


def register(sub) -> None:
    p = sub.add_parser("report", help="a self-contained HTML report of a finished census (figures, grid, maps)",
                       description="Write RUN_DIR/report.html: where the numbers come from (encoder, classifier, "
                                   "estimator, validation), each task's pattern shares with their intervals, the "
                                   "layer x head grid of each pattern's share (click a head for the example maps the "
                                   "census kept, tokens on hover), and the drift, special-tokens, disable and link "
                                   "results in the census folder, in the folders directly inside it, or named with "
                                   "--with (results beside the census folder are not searched). One file, everything inline, "
                                   "no network. A RUN_DIR of several censuses (census --model A --model B) gets one "
                                   "report per census.")
    p.add_argument("run_dir", type=in_path, metavar="RUN_DIR",
                   help="a census folder (census --out), or its census.json")
    p.add_argument("--out", type=out_path, default=None, help="the HTML file (default: RUN_DIR/report.html; one census only)")
    add_overwrite(p, "report.html")
    p.add_argument("--with", type=in_path, dest="extra", action="append", default=[], metavar="PATH",
                   help="a drift, special-tokens, disable or link result folder (or JSON) to show too (repeatable)")
    p.set_defaults(func=run)


def run(args) -> int:
    from ..report import report_files, write_report

    files = report_files(args.run_dir, args.out, args.overwrite)  # every report checked before any is written
    for folder, path in files:
        print(f"wrote {write_report(folder, path, args.extra, args.overwrite)}")
    return 0
