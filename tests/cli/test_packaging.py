"""A wheel (not the editable install the tests run from) carries every subpackage and the shipped classifier, and its
command classifies, runs a census and serves."""

import json
import subprocess
import zipfile

import httpx
import numpy as np
from labelstudio_server import free_port
from live import wait_healthy
from repo import REPO
from synthetic import pattern_map
from wheelvenv import build_wheel, wheel_names, wheel_venv


def test_wheel_installs_into_a_fresh_venv_and_classifies_censuses_and_serves(tmp_path, tiny_bert, glue_dir):
    wheel = build_wheel(tmp_path)
    names = wheel_names(wheel)
    assert "patterncnn/shipped/patterncnn.onnx" in names and "patterncnn/training/templates/model_card.md" in names
    assert "patterncnn/py.typed" in names and "patterncnn/report/assets/report.js" in names
    guide = zipfile.ZipFile(wheel).read("patterncnn/shipped/ANNOTATION_GUIDE.md")  # the guide itself, not a link
    assert guide == (REPO / "annotations" / "ANNOTATION_GUIDE.md").read_bytes()
    packages = {str(d.relative_to(REPO)) for d in (REPO / "patterncnn").rglob("__init__.py")}
    assert {f"{d}" for d in packages} <= set(names)  # every subpackage is in the wheel

    # A fresh venv that borrows the heavy dependencies (torch, ...) from the test venv, not patterncnn itself.
    py = wheel_venv(tmp_path, wheel)
    venv = py.parent.parent
    work = tmp_path / "work"  # away from the repository: no models/ folder to fall back on
    work.mkdir()
    np.savez(work / "m.npz", d=pattern_map("diagonal", 12))
    where = subprocess.run([py, "-c", "import patterncnn.classifier.onnx as i; print(i.__file__); print(i.default_classifier())"],
                           cwd=work, check=True, capture_output=True, text=True).stdout.split()
    assert all(p.startswith(str(venv)) for p in where), where
    version = subprocess.run([py, "-c", "from patterncnn.labelling.push import guide_version; print(guide_version())"],
                             cwd=work, check=True, capture_output=True, text=True).stdout.strip()
    assert version == "1.1"  # `annotate push` records the guide's version from the installed copy
    run = subprocess.run([venv / "bin" / "patterncnn", "classify", "m.npz", "--out", "p.jsonl"], cwd=work,
                         capture_output=True, text=True, env={"HF_HUB_OFFLINE": "1", "PATH": "/usr/bin:/bin"})
    assert run.returncode == 0, run.stderr
    rec = json.loads((work / "p.jsonl").read_text())
    assert rec["id"] == "d" and abs(sum(rec["probs"].values()) - 1) < 1e-3

    env = {"HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1", "PATH": "/usr/bin:/bin"}
    census = subprocess.run([venv / "bin" / "patterncnn", "census", "--task", "rte", "--limit", "4", "--model",
                             str(tiny_bert), "--glue-dir", str(glue_dir), "--out", "census"], cwd=work,
                            capture_output=True, text=True, env=env)
    assert census.returncode == 0, census.stderr
    result = json.loads((work / "census" / "census.json").read_text())
    assert result["tasks"]["rte"]["examples"] == 4 and result["classifier"]["version"].startswith("patterncnn-")

    port = free_port()
    server = subprocess.Popen([venv / "bin" / "patterncnn", "serve", "--no-encoder", "--port", str(port)], cwd=work,
                              env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        wait_healthy(f"http://127.0.0.1:{port}", server, seconds=120)
        model = httpx.get(f"http://127.0.0.1:{port}/v1/model", timeout=10).json()
        assert model["classifier"]["model_version"] == result["classifier"]["version"]
    finally:
        server.terminate()
        server.wait(30)
