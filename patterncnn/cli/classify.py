"""``patterncnn classify``: classify the maps of a store or plain .npz into JSON lines."""

from __future__ import annotations

import sys

from .common import add_classifier_args, classifier


def register(sub) -> None:
    p = sub.add_parser("classify", help="classify maps (map store or plain .npz) -> JSON lines",
                       description="Classify every map of a map store or a plain .npz of square maps keyed by id. "
                                   "Writes one JSON line per map: {id, label, probs}. Invalid maps (non-square, "
                                   "empty, NaN/inf, negative) get an error line and are reported; maps whose rows "
                                   "do not sum to ~1 are classified and flagged.")
    p.add_argument("maps", help="map store folder or .npz file")
    p.add_argument("--out", required=True, help="output .jsonl")
    add_classifier_args(p)
    p.set_defaults(func=run)


def run(args) -> int:
    from ..classifier.classify import classify_maps
    from ..core.maps import open_maps

    maps = open_maps(args.maps)
    s = classify_maps(maps, classifier(args), args.out)
    for map_id, why in s["rejected"]:
        print(f"{map_id}: skipped: {why}", file=sys.stderr)
    counts = ", ".join(f"{k} {v}" for k, v in s["counts"].items())
    print(f"classified {s['classified']} map(s) -> {args.out} ({counts}); {len(s['rejected'])} rejected, "
          f"{s['flagged']} flagged (rows not summing to 1)")
    return 1 if s["rejected"] and not s["classified"] else 0
