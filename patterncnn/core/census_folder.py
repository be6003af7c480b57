"""Where a finished census is on disk: the one lookup that ``report``, ``CensusResult.load``, ``census --compare``
and ``link --census`` share.

Usage::

    census_folders("runs/two")    # [runs/two/ft-0123abcd, runs/two/minilm-53aa5117]: each census in it
    census_file("runs/census")    # runs/census/census.json; a folder of several censuses is refused naming them

A census folder holds ``census.json`` (written last: census/run.py); ``census --model A --model B --out DIR``
writes one such folder per encoder inside DIR. Here below census and experiments (both read censuses), and
reading nothing but the folder: ``census/results.py`` reads and checks the result.
"""

from __future__ import annotations

from pathlib import Path

from .errors import PatternCNNError
from .work import run_command, unfinished_runs

FILE = "census.json"  # what a finished census folder holds


class CensusError(PatternCNNError, RuntimeError):
    """A finished census cannot be read (missing or not a census result); the message says which command writes one."""


def no_census(path: str | Path) -> CensusError:
    """The error for ``path`` (a folder, or a census.json file) that holds no finished census, with the fix that
    fits: resume the unfinished run found there (in it or one of its subfolders), or run the census into its folder."""
    p = Path(path)
    folder = p.parent if p.name == FILE else p
    unfinished = unfinished_runs(folder)
    command = run_command(unfinished[0]) if unfinished else None
    if unfinished and command not in (None, "census"):
        return CensusError(f"no finished census at {path}: {unfinished[0]} holds an unfinished `patterncnn {command}` "
                           f"run, not a census; run `patterncnn census --out {folder}` first (once that {command} "
                           f"has finished), or give this command a census's folder")
    if unfinished:
        return CensusError(f"no finished census at {path}: {unfinished[0]} holds an unfinished run (no {FILE} yet); "
                           f"run the same `patterncnn census` command again to resume it (its finished windows are "
                           f"kept), then run this command again")
    return CensusError(f"no finished census at {path} (no {FILE} there or in its subfolders); run "
                       f"`patterncnn census --out {folder}` first")


def census_folders(run_dir: str | Path) -> list[Path]:
    """The census folders under ``run_dir``: itself when it holds census.json (or is a census.json: its folder),
    else its subfolders that do (``census --model A --model B`` writes one per encoder).

    Raises:
        CensusError: there is none; the message says what to pass, or that the unfinished run there resumes.
    """
    root = Path(run_dir)
    if root.name == FILE and root.is_file():
        return [root.parent]
    if root.is_file():
        raise CensusError(f"{run_dir} is a file; pass the census folder (the --out of `patterncnn census`, which "
                          f"holds {FILE})")
    if (root / FILE).is_file():
        return [root]
    found = sorted(p.parent for p in root.glob(f"*/{FILE}")) if root.is_dir() else []
    if not found:
        raise no_census(run_dir)
    return found


def several_censuses(run_dir: str | Path, folders: list[Path]) -> str:
    """Where the censuses of a folder of several are (:func:`census_folders`): the start of each message about one."""
    return f"{run_dir} holds {len(folders)} censuses in its subfolders: {', '.join(str(f) for f in folders)}"


def census_file(path: str | Path) -> Path:
    """The result file of the one census at ``path``: a census folder, a folder whose one census is in a subfolder
    (found as :func:`census_folders` finds it), or a result file (``census.json``, or a copy under another name).

    Raises:
        CensusError: no census there (:func:`no_census`), or several: the message names them and asks for one.
    """
    p = Path(path)
    if p.is_file():
        return p
    folders = census_folders(p)
    if len(folders) > 1:
        raise CensusError(f"{several_censuses(path, folders)}; give one of them")
    return folders[0] / FILE
