"""The documentation's *Annotating in Label Studio* section (docs/pages/commands/annotate.md), run as written
from a fresh copy of the repository.

The suite's Label Studio is started by that section's start block (tests/support/labelstudio_server.py);
this test runs the section's other bash blocks in order, in a copy of the repository's files, in a
shell that keeps their exports from block to block, with the server's HOME (where the start block
put the token) and ``patterncnn`` running this copy's code. The one change to the blocks: port 8080
becomes the suite server's port. The install block runs too, and finds Label Studio where it
installs it (``~/.cache/patterncnn/label-studio-venv`` links to the one tests/setup-label-studio.sh
installed). Where the section says to label in the UI, three annotators (the admin and two who sign
up through the printed link) label through the label stream. Then the section's pull runs a second
time (nothing changes but the pull log) and its quick training run trains on the old and new labels.
"""

import csv
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

from labelstudio_server import label_stream, on_port, readme_blocks
from repo import REPO

from patterncnn.classifier.onnx import OnnxClassifier
from patterncnn.labelling.labelstudio import connect
from patterncnn.labelling.sets import load_labelled, read_tables


def fresh_copy(dest: Path) -> Path:
    """The repository's files (as in a clone, with this worktree's changes) copied to ``dest``."""
    files = subprocess.run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"], cwd=REPO,
                           capture_output=True, check=True).stdout.decode().split("\0")
    for name in filter(None, files):
        if (REPO / name).is_file():
            (dest / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(REPO / name, dest / name)
    return dest


class Terminal:
    """A shell session: each block runs in bash, and the variables it exports carry over to the next."""

    def __init__(self, cwd: Path, env: dict, state: Path):
        self.cwd, self.env, self.state = cwd, env, state

    def run(self, block: str) -> str:
        script = f"[ -f {self.state} ] && . {self.state}\nset -e\n{block}\nexport -p > {self.state}\n"
        done = subprocess.run(["bash", "-c", script], cwd=self.cwd, env=self.env, capture_output=True, text=True,
                              timeout=1800)
        assert done.returncode == 0, (f"docs block failed:\n{block}\n--- stdout\n{done.stdout}\n"
                                      f"--- stderr\n{done.stderr}")
        return done.stdout


def files(root: Path) -> dict:
    """Every file of a folder but the pull log, with its bytes and time stamp."""
    return {p: (p.read_bytes(), p.stat().st_mtime_ns) for p in sorted(root.rglob("*"))
            if p.is_file() and p.name != "pulls.jsonl"}


def test_readme_label_studio_section_end_to_end(label_studio, glue_dir, tmp_path):
    blocks = [on_port(b, label_studio.port) for b in readme_blocks()]
    assert len(blocks) == 6 and "setup-label-studio.sh" in blocks[0] and "label-studio start" in blocks[1]
    assert "label-studio-venv/bin/label-studio start" in blocks[1] and "LABEL_STUDIO_BASE_DATA_DIR=" in blocks[1]
    assert f"Label Studio API token: {label_studio.token}" in label_studio.log.read_text()  # the start block printed it
    repo = fresh_copy(tmp_path / "repo")
    (tmp_path / "shared").mkdir()
    (tmp_path / "shared" / "glue").symlink_to(glue_dir)  # the page's ../shared/glue (its excerpts)
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "patterncnn").write_text(f"#!/bin/sh\nexec {sys.executable} -c 'import sys; from patterncnn.cli "
                                        f"import main; sys.exit(main())' \"$@\"\n")
    (bin_dir / "patterncnn").chmod(0o755)
    env = {**label_studio.env(), "PATH": f"{bin_dir}:{os.environ['PATH']}", "PYTHONPATH": str(repo)}
    terminal = Terminal(repo, env, tmp_path / "exports.sh")
    shipped = {r["map_id"]: r for r in csv.DictReader(open(repo / "annotations" / "labels.csv"))}
    shipped_annotations = set(read_tables(repo / "annotations").annotations)

    assert "Label Studio already installed in" in terminal.run(blocks[0])  # the install step, in the one place
    pushed = terminal.run(blocks[2])  # sample and push two rounds
    assert re.findall(r"pushed (\d+) map\(s\)", pushed) == ["20", "10"]
    setup = terminal.run(blocks[3])  # three annotators per task
    link = re.search(r"(http\S+/user/signup/\?token=\S+)", setup).group(1)
    tokens = [label_studio.token] + [label_studio.sign_up(link, f"reader{i}@example.com") for i in (1, 2)]
    project = connect(label_studio.url, label_studio.token).find_project("attention patterns")
    for k, token in enumerate(tokens):  # the third annotator calls every rule-"vertical" map heterogeneous
        served = label_stream(label_studio.url, project.id, token,
                              lambda d, k=k: "heterogeneous" if k == 2 and d["pre_label"] == "vertical"
                              else d["pre_label"])
        assert len(served) == 30

    pulled = terminal.run(blocks[4])  # pull, agreement
    assert "Fleiss' kappa" in pulled and "reader1@example.com vs reader2@example.com: 30 maps" in pulled
    out = repo / "annotations"
    labels = {r["map_id"]: r for r in csv.DictReader(open(out / "labels.csv"))}
    tables = read_tables(out)
    new = set(labels) - set(shipped)
    assert len(new) == 30 and len(labels) == len(shipped) + 30
    relabelled_in_ls = {tables.annotations[k]["map_id"] for k in set(tables.annotations) - shipped_annotations}
    assert new <= relabelled_in_ls
    # recomputed at every pull: a Dawid-Skene posterior is refitted on the whole set (it moves with the 30 new maps'
    # labels, which follow the shipped classifier's pre-annotations: up to 0.075 with 9f40f2d2's; the label itself
    # never), and `uncertain` is more than half of a map's annotators' flag (the shipped file has one annotator's)
    same = [k for k in next(iter(shipped.values())) if k not in ("resolution_p", "uncertain")]
    for m, row in shipped.items():  # the old labels, together with the new ones
        if m not in relabelled_in_ls:
            assert abs(float(labels[m]["resolution_p"]) - float(row["resolution_p"])) < 0.1
            assert {k: labels[m][k] for k in same} == {k: row[k] for k in same}
            assert (labels[m]["server"], labels[m]["guide"], labels[m]["origins"]) == ("", "1.0", "1")
    assert shipped_annotations <= set(tables.annotations)
    for m in new:
        assert labels[m]["n_annotators"] == "3" and labels[m]["pre_source"] == "push"
        assert labels[m]["label"] == labels[m]["pre_label"]  # two of three gave the pre-annotation's label
        assert (labels[m]["server"], labels[m]["guide"], labels[m]["tie"]) == (label_studio.url, "1.1", "False")
    cnn = OnnxClassifier(repo / "models" / "patterncnn.onnx").model_version  # round 2's pre-annotations
    assert {labels[m]["pre_model"] for m in new} == {"rule-v1", cnn}
    assert len(load_labelled(out).ids) == len(shipped) + 30  # `patterncnn train --annotations annotations` reads both

    before = files(out)  # the same pull again, a little later: nothing changes but the pull log
    again = terminal.run(blocks[4])
    assert "nothing changed" in again and files(out) == before

    trained = terminal.run(blocks[5])  # the quick training run, with the E5 set beside the pulled one
    e5 = len(load_labelled(repo / "annotations" / "round8-e5-uniform").ids)
    assert f"{len(shipped) + 30 + e5} maps, 3-fold grouped CV" in trained
    metrics = json.loads((repo / "runs" / "quick-model" / "metrics.json").read_text())
    assert metrics["train_config"]["folds"] == 3 and metrics["train_config"]["max_epochs"] == 5
    assert (repo / "runs" / "quick-model" / "patterncnn.onnx").is_file()
    assert not (repo / "runs" / "quick-model" / ".work").exists()
