"""Linking patterns to function: per head, its census pattern distribution, its drift and its disabling effect.

Usage (what ``patterncnn link`` runs)::

    res = link("runs/census-ft", "runs/disable-rte", task="rte", drift="runs/drift")   # the Python API

    result = run_link("runs/census-ft", "runs/drift", "runs/disable-rte", task="rte", out="runs/link-rte")
    result["test"]   # heterogeneous vs vertical heads: mean drop when disabled, permutation p-value

The paper's hypothesis is that heterogeneous heads (which may carry linguistic information) matter
more to the task than vertical ones (attention parked on [CLS]/[SEP]). Heads are grouped by their
majority pattern in the census; the statistic is the mean metric *drop* when a heterogeneous head
is disabled minus the mean drop for a vertical head, and its two-sided p-value comes from
permuting the group labels among those heads. A rank correlation between each head's
heterogeneous share and its drop (also with a permutation p-value) uses every head.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Union

import numpy as np

from ..core import args
from ..core.census_folder import census_file
from ..core.fileio import output_folder, parse_json, weights_id
from ..core.glue import get_task
from ..core.labels import LABELS
from ..core.plots import link_plot, png
from ..core.work import RunError, output_dir, provenance, write_result
from ..encoders.embedded import lookup
from .disable import OLD_RULE, chance_warning, outside_rule
from .result import ExperimentResult


def _load(path: str | Path, name: str) -> dict:
    p = Path(path)
    p = p / name if p.is_dir() else p
    if not p.is_file():
        raise RunError(f"no {name} at {path}; run the matching command first (its --out folder holds {name})")
    result = parse_json(p.read_bytes(), str(p), f"run the command that writes {name} again", RunError)
    if not isinstance(result, dict):
        raise RunError(f"{p} is not a result of that command (not a JSON object); run it again")
    return result


def _ranks(x: np.ndarray) -> np.ndarray:
    from scipy.stats import rankdata

    return rankdata(x)


def group_test(drop: np.ndarray, group_a: np.ndarray, group_b: np.ndarray, perms: int = 10000,
               seed: int = 0) -> dict:
    """Mean ``drop`` in group A minus group B (boolean masks over heads), with a two-sided permutation p-value."""
    a, b = drop[group_a], drop[group_b]
    if len(a) < 2 or len(b) < 2:
        return {"n_a": int(len(a)), "n_b": int(len(b)), "difference": None, "p_value": None,
                "note": "fewer than 2 heads in a group: no test"}
    pooled = np.concatenate([a, b])
    obs = a.mean() - b.mean()
    rng = np.random.default_rng(seed)
    perm = np.array([rng.permutation(pooled) for _ in range(perms)])  # (P, n)
    null = perm[:, : len(a)].mean(1) - perm[:, len(a):].mean(1)
    p = (1 + np.sum(np.abs(null) >= abs(obs) - 1e-12)) / (perms + 1)
    return {"n_a": int(len(a)), "n_b": int(len(b)), "mean_a": float(a.mean()), "mean_b": float(b.mean()),
            "difference": float(obs), "p_value": float(p), "permutations": perms}


def rank_test(x: np.ndarray, y: np.ndarray, perms: int = 10000, seed: int = 0) -> dict:
    """Spearman correlation of x and y with a two-sided permutation p-value; none when either is constant (a
    correlation is then undefined: ``spearman`` and ``p_value`` are None, ``note`` says which)."""
    rx, ry = _ranks(x), _ranks(y)
    flat = [name for name, r in (("x", rx), ("y", ry)) if not r.std() > 0]
    if flat:
        return {"spearman": None, "p_value": None, "note": f"{' and '.join(flat)} constant over the heads: no correlation"}
    rho = float(np.corrcoef(rx, ry)[0, 1])
    rng = np.random.default_rng(seed)
    null = np.array([np.corrcoef(rx, rng.permutation(ry))[0, 1] for _ in range(perms)])
    return {"spearman": rho, "p_value": float((1 + np.sum(np.abs(null) >= abs(rho) - 1e-12)) / (len(null) + 1))}


def model_option(fp: dict) -> str:
    """What to pass as ``--model`` for the encoder of a result's fingerprint: the name it was given as (an embedded
    encoder's short name, a hub id, a relative folder), or, for a folder that may have been given by its absolute
    path, which a result keeps only the last part of (:func:`patterncnn.core.fileio.public_path`), that part under a
    placeholder folder: ``/path/to/walk4-ft-sst2``."""
    name = str(fp.get("model") or fp.get("path"))
    folder = fp.get("sha256") and "/" not in name and lookup(name) is None  # a file hash: weights read from a folder
    return f"/path/to/{name}" if folder else name


def _placeholder(model: str) -> str:
    """What a suggested command's ``/path/to/`` stands for, when :func:`model_option` put one in."""
    return (", /path/to being the folder that holds it: results record a folder's name, not where it is"
            if model.startswith("/path/to/") else "")


def check_inputs(census: dict, drift: dict | None, disable: dict, task: str) -> list[str]:
    """Refuse results of different models (a census or drift that is not of the disabled model), by their weights
    (:func:`patterncnn.core.fileio.weights_id`); return notes on what could not be checked or may differ without
    being wrong (the examples each result was computed on)."""
    notes = []
    if warning := chance_warning(disable):
        notes.append(f"in the disable run, {warning}")
    if outside_rule(disable) == OLD_RULE:
        notes.append(f"the disable run's `outside` (each head's column here) is {OLD_RULE}")
    disabled, model = weights_id(disable["model"]), model_option(disable["model"])
    counted = weights_id(census["encoder"])
    if disabled is None or counted is None:
        notes.append("the census's or the disable run's weights were not recorded: that the census is of the "
                     "disabled model could not be checked")
    elif counted != disabled:
        raise RunError(f"the census is of {census['encoder'].get('model')}, the disable run of {disable['tag']}: run "
                       f"the census on the model that was disabled (`patterncnn census --model {model} --task {task}`"
                       f"{_placeholder(model)})")
    if drift is not None:
        a, b = weights_id(drift["model_a"]), weights_id(drift["model_b"])
        if a is None or b is None or disabled is None:
            notes.append("the drift run's weights were not recorded: that it compares the disabled model with "
                         "another could not be checked")
        elif a == b:
            raise RunError(f"the drift run compares {drift['tag_a']} with itself: run `patterncnn drift` of the "
                           f"pretrained model against the fine-tuned one ({disable['tag']})")
        elif disabled not in (a, b):
            raise RunError(f"the drift run compares {drift['tag_a']} and {drift['tag_b']}, neither of which is the "
                           f"disabled model {disable['tag']}: run `patterncnn drift PRETRAINED {model} --task {task}`"
                           f"{_placeholder(model)}")
    counts = {"census": census["tasks"][task]["examples"], "disable": disable["examples"],
              **({"drift": drift["tasks"][task]["examples"]} if drift is not None else {})}
    drawn = {"census": (census.get("seed"), census["tasks"][task].get("examples"), census["tasks"][task].get("of")),
             "disable": (disable.get("seed"), disable.get("examples"), disable.get("of")),
             **({"drift": (drift.get("seed"), drift["tasks"][task].get("examples"), drift["tasks"][task].get("of"))}
                if drift is not None else {})}
    sampled = {k: seed for k, (seed, n, of) in drawn.items() if seed is not None and n is not None and of is not None
               and n < of}  # a seed that chose which examples: the split was cut by --limit
    if len(set(counts.values())) == 1 and len(sampled) > 1 and len(set(sampled.values())) > 1:
        notes.append("the results drew their dev examples with different seeds (" + ", ".join(
            f"{k} {v}" for k, v in sampled.items()) + "): each head's pattern, drift and drop are estimated on "
            "different inputs; run census, drift and disable with the same --seed (seed= from Python) to compare them "
            "on the same examples")
    if len(set(counts.values())) > 1:
        notes.append("the results were computed on different numbers of dev examples (" + ", ".join(
            f"{k} {v}" for k, v in counts.items()) + "): each head's pattern, drift and drop are estimated on "
            "different inputs; run census, drift and disable with the same number of examples and seed (--limit and "
            "--seed; limit= and seed= from Python) to compare them on the same examples")
    return notes


def head_table(census: dict, drift: dict | None, disable: dict, task: str) -> list[dict]:
    """One row per head: census shares and majority, drift cosine (None without drift), disabling effect."""
    if task not in census["tasks"]:
        raise RunError(f"the census has no task {task!r} (it has {', '.join(census['tasks'])}); run the census on it")
    if drift is not None and task not in drift["tasks"]:
        raise RunError(f"the drift result has no task {task!r} (it has {', '.join(drift['tasks'])})")
    cells = census["tasks"][task]["heads"]
    if (len(cells), len(cells[0])) != (len(disable["heads"]), len(disable["heads"][0])):
        raise RunError("the census and the disable result come from models of different shapes")
    rows = []
    for l, row in enumerate(disable["heads"]):
        for h, d in enumerate(row):
            c = cells[l][h]
            rows.append({"layer": l, "head": h, **{k: c["shares"][k] for k in LABELS}, "majority": c["majority"],
                         "tied": "|".join(c.get("tied", ())) or None,
                         "drift_cosine": drift["tasks"][task]["cosine"][l][h] if drift else None,
                         "change": d["change"], "ci95_low": d["ci95"][0], "ci95_high": d["ci95"][1],
                         "outside": d["outside"]})
    return rows


def run_link(census_path, drift_path, disable_path, task: str, out: str | Path, perms: int = 10000,
             seed: int = 0, overwrite: bool = False) -> dict:
    """Join census, drift and disable per head for ``task``; test the paper's hypothesis; write link.*.

    An earlier link.json in ``out`` needs ``overwrite`` (:func:`patterncnn.core.fileio.output_folder`).
    """
    out = output_folder(out, ("link.json",), overwrite)
    census = _load(census_file(census_path), "census.json")  # a folder of several censuses is refused naming them
    disable = _load(disable_path, "disable.json")
    drift = _load(drift_path, "drift.json") if drift_path else None
    if disable["task"] != task:
        raise RunError(f"the disable result is for {disable['task']}, not {task}")
    rows = head_table(census, drift, disable, task)
    notes = check_inputs(census, drift, disable, task)
    drop = -np.array([r["change"] for r in rows])
    majority = np.array([r["majority"] for r in rows])
    tied = np.array([bool(r["tied"]) for r in rows])
    if tied.any():  # a tie has no majority: such a head joins neither group (the first pattern would take it)
        where = ", ".join(f"{r['layer']}:{r['head']}" for r in rows if r["tied"])
        notes.append(f"{int(tied.sum())} head(s) whose majority pattern is tied ({where}) are in neither group of the "
                     f"test")
    majority = np.where(tied, "", majority)
    test = group_test(drop, majority == "heterogeneous", majority == "vertical", perms, seed)
    result = provenance(
        experiment="link", task=task, census_encoder=Path(str(census["encoder"]["model"])).name,
        drift=(drift["tag_a"] + " vs " + drift["tag_b"]) if drift else None, disable_model=disable["tag"],
        disable_examples=disable["examples"], metric=disable["metric"],
        test={"hypothesis": "disabling a heterogeneous head costs more than disabling a vertical one",
              "statistic": "mean drop (heterogeneous) - mean drop (vertical), metric points as fractions", **test},
        rank_heterogeneous_share_vs_drop=rank_test(np.array([r["heterogeneous"] for r in rows]), drop, perms, seed),
        rank_drift_vs_drop=rank_test(1 - np.array([r["drift_cosine"] for r in rows]), drop, perms, seed)
        if drift else None,
        by_majority={k: {"heads": int((majority == k).sum()), "mean_drop": float(drop[majority == k].mean())}
                     for k in LABELS if (majority == k).any()}, notes=notes, heads=rows)
    write_result(out, "link.json", result, tables={"link.csv": table(result)}, figures={"link.png": png(link_plot(result))})
    return result


def table(result: dict) -> tuple[list[str], list[list]]:
    """(header, rows) of link.csv: one row per head."""
    keys = list(result["heads"][0])
    return keys, [["" if r[k] is None else str(r[k]) for k in keys] for r in result["heads"]]  # None: an empty cell


Source = Union[str, Path, Any]  # a result folder, its JSON file, or a result object (CensusResult, ExperimentResult)


def _folder(x: Source | None) -> str | Path | None:
    """A result object (its ``out``), a folder or a JSON file."""
    return getattr(x, "out", x)


def link(census: Source, disable: Source, task: str, drift: Source | None = None, out: str | Path | None = None, *,
         permutations: int = 10000, seed: int = 0, overwrite: bool = False) -> ExperimentResult:
    """Per head: its census pattern shares, drift and disabling effect; does disabling a heterogeneous head cost
    more than disabling a vertical one? (a permutation test over heads). What ``patterncnn link`` runs.

    Args:
        census, disable, drift: finished results: their folders or JSON files, or the objects
            :func:`patterncnn.census`, :func:`patterncnn.disable` and :func:`patterncnn.drift` return; drift optional.
        task: the GLUE task, present in all of them.
        out: the result folder; None: a new temporary folder.
        overwrite: replace an earlier ``link.json`` in ``out`` (else it is refused).

    Returns:
        :class:`ExperimentResult`: ``.frame`` (one row per head), ``.data["test"]`` (the permutation test), ``.plot()``.

    Example::

        >>> res = patterncnn.link(census_ft, disable_rte, task="rte", drift=drift_rte)
        >>> res.data["test"]["p_value"]
    """
    args.check(task=task, out=out, permutations=permutations, seed=seed, overwrite=overwrite)
    for name, value in (("census", census), ("disable", disable), ("drift", drift)):
        args.path(name, _folder(value), none=name == "drift")
    folder = output_dir(out, "link")
    result = run_link(_folder(census), _folder(drift), _folder(disable), get_task(task).name, folder, permutations,
                      seed, overwrite)
    return ExperimentResult(result, folder, link_plot, table)
