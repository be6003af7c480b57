"""The HTML report of a finished census: one self-contained file to look at (``patterncnn report RUN_DIR``).

Usage::

    path = write_report("runs/census")                        # runs/census/report.html
    write_report("runs/census", extra=["runs/drift-rte"])     # with results that sit elsewhere
    write_report("runs/census", overwrite=True)               # an existing report.html is replaced only so

Modules: ``collect`` (the census and the experiment results found with it), ``page`` (the HTML),
``assets/`` (its style sheet and script, put inline). The report reads finished runs from disk
only; it runs no model.
"""

from __future__ import annotations

from pathlib import Path

from ..census.results import CensusError
from ..core import args
from ..core.census_folder import census_folders, several_censuses
from ..core.fileio import output_file, write_text
from .collect import collect
from .page import page

__all__ = ["write_report"]

REPORT = "report.html"


def report_files(run_dir: str | Path, out: str | Path | None = None,
                 overwrite: bool = False) -> list[tuple[Path, Path]]:
    """(census folder, HTML file) for each census in ``run_dir``, every file checked as an output before any is
    written (:func:`patterncnn.core.fileio.output_file`: an existing one needs ``overwrite``).

    Raises:
        CensusError: no finished census there, or ``out`` given for several.
        OutputError: a report exists and ``overwrite`` is False, or its path is not a regular file.
    """
    folders = census_folders(run_dir)
    if out is not None and len(folders) > 1:
        raise CensusError(f"{several_censuses(run_dir, folders)}; leave out --out to write one report each, or give "
                          f"one of them: `patterncnn report {folders[0]}`")

    def elsewhere(folder: Path) -> str:  # the census whose report is in the way, not the first of several
        return (f"write it elsewhere with `patterncnn report {folder} --out FILE`, one census at a time"
                if len(folders) > 1 else "write it elsewhere with --out FILE")

    return [(folder, output_file(out, overwrite) if out is not None else
             output_file(folder / REPORT, overwrite, option="", instead=elsewhere(folder))) for folder in folders]


def write_report(run_dir: str | Path, out: str | Path | None = None,
                 extra: list[str | Path] | None = None, overwrite: bool = False) -> Path:
    """Write the self-contained HTML report of the census in ``run_dir`` (atomically) and return its path.

    Args:
        run_dir: a census folder (``census --out``), or its ``census.json``; when it holds several
            censuses (one folder per encoder), give one of them.
        out: the HTML file; None: ``run_dir/report.html``.
        extra: drift, special-tokens, disable or link results (folders or JSON files) to show beside it;
            those in the census folder and the folders directly inside it are found without being
            named (nothing beside the census folder is).
        overwrite: replace an existing report (else it is refused, as every output is).

    Returns:
        The path of the HTML file: figures and data inline, no external CSS, script or network request.

    Example::

        >>> patterncnn.write_report("runs/census")
        PosixPath('runs/census/report.html')
    """
    args.check(run_dir=run_dir, out=out, overwrite=overwrite)
    for item in extra or []:
        args.path("each of extra", item)
    folders = census_folders(run_dir)
    if len(folders) > 1:
        raise CensusError(f"{several_censuses(run_dir, folders)}; write one report each: `patterncnn report "
                          f"{folders[0]}`")
    [(folder, path)] = report_files(folders[0], out, overwrite)
    write_text(path, page(collect(folder, extra)))
    return path
