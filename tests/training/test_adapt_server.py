"""`patterncnn adapt start` and `adapt finish` against a real Label Studio 1.23 server, with the packaged MiniLM on
GLUE excerpts: maps drawn uniformly, pushed without predictions, labelled through the API, pulled and validated."""

import json

from repo import REPO

from patterncnn.cli import main
from patterncnn.core.labels import LABELS
from patterncnn.core.maps import MapStore, tag_of
from patterncnn.labelling.labelstudio import connect


def test_adapt_start_pushes_blind_maps_and_finish_pulls_them_into_a_classifier(label_studio, glue_dir, tmp_path,
                                                                               capsys):
    conn = ["--url", label_studio.url, "--api-key", label_studio.token]
    out = tmp_path / "adapt-minilm"
    assert main(["adapt", "start", "--model", "minilm", "--project", "adapt minilm", "--out", str(out), "--maps", "5",
                 "--task", "rte", "--task", "mrpc", "--glue-dir", str(glue_dir), *conn]) == 0
    said = capsys.readouterr().out
    store = MapStore(out / "maps")
    assert len(store) == 6  # 5 rounded up to a multiple of the two tasks
    assert {m["task"] for m in store.meta} == {"rte", "mrpc"} and {m["sampling"] for m in store.meta} == {"uniform"}
    assert "note: with fewer than 100 labelled maps" in said and "sampled 6 maps of minilm-" in said
    project = json.loads((out / "project.json").read_text())
    assert project["url"] == label_studio.url and project["title"] == "adapt minilm"
    assert f"then: patterncnn adapt finish --out {out} (it pulls project {project['project']} of " in said
    assert not (out / "maps" / "png").exists()  # PNG titles name the task, layer and head: none beside the store

    client = connect(label_studio.url, label_studio.token)
    project = client.find_project("adapt minilm")
    tasks = list(client.client.tasks.list(project=project.id, fields="all"))
    assert sorted(t.data["map_id"] for t in tasks) == sorted(store.ids)
    assert all(not t.predictions for t in tasks)  # blind: no classifier's guess, no rule's
    assert all(not (set(t.data) & {"task", "layer", "head", "pre_label"}) for t in tasks)
    for k, t in enumerate(tasks):  # the flow's fixture labels, not a judgement of these maps
        client.client.annotations.create(id=t.id, lead_time=3.0, result=[
            {"from_name": "pattern", "to_name": "map", "type": "choices", "value": {"choices": [LABELS[k % 5]]}}])

    assert main(["adapt", "finish", "--out", str(out), "--epochs", "0", "--folds", "2",  # the project it recorded
                 "--checkpoint", str(REPO / "models" / "patterncnn.pt"), *conn]) == 0
    said = capsys.readouterr().out
    assert "pulled 6 labelled map(s)" in said and "not labelled yet" not in said
    done = json.loads((out / "classifier" / "adapt.json").read_text())
    assert f"wrote {out / 'classifier'} ({done['classifier_version']}: the weights are the classifier's, the version " \
           f"new" in said
    assert done["new"]["maps"] == 6 and done["encoders"] == sorted({tag_of(i) for i in store.ids})
    assert done["adapted_from"]["checkpoint"] == "patterncnn.pt" and len(done["adapted_from"]["sha256"]) == 64
    assert (out / "classifier" / "patterncnn.onnx").is_file() and (out / "labels" / "labels.csv").is_file()

    # the project deleted on the server: `adapt finish` says the record names a project that is gone, and `adapt
    # start` on the same OUT pushes the same maps to a new project (none sampled again) and records it
    client.client.projects.delete(id=project.id)
    assert main(["adapt", "finish", "--out", str(out), "--epochs", "0", "--overwrite", *conn]) == 2
    assert "which the server no longer has" in capsys.readouterr().err
    assert main(["adapt", "start", "--model", "minilm", "--project", "adapt minilm again", "--out", str(out),
                 "--annotators", "2", *conn]) == 0
    said = capsys.readouterr().out
    assert f"{out / 'maps'} already holds the 6 maps of " in said and "sampled 6" not in said and "pushed 6 maps" in said
    again = json.loads((out / "project.json").read_text())
    assert again["title"] == "adapt minilm again" and again["project"] != project.id and again["annotators"] == 2
    assert sorted(t.data["map_id"] for t in client.client.tasks.list(project=again["project"], fields="all")) == \
        sorted(store.ids)
    assert client.client.projects.get(id=again["project"]).maximum_annotations == 2
    assert len(MapStore(out / "maps")) == 6
    assert main(["adapt", "start", "--model", "mpnet", "--project", "adapt minilm again", "--out", str(out),
                 *conn]) == 2  # not the model these maps were sampled with: a new --out was forgotten
    assert "holds maps sampled with --model minilm, not as this command asks" in capsys.readouterr().err
    assert main(["adapt", "start", "--model", "minilm", "--project", "adapt minilm again", "--out", str(out),
                 *conn]) == 0
    said = capsys.readouterr().out  # the project holds them: nothing twice, and the annotators per map kept
    assert "pushed 0 maps" in said and f"(annotators per map: 2, as {out / 'project.json'} recorded" in said
    assert client.client.projects.get(id=again["project"]).maximum_annotations == 2
    assert json.loads((out / "project.json").read_text())["annotators"] == 2
