"""Agreement between annotators and label resolution (patterncnn.labelling.agreement) on known cases."""

from collections import Counter

import numpy as np
import pytest
from sklearn.metrics import cohen_kappa_score

from patterncnn.core.labels import LABELS
from patterncnn.labelling.agreement import (
    agreement_report,
    cohen_kappa,
    dawid_skene,
    fleiss_kappa,
    held_out_rater,
    held_out_scores,
    rater_votes,
    resolve_votes,
)


def row(map_id, who, label, when, i, skipped=False, uncertain=False):
    return {"map_id": map_id, "annotator": who, "label": label, "uncertain": str(uncertain), "skipped": str(skipped),
            "created_at": when, "updated_at": when, "ls_annotation_id": str(i)}


def test_cohen_kappa_matches_sklearn():
    rng = np.random.default_rng(0)
    a = rng.choice(LABELS, 200, p=[0.4, 0.2, 0.15, 0.05, 0.2])
    b = np.where(rng.random(200) < 0.7, a, rng.choice(LABELS, 200))
    assert cohen_kappa(list(a), list(b)) == pytest.approx(cohen_kappa_score(a, b), abs=1e-12)
    assert np.isnan(cohen_kappa(["block"] * 3, ["block"] * 3))


def test_fleiss_kappa_on_fleiss_worked_example():
    # The worked example of Fleiss' kappa (10 subjects, 14 raters, 5 categories): kappa 0.210.
    table = np.array([[0, 0, 0, 0, 14], [0, 2, 6, 4, 2], [0, 0, 3, 5, 6], [0, 3, 9, 2, 0], [2, 2, 8, 1, 1],
                      [7, 7, 0, 0, 0], [3, 2, 6, 3, 0], [2, 5, 3, 2, 2], [6, 5, 2, 1, 0], [0, 2, 2, 3, 7]])
    assert fleiss_kappa(table) == pytest.approx(0.20993, abs=1e-4)
    # Items with a single rating carry no agreement and are ignored.
    assert fleiss_kappa(np.vstack([table, [[1, 0, 0, 0, 0]]])) == pytest.approx(0.20993, abs=1e-4)
    assert fleiss_kappa(np.array([[2, 0], [0, 2]])) == pytest.approx(1.0)


def synthetic_annotators(n=600, accuracies=(0.95, 0.85, 0.6, 0.4, 0.4), seed=0):
    """Truth drawn from skewed priors; annotator j is right with probability accuracies[j], else uniform wrong."""
    rng = np.random.default_rng(seed)
    k = len(LABELS)
    truth = rng.choice(k, n, p=[0.4, 0.2, 0.15, 0.05, 0.2])
    labels = np.empty((n, len(accuracies)), dtype=int)
    for j, acc in enumerate(accuracies):
        wrong = (truth + rng.integers(1, k, n)) % k
        labels[:, j] = np.where(rng.random(n) < acc, truth, wrong)
    return truth, labels


def test_dawid_skene_recovers_annotator_accuracies_and_beats_majority():
    accuracies = (0.95, 0.85, 0.6, 0.4, 0.4)
    truth, labels = synthetic_annotators(accuracies=accuracies)
    ds = dawid_skene(labels, len(LABELS))
    estimated = np.einsum("k,jkk->j", ds.priors, ds.confusion)
    np.testing.assert_allclose(estimated, accuracies, atol=0.05)
    ds_acc = (ds.posterior.argmax(1) == truth).mean()
    majority = np.array([np.bincount(r, minlength=len(LABELS)).argmax() for r in labels])
    assert ds_acc > (majority == truth).mean() + 0.03 and ds_acc > 0.93
    # Missing labels (-1) are allowed; an item nobody labelled is not.
    sparse = labels.copy()
    sparse[np.arange(len(sparse)) % 3 == 0, 2:] = -1
    assert (dawid_skene(sparse, len(LABELS)).posterior.argmax(1) == truth).mean() > 0.9
    with pytest.raises(ValueError, match="at least one label"):
        dawid_skene(np.full((2, 2), -1), len(LABELS))


def test_resolve_votes_majority_ties_and_dawid_skene_through_rows():
    rows = [row("m1", "a", "vertical", "t1", 1), row("m1", "b", "block", "t3", 2, uncertain=True),
            row("m2", "a", "diagonal", "t1", 3), row("m2", "a", "block", "t2", 4),  # a's latest counts
            row("m3", "c", "diagonal", "t1", 5, skipped=True)]  # a skip is no vote
    votes = rater_votes(rows)
    assert set(votes) == {"m1", "m2"} and votes["m2"]["a"].label == "block"
    res = resolve_votes(votes, "majority")
    # Two annotators who disagree tie: majority leaves the map unresolved (no label, not the latest vote's).
    assert res["m1"].label == "" and res["m1"].method == "unresolved" and res["m1"].tie and res["m1"].vote is None
    assert res["m1"].p == 0.5 and not res["m1"].uncertain and res["m1"].n_uncertain == 1  # b alone marked it
    assert res["m2"].label == "block" and res["m2"].method == "single" and not res["m2"].tie
    # The named rule settles the tie, and the resolution still says it was one.
    hybrid = resolve_votes(votes, "majority-dawid-skene")
    assert hybrid["m1"].label in ("vertical", "block") and hybrid["m1"].method == "dawid-skene" and hybrid["m1"].tie
    passes = rater_votes(rows, raters="pass")
    assert {r: v.label for r, v in passes["m2"].items()} == {"a #1": "diagonal", "a #2": "block"}
    truth, labels = synthetic_annotators(n=300)
    many = [row(f"m{i}", f"ann{j}", LABELS[labels[i, j]], f"t{j}", i * 10 + j) for i in range(300) for j in range(5)]
    ds = resolve_votes(rater_votes(many), "dawid-skene")
    maj = resolve_votes(rater_votes(many), "majority")
    ds_acc = np.mean([ds[f"m{i}"].label == LABELS[truth[i]] for i in range(300)])
    maj_acc = np.mean([maj[f"m{i}"].label == LABELS[truth[i]] for i in range(300)])
    assert ds_acc > maj_acc and {r.method for r in ds.values()} == {"dawid-skene"}
    with pytest.raises(ValueError, match="unknown resolution"):
        resolve_votes(votes, "coin")


def test_agreement_report_pairs_fleiss_and_confusion():
    rng = np.random.default_rng(1)
    truth = rng.choice(LABELS, 60)
    noisy = {"a": truth, "b": np.where(rng.random(60) < 0.8, truth, rng.choice(LABELS, 60)),
             "c": np.where(rng.random(60) < 0.6, truth, rng.choice(LABELS, 60))}
    rows = [row(f"m{i}", who, labels[i], f"t{i}", i * 3 + j) for j, (who, labels) in enumerate(noisy.items())
            for i in range(60)]
    resolved = [{"map_id": f"m{i}", "label": truth[i], "pre_label": noisy["c"][i], "pre_source": "push",
                 "pre_model": "rule-v1"} for i in range(60)]
    report = agreement_report(rows, resolved)
    pairs = {(p["a"], p["b"]): p for p in report["pairs"]}
    assert pairs["a", "b"]["n"] == 60
    assert pairs["a", "b"]["kappa"] == pytest.approx(cohen_kappa_score(noisy["a"], noisy["b"]))
    counts = np.array([[sum(noisy[w][i] == k for w in noisy) for k in LABELS] for i in range(60)])
    assert report["fleiss"]["kappa"] == pytest.approx(fleiss_kappa(counts)) and report["fleiss"]["maps"] == 60
    conf = np.array(report["confusion"])
    assert conf.sum() == 2 * 3 * 60 and (conf == conf.T).all()
    assert report["vs_resolved"]["a"]["agree"] == 1.0
    assert report["pre_vs_resolved"]["push rule-v1"]["kappa"] == pytest.approx(cohen_kappa_score(noisy["c"], truth))


def test_majority_dawid_skene_keeps_every_majority_and_asks_dawid_skene_only_on_splits():
    truth, labels = synthetic_annotators(n=200, accuracies=(0.9, 0.85, 0.8))
    rows = [row(f"a{i}", f"r{j}", LABELS[labels[i, j]], f"t{j}", i * 10 + j) for i in range(200) for j in range(3)]
    # A second group of raters that shares no map with the first, on a pool where block is common.
    group = [("block", "block", "block")] * 10 + [("block", "block", "vertical")] * 10 + \
            [("block", "diagonal", "vertical")] * 10
    rows += [row(f"b{i}", who, label, f"u{j}", 9000 + i * 10 + j)
             for i, votes in enumerate(group) for j, (who, label) in enumerate(zip("jkl", votes))]
    votes = rater_votes(rows)
    hybrid = resolve_votes(votes, "majority-dawid-skene")
    ds = resolve_votes(votes, "dawid-skene")
    splits = 0
    for m, v in votes.items():
        counts = sorted(Counter(x.label for x in v.values()).values(), reverse=True)
        if len(counts) > 1 and counts[0] == counts[1]:
            splits += 1
            assert hybrid[m].method == "dawid-skene" and hybrid[m].label == ds[m].label and hybrid[m].tie
        else:
            top = Counter(x.label for x in v.values()).most_common(1)[0][0]
            assert hybrid[m].method == "majority" and hybrid[m].label == top and not hybrid[m].tie
    assert splits >= 10 and all(hybrid[f"b{i}"].label == "block" for i in range(20))


def test_one_rater_against_the_others_counts_only_maps_where_a_majority_of_the_others_agree():
    votes = {"unanimous": ["vertical", "vertical", "vertical"], "two-of-three": ["diagonal", "diagonal", "block"],
             "split": ["vertical", "diagonal", "block"], "two raters": ["vertical", "vertical"],
             "four": ["block", "block", "block", "heterogeneous"]}
    rows = [row(m, f"r{j}", lab, f"t{j}", 10 * i + j) for i, (m, labs) in enumerate(votes.items())
            for j, lab in enumerate(labs)]
    pairs = sorted(held_out_rater(rater_votes(rows)))
    # unanimous: each of the three against the other two; two-of-three: only the dissenter against the two;
    # a split and a map with two raters give none; four raters, three agreeing: each block rater against
    # (block, block, heterogeneous), whose majority is block, and the dissenter against three blocks
    assert pairs == sorted([("unanimous", "vertical", "vertical")] * 3 + [("two-of-three", "block", "diagonal")]
                           + [("four", "block", "block")] * 3 + [("four", "heterogeneous", "block")])
    s = held_out_scores(pairs)
    assert s["pairs"] == 8 and s["maps"] == 3 and s["agree"] == pytest.approx(6 / 8)
    assert s["kappa"] == pytest.approx(cohen_kappa([p[1] for p in pairs], [p[2] for p in pairs]))
    # references hold vertical, diagonal, block: vertical F1 1, diagonal 0 (missed), block 3/4 (one false block,
    # one missed)
    assert s["macro_f1"] == pytest.approx((1 + 0 + 0.75) / 3) and s["per_class_f1"]["heterogeneous"] is None
    assert held_out_scores([]) is None
    report = agreement_report(rows)
    assert report["vs_others"] == s
    # a classifier's labels on the same pairs: scored against the same references
    clf = held_out_scores(pairs, ["vertical"] * 8)
    assert clf["agree"] == pytest.approx(3 / 8) and clf["pairs"] == 8
    # in pass mode the "others" of a pass are its annotator's other passes: no one-rater-vs-others figure
    assert agreement_report(rows, raters="pass")["vs_others"] is None


def test_one_rater_against_the_others_with_five_raters_needs_three_of_the_other_four():
    votes = {"three-two": ["vertical", "vertical", "vertical", "diagonal", "diagonal"],
             "four-one": ["block", "block", "block", "block", "heterogeneous"],
             "two-two-one": ["vertical", "vertical", "diagonal", "diagonal", "block"]}
    rows = [row(m, f"r{j}", lab, f"t{j}", 10 * i + j) for i, (m, labs) in enumerate(votes.items())
            for j, lab in enumerate(labs)]
    pairs = sorted(held_out_rater(rater_votes(rows)))
    # three-two: a vertical rater's others tie two-two (no pair); a diagonal rater's others are three verticals of
    # four. four-one: every rater's others hold at least three blocks. two-two-one: no rater's others reach three.
    assert pairs == sorted([("three-two", "diagonal", "vertical")] * 2 + [("four-one", "block", "block")] * 4
                           + [("four-one", "heterogeneous", "block")])


def test_agreement_report_without_three_raters_has_no_held_out_score():
    rows = [row("m", "a", "vertical", "t1", 1), row("m", "b", "diagonal", "t2", 2)]
    assert agreement_report(rows)["vs_others"] is None


def votes_of(labels: dict[str, list[str]], who: str) -> dict:
    """{map_id: [label of rater who+"1", who+"2", ...]} as rater_votes' votes."""
    return rater_votes([row(m, f"{who}{k}", lab, "2026-01-01T00:00:00Z", 100 * k + i)
                        for i, (m, labs) in enumerate(labels.items()) for k, lab in enumerate(labs)])


def test_between_sets_scores_a_second_labelling_of_the_same_maps_per_family():
    from patterncnn.labelling.agreement import between_sets, format_between

    ref = {"minilm-aaaaaaaa_x_1": ["vertical"] * 3, "minilm-aaaaaaaa_x_2": ["diagonal", "diagonal", "vertical"],
           "mpnet-bbbbbbbb_x_3": ["block", "heterogeneous", "diagonal"],  # a three-way split: no agreed label
           "mpnet-bbbbbbbb_x_4": ["heterogeneous"] * 3, "mpnet-bbbbbbbb_x_9": ["vertical"] * 3}  # not relabelled
    new = {"minilm-aaaaaaaa_x_1": ["vertical", "vertical", "heterogeneous"],
           "minilm-aaaaaaaa_x_2": ["vertical+diagonal"] * 3, "mpnet-bbbbbbbb_x_3": ["block"] * 3,
           "mpnet-bbbbbbbb_x_4": ["heterogeneous", "vertical", "heterogeneous"], "mpnet-bbbbbbbb_x_7": ["diagonal"] * 3}
    ref_resolved = {"minilm-aaaaaaaa_x_1": "vertical", "minilm-aaaaaaaa_x_2": "diagonal",
                    "mpnet-bbbbbbbb_x_3": "heterogeneous", "mpnet-bbbbbbbb_x_4": "heterogeneous",
                    "mpnet-bbbbbbbb_x_9": "vertical"}
    resolved = {"minilm-aaaaaaaa_x_1": "vertical", "minilm-aaaaaaaa_x_2": "vertical+diagonal",
                "mpnet-bbbbbbbb_x_3": "block", "mpnet-bbbbbbbb_x_4": "heterogeneous", "mpnet-bbbbbbbb_x_7": "diagonal"}
    clf = {"minilm-aaaaaaaa_x_1": "vertical", "minilm-aaaaaaaa_x_2": "diagonal", "mpnet-bbbbbbbb_x_4": "vertical"}
    r = between_sets(votes_of(new, "n"), resolved, votes_of(ref, "r"), ref_resolved, {"cnn": clf})
    assert list(r) == ["minilm", "mpnet", "all"]
    assert [r[f]["maps"] for f in r] == [2, 2, 4]  # only the maps both sets hold
    assert r["all"]["resolved"]["agree"] == 0.5 and r["all"]["resolved"]["maps"] == 4
    # rows of the confusion are the reference's labels
    conf = np.array(r["all"]["resolved"]["confusion"])
    assert conf[LABELS.index("diagonal"), LABELS.index("vertical+diagonal")] == 1
    assert conf[LABELS.index("heterogeneous"), LABELS.index("block")] == 1 and conf.sum() == 4
    # the three-way split of the reference is no agreed map; every other map has 2+ agreeing in both sets
    assert r["mpnet"]["both_agreed"]["maps"] == 1 and r["mpnet"]["both_agreed"]["agree"] == 1.0
    assert r["all"]["both_agreed"]["maps"] == 3
    # macro-F1 over the classes the reference holds: minilm {vertical: 1, diagonal: 0}
    assert r["minilm"]["resolved"]["macro_f1"] == pytest.approx(0.5)
    # each rater of the second set against the reference's label
    assert r["minilm"]["raters"]["n2"]["agree"] == 0.0 and r["minilm"]["raters"]["n0"]["agree"] == 0.5
    # a method is scored against both sets, on the maps it labels
    cnn = r["all"]["methods"]["cnn"]
    assert cnn["vs_reference"]["maps"] == 3 and cnn["vs_reference"]["agree"] == pytest.approx(2 / 3)
    assert cnn["vs_second"]["agree"] == pytest.approx(1 / 3)
    # macro-F1 is over the classes of the labels compared to (predictions vertical, diagonal, vertical): against
    # the reference's vertical, diagonal, heterogeneous F1 2/3, 1, 0; against the second set's vertical,
    # vertical+diagonal, heterogeneous 2/3, 0, 0 (with the sides swapped both figures would differ)
    assert cnn["vs_reference"]["macro_f1"] == pytest.approx(5 / 9)
    assert cnn["vs_second"]["macro_f1"] == pytest.approx(2 / 9)
    text = format_between(r, "REF")
    assert "encoder minilm: 2 of this set's 2 maps are in REF" in text
    assert "all maps: 4 of this set's 5 maps are in REF" in text
    assert "cnn vs this set's label: 3 maps, 33.3% agree" in text


def test_between_sets_agreed_needs_two_agreeing_raters_in_each_set_and_raters_count_where_they_voted():
    from patterncnn.labelling.agreement import between_sets, format_between

    ids = [f"minilm-aaaaaaaa_x_{k}" for k in range(4)]
    ref = {ids[0]: ["vertical"] * 3, ids[1]: ["vertical"] * 3, ids[2]: ["diagonal"] * 3, ids[3]: ["diagonal"] * 3}
    # the second set: a three-way split, a map one rater labelled, and two agreed maps (rater n2 only on ids[2])
    new = {ids[0]: ["vertical", "diagonal", "heterogeneous"], ids[1]: ["vertical"],
           ids[2]: ["diagonal", "diagonal", "heterogeneous"], ids[3]: ["diagonal", "vertical"]}
    resolved = {ids[0]: "vertical", ids[1]: "vertical", ids[2]: "diagonal", ids[3]: "diagonal"}
    r = between_sets(votes_of(new, "n"), resolved, votes_of(ref, "r"), {m: v[0] for m, v in ref.items()})
    assert r["all"]["resolved"]["maps"] == 4 and r["all"]["both_agreed"]["maps"] == 1  # only ids[2]
    assert {k: v["maps"] for k, v in r["all"]["raters"].items()} == {"n0": 4, "n1": 3, "n2": 2}
    assert r["all"]["raters"]["n1"]["agree"] == pytest.approx(1 / 3)  # diagonal, diagonal, vertical
    # nothing agreed anywhere: the agreed line says so
    none = between_sets(votes_of({ids[1]: ["vertical"]}, "n"), {ids[1]: "vertical"}, votes_of(ref, "r"),
                        {ids[1]: "vertical"})
    assert none["all"]["both_agreed"] is None
    assert "on maps where each set has 2+ raters agreeing: no maps" in format_between(none, "REF")


def test_uncertain_takes_more_than_half_of_the_raters_not_one():
    def votes(*flags):
        return rater_votes([row("m", f"r{j}", "vertical", f"t{j}", j, uncertain=f) for j, f in enumerate(flags)])

    for method in ("majority", "dawid-skene", "majority-dawid-skene"):
        assert [resolve_votes(votes(*flags), method)["m"].uncertain for flags in
                [(True, False, False), (True, True, False), (True, False), (True, True)]] == [False, True, False, True]
    assert resolve_votes(votes(True), "majority")["m"].uncertain  # one rater only: their flag is all there is
    assert resolve_votes(votes(True, True, False), "majority")["m"].n_uncertain == 2
