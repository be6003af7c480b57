"""A re-adjudication's figures: what two fresh blind annotators under guide 1.1 say on the maps whose first three
annotators split, and what the labels would become with their votes added (five votes, resolved as every set is:
the most votes, Dawid-Skene for ties, fitted on every map of the sets with the new votes added).

Round 9 (the training sets; round 7's second triad against the labels before and after):
    adjudication_stats.py [OUT.json]
Round 11 (round 5's splits; round 7's retest is of the main set, so it is left out when --sets names others):
    adjudication_stats.py [OUT.json] --round annotations/round11-round5-adjudication --sets
        annotations/round5-heldout-uniform
(OUT.json before the options: --sets takes every name after it)
(run from the repository root)
"""
import argparse
import csv
import json
from collections import Counter

from patterncnn.core.labels import SHORT
from patterncnn.core.maps import encoder_family
from patterncnn.labelling.agreement import rater_votes, resolve_votes

TRAINING_SETS = ["annotations", "annotations/round8-e5-uniform"]
ap = argparse.ArgumentParser()
ap.add_argument("out", nargs="?")
ap.add_argument("--sets", nargs="+", default=TRAINING_SETS, help="the sets whose split maps were re-adjudicated")
ap.add_argument("--round", default="annotations/round9-adjudication", help="the re-adjudication's labelled set")
args = ap.parse_args()
# Round 7's second triad relabelled maps of the training sets: compared only when those are the sets.
SETS, ROUND, ROUND7 = args.sets, args.round, "annotations/round7-retest" if args.sets == TRAINING_SETS else None


def rows(root):
    return list(csv.DictReader(open(f"{root}/votes.csv")))


def labels(root):
    return {r["map_id"]: r["label"] for r in csv.DictReader(open(f"{root}/labels.csv"))}


first = {m: lab for s in SETS for m, lab in labels(s).items()}
old_votes = rater_votes([r for s in SETS for r in rows(s)])
new_votes = rater_votes(rows(ROUND))
contested = sorted(new_votes)
five = resolve_votes(rater_votes([r for s in (*SETS, ROUND) for r in rows(s)]), "majority-dawid-skene")
out = {"maps": len(contested), "by_family": {}}
for fam in sorted({encoder_family(m) for m in contested}) + ["all"]:
    ms = [m for m in contested if fam == "all" or encoder_family(m) == fam]
    both_agree = [m for m in ms if len({v.label for v in new_votes[m].values()}) == 1]
    side = Counter()  # on the maps two of the first three agreed on: a new vote with the two, the one, or neither
    for m in ms:
        counts = Counter(v.label for v in old_votes[m].values())
        if counts.most_common(1)[0][1] < 2:
            continue  # a three-way split has no majority to side with
        top = counts.most_common(1)[0][0]
        for v in new_votes[m].values():
            side["with the first majority" if v.label == top else
                 "with its minority" if v.label in counts else "with none of the three"] += 1
    three_way = sum(len(Counter(v.label for v in old_votes[m].values())) == 3 for m in ms)
    ties = sum(five[m].tie for m in ms)
    changed = [m for m in ms if five[m].label != first[m]]
    out["by_family"][fam] = {
        "maps": len(ms), "three_way_splits": three_way, "new_annotators_agree": len(both_agree),
        "new_votes_on_two_to_one_maps": dict(side), "five_vote_ties": ties,
        "label_changes_with_five_votes": len(changed),
        "changes": dict(Counter(f"{SHORT[first[m]]}->{SHORT[five[m].label]}" for m in changed).most_common()),
    }
# Round 7's second triad against the first triad's labels, before and after the five-vote resolution.
second = {m: lab for m, lab in labels(ROUND7).items() if lab} if ROUND7 else {}
for fam in ("minilm", "mpnet", "all") if second else ():
    ms = [m for m in second if fam == "all" or encoder_family(m) == fam]
    before = sum(second[m] == first[m] for m in ms) / len(ms)
    after = sum(second[m] == (five[m].label if m in new_votes else first[m]) for m in ms) / len(ms)
    moved = [m for m in ms if m in new_votes and five[m].label != first[m]]
    out.setdefault("round7_second_triad_vs_first", {})[fam] = {
        "maps": len(ms), "re_adjudicated": sum(m in new_votes for m in ms), "relabelled": len(moved),
        "relabelled_now_agree": sum(second[m] == five[m].label for m in moved),
        "relabelled_agreed_before": sum(second[m] == first[m] for m in moved),
        "agree_before": round(before, 4), "agree_after": round(after, 4)}
print(json.dumps(out, indent=1))
if args.out:
    open(args.out, "w").write(json.dumps(out, indent=1) + "\n")
