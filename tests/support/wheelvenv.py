"""A wheel of this clone installed into a fresh virtualenv: what a user's `pip install patterncnn` gives.

    py = wheel_venv(tmp_path)          # the venv's python; patterncnn there comes from the wheel, nothing else

The venv borrows the heavy dependencies (torch, ...) from the test interpreter's site directories through a
``.pth`` file instead of downloading them, but not patterncnn itself: its editable install is a ``.pth`` hook in
those directories, and ``.pth`` files are only run in a venv's own site directory.
"""

import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

from repo import REPO

IGNORED = (".venv", ".git", "runs", "build", "*.egg-info", "tests", "benchmarks", "__pycache__")


def build_wheel(tmp_path: Path) -> Path:
    """A wheel built from a copy of the clone (the clone stays clean)."""
    src = tmp_path / "src"
    skip = shutil.ignore_patterns(*IGNORED)

    def ignore(folder, names):  # of annotations/, only the guide (models/ANNOTATION_GUIDE.md links to it)
        if Path(folder) == REPO / "annotations":
            return {n for n in names if n != "ANNOTATION_GUIDE.md"}
        return skip(folder, names)

    shutil.copytree(REPO, src, ignore=ignore)
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q", "-w",
                    str(tmp_path / "dist"), str(src)], check=True, capture_output=True)
    return next((tmp_path / "dist").glob("patterncnn-*.whl"))


def wheel_names(wheel: Path) -> list[str]:
    return zipfile.ZipFile(wheel).namelist()


def wheel_venv(tmp_path: Path, wheel: Path | None = None) -> Path:
    """A fresh venv at ``tmp_path/venv`` with the wheel installed (built here when not given); returns its python."""
    wheel = wheel or build_wheel(tmp_path)
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    py = venv / "bin" / "python"
    site = subprocess.run([py, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"], check=True,
                          capture_output=True, text=True).stdout.strip()
    borrowed = [p for p in sys.path if p.endswith("site-packages") and os.path.isdir(p)]  # this interpreter's site dirs
    (Path(site) / "deps.pth").write_text("\n".join(borrowed) + "\n")
    subprocess.run([sys.executable, "-m", "pip", "--python", str(py), "install", "--no-deps", "-q", str(wheel)],
                   check=True, capture_output=True)
    return py
