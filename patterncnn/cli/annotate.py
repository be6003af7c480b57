"""``patterncnn annotate config|push|sheets|pull``: the Label Studio round trip."""

from __future__ import annotations

import os


def _connection_args(q) -> None:
    q.add_argument("--url", help="Label Studio URL (default: $LABEL_STUDIO_URL)")
    q.add_argument("--api-key", help="Label Studio API token (default: $LABEL_STUDIO_API_KEY)")


def _connect(args):
    from ..labelstudio import connect

    return connect(args.url or os.environ.get("LABEL_STUDIO_URL"),
                   args.api_key or os.environ.get("LABEL_STUDIO_API_KEY"))


def register(sub) -> None:
    p = sub.add_parser("annotate", help="label maps in Label Studio: config, push, sheets, pull",
                       description="Round trip with a Label Studio server (label-studio-sdk 2.x). Connection from "
                                   "--url/--api-key or LABEL_STUDIO_URL/LABEL_STUDIO_API_KEY.")
    asub = p.add_subparsers(dest="annotate_command", metavar="ACTION", required=True)
    q = asub.add_parser("config", help="print the labeling config (XML) generated from the five labels")
    q.set_defaults(func=run_config)

    q = asub.add_parser("push", help="import maps as tasks (idempotent), with optional pre-annotations",
                        description="Create or reuse a project and import maps from a map store (or plain .npz) as "
                                    "tasks; map ids already in the project are skipped. Images are embedded in the "
                                    "tasks as PNG data URIs, so a stock server needs no storage setup.")
    q.add_argument("maps", help="map store folder (from `patterncnn sample`) or a plain .npz")
    q.add_argument("--project", required=True, help="project title (created if missing) or id")
    q.add_argument("--pre", choices=("rule", "none"), default="rule",
                   help="pre-annotate with the feature rule, or not at all (default: %(default)s)")
    q.add_argument("--classifier", help="pre-annotate with a trained classifier instead (models/patterncnn.onnx)")
    q.add_argument("--order", choices=("store", "uncertain"), default="store",
                   help="'uncertain': push the maps the predictor is least sure about first (default: %(default)s)")
    q.add_argument("--limit", type=int, help="push at most this many new maps")
    _connection_args(q)
    q.set_defaults(func=run_push)

    q = asub.add_parser("sheets", help="render maps as numbered contact sheets, to look through a batch by eye",
                        description="Render maps as PNG contact sheets (per-map colour scale, [SEP] lines), each "
                                    "map captioned with a running number; index.json maps numbers to map ids.")
    q.add_argument("maps", nargs="+", help="map store folder(s) or .npz file(s)")
    q.add_argument("--out", required=True, help="folder for sheet-NNN.png and index.json")
    q.add_argument("--per-sheet", type=int, default=16, help="(default: %(default)s)")
    q.add_argument("--shuffle", type=int, metavar="SEED", help="shuffle the maps with this seed first")
    q.set_defaults(func=run_sheets)

    q = asub.add_parser("pull", help="export annotations and write the labelled set (e.g. into annotations/)",
                        description="Export the project's annotations and write labels.csv (tidy table joined to "
                                    "the map store), the export as it came (gzipped) and the labelled maps. Skipped "
                                    "tasks are left out and counted; several annotations on a task are resolved "
                                    "by majority, then the most recent.")
    q.add_argument("--project", help="project title or id")
    q.add_argument("--maps", action="append", help="map store(s) the tasks were pushed from (repeatable)")
    q.add_argument("--from-file", help="a JSON export (plain or .json.gz) instead of a server")
    q.add_argument("--out", default="annotations", help="output folder (default: %(default)s)")
    _connection_args(q)
    q.set_defaults(func=run_pull)


def run_config(args) -> int:
    from ..annotate import label_config

    print(label_config())
    return 0


def run_push(args) -> int:
    from ..annotate import RulePredictor, label_config, push
    from ..maps import open_maps

    maps = open_maps(args.maps)
    if args.classifier:
        from ..infer import OnnxClassifier

        predictor = OnnxClassifier(args.classifier)
    else:
        predictor = RulePredictor() if args.pre == "rule" else None
    ls = _connect(args)
    project = ls.ensure_project(args.project, label_config())
    result = push(ls, project, maps, predictor=predictor, order=args.order, limit=args.limit)
    print(f"pushed {result['pushed']} map(s) to project {project.id} ({project.title!r}); "
          f"{result['skipped_existing']} already there")
    print(f"label them at {ls.url}/projects/{project.id}/data")
    return 0


def run_sheets(args) -> int:
    from ..maps import MultiStore, open_maps
    from ..render import write_sheets

    n = write_sheets(MultiStore([open_maps(m) for m in args.maps]), args.out, args.per_sheet, args.shuffle)
    print(f"wrote {n} sheet(s) of up to {args.per_sheet} maps to {args.out} (index.json maps #n to map ids)")
    return 0


def run_pull(args) -> int:
    from ..maps import MultiStore, open_maps
    from ..pull import pull

    maps = MultiStore([open_maps(m) for m in args.maps]) if args.maps else None
    ls = None if args.from_file else _connect(args)
    report = pull(ls, args.project, maps, args.out, from_file=args.from_file)
    counts = ", ".join(f"{k} {v}" for k, v in report["labels"].items())
    print(f"{report['labelled']} labelled map(s) written to {args.out} ({counts}); {report['cancelled']} "
          f"skipped/cancelled and {report['unlabelled']} unlabelled task(s) left out; "
          f"{len(report['disagreements'])} with disagreeing annotations (resolved by majority, then most recent)")
    return 0
