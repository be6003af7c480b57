"""drift(), special_tokens(), disable() and link() from Python: one small pipeline on a tiny BERT and its task head,
each result's table, figure, JSON and HTML, and link() taking the other results' objects."""

import json

import numpy as np
import pytest
from synthetic import sequence_classifier

import patterncnn


@pytest.fixture(scope="module")
def runs(tiny_bert, tiny_classifier, glue_dir, tmp_path_factory):
    root = tmp_path_factory.mktemp("experiments")
    _, _, ft = sequence_classifier(tiny_bert, root / "ft")
    common = dict(limit=12, glue_dir=glue_dir, max_length=48)
    return {
        "census": patterncnn.census(str(ft), tasks=["rte"], out=root / "census", classifier=tiny_classifier[1],
                                    **common),
        "drift": patterncnn.drift(str(tiny_bert), str(ft), tasks="rte", out=root / "drift", device="cpu", **common),
        "special": patterncnn.special_tokens(str(tiny_bert), tasks=["rte", "sst2"], out=root / "special",
                                             token_classes={"digits": r"\d+"}, **common),
        "disable": patterncnn.disable(str(ft), task="RTE", out=root / "disable", bootstrap=100, **common),
    }


def test_drift_frame_and_files(runs):
    res = runs["drift"]
    assert res.kind == "drift" and json.loads((res.out / "drift.json").read_text()) == res.data
    df = res.frame
    assert list(df.columns) == ["task", "layer", "head", "cosine", "std", "examples"] and len(df) == 3 * 4
    assert np.allclose(df["cosine"], 1.0, atol=1e-5)  # a task head on the same encoder: the maps are the encoder's


def test_special_tokens_frame_has_every_class(runs):
    res = runs["special"]
    df = res.frame
    assert {"cls", "sep", "digits", "punctuation", "other"} <= set(df.columns) and set(df["task"]) == {"rte", "sst2"}
    shares = df[["cls", "sep", "digits", "punctuation", "other"]].sum(axis=1)
    assert np.allclose(shares, 1.0, atol=1e-4)  # every key token falls in exactly one class


def test_disable_frame(runs):
    res = runs["disable"]
    df = res.frame
    assert len(df) == 3 * 4 + 3 and res.data["examples"] == 12 and res.data["device"] == "cpu"
    assert (df["ci95_low"] <= df["change"]).all() and (df["change"] <= df["ci95_high"]).all()


def test_link_takes_the_result_objects(runs, tmp_path):
    res = patterncnn.link(runs["census"], runs["disable"], task="RTE", drift=runs["drift"], out=tmp_path / "link",
                          permutations=200)
    assert res.kind == "link" and len(res.frame) == 3 * 4
    assert res.data["disable_model"] == runs["disable"].data["tag"] and res.data["drift"]
    assert runs["disable"].data["baseline"]["at_chance"]  # a tiny random task head: link says what that means
    assert any("within its 95% interval of chance" in n for n in res.data["notes"])
    assert (tmp_path / "link" / "link.png").is_file()


@pytest.mark.parametrize("name", ["drift", "special", "disable"])
def test_every_result_plots_and_shows_itself(runs, name):
    res = runs[name]
    assert res.plot().axes
    html = res._repr_html_()
    assert "data:image/png;base64," in html and res.kind in html and res.kind in repr(res)
    assert json.loads(res.to_json()) == res.data
