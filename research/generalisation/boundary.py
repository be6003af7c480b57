"""Where the vertical+diagonal / diagonal boundary lies: the real unanimous maps against the synthetic ones.

    python research/generalisation/boundary.py [--probs research/generalisation/probs/shipped-recipe-em-probs] \
        [--init models/pretrained-synthetic.pt] [--synthetic 3000] [--min-fits 3]

For the maps of each family that all three annotators labelled diagonal or vertical+diagonal: the generator's check
(`synthetic.measure`) read on them (column coverage, column and diagonal strength against the map's maximum, their
ratio; median and 10th-90th percentiles) and what the check would accept (`synthetic.judge`; "gap" where it accepts
no label), split by what most leave-one-family-out fits called them (at least --min-fits of the saved fits, corrected
posteriors); and what the CNN pretrained on synthetic maps alone (--init, never fine-tuned) calls the same maps.
Then the same measures on --synthetic generated maps of the two classes (seed 1). Prints only; nothing is written.
"""

from __future__ import annotations

import argparse
import glob
from collections import Counter, defaultdict

import numpy as np
import torch
from by_votes import read_votes

from patterncnn.classifier.model import PatternCNN, config_from_dict
from patterncnn.core.labels import LABELS, SHORT
from patterncnn.core.maps import families
from patterncnn.labelling.sets import load_labelled
from patterncnn.training import synthetic
from patterncnn.training.fit import predict_proba, torch_threads

CLASSES = ("diagonal", "vertical+diagonal")


def spread(values: list[float]) -> str:
    q = np.percentile(values, [10, 50, 90])
    return f"{q[1]:.2f} ({q[0]:.2f}-{q[2]:.2f})"


def describe(stats: list[dict]) -> str:
    ratio = [s["colstr"] / max(s["diagstr"], 1e-9) for s in stats]
    return (f"column coverage {spread([s['colcov'] for s in stats])}, column {spread([s['colstr'] for s in stats])}, "
            f"diagonal {spread([s['diagstr'] for s in stats])}, column/diagonal {spread(ratio)}")


def verdict(judged: dict[str, bool]) -> str:
    return "+".join(SHORT[k] for k, v in judged.items() if v) or "gap"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--probs", default="research/generalisation/probs/shipped-recipe-em-probs")
    ap.add_argument("--init", default="models/pretrained-synthetic.pt")
    ap.add_argument("--sets", nargs="+", default=["annotations", "annotations/round8-e5-uniform"])
    ap.add_argument("--synthetic", type=int, default=3000)
    ap.add_argument("--min-fits", type=int, default=3)
    args = ap.parse_args()
    votes = read_votes(args.sets)
    calls: dict[str, Counter] = defaultdict(Counter)
    for f in sorted(glob.glob(f"{args.probs}/*-seed*.npz")):
        r = np.load(f)
        for m, p in zip(r["ids"], r["bcts"].argmax(1)):
            calls[str(m)][int(p)] += 1
    data = load_labelled(args.sets)
    ckpt = torch.load(args.init, map_location="cpu", weights_only=True)
    cfg = config_from_dict(ckpt["model_config"])
    model = PatternCNN(cfg)
    model.load_state_dict(ckpt["state_dict"])
    model.eval()
    with torch_threads(2):
        zero_shot = predict_proba(model, data, np.arange(len(data.y)), cfg).argmax(1)
    fams = families(data.ids)
    groups: dict[tuple, list[int]] = defaultdict(list)
    for i, m in enumerate(data.ids):
        label = LABELS[data.y[i]]
        if label not in CLASSES or Counter(votes[m])[label] < 3:
            continue
        top, n = calls[m].most_common(1)[0] if calls[m] else (-1, 0)
        called = SHORT[LABELS[top]] if n >= args.min_fits else "split"
        groups[(fams[i], label, "all")].append(i)
        groups[(fams[i], label, called)].append(i)
    print(f"real maps all three annotators labelled so; 'called X': at least {args.min_fits} fits of {args.probs} "
          f"called them X; zero-shot: {args.init}")
    for key in sorted(groups, key=lambda k: (k[0], k[1], k[2] != "all", k[2])):
        idx = groups[key]
        if key[2] != "all" and len(idx) < 3:
            continue
        stats = [synthetic.measure(np.asarray(data.maps[i], np.float32), data.seps[i]) for i in idx]
        checks = Counter(verdict(synthetic.judge(np.asarray(data.maps[i], np.float32), data.seps[i])) for i in idx)
        zs = Counter(SHORT[LABELS[zero_shot[i]]] for i in idx)
        print(f"{key[0]} {key[1]} ({key[2]}): {len(idx)} maps\n  {describe(stats)}\n"
              f"  the check: {dict(checks.most_common())}; zero-shot CNN: {dict(zs.most_common())}")
    gen = synthetic.batch(args.synthetic, np.random.default_rng(1), proportions={c: 1.0 for c in CLASSES},
                          max_t=128, with_stats=True)
    for c in CLASSES:
        stats = [m for s, m in gen if LABELS[s.label] == c]
        print(f"synthetic {c}: {len(stats)} maps\n  {describe(stats)}")


if __name__ == "__main__":
    main()
