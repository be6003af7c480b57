"""The Label Studio round trip against a real Label Studio 1.23 server: push -> annotate via API -> pull."""

import csv

import pytest

from patterncnn.annotate import RulePredictor, label_config, push
from patterncnn.labelstudio import connect
from patterncnn.cli import main
from patterncnn.maps import MapStore
from synthetic import pattern_store

KINDS = ["vertical", "diagonal", "vertical+diagonal", "block", "heterogeneous", "diagonal", "vertical"]


def choice(label):
    return [{"from_name": "pattern", "to_name": "map", "type": "choices", "value": {"choices": [label]}}]


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
    t0 = tasks[0]
    assert t0.data["image"].startswith("data:image/png;base64,") and t0.data["pre_label"] in KINDS
    # Annotate as an annotator would, through the API: the true kind of each synthetic map ...
    truth = {m["id"]: m["id"].split("_", 2)[2] for m in store.meta}
    skipped, twice = store.ids[0], store.ids[1]
    for map_id, task in by_map.items():
        if map_id == skipped:
            client.client.annotations.create(id=task.id, result=[], was_cancelled=True)
            continue
        client.client.annotations.create(id=task.id, result=choice(truth[map_id]), lead_time=4.0)
    # ... and a second, disagreeing annotation on one task (tie: the most recent wins).
    client.client.annotations.create(id=by_map[twice].id, result=choice("heterogeneous"), lead_time=1.0)

    out = tmp_path / "annotations"
    assert main(["annotate", "pull", "--project", "round trip", "--maps", str(tmp_path / "maps"), "--out", str(out),
                 *conn]) == 0
    msg = capsys.readouterr().out
    assert "6 labelled map(s)" in msg and "1 skipped" in msg and "1 with disagreeing" in msg
    rows = {r["map_id"]: r for r in csv.DictReader(open(out / "labels.csv"))}
    assert set(rows) == set(store.ids) - {skipped}
    for map_id, row in rows.items():
        want = "heterogeneous" if map_id == twice else truth[map_id]
        assert row["label"] == want
        assert row["annotator"] == label_studio.email
        assert row["pre_model"] == "rule-v1" and row["pre_label"]
    assert rows[twice]["disagreement"] == "True" and rows[twice]["n_annotations"] == "2"
    assert sorted(MapStore(out / "maps").ids) == sorted(rows)


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
    assert "no Label Studio project with id 987654" in capsys.readouterr().err
    # An empty project: nothing to pull, and the existing annotations/ stay as they were.
    client = connect(label_studio.url, label_studio.token)
    client.ensure_project("empty", label_config())
    (tmp_path / "a").mkdir()
    (tmp_path / "a" / "labels.csv").write_text("keep me\n")
    assert main(["annotate", "pull", "--project", "empty", "--out", str(tmp_path / "a"), *conn]) == 2
    assert "no labelled maps" in capsys.readouterr().err
    assert (tmp_path / "a" / "labels.csv").read_text() == "keep me\n"
