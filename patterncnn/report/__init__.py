"""The HTML report of a finished census: one self-contained file to look at (``patterncnn report RUN_DIR``).

Usage::

    path = write_report("runs/census")                        # runs/census/report.html
    write_report("runs/census", extra=["runs/drift-rte"])     # with results that sit elsewhere

Modules: ``collect`` (the census and the experiment results found with it), ``page`` (the HTML),
``assets/`` (its style sheet and script, put inline). The report reads finished runs from disk
only; it runs no model.
"""

from __future__ import annotations

from pathlib import Path

from ..census.results import CensusError
from ..core.fileio import write_text
from .collect import census_folders, collect
from .page import page

__all__ = ["write_report"]

REPORT = "report.html"


def write_report(run_dir: str | Path, out: str | Path | None = None,
                 extra: list[str | Path] | None = None) -> Path:
    """Write the self-contained HTML report of the census in ``run_dir`` (atomically) and return its path.

    Args:
        run_dir: a census folder (``census --out``); when it holds several censuses (one folder per
            encoder), give one of them.
        out: the HTML file; None: ``run_dir/report.html``.
        extra: drift, special-tokens, disable or link results (folders or JSON files) to show beside it;
            those in ``run_dir`` and its immediate subfolders are found without being named.

    Returns:
        The path of the HTML file: figures and data inline, no external CSS, script or network request.

    Example::

        >>> patterncnn.write_report("runs/census")
        PosixPath('runs/census/report.html')
    """
    folders = census_folders(run_dir)
    if len(folders) > 1:
        raise CensusError(f"{run_dir} holds {len(folders)} censuses ({', '.join(f.name for f in folders)}); "
                          f"write one report each: `patterncnn report {folders[0]}`")
    path = Path(out) if out is not None else folders[0] / REPORT
    write_text(path, page(collect(folders[0], extra)))
    return path
