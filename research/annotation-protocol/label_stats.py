"""The datasheet's class counts, votes, uniform shares (Wilson intervals), where block votes fell, and the
comparison with the legacy single-annotator labels.  usage: label_stats.py [ANNOTATIONS]"""
import csv
import math
import os
import sys
from collections import Counter, defaultdict

from patterncnn.core.labels import LABELS as L
from patterncnn.core.maps import encoder_family, open_maps
from patterncnn.labelling.agreement import cohen_kappa, confusion

root=sys.argv[1] if len(sys.argv)>1 else "annotations"
labels={r["map_id"]:r for r in csv.DictReader(open(f"{root}/labels.csv"))}
ann=defaultdict(dict)
for r in csv.DictReader(open(f"{root}/votes.csv")):
    ann[r["map_id"]][r["annotator"]]=r["label"]
store=open_maps(f"{root}/maps")
meta={m["id"]:m for m in store.meta}
def wilson(k,n,z=1.96):
    p=k/n; d=1+z*z/n; c=(p+z*z/(2*n))/d; h=z*math.sqrt(p*(1-p)/n+z*z/(4*n*n))/d; return c-h,c+h
for F in ["minilm","mpnet","all"]:
    ids=[m for m in labels if F=="all" or encoder_family(m)==F]
    res=Counter(labels[m]["label"] for m in ids)
    top=Counter(); agreed=Counter()
    for m in ids:
        c=Counter(ann[m].values()); n=c.most_common(1)[0][1]; top[n]+=1
        if n>=2: agreed[c.most_common(1)[0][0]]+=1
    print(F, len(ids), "resolved", dict(res), "votes-top", dict(top), "agreed>=2", dict(agreed))
    print("  tags",dict(Counter(m.split("_")[0] for m in ids)))
    print("  sampling",dict(Counter(str(meta[m].get("sampling")) for m in ids)))
    print("  tasks",dict(Counter(meta[m]["task"] for m in ids)))
    uni=[m for m in ids if meta[m].get("sampling")=="uniform"]
    for tag in sorted({m.split("_")[0] for m in uni}):  # one encoder (pretrained or one fine-tune) at a time
        sel=[m for m in uni if m.split("_")[0]==tag]
        c=Counter(labels[m]["label"] for m in sel); n=len(sel)
        print("  uniform %s n=%d tasks %s"%(tag,n,dict(Counter(meta[m]["task"] for m in sel))))
        print("    "+"; ".join(f"{k} {100*c[k]/n:.1f}% [{100*wilson(c[k],n)[0]:.1f}, {100*wilson(c[k],n)[1]:.1f}]" for k in L))
    print("  layers", sorted(Counter(meta[m]["layer"] for m in ids).items()))
    blk=[m for m in ids if "block" in ann[m].values()]
    print("  any-block-vote", len(blk), dict(Counter(meta[m]["task"] for m in blk)), dict(Counter(meta[m]["layer"] for m in blk)))
legacy = f"{root}/legacy-single-annotator/labels.csv"
old = {r["map_id"]: r["label"] for r in csv.DictReader(open(legacy))} if os.path.exists(legacy) else {}
ids = [m for m in old if m in labels]
a, b = [old[m] for m in ids], [labels[m]["label"] for m in ids]
if ids: print("legacy vs resolved", len(ids), "maps, agree", round(sum(x == y for x, y in zip(a, b)) / len(ids), 3),
      "kappa", round(cohen_kappa(a, b), 3), "confusion (rows legacy):", confusion(a, b).tolist())
