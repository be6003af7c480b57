"""The example notebook (docs/pages/notebooks/quickstart.ipynb) runs, cell by cell, in a fresh virtualenv where
patterncnn comes from a wheel: a Hugging Face model on two sentence pairs, classify_attentions, a 50-example census,
its report. Executed by nbclient on an ipykernel of that venv, offline, on the GLUE excerpts."""

import json
import subprocess

import nbformat
import pytest
from repo import FIXTURES, REPO
from wheelvenv import wheel_venv

NOTEBOOK = REPO / "docs" / "pages" / "notebooks" / "quickstart.ipynb"

RUN = """
import sys, nbformat, nbclient
nb = nbformat.read(sys.argv[1], as_version=4)
nb.cells.append(nbformat.v4.new_code_cell("import sys, patterncnn; print(sys.executable); print(patterncnn.__file__)"))
nbclient.NotebookClient(nb, timeout=900, kernel_name="python3", resources={"metadata": {"path": sys.argv[3]}}).execute()
nbformat.write(nb, sys.argv[2])
"""


def test_the_notebook_is_clean_as_committed():
    nb = json.loads(NOTEBOOK.read_text(encoding="utf-8"))
    code = [c for c in nb["cells"] if c["cell_type"] == "code"]
    assert code and all(not c["outputs"] and c["execution_count"] is None for c in code)  # no machine's outputs


@pytest.mark.slow
def test_the_notebook_runs_in_a_fresh_venv_from_the_wheel(tmp_path):
    py = wheel_venv(tmp_path)
    work = tmp_path / "work"  # away from the repository
    work.mkdir()
    env = {"HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1", "PATH": "/usr/bin:/bin", "GLUE_DIR": str(FIXTURES / "glue"),
           "HOME": str(tmp_path / "home")}  # nothing of this machine's Jupyter or caches, except what patterncnn needs
    done = subprocess.run([py, "-c", RUN, str(NOTEBOOK), str(tmp_path / "out.ipynb"), str(work)], cwd=work, env=env,
                          capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-3000:]
    nb = nbformat.read(tmp_path / "out.ipynb", as_version=4)  # multi-line outputs joined into strings
    outputs = [c["outputs"] for c in nb.cells if c["cell_type"] == "code"]
    assert all(o.get("output_type") != "error" for cell in outputs for o in cell)
    where = "".join(o.get("text", "") for o in outputs[-1]).split()
    venv = py.parent.parent
    assert where[0].startswith(str(venv)) and where[1].startswith(str(venv)), where  # the kernel and patterncnn: venv's

    def html(i):
        return "".join(o.get("data", {}).get("text/html", "") for o in outputs[i])

    assert "layer 0, head 0" in html(1)  # the heads' HTML grid of classify_attentions
    assert any("image/png" in o.get("data", {}) for o in outputs[4])  # heads.plot(0): a figure
    # estimate_shares on the two examples: a table of shares, and the warning that two are too few for an interval
    assert "the batch has only 2 examples" in "".join(o.get("text", "") for o in outputs[5]) and "high" in html(5)
    assert "<table class=\"shares\">" in html(6) and "data:image/png;base64," in html(6)  # the census result
    assert "report.html" in "".join(o.get("text", "") for o in outputs[11])
