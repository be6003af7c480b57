"""One leave-one-family-out fit, its predictions kept: contact sheets of its commonest confusions, and its agreement
with the two triads of round 7 on the held-out family's retest maps.

    python research/generalisation/errors.py FAMILY [--init research/generalisation/pretrained-research-1m.pt]

The fit is loeo.py's (the other families' maps, those sharing an input example with FAMILY's dropped; early
stopping on a grouped fifth; at most 40 epochs; 3e-4 from --init), seed 0. Writes
``sheets/loeo-FAMILY-TRUE-called-PRED.png`` for the three commonest confusions (at most 30 maps each, in map
order; of two confusions as common, the later label first), and prints its figures and writes them to ``sheets/loeo-FAMILY.json``.
"""

from __future__ import annotations

import argparse
import csv
import json
import sys
from pathlib import Path

import numpy as np
import torch

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from loeo import confusion, held_out  # noqa: E402
from realmaps import contact_sheet  # noqa: E402

from patterncnn.classifier.model import config_from_dict  # noqa: E402
from patterncnn.core.labels import LABELS, SHORT  # noqa: E402
from patterncnn.core.maps import families  # noqa: E402
from patterncnn.labelling.sets import load_labelled  # noqa: E402
from patterncnn.training.evaluate import _split_train  # noqa: E402
from patterncnn.training.fit import INIT_LR, TrainConfig, fit_members, predict_proba, torch_threads  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("family")
    ap.add_argument("--init", default=str(HERE / "pretrained-research-1m.pt"))
    ap.add_argument("--retest", default="annotations/round7-retest")
    args = ap.parse_args()
    data = load_labelled(["annotations", "annotations/round8-e5-uniform"])
    fams = families(data.ids)
    ckpt = torch.load(args.init, map_location="cpu", weights_only=True)
    cfg = config_from_dict(ckpt["model_config"])
    pool, te = held_out(data, fams, args.family)
    with torch_threads(2):
        tr, va = _split_train(data, pool, 0)
        model, _ = fit_members(data, tr, va, cfg, TrainConfig(max_epochs=40, lr=INIT_LR), seed=0,
                               init=ckpt["state_dict"])
        pred = predict_proba(model, data, te, cfg).argmax(1)
    y = data.y[te]
    print(f"{args.family} held out, {len(te)} maps: accuracy {(pred == y).mean():.3f}")
    record = {"family": args.family, "init": Path(args.init).name, "lr": INIT_LR, "seed": 0, "maps": int(len(te)),
              "accuracy": float((pred == y).mean())}
    conf = confusion(y, pred)
    off = [(conf[a, b], a, b) for a in range(len(LABELS)) for b in range(len(LABELS)) if a != b]
    record["confusion"] = conf.tolist()  # rows: the label, columns: the prediction, in LABELS order
    for n, a, b in sorted(off, reverse=True)[:3]:
        sel = [i for i, p in zip(te, pred) if data.y[i] == a and p == b][:30]
        out = HERE / "sheets" / f"loeo-{args.family}-{SHORT[LABELS[a]]}-called-{SHORT[LABELS[b]]}.png"
        out.write_bytes(contact_sheet([data.maps[i] for i in sel], [data.seps[i] for i in sel],
                                      [f"T={data.maps[i].shape[0]}" for i in sel],
                                      title=f"{args.family} maps labelled {LABELS[a]}, called {LABELS[b]} by a "
                                            f"classifier that never saw {args.family} ({len(sel)} of {n})"))
        print(f"  {LABELS[a]} called {LABELS[b]}: {n} of {(y == a).sum()} -> {out.relative_to(HERE)}")
    retest = Path(args.retest) / "labels.csv"
    if retest.is_file():
        second = {r["map_id"]: LABELS.index(r["label"]) for r in csv.DictReader(open(retest)) if r["label"]}
        at = {data.ids[i]: (p, data.y[i]) for i, p in zip(te, pred) if data.ids[i] in second}
        if at:
            p, first = (np.array(v) for v in zip(*at.values()))
            two = np.array([second[m] for m in at])
            both = two == first
            print(f"  on its {len(at)} maps of {retest.parent}: vs the first triad {(p == first).mean():.3f}, vs the "
                  f"second {(p == two).mean():.3f}; the triads agree on {both.sum()} ({both.mean():.3f}), where the "
                  f"classifier scores {(p == first)[both].mean():.3f}")
            record["retest"] = {"maps": len(at), "vs_first_triad": float((p == first).mean()),
                                "vs_second_triad": float((p == two).mean()), "triads_agree": int(both.sum()),
                                "on_agreed_maps": float((p == first)[both].mean())}
    (HERE / "sheets" / f"loeo-{args.family}.json").write_text(json.dumps(record, indent=1) + "\n")


if __name__ == "__main__":
    main()
