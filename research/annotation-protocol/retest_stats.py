"""Round 7's figures beyond `annotate agreement --against`: bootstrap intervals of the second triad's macro-F1
on the agreed maps, MPNet without its block map, the within-triad yardstick on the same maps, the CNN's
out-of-fold matches with one triad and not the other (exact McNemar), and where the first triad's label is not
its majority.

usage: python research/annotation-protocol/retest_stats.py   (from the repository; reads annotations/, its round 7 and
models/metrics.json)
"""
import json
from collections import Counter

import numpy as np
from scipy.stats import binomtest

from patterncnn.core.labels import LABELS
from patterncnn.core.maps import encoder_family
from patterncnn.core.scores import subset_scores
from patterncnn.labelling.agreement import held_out_rater, rater_votes, two_agree
from patterncnn.labelling.sets import read_tables

retest, main = read_tables("annotations/round7-retest"), read_tables("annotations")
new = {m: r["label"] for m, r in retest.labels.items()}
old = {m: r["label"] for m, r in main.labels.items()}
rows = json.load(open("models/metrics.json"))["calibration"]["rows"]
cnn = {i: LABELS[int(np.argmax(p))] for i, p in zip(rows["ids"], rows["probs"])}
ids = sorted(new)
new_votes = rater_votes(retest.annotations.values())
old_votes = rater_votes(r for r in main.annotations.values() if r["map_id"] in new)


def macro_f1(pred, ref, sel):
    y = np.array([LABELS.index(ref[i]) for i in sel])
    return subset_scores(y, np.array([LABELS.index(pred[i]) for i in sel]), np.ones(len(sel), bool))["macro_f1"]


rng = np.random.default_rng(0)
for fam in ("minilm", "mpnet"):
    sel = [i for i in ids if encoder_family(i) == fam and two_agree(new_votes[i]) and two_agree(old_votes[i])]
    boot = [macro_f1(new, old, list(rng.choice(sel, len(sel)))) for _ in range(2000)]
    print(f"{fam}: second triad vs first on {len(sel)} agreed maps, macro-F1 {macro_f1(new, old, sel):.3f}, "
          f"95% bootstrap over maps {np.percentile(boot, 2.5):.3f}-{np.percentile(boot, 97.5):.3f}")
mp = [i for i in ids if encoder_family(i) == "mpnet" and old[i] != "block"]
print(f"mpnet without the first triad's block map: macro-F1 {macro_f1(new, old, mp):.3f} on {len(mp)} maps")
pairs = held_out_rater(old_votes)
print(f"within the first triads, these maps: one annotator {np.mean([p[1] == p[2] for p in pairs]):.3f}, "
      f"the CNN {np.mean([cnn[p[0]] == p[2] for p in pairs]):.3f} on the same {len(pairs)} pairs")
a = sum(cnn[i] == new[i] != old[i] for i in ids)
b = sum(cnn[i] == old[i] != new[i] for i in ids)
print(f"CNN out of fold matches the second triad only on {a} maps, the first only on {b}: "
      f"exact McNemar p {binomtest(min(a, b), a + b, 0.5).pvalue:.2f}")
for i in ids:
    top = Counter(x.label for x in old_votes[i].values()).most_common()
    if top[0][0] != old[i]:
        print(f"first triad's label is not its majority: {i} votes {dict(top)} label {old[i]}; second triad {new[i]}")
