"""A contact sheet of the held-out maps that most leave-one-family-out fits confuse one way, from `loeo.py --save-probs`.

    python research/generalisation/confusion_sheets.py research/generalisation/probs/shipped-recipe-em-probs e5 \
        diagonal vertical+diagonal [--kind bcts] [--min-fits 3] [--max 24]

Writes sheets/confused-FAMILY-TRUE-as-PRED-RUN.png beside this script (RUN: the posteriors' folder name, with
`-plain` for --kind probs): the maps of FAMILY labelled TRUE that at least --min-fits of the fits (seeds) predicted as
PRED (--kind: the corrected posteriors `bcts`, or the plain `probs`), those most fits confuse first (then in map
order), at most --max of them, each drawn with its own colour scale; the title says how many of how many.
"""

import argparse
import glob
from pathlib import Path

import numpy as np
from realmaps import contact_sheet

from patterncnn.core.labels import LABELS, SHORT
from patterncnn.labelling.sets import load_labelled

HERE = Path(__file__).resolve().parent


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("probs")
    ap.add_argument("family")
    ap.add_argument("label", choices=LABELS)
    ap.add_argument("predicted", choices=LABELS)
    ap.add_argument("--kind", default="bcts", choices=["bcts", "probs"])
    ap.add_argument("--min-fits", type=int, default=3)
    ap.add_argument("--max", type=int, default=24)
    ap.add_argument("--sets", nargs="+", default=["annotations", "annotations/round8-e5-uniform"])
    args = ap.parse_args()
    a, b = LABELS.index(args.label), LABELS.index(args.predicted)
    count: dict[str, int] = {}
    for f in sorted(glob.glob(f"{args.probs}/{args.family}-seed*.npz")):
        r = np.load(f)
        for map_id, y, p in zip(r["ids"], r["y"], r[args.kind].argmax(1)):
            if y == a and p == b:
                count[str(map_id)] = count.get(str(map_id), 0) + 1
    data = load_labelled(args.sets)
    index = {m: i for i, m in enumerate(data.ids)}
    qualify = sorted((-n, index[m]) for m, n in count.items() if n >= args.min_fits)
    sel = [i for _, i in qualify[: args.max]]
    run = Path(args.probs).name + ("-plain" if args.kind == "probs" else "")
    out = HERE / "sheets" / f"confused-{args.family}-{SHORT[args.label]}-as-{SHORT[args.predicted]}-{run}.png"
    out.write_bytes(contact_sheet([data.maps[i] for i in sel], [data.seps[i] for i in sel],
                                  title=f"{args.family}: labelled {args.label}, called {args.predicted} by at least "
                                        f"{args.min_fits} fits: {len(sel)} of {len(qualify)} maps ({run})"))
    print(out, len(sel), "of", len(qualify), "maps")


if __name__ == "__main__":
    main()
