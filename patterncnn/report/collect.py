"""What a report shows: a finished census and the experiment results that sit with it, read from disk.

Usage::

    run = collect("runs/census", extra=["runs/drift-rte"])
    run.census            # CensusResult
    run.experiments       # {"drift": [(folder, result dict)], "special-tokens": [...], "disable": [...], "link": [...]}

The census is ``RUN_DIR/census.json``. Experiment results (``drift.json``, ``special_tokens.json``,
``disable.json``, ``link.json``) are taken from the census folder, the folders directly inside it, and
any folder or JSON file named in ``extra``; nothing beside the census folder is searched.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

from ..census.result import CensusResult
from ..census.results import CensusError

EXPERIMENTS = {"drift": "drift.json", "special-tokens": "special_tokens.json", "disable": "disable.json",
               "link": "link.json"}


@dataclasses.dataclass
class Run:
    """One census and the experiment results found with it."""

    census: CensusResult
    experiments: dict[str, list[tuple[Path, dict]]]


def _read(path: Path) -> dict | None:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) and "experiment" in data else None


def collect(folder: str | Path, extra: list[str | Path] | None = None) -> Run:
    """The census in ``folder`` and the experiment results beside it and in ``extra``."""
    folder = Path(folder)
    census = CensusResult.load(folder)
    found: dict[str, list[tuple[Path, dict]]] = {k: [] for k in EXPERIMENTS}
    seen: set[Path] = set()
    places = [folder, *sorted(p for p in folder.iterdir() if p.is_dir() and not p.name.startswith("."))]
    for item in [*places, *(Path(e) for e in extra or [])]:
        files = [item] if item.is_file() else [item / name for name in EXPERIMENTS.values()]
        for f in files:
            data = _read(f) if f.is_file() and f.resolve() not in seen else None
            if data is not None and data["experiment"] in found:
                seen.add(f.resolve())
                found[data["experiment"]].append((f.parent, data))
    if extra:
        missing = [str(e) for e in extra if not any(Path(e).resolve() in (p.resolve(), (p / EXPERIMENTS[k]).resolve())
                                                    for k, v in found.items() for p, _ in v)]
        if missing:
            raise CensusError(f"no drift, special-tokens, disable or link result at {', '.join(missing)}; pass the "
                              f"folder (or JSON) that `patterncnn drift` / `special-tokens` / `disable` / `link` wrote")
    return Run(census, found)
