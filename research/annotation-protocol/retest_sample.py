"""Round 7 (test-retest): 240 maps of the training set (annotations/), 120 per encoder family, drawn uniformly at
random (seed 71) from its maps, written as a map store to push and to make packs from.

usage: retest_sample.py OUT
"""
import random
import sys

from patterncnn.core.maps import MapStore, encoder_family, open_maps

src = open_maps("annotations/maps")
ids = sorted(src.ids)
rng = random.Random(71)
pick = []
for fam in ("minilm", "mpnet"):
    pick += sorted(rng.sample([i for i in ids if encoder_family(i) == fam], 120))
out = MapStore.create(sys.argv[1], info={"purpose": "round 7 test-retest: 240 maps of annotations/, 120 per family, seed 71"})
out.append((src.metadata(i), src.get(i)) for i in pick)
print(len(pick), "maps")
