"""The Label Studio round trip against a real Label Studio 1.23 server: push -> annotate via API -> pull."""

import csv
import re
import time

import httpx
import pytest
from labelstudio_server import label_stream
from live import ml_backend
from synthetic import pattern_store

from patterncnn.classifier.onnx import OnnxClassifier
from patterncnn.cli import main
from patterncnn.core.maps import MapStore
from patterncnn.labelling.labelstudio import AnnotateError, connect
from patterncnn.labelling.push import RulePredictor, label_config, push
from patterncnn.labelling.sets import load_labelled, read_tables

KINDS = ["vertical", "diagonal", "vertical+diagonal", "block", "heterogeneous", "diagonal", "vertical"]


def choice(label):
    return [{"from_name": "pattern", "to_name": "map", "type": "choices", "value": {"choices": [label]}}]


def truth(map_id):
    return map_id.split("_", 2)[2]  # synthetic maps are named syn_<i>_<kind>


@pytest.fixture()
def conn(label_studio):
    return ["--url", label_studio.url, "--api-key", label_studio.token]


def test_round_trip(label_studio, conn, tmp_path, capsys):
    store = pattern_store(tmp_path / "maps", KINDS, t=16)
    assert main(["annotate", "push", str(tmp_path / "maps"), "--project", "round trip", *conn]) == 0
    assert "pushed 7 map(s)" in capsys.readouterr().out
    # Pushing the same maps again creates no duplicate tasks.
    assert main(["annotate", "push", str(tmp_path / "maps"), "--project", "round trip", *conn]) == 0
    second = capsys.readouterr().out
    assert "pushed 0 map(s)" in second and "7 already there" in second

    client = connect(label_studio.url, label_studio.token)
    project = client.ensure_project("round trip", label_config())
    tasks = list(client.client.tasks.list(project=project.id, fields="all"))
    assert len(tasks) == 7
    by_map = {t.data["map_id"]: t for t in tasks}
    assert set(by_map) == set(store.ids)
    assert tasks[0].data["image"].startswith("data:image/png;base64,") and tasks[0].data["pre_label"] in KINDS
    # The task list hides the machine-only columns (the base64 map among them).
    hidden = [v.data["hiddenColumns"]["explore"] for v in client.client.views.list(project=project.id)]
    assert hidden and "tasks:data.map_npy" in hidden[0]
    # Annotate as an annotator would, through the API: the true kind of each synthetic map ...
    skipped, twice = store.ids[0], store.ids[1]
    for map_id, task in by_map.items():
        if map_id == skipped:
            client.client.annotations.create(id=task.id, result=[], was_cancelled=True)
            continue
        client.client.annotations.create(id=task.id, result=choice(truth(map_id)), lead_time=4.0)
    # ... and the same annotator's second look at one task: their latest label counts.
    client.client.annotations.create(id=by_map[twice].id, result=choice("heterogeneous"), lead_time=1.0)

    out = tmp_path / "annotations"
    pull = ["annotate", "pull", "--project", "round trip", "--maps", str(tmp_path / "maps"), "--out", str(out), *conn]
    assert main(pull) == 0
    msg = capsys.readouterr().out
    assert "6 labelled map(s)" in msg and "1 skipped" in msg and "1 with disagreeing" in msg
    rows = {r["map_id"]: r for r in csv.DictReader(open(out / "labels.csv"))}
    assert set(rows) == set(store.ids) - {skipped}
    for map_id, row in rows.items():
        assert row["label"] == ("heterogeneous" if map_id == twice else truth(map_id))
        assert row["annotator"] == label_studio.email  # the e-mail, from the export itself
        assert row["pre_model"] == "rule-v1" and row["pre_label"] and row["pre_source"] == "push"
    assert rows[twice]["disagreement"] == "True" and rows[twice]["n_annotations"] == "2"
    assert sorted(MapStore(out / "maps").ids) == sorted(rows)
    # The export kept in the set reads back (--from-file) and names the annotator without the server.
    stored = next((out / "exports").glob("*.json.gz"))
    assert main(["annotate", "pull", "--from-file", str(stored), "--out", str(tmp_path / "again"),
                 "--maps", str(tmp_path / "maps")]) == 0
    capsys.readouterr()
    again = {r["map_id"]: r for r in csv.DictReader(open(tmp_path / "again" / "labels.csv"))}
    assert {m: (r["label"], r["annotator"]) for m, r in again.items()} == {
        m: (r["label"], r["annotator"]) for m, r in rows.items()}
    # Pulling again from the server (a new export of the same project) adds nothing, loses nothing, changes nothing
    # but the pull log.
    before = {f: (f.read_bytes(), f.stat().st_mtime_ns) for f in out.rglob("*") if f.is_file() and
              f.name != "pulls.jsonl"}
    time.sleep(1)
    assert main(pull) == 0
    said = capsys.readouterr().out
    assert "annotations +0 new, 0 updated" in said and "nothing changed" in said
    assert {f: (f.read_bytes(), f.stat().st_mtime_ns) for f in out.rglob("*") if f.is_file() and
            f.name != "pulls.jsonl"} == before
    assert len((out / "pulls.jsonl").read_text().splitlines()) == 2
    assert {r["server"] for r in read_tables(out).annotations.values()} == {label_studio.url}


def test_three_blind_annotators_and_backend_predictions(label_studio, conn, tmp_path, capsys, tiny_classifier):
    store = pattern_store(tmp_path / "maps", KINDS, t=16)
    project_name = "three annotators"
    assert main(["annotate", "push", str(tmp_path / "maps"), "--project", project_name, *conn]) == 0
    ls = connect(label_studio.url, label_studio.token)
    project = ls.find_project(project_name)
    # Before the set-up, the label stream shows the pushed pre-annotation ...
    shown = label_stream(label_studio.url, project.id, label_studio.token, lambda d: truth(d["map_id"]))
    assert len(shown) == 7 and all(len(t["predictions"]) == 1 for t in shown)
    assert main(["annotate", "annotators", "--project", project_name, "--per-task", "3", *conn]) == 0
    out = capsys.readouterr().out
    link = re.search(r"(http\S+/user/signup/\?token=\S+)", out).group(1)
    emails = ["ann1@example.com", "ann2@example.com"]
    tokens = [label_studio.sign_up(link, e) for e in emails]
    assert "ann1@example.com" in str(ls.annotators().values())
    # ... after it, each new annotator gets every task, without predictions or anyone else's labels.
    for k, token in enumerate(tokens):
        served = label_stream(label_studio.url, project.id, token,
                              lambda d, k=k: "heterogeneous" if k == 1 and d["map_id"].endswith("diagonal")
                              else truth(d["map_id"]))
        assert sorted(t["data"]["map_id"] for t in served) == sorted(store.ids)
        assert all(t["predictions"] == [] and t["annotations"] == [] for t in served)
        if k == 0:  # a pull before the round is done says so (helper 103: it was pulled as if finished)
            assert main(["annotate", "pull", "--project", project_name, "--maps", str(tmp_path / "maps"),
                         "--out", str(tmp_path / "early"), "--dry-run", *conn]) == 0
            assert ("warning: the round is not finished: 7 labelled map(s) have fewer annotations than the 3 per task "
                    "the project asks for" in capsys.readouterr().out)
    # A fourth account gets nothing: every task has its three annotators.
    assert label_stream(label_studio.url, project.id, label_studio.sign_up(link, "late@example.com"), truth) == []

    # The CNN as an ML backend (patterncnn serve) pre-annotates the same tasks inside Label Studio.
    clf = OnnxClassifier(tiny_classifier[1])
    with ml_backend(clf, "tok-abc") as url:
        ls.client.ml.create(project=project.id, url=url, title="patterncnn", auth_method="BASIC_AUTH",
                            basic_auth_user="labelstudio", basic_auth_pass="tok-abc", is_interactive=False)
        ls.client.actions.create(id="retrieve_tasks_predictions", project=project.id,
                                 selected_items={"all": True, "excluded": []})
        for _ in range(60):
            tasks = list(ls.client.tasks.list(project=project.id, fields="all"))
            if sum(len(t.predictions or []) for t in tasks) >= 14:
                break
            time.sleep(1)

    out_dir = tmp_path / "annotations"
    assert main(["annotate", "pull", "--project", project_name, "--maps", str(tmp_path / "maps"),
                 "--out", str(out_dir), *conn]) == 0
    pulled = capsys.readouterr().out
    assert "7 labelled map(s)" in pulled and "the round is not finished" not in pulled
    tables = read_tables(out_dir)
    for map_id in store.ids:
        mine = [a for a in tables.annotations.values() if a["map_id"] == map_id]
        assert sorted(a["annotator"] for a in mine) == sorted([label_studio.email, *emails])
        row = tables.labels[map_id]
        assert row["label"] == truth(map_id) and row["n_annotators"] == "3" and row["resolution"] == "majority"
        assert row["disagreement"] == str(map_id.endswith("diagonal"))
        # the pre-annotation is the pushed one the annotators could have seen: the backend's came after the labels
        assert row["pre_source"] == "push" and row["pre_model"] == "rule-v1"
        preds = {p["source"]: p for p in tables.predictions.values() if p["map_id"] == map_id}
        assert preds["push"]["model_version"] == "rule-v1" and preds["ml-backend"]["backend"].startswith("http://127")
    data = load_labelled(out_dir)  # what `patterncnn train --annotations` reads
    assert sorted(data.ids) == sorted(store.ids)
    assert main(["annotate", "agreement", str(out_dir)]) == 0
    report = capsys.readouterr().out
    assert "ann1@example.com vs ann2@example.com: 7 maps" in report and "Fleiss' kappa" in report
    for source in ("push rule-v1", f"ml-backend {clf.model_version}"):  # each pre-annotation source
        assert f"pre-annotation vs resolved label: {source}: 7 maps" in report
    # Once everyone has signed up, --new-link makes the link sent unusable (helper 103: it could not be revoked)
    ls.update_project(project.id, maximum_annotations=2)  # as a 2-per-task project would be
    assert main(["annotate", "annotators", "--project", project_name, "--new-link", *conn]) == 0
    new_link = re.search(r"(http\S+/user/signup/\?token=\S+)", capsys.readouterr().out).group(1)
    assert new_link != link
    kept = ls.client.projects.get(id=project.id)  # the link alone: the set-up stays (helper 108)
    assert kept.maximum_annotations == 2 and kept.show_collab_predictions is False
    with pytest.raises((RuntimeError, httpx.HTTPError)):
        label_studio.sign_up(link, "stranger@example.com")
    assert "stranger@example.com" not in str(ls.annotators().values())
    label_studio.sign_up(new_link, "ann3@example.com")
    assert "ann3@example.com" in str(ls.annotators().values())


def test_the_pre_annotation_is_the_one_the_labelling_screen_started_from(label_studio, conn, tmp_path, capsys):
    # Found by walkthrough 7: with a second model's predictions made after the push and before the labelling, the
    # pull recorded the latest (the second model's) as the pre-annotation, though the labelling screen showed the
    # project's model version (the pushed rule's) and the annotation started from it.
    store = pattern_store(tmp_path / "maps", KINDS[:3], t=16)
    name = "pre-annotation shown"
    assert main(["annotate", "push", str(tmp_path / "maps"), "--project", name, *conn]) == 0
    ls = connect(label_studio.url, label_studio.token)
    project = ls.find_project(name)
    tasks = list(ls.client.tasks.list(project=project.id, fields="all"))
    pushed = {t.data["map_id"]: t.data["pre_label"] for t in tasks}
    for t in tasks:  # another model's, each a label the rule did not give
        label = next(k for k in KINDS if k != t.data["pre_label"])
        ls.client.predictions.create(task=t.id, result=choice(label), score=0.9, model_version="other-v2")
    time.sleep(1)  # the labels come later than both predictions
    served = label_stream(label_studio.url, project.id, label_studio.token, lambda d: truth(d["map_id"]))
    assert [[p["model_version"] for p in t["predictions"]] for t in served] == [["rule-v1"]] * 3
    out = tmp_path / "annotations"
    assert main(["annotate", "pull", "--project", name, "--maps", str(tmp_path / "maps"), "--out", str(out),
                 *conn]) == 0
    tables = read_tables(out)
    assert {a["ls_parent_prediction_id"] for a in tables.annotations.values()} != {""}
    for map_id in store.ids:
        row = tables.labels[map_id]
        assert (row["pre_label"], row["pre_model"], row["pre_source"]) == (pushed[map_id], "rule-v1", "push")
        assert {p["model_version"] for p in tables.predictions.values() if p["map_id"] == map_id} == {
            "rule-v1", "other-v2"}  # both are kept in predictions.csv


def test_order_uncertain_pushes_least_sure_first(label_studio, tmp_path):
    store = pattern_store(tmp_path / "maps", KINDS, t=16)
    client = connect(label_studio.url, label_studio.token)
    project = client.ensure_project("uncertain first", label_config())
    assert push(client, project, store, RulePredictor(), order="uncertain", limit=3)["pushed"] == 3
    pushed = {t.data["map_id"]: max(t.data["pre_scores"].values())
              for t in client.client.tasks.list(project=project.id, fields="all")}
    probs = RulePredictor().predict([store.get(i) for i in store.ids], [m["seps"] for m in store.meta]).max(1)
    three_least = sorted(zip(probs, store.ids))[:3]
    assert set(pushed) == {i for _, i in three_least}


def test_failures_are_one_line(label_studio, conn, tmp_path, capsys):
    pattern_store(tmp_path / "maps", ["diagonal"])
    down = ["--url", "http://127.0.0.1:9", "--api-key", label_studio.token]
    assert main(["annotate", "push", str(tmp_path / "maps"), "--project", "p", *down]) == 2
    err = capsys.readouterr().err
    assert "cannot reach Label Studio" in err and "Traceback" not in err and err.count("\n") == 1
    bad_key = ["--url", label_studio.url, "--api-key", "0" * 40]
    assert main(["annotate", "push", str(tmp_path / "maps"), "--project", "p", *bad_key]) == 2
    assert "refused the API key" in capsys.readouterr().err
    assert main(["annotate", "pull", "--project", "no such project", "--out", str(tmp_path / "a"), *conn]) == 2
    assert "no Label Studio project titled" in capsys.readouterr().err
    assert main(["annotate", "pull", "--project", "987654", "--out", str(tmp_path / "a"), *conn]) == 2
    err = capsys.readouterr().err
    assert "no Label Studio project with id 987654" in err and "pass an existing project's id or title" in err
    assert main(["annotate", "annotators", "--project", "987654", *conn]) == 2
    err = capsys.readouterr().err
    assert "no Label Studio project with id 987654" in err and "create" not in err
    assert main(["annotate", "annotators", "--project", "no such project", *conn]) == 2
    assert "no Label Studio project titled" in capsys.readouterr().err
    # An empty project: nothing to pull, and the existing annotations/ stay as they were.
    client = connect(label_studio.url, label_studio.token)
    client.ensure_project("empty", label_config())
    (tmp_path / "a").mkdir()
    (tmp_path / "a" / "labels.csv").write_text("map_id,label\n")  # a set that labels nothing yet
    assert main(["annotate", "pull", "--project", "empty", "--out", str(tmp_path / "a"), *conn]) == 2
    assert "no labelled maps" in capsys.readouterr().err
    assert (tmp_path / "a" / "labels.csv").read_text() == "map_id,label\n"
    (tmp_path / "a" / "labels.csv").write_text("keep me\n")  # a damaged one is refused by name, and kept as it is
    assert main(["annotate", "pull", "--project", "empty", "--out", str(tmp_path / "a"), *conn]) == 2
    assert "labels.csv has no column 'map_id'" in capsys.readouterr().err
    assert (tmp_path / "a" / "labels.csv").read_text() == "keep me\n"


def test_push_says_which_maps_are_labelled_and_leaves_them_out(label_studio, conn, tmp_path, capsys):
    store = pattern_store(tmp_path / "maps", KINDS[:3], t=16)
    labelled = tmp_path / "set"
    labelled.mkdir()
    (labelled / "labels.csv").write_text(f"map_id,label\n{store.ids[0]},vertical\n")
    push = ["annotate", "push", str(tmp_path / "maps"), "--labelled-set", str(labelled), *conn]
    assert main([*push, "--project", "labelled before"]) == 0
    said = capsys.readouterr().out
    assert "pushed 3 map(s)" in said and "annotation guide 1.1" in said
    assert f"note: 1 of the pushed maps is already labelled in {labelled} (e.g. {store.ids[0]})" in said
    assert "--skip-labelled" in said
    assert main([*push, "--project", "new maps only", "--skip-labelled"]) == 0
    said = capsys.readouterr().out
    assert "pushed 2 map(s)" in said and f"left out 1 map(s) already labelled in {labelled}" in said
    ls = connect(label_studio.url, label_studio.token)
    data = [t.data for t in ls.client.tasks.list(project=ls.find_project("new maps only").id, fields="all")]
    assert sorted(d["map_id"] for d in data) == store.ids[1:]
    assert all(d["guide"] == "1.1" and d["ref"].startswith("map ") and not {"model", "task", "layer", "head"} & set(d)
               for d in data)


def test_annotations_copied_from_predictions_count_only_once_a_person_submits_them(label_studio, conn, tmp_path,
                                                                                  capsys):
    # Label Studio's Data Manager action "Create Annotations From Predictions" copies every task's prediction into
    # an annotation of whoever clicked; the pull once took those as that member's votes on maps nobody looked at
    import httpx

    store = pattern_store(tmp_path / "maps", KINDS[:3], t=16)
    name = "copied predictions"
    assert main(["annotate", "push", str(tmp_path / "maps"), "--project", name, *conn]) == 0
    ls = connect(label_studio.url, label_studio.token)
    project = ls.find_project(name)
    by_map = {t.data["map_id"]: t for t in ls.client.tasks.list(project=project.id, fields="all")}
    looked = store.ids[0]
    ls.client.annotations.create(id=by_map[looked].id, result=choice(truth(looked)), lead_time=3.0)
    with httpx.Client(base_url=label_studio.url, headers={"Authorization": f"Token {label_studio.token}"},
                      timeout=60) as c:
        c.post("/api/dm/actions", params={"id": "predictions_to_annotations", "project": project.id},
               json={"selectedItems": {"all": True, "excluded": []}}).raise_for_status()
        copies = [a for t in ls.client.tasks.list(project=project.id, fields="all") for a in t.annotations
                  if a["parent_prediction"] is not None]
        assert len(copies) == 3  # one per task, the labelled one's too
        out = tmp_path / "annotations"
        pull = ["annotate", "pull", "--project", name, "--maps", str(tmp_path / "maps"), "--out", str(out), *conn]
        assert main(pull) == 0
        said = capsys.readouterr().out
        assert "warning: 3 annotation(s) were copied from predictions by Label Studio" in said
        assert "1 labelled map(s)" in said and "2 unlabelled task(s)" in said
        assert [(r["map_id"], r["label"]) for r in read_tables(out).annotations.values()] == [(looked, truth(looked))]
        # A member opens one copy and submits it (the labelling screen's Update): now it is their vote.
        mine = next(a for a in copies if a["task"] == by_map[store.ids[1]].id)
        c.patch(f"/api/annotations/{mine['id']}/", json={"result": mine["result"]}).raise_for_status()
    assert main(pull) == 0
    said = capsys.readouterr().out
    assert "warning: 2 annotation(s) were copied" in said and "2 labelled map(s)" in said
    assert read_tables(out).labels[store.ids[1]]["annotator"] == label_studio.email


def test_a_pull_that_fails_in_its_download_leaves_no_snapshot_export(label_studio):
    # helper 103: a failed pull left its snapshot export (a full copy of the project) on the server
    import httpx

    ls = connect(label_studio.url, label_studio.token)
    project = ls.ensure_project("snapshot left", label_config())
    exports = ls.client.projects.exports

    def broken(*a, **k):
        raise httpx.ReadError("connection reset")

    exports.download = broken
    with pytest.raises(AnnotateError, match="lost the connection"):
        ls.export(project)
    assert [e.id for e in exports.list(project.id)] == []
