"""``patterncnn classify``: classify the maps of a store, or a plain .npz or .npy, into JSON lines."""

from __future__ import annotations

import sys

from .common import add_classifier_args, add_overwrite, classifier, in_path, out_path


def register(sub) -> None:
    p = sub.add_parser("classify", help="classify maps (map store, plain .npz or .npy) -> JSON lines",
                       description="Classify every map of a map store, a plain .npz of square maps keyed by id, or "
                                   "an .npy of one (T, T) map or N of them (N, T, T). Writes one JSON line per map: "
                                   "{id, label, probs}. Invalid maps (non-square, empty, NaN/inf, negative, "
                                   "separators outside the map, values too large to score) get an error line and "
                                   "are reported; maps whose rows do not sum to ~1 are classified and flagged.")
    p.add_argument("maps", type=in_path, help="map store folder, .npz or .npy file")
    p.add_argument("--out", type=out_path, required=True, help="output .jsonl, or - for standard output")
    add_overwrite(p, "file")
    add_classifier_args(p)
    p.set_defaults(func=run)


def run(args) -> int:
    from ..classifier.classify import FILE_SEPS_FIX, classify_maps, without_seps_note
    from ..core.fileio import output_file
    from ..core.maps import MapFormatError, open_maps, require_maps

    out = output_file(args.out, args.overwrite, stream=True)  # before any work: never a FIFO, never silently
    maps = require_maps(open_maps(args.maps))  # none to classify: refused, as when none can be
    s = classify_maps(maps, classifier(args), sys.stdout if out is None else out)
    if s["rejected"] and not s["classified"]:
        map_id, why = s["rejected"][0]
        raise MapFormatError(f"none of the {len(s['rejected'])} map(s) could be classified (map {map_id!r}: {why}); "
                             f"{args.out} lists each one's error")
    for map_id, why in s["rejected"]:
        print(f"{map_id}: skipped: {why}", file=sys.stderr)
    if s["without_seps"]:
        print("note: " + without_seps_note(s["without_seps"], FILE_SEPS_FIX), file=sys.stderr)
    counts = ", ".join(f"{k} {v}" for k, v in s["counts"].items())
    print(f"classified {s['classified']} map(s) -> {args.out} ({counts}); {len(s['rejected'])} rejected, "
          f"{s['flagged']} flagged (rows not summing to 1)", file=sys.stderr if out is None else sys.stdout)
    return 0
