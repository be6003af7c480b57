"""A wheel (not the editable install the tests run from) carries every subpackage and the shipped classifier, and its
command classifies, runs a census and serves."""

import json
import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import httpx
import numpy as np
from labelstudio_server import free_port
from repo import REPO
from synthetic import pattern_map


def test_wheel_installs_into_a_fresh_venv_and_classifies_censuses_and_serves(tmp_path, tiny_bert, glue_dir):
    src = tmp_path / "src"  # build from a copy: the clone stays clean
    skip = shutil.ignore_patterns(".venv", ".git", "runs", "build", "*.egg-info", "tests", "benchmarks", "__pycache__")

    def ignore(folder, names):  # of annotations/, only the guide (models/ANNOTATION_GUIDE.md links to it)
        if Path(folder) == REPO / "annotations":
            return {n for n in names if n != "ANNOTATION_GUIDE.md"}
        return skip(folder, names)

    shutil.copytree(REPO, src, ignore=ignore)
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q", "-w",
                    str(tmp_path / "dist"), str(src)], check=True, capture_output=True)
    wheel = next((tmp_path / "dist").glob("patterncnn-*.whl"))
    names = zipfile.ZipFile(wheel).namelist()
    assert "patterncnn/shipped/patterncnn.onnx" in names and "patterncnn/training/templates/model_card.md" in names
    guide = zipfile.ZipFile(wheel).read("patterncnn/shipped/ANNOTATION_GUIDE.md")  # the guide itself, not a link
    assert guide == (REPO / "annotations" / "ANNOTATION_GUIDE.md").read_bytes()
    packages = {str(d.relative_to(REPO)) for d in (REPO / "patterncnn").rglob("__init__.py")}
    assert {f"{d}" for d in packages} <= set(names)  # every subpackage is in the wheel

    # A fresh venv that borrows the heavy dependencies (torch, ...) from the test venv, not patterncnn itself.
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    py = venv / "bin" / "python"
    site = subprocess.run([py, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"], check=True,
                          capture_output=True, text=True).stdout.strip()
    borrowed = [p for p in sys.path if p.endswith("site-packages") and os.path.isdir(p)]  # this interpreter's site dirs
    (tmp_path / "venv" / site.split(str(venv) + "/", 1)[1] / "deps.pth").write_text("\n".join(borrowed) + "\n")
    subprocess.run([sys.executable, "-m", "pip", "--python", str(py), "install", "--no-deps", "-q", str(wheel)],
                   check=True, capture_output=True)

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
        for _ in range(600):
            try:
                if httpx.get(f"http://127.0.0.1:{port}/health", timeout=2).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            assert server.poll() is None, server.stdout.read()
            subprocess.run(["sleep", "0.1"])
        model = httpx.get(f"http://127.0.0.1:{port}/v1/model", timeout=10).json()
        assert model["classifier"]["model_version"] == result["classifier"]["version"]
    finally:
        server.terminate()
        server.wait(30)
