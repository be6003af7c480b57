"""Round 9 (re-adjudication under guide 1.1): every map of the training sets (annotations/ and
annotations/round8-e5-uniform/) on which its three annotators did not all agree, written as one map store to push
and to make packs from, in map-id order.

usage: adjudicate_sample.py OUT
"""
import csv
import json
import sys

from patterncnn.core.maps import MapStore, open_maps

pick = []
for root in ("annotations", "annotations/round8-e5-uniform"):
    src = open_maps(f"{root}/maps")
    split = sorted(r["map_id"] for r in csv.DictReader(open(f"{root}/labels.csv")) if len(json.loads(r["labels_seen"])) > 1)
    pick.append((src, split))
out = MapStore.create(sys.argv[1], info={"purpose": "round 9 re-adjudication: the maps of annotations/ and "
                                                    "annotations/round8-e5-uniform/ whose three votes were not unanimous"})
for src, ids in pick:
    out.append((src.metadata(i), src.get(i)) for i in ids)
print(sum(len(ids) for _, ids in pick), "maps")
