"""A wheel (not the editable install the tests run from) carries the shipped classifier and classifies a map."""

import json
import shutil
import subprocess
import sys
import sysconfig
import zipfile

import numpy as np
from conftest import REPO
from synthetic import pattern_map


def test_wheel_installs_into_a_fresh_venv_and_classifies(tmp_path):
    src = tmp_path / "src"  # build from a copy: the clone stays clean
    shutil.copytree(REPO, src, ignore=shutil.ignore_patterns(".venv", ".git", "runs", "build", "*.egg-info",
                                                              "annotations", "tests", "benchmarks", "__pycache__"))
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q", "-w",
                    str(tmp_path / "dist"), str(src)], check=True, capture_output=True)
    wheel = next((tmp_path / "dist").glob("patterncnn-*.whl"))
    names = zipfile.ZipFile(wheel).namelist()
    assert "patterncnn/shipped/patterncnn.onnx" in names and "patterncnn/templates/model_card.md" in names

    # A fresh venv that borrows the heavy dependencies (torch, ...) from the test venv, not patterncnn itself.
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    py = venv / "bin" / "python"
    site = subprocess.run([py, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"], check=True,
                          capture_output=True, text=True).stdout.strip()
    (tmp_path / "venv" / site.split(str(venv) + "/", 1)[1] / "deps.pth").write_text(
        sysconfig.get_paths()["purelib"] + "\n")
    subprocess.run([sys.executable, "-m", "pip", "--python", str(py), "install", "--no-deps", "-q", str(wheel)],
                   check=True, capture_output=True)

    work = tmp_path / "work"  # away from the repository: no models/ folder to fall back on
    work.mkdir()
    np.savez(work / "m.npz", d=pattern_map("diagonal", 12))
    where = subprocess.run([py, "-c", "import patterncnn.classifier.onnx as i; print(i.__file__); print(i.default_classifier())"],
                           cwd=work, check=True, capture_output=True, text=True).stdout.split()
    assert all(p.startswith(str(venv)) for p in where), where
    run = subprocess.run([venv / "bin" / "patterncnn", "classify", "m.npz", "--out", "p.jsonl"], cwd=work,
                         capture_output=True, text=True, env={"HF_HUB_OFFLINE": "1", "PATH": "/usr/bin:/bin"})
    assert run.returncode == 0, run.stderr
    rec = json.loads((work / "p.jsonl").read_text())
    assert rec["id"] == "d" and abs(sum(rec["probs"].values()) - 1) < 1e-3
