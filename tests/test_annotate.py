"""Label Studio config and conversions, without a server."""

import base64
import gzip
import io
import json
import xml.etree.ElementTree as ET

import numpy as np
import pytest
from PIL import Image

from patterncnn.annotate import RulePredictor, label_config, make_task
from patterncnn.labelled import write_labelled_set
from patterncnn.labelstudio import AnnotateError
from patterncnn.pull import label_rows, resolve
from patterncnn.cli import main
from patterncnn.labels import LABELS
from synthetic import pattern_map, pattern_store


def ann(label, i, when, uncertain=False, cancelled=False):
    result = [] if label is None else [{"from_name": "pattern", "to_name": "map", "type": "choices",
                                        "value": {"choices": [label]}}]
    if uncertain:
        result.append({"from_name": "uncertain", "to_name": "map", "type": "choices",
                       "value": {"choices": ["uncertain"]}})
    return {"id": i, "result": result, "was_cancelled": cancelled, "updated_at": when, "completed_by": 1,
            "lead_time": 2.5}


def test_label_config_has_the_five_labels_in_order():
    root = ET.fromstring(label_config())
    pattern = root.find("./Choices[@name='pattern']")
    assert [c.get("value") for c in pattern] == list(LABELS)
    assert pattern.get("choice") == "single-radio" and pattern.get("toName") == "map"
    assert [c.get("value") for c in root.find("./Choices[@name='uncertain']")] == ["uncertain"]
    assert root.find("./Image").get("value") == "$image"


def test_make_task_embeds_png_and_prediction():
    arr = pattern_map("diagonal", 24)
    probs = RulePredictor().predict([arr], [None])[0]
    task = make_task({"id": "m1", "task": "sst2", "layer": 2, "head": 5, "tokens": None}, arr, probs, "rule-v1")
    head, b64 = task["data"]["image"].split(",", 1)
    assert head == "data:image/png;base64"
    assert Image.open(io.BytesIO(base64.b64decode(b64))).format == "PNG"
    assert task["data"]["map_id"] == "m1" and task["data"]["layer"] == 2
    assert task["data"]["pre_label"] == "diagonal" == task["predictions"][0]["result"][0]["value"]["choices"][0]
    assert set(task["data"]["pre_scores"]) == set(LABELS)


def test_rule_pre_annotates_clear_synthetic_patterns():
    sep = 11
    for kind in LABELS:
        probs = RulePredictor().predict([pattern_map(kind, 24, sep)], [[sep, 23]])[0]
        assert LABELS[int(np.argmax(probs))] == kind, (kind, probs)
        assert probs.sum() == pytest.approx(1.0, abs=1e-5)


def test_resolve_majority_then_most_recent():
    r = resolve([ann("vertical", 1, "2026-01-01"), ann("block", 2, "2026-01-03"), ann("vertical", 3, "2026-01-02")])
    assert r.label == "vertical" and r.disagreement and r.labels_seen == {"vertical": 2, "block": 1}
    tie = resolve([ann("vertical", 1, "2026-01-01"), ann("block", 2, "2026-01-03", uncertain=True)])
    assert tie.label == "block" and tie.uncertain
    assert resolve([ann(None, 1, "x", cancelled=True)]) is None
    assert resolve([ann("diagonal", 1, "2026-01-05", cancelled=True), ann("block", 2, "2026-01-01")]).label == "block"
    with pytest.raises(AnnotateError, match="not one of"):
        resolve([ann("zigzag", 1, "x")])


def export_for(store, labels):
    tasks = []
    for i, (map_id, anns) in enumerate(labels.items()):
        tasks.append({"id": i + 1, "data": {"map_id": map_id, "pre_label": "diagonal",
                                            "pre_scores": {n: 0.2 for n in LABELS}, "pre_model": "rule-v1"},
                      "annotations": anns})
    return tasks


def test_label_rows_and_write_labelled_set(tmp_path):
    store = pattern_store(tmp_path / "maps", ["diagonal", "vertical", "block"])
    ids = store.ids
    export = export_for(store, {ids[0]: [ann("diagonal", 1, "a")], ids[1]: [ann(None, 2, "b", cancelled=True)],
                                ids[2]: [ann("block", 3, "a"), ann("heterogeneous", 4, "b")]})
    rows, report = label_rows(export, store, {1: "me@x"})
    assert [r["label"] for r in rows] == ["diagonal", "heterogeneous"]
    assert report["cancelled"] == 1 and report["disagreements"][0]["map_id"] == ids[2]
    assert rows[0]["annotator"] == "me@x" and rows[0]["pre_label"] == "diagonal" and rows[0]["layer"] == 0
    raw = json.dumps(export).encode()
    write_labelled_set(tmp_path / "ann", raw, rows, report, store)
    assert gzip.decompress((tmp_path / "ann" / "labelstudio-export.json.gz").read_bytes()) == raw
    csv_lines = (tmp_path / "ann" / "labels.csv").read_text().splitlines()
    assert csv_lines[0].startswith("map_id,label,uncertain,annotator,pre_label,pre_score") and len(csv_lines) == 3
    from patterncnn.maps import MapStore

    labelled = MapStore(tmp_path / "ann" / "maps")
    assert sorted(labelled.ids) == sorted([ids[0], ids[2]])
    np.testing.assert_array_equal(labelled.get(ids[0]), store.get(ids[0]))


def test_failed_pull_leaves_annotations_untouched(tmp_path):
    store = pattern_store(tmp_path / "maps", ["diagonal"])
    out = tmp_path / "ann"
    out.mkdir()
    (out / "labels.csv").write_text("precious\n")
    rows = [{"map_id": "not-in-store", "label": "diagonal"}]
    with pytest.raises(AnnotateError, match="not in the given map store"):
        write_labelled_set(out, b"[]", rows, {}, store)
    assert (out / "labels.csv").read_text() == "precious\n"
    assert sorted(p.name for p in out.iterdir()) == ["labels.csv"]


def test_pull_from_file(tmp_path, capsys):
    store = pattern_store(tmp_path / "maps", ["diagonal", "vertical"])
    export = export_for(store, {store.ids[0]: [ann("diagonal", 1, "a")], store.ids[1]: [ann("vertical", 2, "a")]})
    (tmp_path / "export.json").write_text(json.dumps(export))
    assert main(["annotate", "pull", "--from-file", str(tmp_path / "export.json"), "--maps", str(tmp_path / "maps"),
                 "--out", str(tmp_path / "ann")]) == 0
    assert "2 labelled map(s)" in capsys.readouterr().out
    (tmp_path / "bad.json").write_text("id,label\n")
    assert main(["annotate", "pull", "--from-file", str(tmp_path / "bad.json"), "--out", str(tmp_path / "b")]) == 2
    assert "not JSON" in capsys.readouterr().err
