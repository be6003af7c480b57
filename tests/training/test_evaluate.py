"""Per-encoder reports of `patterncnn train` (patterncnn.training.evaluate) and the per-encoder default estimator."""

import csv
import dataclasses

import numpy as np
import pytest
from synthetic import family_set, simulated_rows, write_votes

from patterncnn.core.labels import LABELS
from patterncnn.training import evaluate as ev

TINY = dict(grid=16, widths=(4, 4, 8, 8, 8, 8, 16, 16))


@pytest.fixture(scope="module")
def two_encoders(tmp_path_factory):
    return family_set(tmp_path_factory.mktemp("two-encoders"))


def test_encoder_family_groups_fine_tunes_with_their_base():
    from patterncnn.core.maps import encoder_family, is_fine_tune

    assert encoder_family("minilm-53aa5117_cola_dev_00028_L00_H09") == "minilm"
    assert encoder_family("minilm-sst2-0633eb25_sst2_dev_00012_L03_H07") == "minilm"
    assert encoder_family("mpnet-78c0197b") == "mpnet"
    assert encoder_family("mpnet-rte-0123abcd") == "mpnet"
    assert encoder_family("all-MiniLM-L6-v2-deadbeef") == "all-MiniLM-L6-v2"
    assert encoder_family("syn_001_block") == "syn"  # no tag digest: its own family
    assert encoder_family("bert-base-uncased-1a2b3c4d") == "bert-base-uncased"  # "uncased" is not a task
    assert not is_fine_tune("bert-base-uncased-1a2b3c4d") and not is_fine_tune("minilm-f1a2b3c4")
    assert is_fine_tune("minilm-sst2-0633eb25_sst2_dev_00012_L03_H07") and is_fine_tune("minilm-cola-0badcafe")


def test_votes_latest_per_annotator_skips_ignored(tmp_path):
    ids = ["m1", "m2", "m3"]
    rows = [("m1", "a", "block", "False", "1"), ("m1", "b", "block", "False", "2"),
            ("m1", "c", "diagonal", "False", "3"),
            ("m2", "a", "vertical", "False", "4"), ("m2", "a", "diagonal", "False", "5"),  # a relabels: latest counts
            ("m2", "b", "vertical", "True", "6")]  # skipped: no vote
    with open(tmp_path / "votes.csv", "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["map_id", "annotator", "label", "skipped", "created_at", "ls_annotation_id"])
        w.writerows([(m, a, lab, sk, f"2026-11-23T10:00:0{i}Z", i) for m, a, lab, sk, i in rows])
    y = np.array([LABELS.index("block"), LABELS.index("diagonal"), LABELS.index("heterogeneous")])
    v = ev.load_votes(tmp_path, ids, y)
    assert v.n.tolist() == [3, 1, 0]
    assert v.shares[0].tolist() == pytest.approx([0, 1 / 3, 0, 2 / 3, 0])
    assert v.shares[1].tolist() == [0, 1, 0, 0, 0]
    assert v.shares[2].tolist() == [0, 0, 0, 0, 1]  # no votes: the resolved label
    assert v.agreed.tolist() == [True, False, False]


def test_annotator_yardstick_scores_methods_on_the_annotators_pairs(tmp_path):
    from patterncnn.training.modelcard import _yardstick

    ids = ["minilm-1a2b3c4d_m1", "minilm-1a2b3c4d_m2", "mpnet-1a2b3c4d_m3", "mpnet-1a2b3c4d_m4", "syn-1a2b3c4d_m5"]
    votes = {"minilm-1a2b3c4d_m1": ("vertical",) * 3, "minilm-1a2b3c4d_m2": ("diagonal", "diagonal", "vertical"),
             "mpnet-1a2b3c4d_m3": ("block", "vertical", "heterogeneous"), "mpnet-1a2b3c4d_m4": ("heterogeneous",) * 3,
             "syn-1a2b3c4d_m5": ("vertical", "diagonal", "block"),  # a family of splits only: no pair, left out
             "mpnet-1a2b3c4d_m6": ("vertical",) * 3}  # annotated but not in the labelled set: left out
    # a fourth rater on m4 with a label outside the five: no vote, so m4 still has three unanimous pairs
    write_votes(tmp_path, votes, extra=[("mpnet-1a2b3c4d_m4", "d", "unclear")])
    pred = np.array([LABELS.index(x) for x in ("vertical", "vertical", "block", "vertical", "block")])
    y = ev.annotator_yardstick(ev.load_votes(tmp_path, ids, pred), ids, ev.families(ids), {ev.CNN: pred})
    assert list(y) == ["minilm", "mpnet", "all"]
    # minilm: m1 three pairs (vertical), m2 one (the dissenter's vertical against diagonal)
    assert y["minilm"]["pairs"] == 4 and y["minilm"]["maps"] == 2
    assert y["minilm"]["annotator"]["agree"] == pytest.approx(3 / 4)
    assert y["minilm"]["methods"][ev.CNN]["agree"] == pytest.approx(3 / 4)  # m1 right 3 times, m2 wrong once
    # mpnet: the split m3 gives no pair; m4 three pairs, all heterogeneous; the CNN says vertical
    assert y["mpnet"]["pairs"] == 3 and y["mpnet"]["maps"] == 1
    assert y["mpnet"]["annotator"]["agree"] == 1 and y["mpnet"]["methods"][ev.CNN]["agree"] == 0
    assert y["all"]["pairs"] == 7 and y["all"]["methods"][ev.CNN]["agree"] == pytest.approx(3 / 7)
    # weighted per pair, not per map: per map the CNN would be right on 1 of 3
    card = _yardstick({"annotator_yardstick": y})
    assert "| mpnet (1 maps) | **one annotator** | 1.000 / 1.000 (3) |" in card
    assert "| minilm (2 maps) | **CNN** | " in card and "| syn" not in card
    # a labelled set without votes.csv (one label per map) has no yardstick, and the card says why
    none = ev.load_votes(tmp_path / "none", ids, pred)
    assert ev.annotator_yardstick(none, ids, ev.families(ids), {ev.CNN: pred}) == {}
    assert "no map has three or more annotators" in _yardstick({"annotator_yardstick": {}})
    assert "trained before" in _yardstick({})


def test_subset_macro_f1_averages_only_the_classes_present():
    y = np.array([0, 0, 1, 1, 3])
    pred = np.array([0, 0, 1, 0, 3])
    s = ev.subset_scores(y, pred, np.array([True, True, True, True, False]))
    assert s["classes"] == [LABELS[0], LABELS[1]] and s["per_class_f1"]["block"] is None
    assert s["macro_f1"] == pytest.approx((0.8 + 2 / 3) / 2) and s["accuracy"] == pytest.approx(0.75)
    assert ev.subset_scores(y, pred, np.zeros(5, dtype=bool)) is None


def test_per_encoder_says_when_the_cnn_does_not_beat_a_baseline():
    from patterncnn.training.modelcard import _per_encoder

    y = np.array([0, 1, 2, 3, 4] * 4)
    fams = np.array(["minilm"] * 10 + ["mpnet"] * 10)
    good, bad = y.copy(), y.copy()
    bad[10:] = 0  # the CNN is wrong on every mpnet map but the first
    rep = ev.per_encoder(y, fams, np.ones(20, dtype=bool), {ev.CNN: bad, "features+logreg": good})
    assert rep["minilm"]["cnn_beats_best_baseline"] is False  # a tie does not beat
    assert rep["mpnet"]["methods"][ev.CNN]["all"]["macro_f1"] < rep["mpnet"]["methods"]["features+logreg"]["all"][
        "macro_f1"] and not rep["mpnet"]["cnn_beats_best_baseline"]
    assert rep["all"]["maps"] == 20
    card = _per_encoder({"per_encoder": rep, "votes": {"maps_with_several_votes": 0, "agreed_maps": 20,
                                                       "annotators_per_map": {"1": 20}}})
    verdicts = card["per_encoder_verdicts"]
    assert "**mpnet**: the CNN (" in verdicts and "**does not beat**" in verdicts


def test_leave_one_encoder_out_keeps_test_examples_out_of_training(two_encoders, monkeypatch):
    import patterncnn.training.fit as train
    from patterncnn.classifier.model import CNNConfig
    from patterncnn.labelling.sets import load_labelled

    data = load_labelled(two_encoders)
    seen = []
    real_fit = train.fit

    def spy(data_, tr, va, cfg, tcfg, seed, **kw):
        seen.append((tr, va, tcfg.max_epochs, seed))
        return real_fit(data_, tr, va, cfg, tcfg, seed, **kw)

    monkeypatch.setattr(train, "fit", spy)
    fams = ev.families(data.ids)
    votes = ev.load_votes(two_encoders, data.ids, data.y)
    tcfg = train.TrainConfig(folds=3, max_epochs=30, batch_size=8)
    pairs = ev.leave_one_encoder_out(data, fams, votes.agreed, ev.feature_matrix(data), CNNConfig(**TINY), tcfg, 2,
                                     seeds=2)
    assert [(p["train"], p["test"]) for p in pairs] == [("mpnet", "minilm"), ("minilm", "mpnet")]  # each held out
    assert len(seen) == 4  # two seeds per direction
    for p in pairs:  # each seed's fit is reported, and the spread over them
        assert [r["seed"] for r in p["seeds"]] == [0, 1]
        f1 = [r["all"]["macro_f1"] for r in p["seeds"]]
        assert p["cnn_over_seeds"]["macro_f1"] == pytest.approx(
            {"mean": np.mean(f1), "sd": np.std(f1, ddof=1), "min": min(f1), "max": max(f1), "n": 2})
        assert p["methods"][ev.CNN] == {"all": p["seeds"][0]["all"], "agreed": p["seeds"][0]["agreed"]}
    assert [s[3] for s in seen] == [0, 1, 0, 1]  # each fit its own seed
    for (tr, va, epochs, _), p in zip(seen[::2] + seen[1::2], pairs + pairs):  # every fit, both seeds
        test_groups = set(data.groups[fams == p["test"]])
        assert epochs == 2 and set(fams[np.concatenate([tr, va])]) == set(p["train"].split("+"))
        assert not test_groups & set(data.groups[np.concatenate([tr, va])])
        assert p["dropped_shared_examples"] == 2 * len(LABELS)  # the shared examples of every class
        assert p["methods"][ev.CNN]["all"]["maps"] == (fams == p["test"]).sum() == 30
        assert set(p["methods"]) == {ev.CNN, *ev.TRAINED_BASELINES}
    for p in pairs:  # the census's measure too: count's pooled share error on the held-out family's uniform maps
        for r in p["seeds"]:
            assert r["share_error"]["maps"] == 30 and abs(sum(r["share_error"][k] for k in LABELS)) < 1e-9
            assert r["four_classes"]["maps"] == 24 and "block" not in r["four_classes"]["classes"]
        err = p["cnn_over_seeds"]["abs_share_error"]
        assert err["vertical"]["mean"] == pytest.approx(np.mean([abs(r["share_error"]["vertical"]) for r in p["seeds"]]))
    unseen = ev.unseen_family(pairs)
    assert unseen["families"] == ["minilm", "mpnet"] and unseen["seeds"] == 2
    assert unseen["bias_band"]["diagonal"] == max(p["cnn_over_seeds"]["abs_share_error"]["diagonal"]["mean"]
                                                  for p in pairs)
    assert unseen["accuracy"] == min(p["cnn_over_seeds"]["accuracy"]["mean"] for p in pairs)
    assert "not_held_out" not in unseen
    # a family loeo_plan could not hold out is recorded beside the worst, which is not taken over it
    partial = ev.unseen_family(pairs[:1], [{"train": "minilm", "test": "mpnet", "reason": "fewer than the 20"}])
    assert partial["families"] == ["minilm"] and partial["not_held_out"] == ["mpnet"]


def test_leave_one_encoder_out_with_three_families_trains_on_the_other_two(tmp_path):
    from patterncnn.classifier.model import CNNConfig
    from patterncnn.labelling.sets import load_labelled
    from patterncnn.training.fit import TrainConfig

    root = family_set(tmp_path / "three", per_class=4, third=True)
    data = load_labelled(root)
    fams = ev.families(data.ids)
    votes = ev.load_votes(root, data.ids, data.y)
    pairs = ev.leave_one_encoder_out(data, fams, votes.agreed, ev.feature_matrix(data), CNNConfig(**TINY),
                                     TrainConfig(folds=3, max_epochs=2, batch_size=8), 2, seeds=1)
    assert [(p["test"], p["train"]) for p in pairs] == [("e5", "minilm+mpnet"), ("minilm", "e5+mpnet"),
                                                        ("mpnet", "e5+minilm")]
    for p in pairs:  # the shared examples of every other family are dropped, once per map
        assert p["train_maps"] == 2 * (4 * len(LABELS) - 2 * len(LABELS))
        assert p["dropped_shared_examples"] == 2 * 2 * len(LABELS)


def test_soft_labels_train_on_vote_shares_on_the_same_folds(two_encoders, monkeypatch):
    import patterncnn.training.fit as train
    from patterncnn.classifier.model import CNNConfig
    from patterncnn.labelling.sets import load_labelled

    data = load_labelled(two_encoders)
    votes = ev.load_votes(two_encoders, data.ids, data.y)
    got = {}
    real = train.out_of_fold

    def spy(data_, cfg, tcfg, progress=None, targets=None, **kw):
        got["targets"] = targets
        return real(data_, cfg, tcfg, progress, targets=targets, **kw)

    monkeypatch.setattr(ev, "out_of_fold", spy)
    cfg, tcfg = CNNConfig(**TINY), train.TrainConfig(folds=3, max_epochs=2, batch_size=8)
    hard = real(data, cfg, tcfg)
    rep, soft = ev.soft_vs_hard(data, votes, hard.probs, cfg, tcfg)
    assert got["targets"] is votes.shares and soft.shape == (len(data.y), len(LABELS))
    assert rep["run"] and rep["maps_with_several_votes"] == len(data.y)
    assert rep["hard"]["agreed"]["maps"] == int(votes.agreed.sum()) < len(data.y)  # three-way splits are not agreed
    assert np.allclose(votes.shares.sum(1), 1) and (votes.shares.max(1) < 1).any()
    # the shares reach the loss: the same folds and seeds give other posteriors than the hard labels (a fit that
    # dropped its targets passed every test here: helper 99's review)
    assert np.abs(soft - hard.probs).max() > 1e-3
    one = dataclasses.replace(votes, n=np.ones_like(votes.n))
    assert ev.soft_vs_hard(data, one, hard.probs, cfg, tcfg)[1] is None  # one vote per map: nothing to learn


def test_census_defaults_to_the_estimator_validated_on_its_encoder():
    from synthetic import concat_rows

    from patterncnn.shares.calibrate import calibration_record
    from patterncnn.shares.estimate import best_by_encoder, plan_for

    rng = np.random.default_rng(0)
    shares = [0.3, 0.2, 0.2, 0.1, 0.2]
    rows = concat_rows(simulated_rows(shares, 120, rng, encoder="minilm-53aa5117"),
                       simulated_rows(shares, 120, rng, encoder="mpnet-78c0197b", start=1000))
    enc = lambda err, cov: {"mean_abs_error": err, "coverage": cov}
    results = [{"estimator": "count", "scope": None, "coverage": 0.5, "worst_encoder_mean_abs_error": 0.06,
                "encoders": {"minilm-53aa5117": enc(0.01, 0.95), "mpnet-78c0197b": enc(0.06, 0.5)}},
               {"estimator": "adjusted", "scope": "encoder", "coverage": 0.95, "worst_encoder_mean_abs_error": 0.04,
                "encoders": {"minilm-53aa5117": enc(0.04, 0.95), "mpnet-78c0197b": enc(0.02, 0.95)}},
               {"estimator": "probs", "scope": "all", "coverage": 0.92, "worst_encoder_mean_abs_error": 0.05,
                "encoders": {"minilm-53aa5117": enc(0.005, 0.80), "mpnet-78c0197b": enc(0.05, 0.92)}}]
    per = best_by_encoder(results)
    assert per["minilm-53aa5117"]["estimator"] == "count"  # probs errs less but its intervals cover too little
    assert per["mpnet-78c0197b"] == {"estimator": "adjusted", "scope": "encoder", "mean_abs_error": 0.02,
                                     "coverage": 0.95, "meets_targets": True}
    meta = {"calibration": calibration_record(rows), "validation": {
        "best": {"estimator": "adjusted", "scope": "encoder"}, "best_per_encoder": per, "results": results}}
    assert plan_for(meta, None, None, "minilm-53aa5117").estimator == "count"
    plan = plan_for(meta, None, None, "mpnet-78c0197b")
    assert (plan.estimator, plan.scope) == ("adjusted", "encoder") and "mpnet-78c0197b" in plan.chosen_by
    tuned = plan_for(meta, None, None, "minilm-sst2-0633eb25")  # a fine-tune takes its base encoder's default
    assert tuned.estimator == "count" and "minilm-53aa5117" in tuned.chosen_by
    assert plan_for(meta, None, None, "bert-1a2b3c4d").estimator == "adjusted"  # unvalidated family: overall best
    assert plan_for(meta, "probs", None, "minilm-53aa5117").estimator == "probs"  # given beats the default


def test_train_reports_per_encoder_in_metrics_and_card(two_encoders, tmp_path, capsys):
    import json

    from patterncnn.cli import main

    out = tmp_path / "m"
    args = ["train", "--annotations", str(two_encoders), "--out", str(out), "--folds", "3", "--max-epochs", "2",
            "--loeo-max-epochs", "2"]
    with pytest.raises(SystemExit) as e:  # refused when the arguments are parsed
        main(args + ["--loeo-seeds", "0"])
    assert e.value.code == 2 and "--loeo-seeds: must be a whole number of at least 1" in capsys.readouterr().err
    rc = main(args + ["--loeo-seeds", "2"])
    assert rc == 0
    printed = capsys.readouterr().out
    assert "leave one encoder out, train minilm -> test mpnet: macro-F1" in printed and "over 2 seeds" in printed
    assert "soft vs hard labels: macro-F1" in printed and "  mpnet: CNN macro-F1" in printed
    m = json.loads((out / "metrics.json").read_text())
    e = m["evaluation"]
    assert e["families"] == {"minilm": 30, "mpnet": 30} and e["soft_labels"]["run"]
    assert len(e["leave_one_encoder_out"]["pairs"]) == 2
    for fam in ("minilm", "mpnet"):  # the per-family slices add up to the out-of-fold confusion matrix
        assert e["per_encoder"][fam]["methods"][ev.CNN]["all"]["maps"] == 30
    acc = np.mean([e["per_encoder"][f]["methods"][ev.CNN]["all"]["accuracy"] for f in ("minilm", "mpnet")])
    assert acc == pytest.approx(m["cv"]["accuracy"])
    assert m["baselines"]["features+logreg"]["macro_f1"] == pytest.approx(
        e["per_encoder"]["all"]["methods"]["features+logreg"]["all"]["macro_f1"])
    card = (out / "README.md").read_text()
    assert "## Leave one encoder out" in card and "| minilm (" in card and "## Soft labels against hard labels" in card
    assert "| CNN (seed 0) |" in card and "2 seeds) |" in card
    assert "## Against one annotator" in card and "| **one annotator** |" in card
    y = e["annotator_yardstick"]  # each map of the synthetic set has three annotators
    # 60 maps: every fifth a three-way split (no pair), every other third a two-of-three map (one pair, its
    # dissenter), the other 32 unanimous (three pairs each)
    assert y["all"]["pairs"] == 3 * 32 + 16 and y["all"]["annotator"]["agree"] == pytest.approx(96 / 112)
    assert y["all"]["methods"][ev.CNN]["pairs"] == 112
    from patterncnn.training.modelcard import model_card

    for p in e["leave_one_encoder_out"]["pairs"]:  # a metrics.json from before fits per seed were kept
        del p["seeds"], p["cnn_over_seeds"]
    assert "| CNN (one fit) |" in model_card(m) and " (one fit)** (" in model_card(m)
    assert "$" not in card.replace("$$", "") and "**Not measured**" not in card


def test_leave_one_encoder_out_corrects_each_fit_on_its_own_early_stopping_maps(two_encoders, monkeypatch):
    """`train --bias-correction`'s leave one encoder out: each fit is shifted by BCTS fitted on its own early-stopping
    maps (training families only), and its predictions are the shifted posteriors'; without the option, no shift."""
    from patterncnn.classifier.model import CNNConfig
    from patterncnn.core.segments import rule_out_block
    from patterncnn.labelling.sets import load_labelled
    from patterncnn.training.fit import TrainConfig, bias_shift, fit_members, predict_proba, shift_head, shifted

    data = load_labelled(two_encoders)
    fams = ev.families(data.ids)
    votes = ev.load_votes(two_encoders, data.ids, data.y)
    calls, real = [], ev.correct_on

    def spy(model, data_, idx, cfg_):
        calls.append((np.array(idx), real(model, data_, idx, cfg_)))
        return calls[-1][1]

    monkeypatch.setattr(ev, "correct_on", spy)
    cfg, tcfg = CNNConfig(**TINY), TrainConfig(folds=3, max_epochs=2, batch_size=8)
    ev.leave_one_encoder_out(data, fams, votes.agreed, ev.feature_matrix(data), cfg, tcfg, 2, seeds=2)
    assert calls == []  # not asked for: no correction
    corrected = dataclasses.replace(tcfg, bias_correction=True)
    pairs = ev.leave_one_encoder_out(data, fams, votes.agreed, ev.feature_matrix(data), cfg, corrected, 2, seeds=2)
    assert len(calls) == 4  # one per fit: two directions, two seeds
    fits = [(p, r) for p in pairs for r in p["seeds"]]
    for (va, shift), (p, r) in zip(calls, fits):
        test = fams == p["test"]
        pool = np.flatnonzero(~test & ~np.isin(data.groups, data.groups[test]))
        te = np.flatnonzero(test)
        tr, early = ev._split_train(data, pool, r["seed"])
        assert np.array_equal(va, early) and not test[va].any()  # its early-stopping maps, never the test family's
        model, _ = fit_members(data, tr, early, cfg, corrected, seed=r["seed"])  # the same fit, unshifted
        seps = [data.seps[i] for i in te]
        ruled = rule_out_block(predict_proba(model, data, early, cfg).astype(np.float64),
                               [data.seps[i] for i in early])
        assert np.allclose(shift, bias_shift(ruled, data.y[early]))
        pred = rule_out_block(shifted(predict_proba(model, data, te, cfg).astype(np.float64), shift), seps).argmax(1)
        assert r["all"]["accuracy"] == pytest.approx((pred == data.y[te]).mean())
    # The predictions are the shifted model's: with a shift large enough to move them (the tiny fits' own shifts do
    # not change their accuracy), the scores follow the shifted posteriors, not the plain ones.
    big = np.array([0.0, 0.0, 0.0, 0.0, 4.0])

    def forced(model, data_, idx, cfg_):
        shift_head(model, big)
        return big

    monkeypatch.setattr(ev, "correct_on", forced)
    pairs = ev.leave_one_encoder_out(data, fams, votes.agreed, ev.feature_matrix(data), cfg, corrected, 2, seeds=1)
    for p in pairs:
        test = fams == p["test"]
        pool = np.flatnonzero(~test & ~np.isin(data.groups, data.groups[test]))
        te = np.flatnonzero(test)
        tr, early = ev._split_train(data, pool, 0)
        model, _ = fit_members(data, tr, early, cfg, corrected, seed=0)
        seps = [data.seps[i] for i in te]
        plain = rule_out_block(predict_proba(model, data, te, cfg).astype(np.float64), seps)
        moved = rule_out_block(shifted(plain, big), seps).argmax(1)
        mask = np.ones(len(te), dtype=bool)
        def f1s(scores):
            return np.array([-1.0 if v is None else v for v in scores["per_class_f1"].values()])

        got, want = p["seeds"][0]["all"], ev.subset_scores(data.y[te], moved, mask)
        assert np.allclose(f1s(got), f1s(want)) and got["accuracy"] == pytest.approx(want["accuracy"])
        assert not np.allclose(f1s(ev.subset_scores(data.y[te], plain.argmax(1), mask)), f1s(want))


def test_soft_label_cv_is_corrected_as_the_hard_one_with_its_own_out_of_fold_shifts(two_encoders):
    """With `--bias-correction` the soft-label CV's posteriors are corrected fold by fold, as train corrects the hard
    CV's (:func:`patterncnn.training.fit.corrected_out_of_fold` of the soft CV's own posteriors)."""
    import patterncnn.training.fit as train
    from patterncnn.classifier.model import CNNConfig
    from patterncnn.labelling.sets import load_labelled

    data = load_labelled(two_encoders)
    votes = ev.load_votes(two_encoders, data.ids, data.y)
    cfg, tcfg = CNNConfig(**TINY), train.TrainConfig(folds=3, max_epochs=2, batch_size=8)
    plain = train.out_of_fold(data, cfg, tcfg, targets=votes.shares)
    expected = train.corrected_out_of_fold(data, plain)[0].probs
    corrected = dataclasses.replace(tcfg, bias_correction=True)
    rep, soft = ev.soft_vs_hard(data, votes, plain.probs, cfg, corrected)  # the hard side's posteriors: any will do
    assert np.allclose(soft, expected, atol=1e-6) and not np.allclose(soft, plain.probs, atol=1e-3)
    assert rep["soft"]["all"]["accuracy"] == pytest.approx((soft.argmax(1) == data.y).mean())


def shared_inputs_set(root, vertical=6, own=6):
    """Two families on mostly the same inputs, as rounds 5 and 12 are: minilm has ``vertical`` vertical maps and 6 of
    each other class, each on its own input example; mpnet has a map (of the same class) on every minilm input but the
    vertical ones, and ``own`` maps per class on inputs minilm does not have. Holding mpnet out leaves minilm's
    vertical maps only to train on; holding minilm out leaves mpnet's 5 * ``own``. No votes.csv: one label per map."""
    from synthetic import pattern_map, write_labelled_set

    recs, rows = [], []

    def add(tag, k, kind, ex, i):
        t = 12 + (i * 5) % 20
        sep = t // 2 - 1
        mid = f"{tag}_rte_dev_{ex:05d}_L{i % 3:02d}_H{i % 4:02d}"
        recs.append(({"id": mid, "task": "rte", "split": "dev", "example": ex, "layer": i % 3, "head": i % 4, "T": t,
                      "seps": [sep, t - 1]}, pattern_map(kind, t, sep, seed=31 * k + i + (7 if "mpnet" in tag else 0))))
        rows.append({"map_id": mid, "label": kind, "uncertain": "False"})

    for k, kind in enumerate(LABELS):
        for i in range(vertical if kind == "vertical" else 6):
            add("minilm-53aa5117", k, kind, 1000 * k + i, i)
            if kind != "vertical":  # the same input example: one group, dropped when minilm is held out
                add("mpnet-78c0197b", k, kind, 1000 * k + i, i)
        for i in range(own):
            add("mpnet-78c0197b", k, kind, 1000 * k + 500 + i, i)
    write_labelled_set(root, recs, rows)
    return root


def test_train_skips_a_leave_one_encoder_out_direction_left_with_one_class_before_any_fit(tmp_path, monkeypatch,
                                                                                         caplog, capsys):
    """Holding mpnet out leaves 6 vertical minilm maps (round 5's case): that direction is decided unfittable from the
    labels before the first fit, neither the CNN nor a baseline is fitted on it, train runs to the end and the metrics,
    the card and the printed summary say why; the other direction is fitted as before."""
    import json

    import patterncnn.training.fit as fit_module
    from patterncnn.cli import main
    from patterncnn.labelling.sets import load_labelled

    root = shared_inputs_set(tmp_path / "set")
    data = load_labelled(root)
    fams = ev.families(data.ids)
    held_out = np.isin(data.groups, data.groups[fams == "mpnet"])
    one_class = np.flatnonzero((fams == "minilm") & ~held_out)  # the pool holding mpnet out leaves
    assert len(one_class) == 6 and set(data.y[one_class].tolist()) == {LABELS.index("vertical")}

    cnn_fits, baseline_fits, warned_at_first_fit = [], [], []
    real_fit, real_makers = fit_module.fit, ev._makers

    def spy_fit(data_, tr, va, cfg, tcfg, seed, **kw):
        if not cnn_fits:
            warned_at_first_fit.append(sum("skipped" in r.getMessage() for r in caplog.records))
        cnn_fits.append((np.asarray(tr), np.asarray(va), tcfg.max_epochs))
        return real_fit(data_, tr, va, cfg, tcfg, seed, **kw)

    def spy_makers(seed):
        def recorded(make):
            def build():
                model = make()
                fit = model.fit
                model.fit = lambda x, y: (baseline_fits.append(np.asarray(y)), fit(x, y))[1]
                return model
            return build
        return {name: recorded(make) for name, make in real_makers(seed).items()}

    monkeypatch.setattr(fit_module, "fit", spy_fit)
    monkeypatch.setattr(ev, "_makers", spy_makers)
    out = tmp_path / "m"
    with caplog.at_level("INFO"):
        rc = main(["train", "--annotations", str(root), "--out", str(out), "--folds", "3", "--max-epochs", "3",
                   "--loeo-max-epochs", "2", "--loeo-seeds", "2"])
    printed = capsys.readouterr()
    assert rc == 0, printed.err
    reason = ("6 training maps after dropping the 24 that share input examples with mpnet: fewer than the 20 a "
              "direction is fitted on, one class (vertical)")
    assert warned_at_first_fit == [1]  # said before the cross-validation's first fit
    assert f"leave one encoder out: minilm -> mpnet skipped: {reason}" in caplog.text

    lo = json.loads((out / "metrics.json").read_text())["evaluation"]["leave_one_encoder_out"]
    assert lo["run"] and lo["skipped"] == [{"train": "minilm", "test": "mpnet", "train_maps": 6,
                                            "dropped_shared_examples": 24, "reason": reason}]
    assert [(p["train"], p["test"], p["train_maps"]) for p in lo["pairs"]] == [("mpnet", "minilm", 30)]
    assert lo["unseen_family"] is None  # no uniformly drawn maps in this set
    loeo_fits = [(tr, va) for tr, va, epochs in cnn_fits if epochs == 2]
    assert len(loeo_fits) == 2  # two seeds of mpnet -> minilm, none of minilm -> mpnet
    for tr, va in loeo_fits:
        assert set(fams[np.concatenate([tr, va])].tolist()) == {"mpnet"}
    assert baseline_fits and all(len(set(y.tolist())) >= 2 for y in baseline_fits)  # no baseline on one class

    card = (out / "README.md").read_text()
    assert "| mpnet (30 maps) | minilm | CNN (seed 0) |" in card
    assert f"- train minilm → test mpnet: {reason}." in card and "nothing was fitted on them" in card
    assert f"leave one encoder out, train minilm -> test mpnet: skipped, {reason}" in printed.out
    assert "leave one encoder out, train mpnet -> test minilm: macro-F1" in printed.out


def test_train_skips_leave_one_encoder_out_when_no_direction_can_be_fitted(tmp_path, capsys):
    """Both directions unfittable (one class of 24 maps; 5 maps of five classes): leave one encoder out is not run,
    with the reason of each, and train writes its classifier; no raw scikit-learn error."""
    import json

    from patterncnn.cli import main
    from patterncnn.labelling.sets import load_labelled

    root = shared_inputs_set(tmp_path / "set", vertical=24, own=1)
    data = load_labelled(root)
    plan = ev.loeo_plan(data, ev.families(data.ids))  # what train decides before its first fit
    few = "5 training maps after dropping the 24 that share input examples with minilm: fewer than the 20 a direction"
    one = "24 training maps after dropping the 24 that share input examples with mpnet: one class (vertical)"
    assert not plan["run"] and plan["pairs"] == [] and [s["reason"] for s in plan["skipped"]] == [
        few + " is fitted on", one]
    assert plan["reason"].startswith("no direction leaves a training pool it can be fitted on (20 maps or more")
    assert f"mpnet -> minilm: {few}" in plan["reason"] and f"minilm -> mpnet: {one}" in plan["reason"]
    assert ev.loeo_plan(data, ev.families(data.ids), enabled=False)["reason"] == "skipped (--no-leave-one-encoder-out)"

    out = tmp_path / "m"
    rc = main(["train", "--annotations", str(root), "--out", str(out), "--folds", "3", "--max-epochs", "2",
               "--loeo-max-epochs", "2", "--loeo-seeds", "1"])
    printed = capsys.readouterr()
    assert rc == 0, printed.err
    e = json.loads((out / "metrics.json").read_text())["evaluation"]
    assert e["leave_one_encoder_out"] == plan
    assert f"leave one encoder out not run: {plan['reason']}" in printed.out
    assert f"**Not measured**: {plan['reason']}." in (out / "README.md").read_text()
