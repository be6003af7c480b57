"""A real Label Studio connects to `patterncnn serve` as its ML backend and shows its predictions on map tasks."""

import logging
import time

import pytest
from live import live_server
from synthetic import pattern_store

from patterncnn.classifier.onnx import OnnxClassifier
from patterncnn.core.labels import LABELS
from patterncnn.labelling.labelstudio import connect
from patterncnn.labelling.push import label_config, push
from patterncnn.serve import ServeSettings, create_app


@pytest.fixture()
def backend(tiny_classifier):
    clf = OnnxClassifier(tiny_classifier[1])
    settings = ServeSettings(api_token="tok-123")
    with live_server(create_app(settings, clf), settings) as url:
        yield url, clf


def test_label_studio_shows_backend_predictions(label_studio, backend, tmp_path, caplog):
    url, clf = backend
    store = pattern_store(tmp_path / "maps", ["diagonal", "vertical", "block"], t=16)
    ls = connect(label_studio.url, label_studio.token)
    project = ls.ensure_project("ml backend", label_config())
    push(ls, project, store, predictor=None)
    # A mixed selection: a task whose map is missing gets none; the three map tasks still get theirs (a refusal of the
    # whole /predict stored none).
    ls.import_tasks(project.id, [{"image": "data:image/png;base64,", "map_id": "no map"}])
    ml = ls.client.ml.create(project=project.id, url=url, title="patterncnn", auth_method="BASIC_AUTH",
                      basic_auth_user="labelstudio", basic_auth_pass="tok-123", is_interactive=False)
    assert str(ml.state).upper().endswith("CO") or "CONNECTED" in str(ml.state).upper(), ml.state
    # The Data Manager's "Retrieve Predictions" action: Label Studio calls the backend's /predict.
    ls.client.actions.create(id="retrieve_tasks_predictions", project=project.id, selected_items={"all": True, "excluded": []})
    preds = []
    for _ in range(60):
        tasks = list(ls.client.tasks.list(project=project.id, fields="all"))
        preds = [p if isinstance(p, dict) else p.dict() for t in tasks for p in (t.predictions or [])]
        preds = [p for p in preds if p["result"]]
        if len(preds) >= 3:
            break
        time.sleep(1)
    assert len(tasks) == 4 and len(preds) == 3, preds
    for p in preds:
        assert p["model_version"] == clf.model_version
        assert p["result"][0]["value"]["choices"][0] in LABELS and p["result"][0]["from_name"] == "pattern"
    # Nothing is stored for the map-less task, so the next Retrieve Predictions asks for it again, and for it alone
    # (helper 90's review: an empty prediction under the model's version made Label Studio skip it for good).
    assert [len(t.predictions or []) for t in tasks].count(0) == 1
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="patterncnn.serve"):
        ls.client.actions.create(id="retrieve_tasks_predictions", project=project.id,
                                 selected_items={"all": True, "excluded": []})
        for _ in range(60):
            if "tasks got no prediction" in caplog.text:
                break
            time.sleep(1)
    assert "POST /predict: 1 of 1 tasks got no prediction (no usable map)" in caplog.text, caplog.text
