"""Pulling into a copy of the shipped labelled set (1,505 maps, 3 annotators each) never loses a label."""

import csv
import json
import shutil
from collections import Counter
from pathlib import Path

import numpy as np
import pytest
from repo import REPO  # noqa: E402
from synthetic import pattern_store

from patterncnn.classifier.onnx import OnnxClassifier
from patterncnn.cli import main
from patterncnn.core.maps import MapStore
from patterncnn.labelling.agreement import agreement_report
from patterncnn.labelling.sets import load_labelled, read_tables

SHIPPED = REPO / "annotations"
LEGACY = SHIPPED / "legacy-single-annotator"
N_MAPS, N_ANNOTATIONS = 1505, 4515
ROUNDS = {"abc": 1075, "def": 250, "ghi": 180}  # three fresh annotators per round, maps per round
N_PULLS = len(ROUNDS)  # the shipped set was pulled once per round, each export kept
ANNOTATORS = ["ann1@example.com", "ann2@example.com", "ann3@example.com"]


def rows(path):
    with open(path, newline="", encoding="utf-8") as f:
        return {r["map_id"]: r for r in csv.DictReader(f)}


SHIPPED_COLUMNS = next(csv.reader(open(SHIPPED / "labels.csv", encoding="utf-8")))
# Recomputed at every pull: a Dawid-Skene posterior is fitted on the whole set, so it moves a little when maps are
# added; `uncertain` is now the flag of more than half of a map's annotators (the shipped file has one annotator's).
RECOMPUTED = ("resolution_p", "uncertain")


def kept(table: dict, ids) -> dict:
    """The shipped columns of the rows of ``ids``, but those recomputed at every pull: every other column of an
    earlier row must stay as it was."""
    return {m: {k: table[m][k] for k in SHIPPED_COLUMNS if k not in RECOMPUTED} for m in ids}


def check_uncertain(labels: dict, votes: dict) -> None:
    """Each row's `uncertain` is True exactly when more than half of its annotators marked the map uncertain."""
    flags = {}
    for r in votes.values():
        flags.setdefault(r["map_id"], {})[r["annotator"]] = r["uncertain"] == "True"
    for m, r in labels.items():
        n = sum(flags[m].values())
        assert (r["uncertain"], r["n_uncertain"]) == (str(2 * n > len(flags[m])), str(n)), m


def choice(label):
    return [{"from_name": "pattern", "to_name": "map", "type": "choices", "value": {"choices": [label]}}]


def three_annotator_export(labels: dict[str, list[str]], first_id: int, when: str) -> list[dict]:
    """An export (as `pull` gets it from a server) where three annotators labelled each map."""
    tasks = []
    for t, (map_id, votes) in enumerate(labels.items()):
        anns = [{"id": first_id + 3 * t + j, "unique_id": f"u-{map_id}-{j}", "result": choice(label),
                 "was_cancelled": False, "created_at": when, "updated_at": when, "lead_time": 3.0,
                 "completed_by": {"id": 10 + j, "email": ANNOTATORS[j]}} for j, label in enumerate(votes)]
        backend = {"id": 5000 + t, "model_version": "patterncnn-0.1.0-abcdef12", "score": 0.61, "created_at": when,
                   "result": choice(votes[0])}
        tasks.append({"id": 9000 + t, "project": 42, "created_at": "2027-01-01T00:00:00Z", "annotations": anns,
                      "predictions": [backend],
                      "data": {"map_id": map_id, "pre_label": "vertical", "pre_model": "rule-v1",
                               "pre_scores": {"vertical": 0.9}}})
    return tasks


@pytest.fixture()
def shipped_copy(tmp_path):
    out = tmp_path / "annotations"
    shutil.copytree(SHIPPED, out)
    return out


def test_shipped_set_records_every_annotation_and_its_agreement():
    tables = read_tables(SHIPPED)
    assert len(tables.labels) == N_MAPS and len(tables.annotations) == N_ANNOTATIONS
    assert len(tables.predictions) == N_MAPS
    assert {r["annotator"] for r in tables.annotations.values()} == {
        f"annotator-{x}@patterncnn.local" for x in "".join(ROUNDS)}
    per_map = {}
    for r in tables.annotations.values():
        per_map.setdefault(r["map_id"], set()).add(r["annotator"])
    assert set(per_map) == set(tables.labels)
    rounds = [next(k for k in ROUNDS if v == {f"annotator-{x}@patterncnn.local" for x in k}) for v in per_map.values()]
    assert {k: rounds.count(k) for k in ROUNDS} == ROUNDS  # every map has exactly one round's three annotators
    assert {r["resolution"] for r in tables.labels.values()} == {"dawid-skene"}
    assert {r["pre_source"] for r in tables.labels.values()} == {"push"}
    report = agreement_report(list(tables.annotations.values()), list(tables.labels.values()))
    assert round(report["fleiss"]["kappa"], 3) == 0.830 and report["fleiss"]["maps"] == N_MAPS
    pre = report["pre_vs_resolved"]["push patterncnn-0.1.0-e98a51cd"]  # round 1's pre-annotation
    assert pre["n"] == ROUNDS["abc"] and round(pre["agree"], 3) == 0.703 and round(pre["kappa"], 3) == 0.586
    pre = report["pre_vs_resolved"]["push patterncnn-0.1.0-c19ac0b8"]  # rounds 2 and 3: maps it never saw
    assert pre["n"] == ROUNDS["def"] + ROUNDS["ghi"]
    assert round(pre["agree"], 3) == 0.777 and round(pre["kappa"], 3) == 0.652


def test_legacy_single_annotator_set_keeps_its_agreement():
    tables = read_tables(LEGACY)
    assert len(tables.labels) == 515 and len(tables.annotations) == 1146 and len(tables.predictions) == 515
    assert {r["annotator"] for r in tables.annotations.values()} == {"annotator@patterncnn.local"}
    assert set(tables.labels) <= set(MapStore(SHIPPED / "maps").ids)  # its maps are the shipped maps
    # The datasheet's figures, recomputed from votes.csv: blind pass 1 vs pass 2, and pre vs final.
    report = agreement_report(list(tables.annotations.values()), list(tables.labels.values()), raters="pass")
    first = next(p for p in report["pairs"] if p["a"].endswith("#1") and p["b"].endswith("#2"))
    assert first["n"] == 515 and round(first["agree"], 3) == 0.775 and round(first["kappa"], 2) == 0.69
    pre = report["pre_vs_resolved"]["all"]
    assert pre["n"] == 515 and round(pre["agree"], 3) == 0.520 and round(pre["kappa"], 2) == 0.33


def test_pull_twice_into_the_shipped_set_loses_nothing(shipped_copy, tmp_path, capsys):
    shipped = rows(SHIPPED / "labels.csv")
    store = pattern_store(tmp_path / "round1", ["diagonal", "block", "vertical", "heterogeneous"])
    a, b, c, d = store.ids
    first = three_annotator_export({a: ["diagonal"] * 3, b: ["vertical", "vertical", "heterogeneous"],
                                    c: ["vertical", "vertical+diagonal", "vertical"]}, 70001, "2027-01-01T10:00:00Z")
    (tmp_path / "e1.json").write_text(json.dumps(first))
    pull = ["annotate", "pull", "--maps", str(tmp_path / "round1"), "--out", str(shipped_copy)]
    assert main([*pull, "--from-file", str(tmp_path / "e1.json")]) == 0
    assert f"{N_MAPS + 3} labelled map(s)" in capsys.readouterr().out
    after1 = rows(shipped_copy / "labels.csv")
    assert kept(after1, shipped) == kept(shipped, shipped)  # every shipped row, every column, unchanged
    check_uncertain(after1, read_tables(shipped_copy).annotations)
    assert {after1[m]["guide"] for m in shipped} == {"1.0"} and {after1[m]["server"] for m in shipped} == {""}
    assert [after1[m]["label"] for m in (a, b, c)] == ["diagonal", "vertical", "vertical"]
    assert after1[b]["labels_seen"] == '{"heterogeneous": 1, "vertical": 2}'
    assert after1[b]["n_annotators"] == "3" and after1[b]["disagreement"] == "True"
    # the pushed pre-annotation, made before the annotations; the other prediction came with them
    assert after1[a]["pre_label"] == "vertical" and after1[a]["pre_source"] == "push"
    ann1 = read_tables(shipped_copy).annotations
    assert len(ann1) == N_ANNOTATIONS + 9
    assert sorted(r["annotator"] for r in ann1.values() if r["map_id"] == b) == ANNOTATORS
    preds = [p for p in read_tables(shipped_copy).predictions.values() if p["map_id"] == a]
    assert sorted(p["source"] for p in preds) == ["other", "push"]

    # Second pull: ann3 edits their annotation of b, and a new map d comes in.
    second = three_annotator_export({b: ["vertical"] * 3, d: ["heterogeneous"] * 3}, 70101,
                                    "2027-01-02T10:00:00Z")
    second[0]["annotations"] = second[0]["annotations"][2:]  # only ann3's (edited) annotation of b
    second[0]["annotations"][0].update(id=70005, unique_id=f"u-{b}-2")
    (tmp_path / "e2.json").write_text(json.dumps(second))
    assert main([*pull, "--from-file", str(tmp_path / "e2.json")]) == 0
    msg = capsys.readouterr().out
    assert f"annotations +3 new, 1 updated, {N_ANNOTATIONS + 8} kept" in msg and f"{N_MAPS + 4} labelled map(s)" in msg
    after2 = rows(shipped_copy / "labels.csv")
    assert kept(after2, shipped) == kept(shipped, shipped)
    assert after2[b]["labels_seen"] == '{"vertical": 3}' and after2[b]["disagreement"] == "False"
    assert after2[d]["label"] == "heterogeneous"
    ann2 = read_tables(shipped_copy).annotations
    assert set(ann1) <= set(ann2) and len(ann2) == N_ANNOTATIONS + 12
    assert len(MapStore(shipped_copy / "maps").ids) == N_MAPS + 4
    data = load_labelled(shipped_copy)  # what `patterncnn train --annotations` reads
    assert len(data.ids) == N_MAPS + 4 and data.y.shape == (N_MAPS + 4,)
    pulls = [json.loads(line) for line in (shipped_copy / "pulls.jsonl").read_text().splitlines()]
    assert len(pulls) == N_PULLS + 2  # the shipped pulls + 2
    assert [p["resolution"] for p in pulls] == ["dawid-skene"] * (N_PULLS + 2)  # no --resolve: the set's own method
    assert len(list((shipped_copy / "exports").glob("*.json.gz"))) == N_PULLS + 2


def test_replace_shows_what_it_drops(shipped_copy, tmp_path, capsys):
    store = pattern_store(tmp_path / "round1", ["diagonal"])
    (tmp_path / "e.json").write_text(json.dumps(three_annotator_export({store.ids[0]: ["diagonal"] * 3}, 80001,
                                                                        "2027-01-01T10:00:00Z")))
    before = (shipped_copy / "labels.csv").read_bytes()
    pull = ["annotate", "pull", "--from-file", str(tmp_path / "e.json"), "--maps", str(tmp_path / "round1"),
            "--out", str(shipped_copy), "--replace"]
    assert main([*pull, "--dry-run"]) == 0
    msg = capsys.readouterr().out
    assert f"{N_MAPS} dropped" in msg and "dropped (--replace): minilm-" in msg and "dry run: nothing written" in msg
    assert (shipped_copy / "labels.csv").read_bytes() == before
    assert len(list((shipped_copy / "exports").iterdir())) == N_PULLS
    assert main(pull) == 0
    assert "1 labelled map(s)" in capsys.readouterr().out
    assert list(rows(shipped_copy / "labels.csv")) == store.ids and MapStore(shipped_copy / "maps").ids == store.ids


def test_dawid_skene_resolution_is_recorded(shipped_copy, tmp_path, capsys):
    shipped = rows(SHIPPED / "labels.csv")
    store = pattern_store(tmp_path / "round1", ["diagonal", "block"])
    a, b = store.ids
    export = three_annotator_export({a: ["diagonal"] * 3, b: ["vertical", "vertical", "heterogeneous"]},
                                    90001, "2027-01-01T10:00:00Z")
    (tmp_path / "e.json").write_text(json.dumps(export))
    assert main(["annotate", "pull", "--from-file", str(tmp_path / "e.json"), "--maps", str(tmp_path / "round1"),
                 "--out", str(shipped_copy), "--resolve", "dawid-skene"]) == 0
    assert "resolved by dawid-skene" in capsys.readouterr().out
    labels = rows(shipped_copy / "labels.csv")
    assert (labels[a]["label"], labels[b]["label"]) == ("diagonal", "vertical")
    assert labels[a]["resolution"] == labels[b]["resolution"] == "dawid-skene"
    # The shipped maps' three votes are resolved again with the new ones: every label stays.
    assert all(labels[m]["label"] == r["label"] and labels[m]["resolution"] == "dawid-skene" for m, r in shipped.items())
    assert all(0 < float(r["resolution_p"]) <= 1 for r in labels.values())
    assert json.loads((shipped_copy / "pulls.jsonl").read_text().splitlines()[-1])["resolution"] == "dawid-skene"


def test_an_explicit_resolve_overrides_the_sets_method(shipped_copy, tmp_path, capsys):
    store = pattern_store(tmp_path / "round1", ["diagonal"])
    (tmp_path / "e.json").write_text(json.dumps(three_annotator_export({store.ids[0]: ["diagonal"] * 3}, 95001,
                                                                        "2027-01-01T10:00:00Z")))
    assert main(["annotate", "pull", "--from-file", str(tmp_path / "e.json"), "--maps", str(tmp_path / "round1"),
                 "--out", str(shipped_copy), "--resolve", "majority"]) == 0
    out = capsys.readouterr().out
    assert "resolved by majority" in out
    labels = rows(shipped_copy / "labels.csv")
    # The shipped set's 12 three-way splits of three are ties: majority leaves them unresolved, and the summary says so
    # (and asks for a fourth annotator).
    assert Counter(r["resolution"] for r in labels.values()) == {"majority": N_MAPS + 1 - 12, "unresolved": 12}
    assert all(r["label"] == "" and r["tie"] == "True" for r in labels.values() if r["resolution"] == "unresolved")
    assert "12 tie(s) left unresolved" in out and "--per-task 4" in out and "majority-dawid-skene" in out
    assert len(load_labelled(shipped_copy).unresolved) == 12
    with open(shipped_copy / "pulls.jsonl", "a", encoding="utf-8") as f:
        f.write("{not json\n")
    assert main(["annotate", "pull", "--from-file", str(tmp_path / "e.json"), "--out", str(shipped_copy)]) == 2
    err = capsys.readouterr().err
    assert "pulls.jsonl (its last line) is not valid JSON" in err and "--resolve" in err


def three_annotators_each(held: Path, maps: int, letters: str):
    """The tables of a held-out round: ``maps`` maps, each labelled once by each of its three annotators."""
    tables = read_tables(held)
    assert len(tables.labels) == maps and len(tables.annotations) == 3 * maps
    per_map = {}
    for r in tables.annotations.values():
        per_map.setdefault(r["map_id"], set()).add(r["annotator"])
    assert all(v == {f"annotator-{x}@patterncnn.local" for x in letters} for v in per_map.values())
    return tables


def test_round4_block_candidates_are_a_labelled_set_of_their_own_held_out_of_training():
    held = SHIPPED / "round4-block-candidates"
    tables = three_annotators_each(held, 108, "jkl")
    # the majority wherever there is one; Dawid-Skene only on the two three-way splits
    assert Counter(r["resolution"] for r in tables.labels.values()) == {"majority": 106, "dawid-skene": 2}
    assert Counter(r["label"] for r in tables.labels.values())["block"] == 23
    assert not set(MapStore(held / "maps").ids) & set(MapStore(SHIPPED / "maps").ids)
    assert len(load_labelled(SHIPPED).ids) == N_MAPS  # `train --annotations annotations` does not read it


def test_round5_is_a_held_out_uniform_test_set_scored_by_validate(tmp_path, capsys):
    """240 maps drawn uniformly from GLUE *train* inputs (no example of the training set), three new annotators;
    `validate --annotations` scores the shipped classifier on them, and agrees with the recorded pre-annotation."""
    held = SHIPPED / "round5-heldout-uniform"
    tables = three_annotators_each(held, 240, "mno")
    assert Counter(r["resolution"] for r in tables.labels.values()) == {"majority": 240}
    test = load_labelled(held)
    assert {m["sampling"] for m in test.meta} == {"uniform"} and {m["split"] for m in test.meta} == {"train"}
    assert Counter(i.split("_")[0] for i in test.ids) == {"minilm-53aa5117": 120, "mpnet-78c0197b": 120}
    # the training set is all dev inputs, so no input example of this train-split set is in it
    assert {m["split"] for m in load_labelled(SHIPPED).meta} == {"dev"}
    assert main(["validate", "--annotations", str(held), "--out", str(tmp_path / "v")]) == 0
    v = json.loads((tmp_path / "v" / "validation.json").read_text())
    # the maps were pre-annotated (hidden from the annotators) by the classifier of the day, 222b7338: its labels
    # give the figures the datasheet and docs/pages/classifier.md publish for it
    rows = list(tables.labels.values())
    assert {r["pre_model"] for r in rows} == {"patterncnn-0.1.0-222b7338"}
    pre = np.array([r["pre_label"] == r["label"] for r in rows])
    minilm = np.array([m.startswith("minilm") for m in tables.labels])
    assert [round(float(pre.mean()), 3), round(float(pre[minilm].mean()), 3)] == [0.842, 0.883]
    # validate scores the shipped classifier (9f40f2d2-r5d652c since 2026-11-26) on the same maps
    assert v["classifier"]["version"] == OnnxClassifier().model_version == "patterncnn-0.1.0-9f40f2d2-r5d652c"
    assert round(v["labels"]["groups"]["all"]["all"]["accuracy"], 3) == 0.863
    count = next(r for r in v["results"] if r["estimator"] == "count")["encoders"]
    assert [round(count[e]["mean_abs_error"], 3) for e in ("minilm-53aa5117", "mpnet-78c0197b")] == [0.020, 0.020]


def test_round6_block_candidates_a_second_triad_held_out_of_training():
    held = SHIPPED / "round6-block-candidates"
    tables = three_annotators_each(held, 80, "pqr")
    assert Counter(r["resolution"] for r in tables.labels.values()) == {"majority": 80}
    block = [m for m, r in tables.labels.items() if r["label"] == "block"]
    assert len(block) == 2 and all(m.startswith("minilm-stsb-") for m in block)  # no MPNet map this time
    ids = set(MapStore(held / "maps").ids)
    for other in (SHIPPED, SHIPPED / "round4-block-candidates", SHIPPED / "round5-heldout-uniform"):
        assert not ids & set(MapStore(other / "maps").ids)  # the pools skipped every labelled map


def test_round7_a_second_triad_relabels_240_training_maps_and_agrees_on_84_percent(tmp_path, capsys):
    """Round 7: 240 maps of the training set, drawn per family, labelled again by a new triad (s, t, u) with one
    order each; `annotate agreement --against` gives the figures the datasheet and docs/pages/classifier.md publish."""
    held = SHIPPED / "round7-retest"
    tables = three_annotators_each(held, 240, "stu")
    assert Counter(r["resolution"] for r in tables.labels.values()) == {"majority": 240}
    ids = set(MapStore(held / "maps").ids)
    assert ids <= set(MapStore(SHIPPED / "maps").ids)  # a relabelling of training maps, not new maps
    assert Counter(i.split("-")[0] for i in ids) == {"minilm": 120, "mpnet": 120}
    assert len(load_labelled(SHIPPED).ids) == N_MAPS  # its labels are not merged into the training set
    out = tmp_path / "against.json"
    assert main(["annotate", "agreement", str(held), "--against", str(SHIPPED), "--classifier",
                 str(SHIPPED.parent / "models" / "patterncnn.onnx"), "--out", str(out)]) == 0
    assert "this set's resolved label vs the reference's: 240 maps, 83.8% agree, kappa 0.751" in capsys.readouterr().out
    r = json.loads(out.read_text())["by_family"]
    committed = json.loads((held / "against-main.json").read_text())["by_family"]

    def annotators_only(report):
        return {f: {k: v for k, v in part.items() if k != "methods"} for f, part in report.items()}

    assert annotators_only(committed) == annotators_only(r)  # the committed report, the annotators' part
    # its classifier part is the classifier of the day, 222b7338 (out of fold); the shipped one is scored today
    assert list(r["all"]["methods"]) == [f"{OnnxClassifier().model_version} out-of-fold"]
    r = committed  # below: the figures the docs publish for 222b7338, as the committed report holds them

    def fig(s):
        return round(s["agree"], 3), round(s["kappa"], 3), round(s["macro_f1"], 3)

    assert [fig(r[f]["resolved"]) for f in ("minilm", "mpnet", "all")] == [
        (0.85, 0.777, 0.784), (0.825, 0.715, 0.614), (0.838, 0.751, 0.749)]
    assert [round(r[f]["both_agreed"]["macro_f1"], 3) for f in ("minilm", "mpnet", "all")] == [0.789, 0.614, 0.752]
    (cnn,) = r["all"]["methods"].values()
    assert fig(cnn["vs_reference"]) == (0.754, 0.629, 0.578) and fig(cnn["vs_second"]) == (0.796, 0.684, 0.742)
    # in-sample for the shipped classifier: validate refuses it as an independent test set
    assert main(["validate", "--annotations", str(held), "--out", str(tmp_path / "v")]) == 2
    assert "trained or calibrated this classifier" in capsys.readouterr().err


def write_set(root: Path, labels: dict[str, str]) -> Path:
    """A labelled set of two tables only: one resolved label and one annotation per map."""
    root.mkdir(parents=True)
    with open(root / "labels.csv", "w", newline="", encoding="utf-8") as f:
        w = csv.DictWriter(f, ["map_id", "label"])
        w.writeheader()
        w.writerows({"map_id": m, "label": lab} for m, lab in labels.items())
    with open(root / "votes.csv", "w", newline="", encoding="utf-8") as f:
        w = csv.DictWriter(f, ["map_id", "annotator", "label", "skipped", "created_at", "ls_annotation_id"])
        w.writeheader()
        w.writerows({"map_id": m, "annotator": "a@x", "label": lab, "skipped": "False", "created_at": "2026",
                     "ls_annotation_id": str(i)} for i, (m, lab) in enumerate(labels.items()))
    return root


def test_agreement_against_says_what_is_wrong(tmp_path, capsys):
    a = write_set(tmp_path / "a", {"minilm-aaaaaaaa_x_1": "vertical"})
    b = write_set(tmp_path / "b", {"minilm-aaaaaaaa_x_2": "vertical"})
    assert main(["annotate", "agreement", str(a), "--against", str(b)]) == 2
    assert "share no map" in capsys.readouterr().err
    assert main(["annotate", "agreement", str(a), "--classifier", "models/patterncnn.onnx"]) == 2
    assert "give --against too" in capsys.readouterr().err
    (tmp_path / "empty").mkdir()
    assert main(["annotate", "agreement", str(a), "--against", str(tmp_path / "empty")]) == 2
    assert "labels.csv not found" in capsys.readouterr().err
    c = write_set(tmp_path / "c", {"minilm-aaaaaaaa_x_1": "diagonal"})
    assert main(["annotate", "agreement", str(a), "--against", str(c)]) == 0
    assert "1 maps, 0.0% agree" in capsys.readouterr().out
    (c / "votes.csv").unlink()
    assert main(["annotate", "agreement", str(a), "--against", str(c)]) == 0
    assert "has no votes.csv, so none of its maps counts as agreed" in capsys.readouterr().out


def test_agreement_against_refuses_a_classifier_without_out_of_fold_predictions(tiny_classifier, tmp_path, capsys):
    a = write_set(tmp_path / "a", {"minilm-aaaaaaaa_x_1": "vertical"})
    b = write_set(tmp_path / "b", {"minilm-aaaaaaaa_x_1": "vertical"})
    assert main(["annotate", "agreement", str(a), "--against", str(b), "--classifier", str(tiny_classifier[1])]) == 2
    assert "stores no out-of-fold predictions" in capsys.readouterr().err


def test_a_new_server_labelling_a_shipped_map_keeps_the_shipped_provenance(shipped_copy, tmp_path, capsys):
    """`sample` with the default seed can draw a shipped map again; pulled from the new server (whose project and
    task ids count from 1 again), its labels join the shipped ones, and the shipped row's provenance stays."""
    shipped = rows(SHIPPED / "labels.csv")
    m = next(m for m, r in shipped.items() if r["ls_task_id"] == "1")  # the new server's task 1 too
    before = read_tables(SHIPPED)
    export = three_annotator_export({m: ["vertical", "vertical", "diagonal"]}, 1, "2027-01-01T10:00:00Z")
    export[0].update(id=1, project=1)
    export[0]["data"]["guide"] = "1.1"
    (tmp_path / "new.json").write_text(json.dumps(export))
    assert main(["annotate", "pull", "--from-file", str(tmp_path / "new.json"), "--server", "http://localhost:8080",
                 "--out", str(shipped_copy)]) == 0
    capsys.readouterr()
    after = rows(shipped_copy / "labels.csv")
    for column in ("pre_label", "pre_score", "pre_model", "pre_source", "ls_task_id"):
        assert after[m][column] == shipped[m][column], column  # the shipped origin's, not the new server's
    assert (after[m]["server"], after[m]["origins"], after[m]["n_annotators"]) == ("", "2", "6")
    assert after[m]["guide"] == "1.0;1.1"  # the shipped votes were made under guide 1.0, the new ones under 1.1
    tables = read_tables(shipped_copy)
    for name in ("annotations", "predictions"):  # every shipped row of the map, as it was (a column added since: empty)
        old = {k: r for k, r in getattr(before, name).items() if r["map_id"] == m}
        now = {k: getattr(tables, name)[k] for k in old}
        assert {k: {c: r[c] for c in old[k]} for k, r in now.items()} == old
        assert all(r[c] == "" for k, r in now.items() for c in set(r) - set(old[k]))
    new = [r for r in tables.predictions.values() if r["map_id"] == m and r["server"]]
    assert {(r["server"], r["ls_task_id"], r["model_version"]) for r in new} == {
        ("http://localhost:8080", "1", "patterncnn-0.1.0-abcdef12"), ("http://localhost:8080", "1", "rule-v1")}
    assert len(tables.annotations) == N_ANNOTATIONS + 3 and len(tables.labels) == N_MAPS


def test_round9_two_fresh_annotators_re_adjudicate_every_split_training_map():
    """Round 9: the maps of both training sets whose three votes were not unanimous, labelled again by two fresh
    blind annotators (y, z) under guide 1.1; the committed adjudication.json (and the datasheet's figures) is what
    research/annotation-protocol/adjudication_stats.py computes from the committed votes."""
    import subprocess
    import sys

    held = SHIPPED / "round9-adjudication"
    tables = read_tables(held)
    assert len(tables.labels) == 314 and len(tables.annotations) == 2 * 314
    per_map = {}
    for r in tables.annotations.values():
        per_map.setdefault(r["map_id"], set()).add(r["annotator"])
        assert r["guide"] == "1.1"
    assert all(v == {"annotator-y@patterncnn.local", "annotator-z@patterncnn.local"} for v in per_map.values())
    split = {m for root in (SHIPPED, SHIPPED / "round8-e5-uniform")
             for m, r in read_tables(root).labels.items() if len(json.loads(r["labels_seen"])) > 1}
    assert set(per_map) == split  # exactly the training maps whose three annotators split, no other
    assert Counter(m.split("-")[0] for m in split) == {"minilm": 121, "mpnet": 128, "e5": 65}
    import os

    out = subprocess.run([sys.executable, "research/annotation-protocol/adjudication_stats.py"], cwd=REPO,
                         capture_output=True, text=True, check=True,
                         env={**os.environ, "PYTHONPATH": str(REPO)}).stdout
    report = json.loads(out)
    assert report == json.loads((held / "adjudication.json").read_text())
    fam = report["by_family"]["all"]
    assert (fam["new_annotators_agree"], fam["label_changes_with_five_votes"]) == (194, 87)
    assert (fam["three_way_splits"], fam["five_vote_ties"]) == (16, 34)
    assert fam["new_votes_on_two_to_one_maps"] == {"with the first majority": 295, "with its minority": 242,
                                                   "with none of the three": 59}
    r7 = report["round7_second_triad_vs_first"]
    assert [(r7[f]["agree_before"], r7[f]["agree_after"]) for f in ("minilm", "mpnet", "all")] == [
        (0.85, 0.8417), (0.825, 0.8583), (0.8375, 0.85)]
    assert (r7["all"]["relabelled"], r7["all"]["relabelled_agreed_before"], r7["all"]["relabelled_now_agree"]) == (
        10, 3, 6)


def test_round10_more_e5_maps_on_train_inputs_three_fresh_annotators_under_guide_1_1(tmp_path, capsys):
    """Round 10: 240 E5 maps drawn uniformly from GLUE *train* inputs (none of round 8's dev inputs), three fresh
    annotators (aa, ab, ac) under guide 1.1; the datasheet's figures are what the committed votes and `annotate
    agreement` give, and `validate` scores the shipped classifier (its hidden pre-annotator) as the datasheet says."""
    held = SHIPPED / "round10-e5-train"
    tables = three_annotators_each(held, 240, ["aa", "ab", "ac"])
    assert Counter(r["resolution"] for r in tables.labels.values()) == {"majority": 239, "dawid-skene": 1}
    assert {r["guide"] for r in tables.annotations.values()} == {r["guide"] for r in tables.labels.values()} == {"1.1"}
    assert Counter(r["label"] for r in tables.labels.values()) == {
        "vertical": 171, "diagonal": 14, "vertical+diagonal": 32, "block": 5, "heterogeneous": 18}
    test = load_labelled(held)
    assert {m["sampling"] for m in test.meta} == {"uniform"} and {m["split"] for m in test.meta} == {"train"}
    assert Counter(m["task"] for m in test.meta) == {t: 48 for t in ("cola", "sst2", "mrpc", "stsb", "rte")}
    assert {i.split("_")[0] for i in test.ids} == {"e5-cd1caf18"}
    assert {m["split"] for m in load_labelled(SHIPPED / "round8-e5-uniform").meta} == {"dev"}  # no input shared
    out = tmp_path / "agreement.json"
    assert main(["annotate", "agreement", str(held), "--out", str(out)]) == 0
    assert "Fleiss' kappa 0.789 over 240 maps" in capsys.readouterr().out
    assert json.loads(out.read_text()) == json.loads((held / "agreement.json").read_text())
    rows = list(tables.labels.values())
    assert {r["pre_model"] for r in rows} == {"patterncnn-0.1.0-9f40f2d2-r5d652c"}
    assert round(float(np.mean([r["pre_label"] == r["label"] for r in rows])), 3) == 0.879
    assert main(["validate", "--annotations", str(held), "--out", str(tmp_path / "v")]) == 0
    v = json.loads((tmp_path / "v" / "validation.json").read_text())
    assert v["classifier"]["version"] == "patterncnn-0.1.0-9f40f2d2-r5d652c"
    assert round(v["labels"]["groups"]["all"]["all"]["accuracy"], 3) == 0.879
    count = next(r for r in v["results"] if r["estimator"] == "count")["encoders"]
    assert round(count["e5-cd1caf18"]["mean_abs_error"], 3) == 0.020


def test_round11_two_fresh_annotators_re_adjudicate_round5s_split_maps(tmp_path, capsys):
    """Round 11: round 5's maps whose three votes split, labelled again by two fresh blind annotators (ad, ae) under
    guide 1.1; adjudication.json is what adjudication_stats.py computes from the committed votes; pulled into a copy
    of round 5 (the five-vote version of research/generalisation/RULES.md), its export relabels 11 maps, and the
    shipped classifier scores there as the rule's outcome says."""
    import gzip
    import os
    import shutil
    import subprocess
    import sys

    held, round5 = SHIPPED / "round11-round5-adjudication", SHIPPED / "round5-heldout-uniform"
    tables = read_tables(held)
    per_map = {}
    for r in tables.annotations.values():
        per_map.setdefault(r["map_id"], set()).add(r["annotator"])
        assert r["guide"] == "1.1"
    assert all(v == {"annotator-ad@patterncnn.local", "annotator-ae@patterncnn.local"} for v in per_map.values())
    split = {m for m, r in read_tables(round5).labels.items() if len(json.loads(r["labels_seen"])) > 1}
    assert set(per_map) == split and Counter(m.split("-")[0] for m in split) == {"minilm": 14, "mpnet": 13}
    out = subprocess.run([sys.executable, "research/annotation-protocol/adjudication_stats.py", "--round", str(held),
                          "--sets", str(round5)], cwd=REPO, capture_output=True, text=True, check=True,
                         env={**os.environ, "PYTHONPATH": str(REPO)}).stdout
    report = json.loads(out)
    assert report == json.loads((held / "adjudication.json").read_text())
    fam = report["by_family"]["all"]
    assert (fam["new_annotators_agree"], fam["label_changes_with_five_votes"], fam["five_vote_ties"]) == (17, 11, 3)
    assert fam["new_votes_on_two_to_one_maps"] == {"with the first majority": 21, "with its minority": 30,
                                                   "with none of the three": 3}

    five = tmp_path / "round5-5votes"
    shutil.copytree(round5, five)
    (export,) = (held / "exports").glob("*.json.gz")
    (tmp_path / "export.json").write_bytes(gzip.decompress(export.read_bytes()))
    assert main(["annotate", "pull", "--from-file", str(tmp_path / "export.json"), "--maps", str(held / "maps"),
                 "--out", str(five), "--server", "http://localhost:8211", "--resolve", "majority-dawid-skene"]) == 0
    pulled = capsys.readouterr().out
    assert "+0 new, 11 relabelled, 0 dropped" in pulled
    # the maps whose `uncertain` changed are said (helper 109: a pull changed 11 shipped rows' flag silently)
    assert "note: 9 map(s) changed their 'uncertain' flag" in pulled
    assert main(["validate", "--annotations", str(five), "--out", str(tmp_path / "v")]) == 0
    v = json.loads((tmp_path / "v" / "validation.json").read_text())
    assert v["classifier"]["version"] == "patterncnn-0.1.0-9f40f2d2-r5d652c"
    groups = v["labels"]["groups"]
    assert [round(groups[f"family {f}"]["all"]["accuracy"], 3) for f in ("minilm", "mpnet")] == [0.925, 0.833]
    # against one annotator, the reference being three of the other four where a map has five votes
    yard = v["labels"]["against_one_annotator"]
    assert [(yard[f]["pairs"], yard[f]["maps"], round(yard[f]["annotator"]["agree"], 3),
             round(yard[f]["methods"]["classifier"]["agree"], 3)) for f in ("minilm", "mpnet", "all")] == [
        (353, 119, 0.935, 0.935), (355, 118, 0.949, 0.859), (708, 237, 0.942, 0.897)]


def test_round12_more_minilm_and_mpnet_maps_three_fresh_annotators_under_guide_1_1(tmp_path, capsys):
    """Round 12: 240 uniformly drawn maps of the two embedded encoders on GLUE dev inputs (none of round 5's train
    inputs, no map of the main set), three fresh annotators (af, ag, ah) under guide 1.1; the datasheet's figures are
    what the committed votes and `annotate agreement` give, and `validate` scores the shipped classifier as it says."""
    held = SHIPPED / "round12-minilm-mpnet-dev"
    tables = three_annotators_each(held, 240, ["af", "ag", "ah"])
    assert Counter(r["resolution"] for r in tables.labels.values()) == {"majority": 237, "dawid-skene": 3}
    assert {r["guide"] for r in tables.annotations.values()} == {"1.1"}
    assert Counter(r["label"] for r in tables.labels.values()) == {
        "vertical": 134, "diagonal": 20, "vertical+diagonal": 66, "block": 3, "heterogeneous": 17}
    test = load_labelled(held)
    assert {m["sampling"] for m in test.meta} == {"uniform"} and {m["split"] for m in test.meta} == {"dev"}
    assert Counter(i.split("_")[0] for i in test.ids) == {"minilm-53aa5117": 120, "mpnet-78c0197b": 120}
    assert not set(test.ids) & set(read_tables(SHIPPED).labels)  # no map of the training set
    assert {m["split"] for m in load_labelled(SHIPPED / "round5-heldout-uniform").meta} == {"train"}
    out = tmp_path / "agreement.json"
    assert main(["annotate", "agreement", str(held), "--by-encoder", "--out", str(out)]) == 0
    assert "Fleiss' kappa 0.734 over 240 maps" in capsys.readouterr().out
    assert json.loads(out.read_text()) == json.loads((held / "agreement.json").read_text())
    assert main(["validate", "--annotations", str(held), "--out", str(tmp_path / "v")]) == 0
    v = json.loads((tmp_path / "v" / "validation.json").read_text())
    assert v["classifier"]["version"] == "patterncnn-0.1.0-9f40f2d2-r5d652c"
    groups = v["labels"]["groups"]
    assert [round(groups[g]["all"]["accuracy"], 3) for g in ("all", "family minilm", "family mpnet")] == [
        0.842, 0.875, 0.808]
    yard = v["labels"]["against_one_annotator"]
    assert [(yard[f]["pairs"], round(yard[f]["annotator"]["agree"], 3), round(yard[f]["methods"]["classifier"]["agree"], 3))
            for f in ("minilm", "mpnet", "all")] == [(303, 0.911, 0.934), (300, 0.91, 0.843), (603, 0.91, 0.889)]
