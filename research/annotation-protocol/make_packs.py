"""Blind annotation packs: per annotator, the same maps in one shuffled order (seed 101 + part), as contact sheets
with neutral captions (running number and T only). The index (number -> map id, which names model and
task) goes to a private folder the annotators never see; labels-template.csv is what they fill in.

usage: make_packs.py PACKS PRIVATE PART STORE [STORE ...]
The annotators are a, b, c unless $WHO names others (round 3: WHO=g,h,i). Rounds 1-6 gave every annotator the
same order; $SEEDS gives each annotator of $WHO its own shuffle seed instead (round 7: WHO=s,t,u SEEDS=171,172,173),
so that two annotators rarely see a map beside the same neighbours.
"""
import csv
import json
import os
import shutil
import sys
from pathlib import Path

from patterncnn.classifier.render import write_sheets
from patterncnn.core.maps import MultiStore, open_maps

packs, private, part, stores = Path(sys.argv[1]), Path(sys.argv[2]), sys.argv[3], sys.argv[4:]
maps = MultiStore([open_maps(s) for s in stores])
whos = os.environ.get("WHO", "a,b,c").split(",")
seeds = [int(x) for x in os.environ["SEEDS"].split(",")] if os.environ.get("SEEDS") else [101 + int(part)] * len(whos)
if len(seeds) != len(whos):
    raise SystemExit(f"SEEDS gives {len(seeds)} seeds for {len(whos)} annotators in WHO")
for who, seed in zip(whos, seeds):
    out = packs / f"annotator-{who}" / f"part-{part}"
    n = write_sheets(maps, out, per_sheet=12, shuffle=seed)["sheets"]
    idx = json.loads((out / "index.json").read_text())
    priv = private / f"annotator-{who}" / f"part-{part}"
    priv.mkdir(parents=True, exist_ok=True)
    shutil.move(out / "index.json", priv / "index.json")
    with open(out / "labels-template.csv", "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["n", "label", "uncertain"])
        for r in idx:
            w.writerow([r["n"], "", ""])
    print(who, part, n, "sheets", len(idx), "maps")
