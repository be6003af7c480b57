"""The committed experiment results (research/experiments) name models by tag and data by relative path only."""

import json

import pytest
from repo import REPO  # noqa: E402

RESULTS = sorted((REPO / "research" / "experiments").glob("*/*.json"))


@pytest.mark.parametrize("path", RESULTS, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_no_absolute_paths_and_provenance(path):
    text = path.read_text(encoding="utf-8")
    assert "/work/" not in text and "/root/" not in text and "/home/" not in text
    res = json.loads(text)
    assert res["created_by"].startswith("patterncnn ") and res["experiment"] in (
        "drift", "special-tokens", "disable", "link")


@pytest.mark.parametrize("encoder", ["minilm", "mpnet"])
def test_results_are_committed(encoder):
    experiments = {p.parent.name.split(f"-{encoder}")[0] for p in RESULTS if f"-{encoder}" in p.parent.name}
    assert experiments >= {"drift", "special-tokens", "disable", "link"}
