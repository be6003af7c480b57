"""Re-adjudication samples: every map of the given labelled sets on which its annotators did not all agree, written
as one map store to push and to make packs from, in map-id order within each set.

Round 9 (the training sets' splits, guide 1.1): adjudicate_sample.py OUT
  (the sets default to annotations/ and annotations/round8-e5-uniform/)
Round 11 (round 5's splits): adjudicate_sample.py OUT annotations/round5-heldout-uniform

usage: adjudicate_sample.py OUT [SET ...]
"""
import csv
import json
import sys

from patterncnn.core.maps import MapStore, open_maps

roots = sys.argv[2:] or ["annotations", "annotations/round8-e5-uniform"]
pick = []
for root in roots:
    src = open_maps(f"{root}/maps")
    split = sorted(r["map_id"] for r in csv.DictReader(open(f"{root}/labels.csv")) if len(json.loads(r["labels_seen"])) > 1)
    pick.append((src, split))
out = MapStore.create(sys.argv[1], info={"purpose": "re-adjudication: the maps of " + ", ".join(roots)
                                                    + " whose votes were not unanimous"})
for src, ids in pick:
    out.append((src.metadata(i), src.get(i)) for i in ids)
print(sum(len(ids) for _, ids in pick), "maps")
