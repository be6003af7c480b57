"""MiniLM's uniformly drawn hand-labelled maps (the 180 stored with the shipped classifier) against the committed
default census of MiniLM (research/census/minilm-r5d652c, `adjusted`, uniform scope) and its `count` column.
Pair tasks pooled (MRPC, QNLI, RTE, STS-B) with equal weight, hand shares with a binomial SE.
Usage: python research/intervals/minilm_hand_vs_census.py"""
import json
import sys

import numpy as np

sys.path.insert(0, ".")
from patterncnn.shares.calibrate import stored_rows

L = ["vertical", "diagonal", "vertical+diagonal", "block", "heterogeneous"]
rows = stored_rows(json.load(open("models/metrics.json")))
mini = rows.subset(rows.uniform & (rows.encoder == "minilm-53aa5117"))
print("splits of the hand-labelled maps:", sorted({g.split("/")[1] for g in mini.group.tolist()}))
c = json.load(open("research/census/minilm-r5d652c/census.json"))
pair = ["mrpc", "qnli", "rte", "stsb"]
print(f"{'task':6} {'pattern':18} {'hand (n)':>14} {'adjusted [ci95]':>24} {'count':>7}")
for t in pair + ["sst2"]:
    s = mini.task == t
    n = int(s.sum())
    for i, k in enumerate(L):
        h = (mini.y[s] == i).mean()
        ci = c["tasks"][t]["ci95"][k]
        flag = "  <- hand outside" if not ci[0] <= h <= ci[1] else ""
        if k in ("diagonal", "vertical+diagonal"):
            print(f"{t:6} {k:18} {100*h:7.1f} ({n:3d}) {100*c['tasks'][t]['shares'][k]:7.1f} [{100*ci[0]:4.1f}, {100*ci[1]:4.1f}]"
                  f" {100*c['tasks'][t]['shares_by_estimator']['count'][k]:7.1f}{flag}")
for k in ("diagonal", "vertical+diagonal"):
    i = L.index(k)
    hs = [(mini.y[mini.task == t] == i).mean() for t in pair]
    ns = [(mini.task == t).sum() for t in pair]
    se = np.sqrt(sum(h * (1 - h) / n for h, n in zip(hs, ns))) / len(pair)
    adj = np.mean([c["tasks"][t]["shares"][k] for t in pair])
    cnt = np.mean([c["tasks"][t]["shares_by_estimator"]["count"][k] for t in pair])
    print(f"pair tasks pooled, {k}: hand {100*np.mean(hs):.1f} (SE {100*se:.1f}), adjusted census {100*adj:.1f} "
          f"({(adj-np.mean(hs))/se:+.1f} SE), count {100*cnt:.1f} ({(cnt-np.mean(hs))/se:+.1f} SE)")
