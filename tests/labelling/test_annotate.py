"""Label Studio config, tasks, export -> rows, merging into a labelled set, pull from a file; no server."""

import base64
import csv
import io
import json
import xml.etree.ElementTree as ET

import numpy as np
import pytest
from PIL import Image
from repo import REPO
from synthetic import pattern_map, pattern_store

from patterncnn.classifier.render import render_png
from patterncnn.cli import main
from patterncnn.core.labels import LABELS
from patterncnn.core.maps import MapStore
from patterncnn.labelling.labelstudio import AnnotateError
from patterncnn.labelling.pull import flatten, label_rows
from patterncnn.labelling.push import (
    HIDDEN_COLUMNS,
    SHOWN,
    RulePredictor,
    blind_id,
    guide_version,
    label_config,
    make_task,
    same_map,
    shown_fields,
)
from patterncnn.labelling.sets import Tables, load_labelled, merge_rows, write_labelled_set


def ann(label, i, when, uncertain=False, cancelled=False, who=1):
    result = [] if label is None else [{"from_name": "pattern", "to_name": "map", "type": "choices",
                                        "value": {"choices": [label]}}]
    if uncertain:
        result.append({"from_name": "uncertain", "to_name": "map", "type": "choices",
                       "value": {"choices": ["uncertain"]}})
    return {"id": i, "result": result, "was_cancelled": cancelled, "created_at": when, "updated_at": when,
            "completed_by": who, "lead_time": 2.5, "unique_id": f"uuid-{i}"}


def export_for(labels, predictions=None):
    """A Label Studio export: one task per map id, with these annotations (and full predictions)."""
    tasks = []
    for i, (map_id, anns) in enumerate(labels.items()):
        tasks.append({"id": i + 1, "project": 7, "created_at": "2026-01-01T00:00:00Z",
                      "data": {"map_id": map_id, "pre_label": "diagonal", "pre_scores": {n: 0.2 for n in LABELS},
                               "pre_model": "rule-v1", "layer": 1},
                      "annotations": anns, "predictions": (predictions or {}).get(map_id, [i + 100])})
    return tasks


def test_guide_is_in_the_repository():
    guide = REPO / "annotations" / "ANNOTATION_GUIDE.md"
    assert guide.is_file() and "## Rules for the hard cases" in guide.read_text()
    shared = REPO.parent / "shared" / "ANNOTATION_GUIDE.md"
    if not shared.is_file():
        pytest.skip(f"{shared} is not beside this clone: nothing to compare the copy with")
    assert guide.read_bytes() == shared.read_bytes(), "annotations/ANNOTATION_GUIDE.md differs from ../shared"


def test_label_config_has_the_five_labels_in_order_above_the_map():
    root = ET.fromstring(label_config())
    pattern = root.find("./Choices[@name='pattern']")
    assert [c.get("value") for c in pattern] == list(LABELS)
    assert pattern.get("choice") == "single-radio" and pattern.get("toName") == "map"
    assert [c.get("value") for c in root.find("./Choices[@name='uncertain']")] == ["uncertain"]
    image = root.find("./Image")
    assert image.get("value") == "$image"
    # fitted to the view: never wider than the panel, never taller than the window less what sits above and below
    assert image.get("maxWidth") == "100%" and image.get("maxHeight").startswith("calc(100vh - ")
    tags = [el.get("name") for el in root]
    assert tags.index("pattern") < tags.index("uncertain") < tags.index("map")


def test_the_task_shows_no_encoder_task_layer_or_head():
    """The guide forbids labelling from them: the config shows a neutral id and the picture; the picture's title is
    the neutral id; the real id stays in a data field that the config does not show and the task list hides."""
    map_id = "mpnet-stsb-b9324d55_qnli_dev_00123_L07_H11"
    meta = {"id": map_id, "model": "mpnet-stsb", "task": "qnli", "split": "dev", "example": 123, "layer": 7,
            "head": 11, "tokens": [f"w{i}" for i in range(30)], "seps": [14, 29]}
    arr = pattern_map("diagonal", 30)
    task = make_task(meta, arr, RulePredictor().predict([arr], [meta["seps"]])[0], "rule-v1")
    data = task["data"]
    shown = shown_fields(label_config())
    assert shown == {"ref", "image"} and shown <= set(SHOWN)
    assert set(data) - set(HIDDEN_COLUMNS) == set(SHOWN)  # what the task list may show: nothing that names the map
    forbidden = [map_id, "mpnet", "stsb", "qnli", "00123", "L07", "H11", "layer", "head"]
    for field in SHOWN:
        if field != "image":
            assert not any(f in str(data[field]) for f in forbidden), (field, data[field])
    assert data["ref"] == blind_id(map_id) and data["ref"].startswith("map ") and data["map_id"] == map_id
    png = base64.b64decode(data["image"].split(",", 1)[1])
    assert png == render_png(arr, meta["tokens"], meta["seps"], title=blind_id(map_id))  # titled with the neutral id
    assert png != render_png(arr, meta["tokens"], meta["seps"], title=map_id)
    assert Image.open(io.BytesIO(png)).format == "PNG"
    assert data["pre_label"] == task["predictions"][0]["result"][0]["value"]["choices"][0]
    assert set(data["pre_scores"]) == set(LABELS) and "map_id" in HIDDEN_COLUMNS
    assert blind_id(map_id) == blind_id(map_id) != blind_id(map_id.replace("H11", "H10"))  # stable, one per map


def test_every_task_records_the_guide_version_read_from_the_guide(tmp_path):
    first_lines = (REPO / "annotations" / "ANNOTATION_GUIDE.md").read_text().splitlines()[:3]
    assert any(line.startswith(f"Version {guide_version()} (") for line in first_lines)
    assert guide_version() == "1.1"
    task = make_task({"id": "m1", "tokens": None}, pattern_map("diagonal", 12))
    assert task["data"]["guide"] == "1.1" and "predictions" not in task
    (tmp_path / "g.md").write_text("# Guide\n\nVersion 2.0 (2027-01-01): new.\n")
    assert guide_version(tmp_path / "g.md") == "2.0"
    (tmp_path / "g.md").write_text("# Guide\n\nno version here\n")
    with pytest.raises(AnnotateError, match="names no version"):
        guide_version(tmp_path / "g.md")


def test_rule_pre_annotates_clear_synthetic_patterns():
    sep = 11
    for kind in LABELS:
        probs = RulePredictor().predict([pattern_map(kind, 24, sep)], [[sep, 23]])[0]
        assert LABELS[int(np.argmax(probs))] == kind, (kind, probs)
        assert probs.sum() == pytest.approx(1.0, abs=1e-5)


def test_an_ml_backend_serving_the_pushed_version_is_told_from_the_push():
    # A backend serving the classifier push used gives its predictions the same version: all were taken for pushed
    # ones, the pushed one with the backend's URL (helper 97's walk of the docs)
    result = [{"from_name": "pattern", "to_name": "map", "type": "choices", "value": {"choices": ["block"]}}]
    pushed = {"id": 101, "model_version": "rule-v1", "created_at": "2026-01-01T00:00:00Z", "result": result}
    served = {**pushed, "id": 900, "created_at": "2026-01-02T00:00:00Z"}
    export = export_for({"a": [ann("diagonal", 1, "t1")]}, predictions={"a": [served, pushed]})
    flat = flatten(export, backends={"rule-v1": "http://127.0.0.1:9090"}, export_file="e")
    by = {p["ls_prediction_id"]: p for p in flat.predictions}
    assert (by[101]["source"], by[101]["backend"]) == ("push", "")
    assert (by[900]["source"], by[900]["backend"]) == ("ml-backend", "http://127.0.0.1:9090")


def test_flatten_keeps_every_annotation_and_prediction():
    backend = {"id": 900, "model_version": "patterncnn-cnn", "score": 0.7, "created_at": "2026-01-02T00:00:00Z",
               "result": [{"from_name": "pattern", "to_name": "map", "type": "choices",
                           "value": {"choices": ["block"]}}]}
    export = export_for({"a": [ann("diagonal", 1, "t1", who={"id": 4, "email": "x@e"}), ann("block", 2, "t2", who=5)],
                         "b": [ann(None, 3, "t1", cancelled=True)]},
                        predictions={"a": [backend, 101], "b": [102]})
    flat = flatten(export, names={5: "y@e"}, backends={"patterncnn-cnn": "http://127.0.0.1:9090"}, export_file="e")
    assert [(r["map_id"], r["annotator"], r["label"], r["skipped"]) for r in flat.annotations] == [
        ("a", "x@e", "diagonal", False), ("a", "y@e", "block", False), ("b", "user 1", None, True)]
    assert flat.report["cancelled"] == 1 and flat.report["unknown_annotators"] == ["1"]
    by = {(p["map_id"], p["source"]): p for p in flat.predictions}
    assert by["a", "ml-backend"]["label"] == "block" and by["a", "ml-backend"]["backend"] == "http://127.0.0.1:9090"
    assert by["a", "push"]["label"] == "diagonal" and by["a", "push"]["score"] == 0.2  # from the task data
    assert flat.report["predictions_without_content"] == 0  # 101 and 102 are the pushed ones
    with pytest.raises(AnnotateError, match="not one of"):
        flatten(export_for({"c": [ann("zigzag", 9, "t")]}))


def test_label_rows_resolve_by_annotator_and_record_the_method():
    export = export_for({"m": [ann("vertical", 1, "t1", who=1), ann("block", 2, "t3", who=2),
                               ann("vertical", 3, "t2", who=3), ann("block", 4, "t4", who=1, uncertain=True)]})
    flat = flatten(export, names={1: "a@e", 2: "b@e", 3: "c@e"})
    tables = Tables.of(annotations=flat.annotations, predictions=flat.predictions)
    row = label_rows(tables.annotations, tables.predictions, {"m": {"layer": 1}})["m"]
    # a@e changed their mind (their latest is block): block 2 votes, vertical 1. Only a@e marked it uncertain:
    # one annotator of three does not make the resolved label uncertain.
    assert row["label"] == "block" and row["annotator"] == "a@e"
    assert row["uncertain"] == "False" and row["n_uncertain"] == "1" and row["tie"] == "False"
    assert row["n_annotators"] == "3" and row["n_annotations"] == "4" and row["disagreement"] == "True"
    assert row["resolution"] == "majority" and float(row["resolution_p"]) == pytest.approx(2 / 3, abs=1e-4)
    assert row["pre_label"] == "diagonal" and row["pre_source"] == "push" and row["pre_model"] == "rule-v1"
    assert label_rows(tables.annotations, tables.predictions, {}, "dawid-skene")["m"]["resolution"] == "dawid-skene"


def test_merge_rows_adds_updates_keeps_and_drops_only_when_asked():
    old = {"a": {"x": "1"}, "b": {"x": "2"}}
    merged, c = merge_rows(old, {"b": {"x": "3"}, "c": {"x": "4"}})
    assert merged == {"a": {"x": "1"}, "b": {"x": "3"}, "c": {"x": "4"}}
    assert c == {"added": ["c"], "updated": ["b"], "kept": 1, "dropped": []}
    merged, c = merge_rows(old, {"b": {"x": "2"}}, replace=True)
    assert merged == {"b": {"x": "2"}} and c["dropped"] == ["a"] and c["updated"] == []


def test_failed_write_leaves_the_set_untouched(tmp_path):
    store = pattern_store(tmp_path / "maps", ["diagonal"])
    out = tmp_path / "ann"
    out.mkdir()
    (out / "labels.csv").write_text("precious\n")
    tables = Tables.of(labels=[{"map_id": "not-in-store", "label": "diagonal"}])
    with pytest.raises(AnnotateError, match="not in the given map store"):
        write_labelled_set(out, tables, store, ("exports/x.json.gz", b"[]"))
    assert (out / "labels.csv").read_text() == "precious\n"
    assert sorted(p.name for p in out.iterdir()) == ["labels.csv"]


def test_pull_from_file_twice_merges(tmp_path, capsys):
    store = pattern_store(tmp_path / "maps", ["diagonal", "vertical", "block"])
    a, b, c = store.ids
    first = export_for({a: [ann("diagonal", 1, "t1")], b: [ann("vertical", 2, "t1")]})
    (tmp_path / "e1.json").write_text(json.dumps(first))
    out = tmp_path / "ann"
    pull = ["annotate", "pull", "--maps", str(tmp_path / "maps"), "--out", str(out)]
    assert main([*pull, "--from-file", str(tmp_path / "e1.json"), "--annotator", "1=me@example.com"]) == 0
    assert "2 labelled map(s)" in capsys.readouterr().out
    # The second export (a later pull of the same project): b relabelled, c new, a still there.
    second = export_for({b: [{**ann("block", 2, "t2"), "unique_id": "uuid-2"}], c: [ann("block", 3, "t2")]})
    (tmp_path / "e2.json").write_text(json.dumps(second))
    assert main([*pull, "--from-file", str(tmp_path / "e2.json")]) == 0
    out_text = capsys.readouterr().out
    assert "+1 new, 1 updated, 1 kept" in out_text and "3 labelled map(s)" in out_text and "1 relabelled" in out_text
    rows = {r["map_id"]: r for r in csv.DictReader(open(out / "labels.csv"))}
    assert {m: r["label"] for m, r in rows.items()} == {a: "diagonal", b: "block", c: "block"}
    # The annotator named once by --annotator stays named: the set remembers user 1.
    assert {r["annotator"] for r in rows.values()} == {"me@example.com"}
    assert sorted(MapStore(out / "maps").ids) == sorted(store.ids)
    assert len(list((out / "exports").glob("*.json.gz"))) == 2
    assert len((out / "pulls.jsonl").read_text().splitlines()) == 2
    # What the pull stored reads back as exports (gzipped); the older one does not undo the newer label.
    for stored in sorted((out / "exports").glob("*.json.gz")):
        assert main([*pull, "--from-file", str(stored), "--dry-run"]) == 0
        assert "annotations +0 new, 0 updated" in capsys.readouterr().out
    assert load_labelled(out).y.tolist() == [LABELS.index(x) for x in ("diagonal", "block", "block")]


def test_pull_from_file_errors_are_one_line(tmp_path, capsys):
    (tmp_path / "bad.json").write_text("id,label\n")
    assert main(["annotate", "pull", "--from-file", str(tmp_path / "bad.json"), "--out", str(tmp_path / "b")]) == 2
    assert "the export is not valid JSON" in capsys.readouterr().err
    (tmp_path / "e.json").write_text(json.dumps(export_for({"x": [ann("diagonal", 1, "t")]})))
    assert main(["annotate", "pull", "--from-file", str(tmp_path / "e.json"), "--annotator", "one=me",
                 "--out", str(tmp_path / "b")]) == 2
    assert "ID=EMAIL" in capsys.readouterr().err
    assert not (tmp_path / "b").exists()


def test_agreement_command_on_the_shipped_set(tmp_path, capsys):
    assert main(["annotate", "agreement", str(REPO / "annotations"), "--by-encoder",
                 "--out", str(tmp_path / "agreement.json")]) == 0
    out = capsys.readouterr().out
    assert "Fleiss' kappa 0.830 over 1505 maps" in out  # the datasheet's figures
    assert "\nencoder minilm\n" in out and "Fleiss' kappa 0.854 over 855 maps" in out
    assert "\nencoder mpnet\n" in out and "Fleiss' kappa 0.792 over 650 maps" in out
    report = json.loads((tmp_path / "agreement.json").read_text())
    assert set(report["by_encoder"]) == {"minilm", "mpnet"}
    assert sum(r["fleiss"]["maps"] for r in report["by_encoder"].values()) == report["all"]["fleiss"]["maps"]
    assert json.loads((REPO / "annotations" / "agreement.json").read_text()) == report  # the shipped report is current
    assert main(["annotate", "agreement", str(REPO / "annotations" / "legacy-single-annotator"), "--raters", "pass",
                 "--out", str(tmp_path / "agreement.json")]) == 2  # an existing --out needs --overwrite
    assert "agreement.json already exists; pass --overwrite" in capsys.readouterr().err
    assert main(["annotate", "agreement", str(REPO / "annotations" / "legacy-single-annotator"), "--raters", "pass",
                 "--out", str(tmp_path / "agreement.json"), "--overwrite"]) == 0
    out = capsys.readouterr().out
    assert "#1 vs annotator@patterncnn.local #2: 515 maps, 77.5% agree, Cohen's kappa 0.690" in out
    assert json.loads((tmp_path / "agreement.json").read_text())["raters_are"] == "pass"
    assert main(["annotate", "agreement", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert "votes.csv not found" in err and err.count("\n") == 1


@pytest.mark.parametrize("table", ["labels.csv", "votes.csv"])
def test_agreement_given_a_table_instead_of_its_set_names_the_folder_to_pass(tmp_path, capsys, table):
    labelled = tmp_path / "set"
    labelled.mkdir()
    (labelled / "labels.csv").write_text("map_id,label\nm1,vertical\n")
    (labelled / "votes.csv").write_text("map_id,annotator,label,ls_annotation_id\nm1,a,vertical,1\n")
    for argv in (["annotate", "agreement", str(labelled / table)],
                 ["annotate", "agreement", str(labelled), "--against", str(labelled / table)]):
        assert main(argv) == 2
        err = capsys.readouterr().err
        assert err == (f"patterncnn annotate: error: {labelled / table} is a file, not a labelled set: pass the "
                       f"labelled set's folder, the one that holds votes.csv and labels.csv ({labelled})\n")


def test_a_project_title_outside_label_studios_limits_is_refused_before_any_call():
    from patterncnn.labelling.labelstudio import MAX_TITLE, MIN_TITLE, AnnotateError, Connection

    ls = Connection(url="http://localhost:1", client=None)  # no server: the check comes first
    for title in ("r" * (MAX_TITLE + 1), "p2", "   ab  "):
        with pytest.raises(AnnotateError, match=rf"{MIN_TITLE} to {MAX_TITLE} characters.*choose another --project"):
            ls.ensure_project(title, label_config())


# ---------------------------------------------------------------- issue 31: damaged exports and tables


def _good_task() -> dict:
    return export_for({"x": [ann("diagonal", 1, "t")]})[0]


@pytest.mark.parametrize("damage,phrase", [
    (lambda t: t.update(annotations="all"), "task #0.annotations must be a list"),
    (lambda t: t["annotations"][0].update(result=5), "task #0.annotations[0].result must be a list"),
    (lambda t: t["annotations"][0]["result"][0].update(value=[1]), "result[0].value must be an object"),
    (lambda t: t["annotations"][0]["result"][0]["value"].update(choices="block"), "choices must be a list of strings"),
    (lambda t: t["annotations"][0].update(completed_by=[1]), "completed_by must be a user"),
    (lambda t: t["annotations"][0].update(created_at=5), "created_at must be a string or null"),
    (lambda t: t["annotations"][0].update(id="abc"), "annotations[0].id must be a number"),
    (lambda t: t.update(predictions=[{"model_version": "m"}]), "task #0.predictions[0] has no id"),
    (lambda t: t.update(predictions=[[1]]), "predictions[0] must be an object or an id"),
    (lambda t: t.update(data=[]), "task #0.data must be an object"),
    (lambda t: t["data"].update(pre_scores=[0.2]), "task #0.data.pre_scores must be an object"),
    (lambda t: t["data"].pop("map_id"), "has no map_id"),
])
def test_a_damaged_export_is_one_line_naming_task_and_field(tmp_path, capsys, damage, phrase):
    task = _good_task()
    damage(task)
    (tmp_path / "e.json").write_text(json.dumps([task]))
    assert main(["annotate", "pull", "--from-file", str(tmp_path / "e.json"), "--out", str(tmp_path / "s")]) == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err and len(err.strip().splitlines()) == 1 and phrase in err, err


def test_a_gzip_export_is_inflated_within_a_bound(tmp_path, monkeypatch, capsys):
    import gzip

    import patterncnn.labelling.pull as pull

    monkeypatch.setattr(pull, "MAX_EXPORT_BYTES", 10_000)  # the same bound as the shipped 512 MiB, in 10 kB
    (tmp_path / "e.json.gz").write_bytes(gzip.compress(b"[" + b" " * 50_000 + b"]"))
    assert main(["annotate", "pull", "--from-file", str(tmp_path / "e.json.gz"), "--out", str(tmp_path / "s")]) == 2
    assert "inflates to more than" in capsys.readouterr().err
    (tmp_path / "e.json.gz").write_bytes(gzip.compress(json.dumps([_good_task()]).encode())[:-8])
    assert main(["annotate", "pull", "--from-file", str(tmp_path / "e.json.gz"), "--out", str(tmp_path / "s")]) == 2
    assert "truncated gzip" in capsys.readouterr().err


@pytest.mark.parametrize("table,text,phrase", [
    ("labels.csv", "map_id,label\nm1,sideways\n", "labels.csv:2: label 'sideways' is not one of"),
    ("labels.csv", "map_id,labels\nm1,block\n", "labels.csv has no column 'label'"),
    ("labels.csv", "map_id,label\nm1,block,extra\n", "labels.csv:2: the row does not have one cell per column"),
    ("labels.csv", "map_id,label\nm1,block\nm1,block\n", "labels.csv:3: the row repeats 'm1'"),
    ("votes.csv", "map_id,annotator,label,ls_annotation_id\nm1,a,block,x1\n", "no map_id or Label Studio annotation id"),
    ("labels.csv", "map_id,label\nm1,bl\x00ock\n", "labels.csv:2: label 'bl\\x00ock' is not one of"),
    ("votes.csv", "map_id,annotator,label,ls_annotation_id\nm1,a," + "b" * 200_000 + ",1\n",
     "is not a readable CSV table"),
])
def test_a_damaged_table_is_one_line_naming_file_and_line(tmp_path, capsys, table, text, phrase):
    (tmp_path / "set").mkdir()
    (tmp_path / "set" / table).write_text(text)
    if table == "labels.csv":
        (tmp_path / "set" / "votes.csv").write_text("map_id,annotator,label,ls_annotation_id\nm1,a,block,1\n")
    assert main(["annotate", "agreement", str(tmp_path / "set")]) == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err and len(err.strip().splitlines()) == 1 and phrase in err, err


def test_labels_of_maps_the_set_does_not_hold_are_refused(labelled_set, tmp_path):
    import shutil

    from patterncnn.core.errors import DataError
    from patterncnn.labelling.sets import load_labelled

    shutil.copytree(labelled_set, tmp_path / "set")
    with open(tmp_path / "set" / "labels.csv", "a") as f:
        f.write("ghost,block,False\n")
    with pytest.raises(DataError, match="labels 1 map.s. that .* does not hold, e.g. 'ghost'"):
        load_labelled(tmp_path / "set")


def test_push_refuses_a_map_that_cannot_be_drawn_before_anything_is_pushed(tmp_path, capsys):
    from patterncnn.core.maps import open_maps
    from patterncnn.labelling.push import push

    bad = pattern_map("diagonal", 10)
    bad[3, 3] = np.nan
    np.savez(tmp_path / "m.npz", good=pattern_map("vertical", 10), bad=bad)
    with pytest.raises(AnnotateError, match=r"1 of the 2 map\(s\) cannot be shown \(bad: .*NaN.*nothing was pushed"):
        push(None, None, open_maps(tmp_path / "m.npz"))  # refused before the server is asked anything
    # the command: refused before it connects (no server listens at this URL; reaching it would be another error)
    assert main(["annotate", "push", str(tmp_path / "m.npz"), "--project", "patterns", "--url", "http://127.0.0.1:9",
                 "--api-key", "x", "--pre", "none"]) == 2
    assert "cannot be shown (bad:" in capsys.readouterr().err


class TaskList:
    """A stand-in for a Label Studio project's task list: what `push` reads and imports."""

    def __init__(self):
        self.tasks = []

    def task_data(self, project_id):
        return [t["data"] for t in self.tasks]

    def import_tasks(self, project_id, tasks):
        self.tasks += [{**t, "id": len(self.tasks) + i + 1, "project": project_id} for i, t in enumerate(tasks)]


def test_two_plain_npy_files_are_never_taken_for_each_other(tmp_path, capsys):
    """Both number their maps 0, 1, 2: the second push is refused (not 'already there'), and so is a pull that would
    give the first file's labels to the second file's maps."""
    from types import SimpleNamespace

    from patterncnn.core.maps import open_maps
    from patterncnn.labelling.push import push

    np.save(tmp_path / "three.npy", np.stack([pattern_map(k, 12, 5) for k in ("diagonal", "vertical", "block")]))
    np.save(tmp_path / "other.npy", np.stack([pattern_map(k, 12, 5, seed=1) for k in ("heterogeneous", "vertical", "block")]))
    ls, project = TaskList(), SimpleNamespace(id=3)
    assert push(ls, project, open_maps(tmp_path / "three.npy"))["pushed"] == 3
    assert push(ls, project, open_maps(tmp_path / "three.npy"))["skipped_existing"] == 3  # the same maps: idempotent
    with pytest.raises(AnnotateError, match=r"3 map\(s\) of .*other.npy differ from the maps that project 3 holds "
                                            r"under their ids \(e.g. 0\); nothing was pushed: push them to another"):
        push(ls, project, open_maps(tmp_path / "other.npy"))
    assert len(ls.tasks) == 3

    for t in ls.tasks:
        t["annotations"] = [ann("diagonal", t["id"], "t1")]
    (tmp_path / "export.json").write_text(json.dumps(ls.tasks))
    pull = ["annotate", "pull", "--from-file", str(tmp_path / "export.json"), "--out"]
    assert main([*pull, str(tmp_path / "wrong"), "--maps", str(tmp_path / "other.npy")]) == 2
    err = capsys.readouterr().err
    assert "task 1 holds another map than 0 of" in err and "pass with --maps the store(s) the project was pushed" in err
    assert not (tmp_path / "wrong").exists()
    assert main([*pull, str(tmp_path / "right"), "--maps", str(tmp_path / "three.npy")]) == 0
    assert np.array_equal(MapStore(tmp_path / "right" / "maps").get("2"), np.load(tmp_path / "three.npy")[2])


@pytest.mark.parametrize("limit", ["0", "-3"])
def test_push_limit_below_one_is_refused_before_anything(tmp_path, capsys, limit):
    np.save(tmp_path / "m.npy", pattern_map("diagonal", 10))
    with pytest.raises(SystemExit) as exit_:
        main(["annotate", "push", str(tmp_path / "m.npy"), "--project", "patterns", "--limit", limit,
              "--url", "http://127.0.0.1:9", "--api-key", "x"])
    assert exit_.value.code == 2
    assert f"--limit: must be a whole number of at least 1 (got '{limit}')" in capsys.readouterr().err


def test_an_unknown_project_id_names_the_fix_of_the_command():
    """push creates a project of a new title; pull and annotators create none, so they ask for an existing one."""
    from types import SimpleNamespace

    from label_studio_sdk.core.api_error import ApiError

    from patterncnn.labelling.labelstudio import Connection

    def missing(id):
        raise ApiError(status_code=404, body={"detail": "Not found."})

    ls = Connection(url="http://ls:8080", client=SimpleNamespace(projects=SimpleNamespace(get=missing)))
    with pytest.raises(AnnotateError) as found:
        ls.find_project("99")
    assert str(found.value) == ("no Label Studio project with id 99 at http://ls:8080; list them in the UI or pass an "
                                "existing project's id or title (or push maps to a new one with `patterncnn annotate "
                                "push`)")
    with pytest.raises(AnnotateError, match="with id 99 at http://ls:8080; list them in the UI or pass a title to "
                                            "create one$"):
        ls.ensure_project("99", label_config())


def test_a_task_carries_the_same_map_recomputed_but_not_another_map():
    """The same map recomputed by another backend differs in its last bits (which can round to another float16):
    still the same; another map under the same id (two plain .npy files numbering theirs 0, 1, ...) is not."""
    m = pattern_map("vertical", 12, 5)
    data = make_task({"id": "0", "seps": [5, 11]}, m)["data"]
    assert same_map(data, m)
    near = m.astype(np.float16).astype(np.float64)
    near[near > 0] = np.nextafter(near[near > 0].astype(np.float16), np.float16(1)).astype(np.float64)  # next float16
    assert not np.array_equal(near.astype(np.float16), m.astype(np.float16)) and same_map(data, near)
    assert not same_map(data, pattern_map("diagonal", 12, 5)) and not same_map(data, pattern_map("vertical", 14, 6))
    assert same_map({"map_id": "0"}, pattern_map("diagonal", 12, 5))  # a task pushed before tasks carried the map


def test_push_notes_maps_pre_annotated_without_their_separators(tmp_path, capsys, monkeypatch):
    """classify and the service say when maps are labelled without separator positions; `annotate push` did not,
    though its pre-annotations (classifier or rule) read them the same way. One wording for all three."""
    from types import SimpleNamespace

    from patterncnn.classifier.classify import FILE_SEPS_FIX, without_seps_note
    from patterncnn.cli import annotate as annotate_cli
    from patterncnn.core.maps import open_maps
    from patterncnn.labelling.push import RulePredictor, push

    maps = {"a": pattern_map("block", 12, 5), "b": pattern_map("vertical", 12, 5)}
    np.savez(tmp_path / "plain.npz", **maps)
    np.savez(tmp_path / "seps.npz", **maps, __seps__=np.array([[5, 11], [5, 11]]))
    project = SimpleNamespace(id=3, title="patterns")
    assert push(TaskList(), project, open_maps(tmp_path / "plain.npz"), RulePredictor())["without_seps"] == 2
    assert push(TaskList(), project, open_maps(tmp_path / "seps.npz"), RulePredictor())["without_seps"] == 0
    assert push(TaskList(), project, open_maps(tmp_path / "plain.npz"))["without_seps"] == 0  # no pre-annotation

    def server(args):  # an empty project on a stand-in server for each command
        ls = TaskList()
        ls.url, ls.ensure_project = "http://ls:8080", lambda *a, **k: project
        return ls

    monkeypatch.setattr(annotate_cli, "connect", server)
    args = ["--project", "patterns", "--url", "http://ls:8080", "--api-key", "x"]
    assert main(["annotate", "push", str(tmp_path / "plain.npz"), *args]) == 0
    note = "note: " + without_seps_note(2, FILE_SEPS_FIX, "the feature rule")
    assert note in capsys.readouterr().err and "as a member __seps__) for the labels the census gives" in note
    assert main(["annotate", "push", str(tmp_path / "seps.npz"), *args]) == 0
    said = capsys.readouterr()
    assert "pushed 2 map(s)" in said.out and "carry no separator" not in said.out + said.err


def test_a_push_the_server_drops_says_what_landed_and_how_a_rerun_with_limit_finishes_it(tmp_path):
    """An --order uncertain --limit 120 push that lost the server after 100 tasks said nothing of them, and its rerun
    pushed 120 more: 220 where 120 were asked (helper 103's review)."""
    from types import SimpleNamespace

    from patterncnn.core.maps import open_maps
    from patterncnn.labelling.labelstudio import AnnotateError
    from patterncnn.labelling.push import RulePredictor, push

    np.savez(tmp_path / "m.npz", **{f"m{i:03d}": pattern_map(("vertical", "diagonal")[i % 2], 12, 5)
                                    for i in range(10)})
    maps, project = open_maps(tmp_path / "m.npz"), SimpleNamespace(id=3, title="patterns")

    class Dropping(TaskList):
        def import_tasks(self, project_id, tasks):
            if len(self.tasks) >= 4:
                raise AnnotateError("lost the connection to Label Studio at http://ls:8080 (ConnectError); is it "
                                    "running?")
            super().import_tasks(project_id, tasks)

    ls = Dropping()
    with pytest.raises(AnnotateError, match=r"is it running\?; 4 of the 6 map\(s\) to push were imported before it "
                                            r"failed .*pass --limit 2 to push the rest of this push's 6"):
        push(ls, project, maps, RulePredictor(), order="uncertain", limit=6, batch=2)
    ls.__class__ = TaskList  # the server back: the advised rerun ends with the 6 asked for
    assert push(ls, project, maps, RulePredictor(), order="uncertain", limit=2, batch=2)["pushed"] == 2
    assert len(ls.tasks) == 6


def test_a_skip_of_a_task_another_annotator_labelled_is_counted():
    # helper 103: bob skipped a task alice labelled, and the pull said "0 skipped/cancelled"
    from patterncnn.cli.annotate import _skips

    export = export_for({"a": [ann("diagonal", 1, "t1"), ann(None, 2, "t2", cancelled=True)],
                         "b": [ann(None, 3, "t1", cancelled=True)], "c": [ann("block", 4, "t1")]})
    report = flatten(export, export_file="e").report
    assert (report["cancelled"], report["skipped_annotations"], report["unlabelled"]) == (1, 2, 0)
    assert _skips(report) == "2 skipped/cancelled annotation(s) (1 task(s) only skipped)"
    assert _skips({**report, "skipped_annotations": 1}) == "1 skipped/cancelled"


def test_a_round_is_short_of_the_annotations_label_studio_still_waits_for():
    # helper 108: a map one of its two annotators skipped was reported as "not finished" for ever where skips complete
    # a task (IGNORE_SKIPPED); helper 110: by default (REQUEUE_FOR_OTHERS) the skipped task goes to another annotator,
    # so there it is not finished
    from patterncnn.labelling.pull import _short_of_annotators

    export = export_for({"a": [ann("diagonal", 1, "t1", who=1), ann(None, 2, "t2", who=2, cancelled=True)],
                         "b": [ann("block", 3, "t1", who=1)],
                         "c": [ann("block", 4, "t1", who=1), ann("block", 5, "t2", who=2)],
                         "d": [ann(None, 6, "t1", who=1, cancelled=True)]})
    flat = flatten(export, export_file="e")
    assert _short_of_annotators(flat, 2) == {"per_task": 2, "maps": {"a": 1, "b": 1}}  # the default skip queue
    assert _short_of_annotators(flat, 2, skips_count=True) == {"per_task": 2, "maps": {"b": 1}}  # d: no label
    assert _short_of_annotators(flat, None) is None
