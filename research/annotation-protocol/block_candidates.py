"""Pick the top-N pair-input maps of candidate pools by the within-segment excess feature (pre-selection only).

usage: block_candidates.py POOL OUT N [LABELLED ...]   (LABELLED: labelled sets whose maps are skipped; rounds 4, 6)
"""
import sys

from patterncnn.classifier.features import FEATURE_NAMES, map_features
from patterncnn.core.maps import MapStore, open_maps
from patterncnn.core.segments import is_pair

src, out, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
skip = {i for labelled in sys.argv[4:] for i in open_maps(labelled + "/maps").ids}
maps = open_maps(src)
k = FEATURE_NAMES.index("within_excess")
scored = []
for meta, arr in maps:
    if meta["id"] in skip or not is_pair(arr.shape[0], meta.get("seps")):
        continue
    scored.append((float(map_features(arr, meta.get("seps"))[k]), meta["id"]))
scored.sort(reverse=True)
keep = {i for _, i in scored[:n]}
store = MapStore.create(out, info={"selection": f"top {n} of {src.rsplit('/',1)[-1]} by within_excess (pre-selection for block)"})
store.append((m, a) for m, a in maps if m["id"] in keep)
print(len(keep), "kept; scores", scored[0][0], scored[len(keep) - 1][0])
