"""Validate the share estimators on hand-labelled maps drawn uniformly at random (``patterncnn validate``).

Usage::

    v = validate_rows(rows)                          # cross-validated, from train's out-of-fold rows
    v = validate_independent(rows, score_labelled(classifier, "annotations-new"))   # maps it never saw
    print(markdown_table(v))

Only maps whose metadata says ``"sampling": "uniform"`` (``patterncnn sample --design uniform``) are
scored: their hand-labelled shares estimate the census's shares. Each estimator estimates the shares
of each (encoder, task) cell from the classifier's outputs on those maps alone, with the census's
intervals, and is compared with the hand labels. Cross-validated: a map of fold k is scored by the
model of train's CV that did not see fold k (its out-of-fold probabilities) and calibrated only on
the rows of the other folds, so no map scores a model that was trained or calibrated on it.

Per encoder, cells are pooled with equal weight per task; reported: the mean and worst absolute
share error per class, and how often the 95% interval holds the hand-labelled share.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from .calibrate import CAL_BOOTSTRAP, SCOPES, Rows, fit_calibration, map_rows, scope_mask
from .estimate import ESTIMATORS, TARGET_COVERAGE, TARGET_ERROR, best_result, example_sums, shares_with_intervals
from .labels import LABELS

UNIFORM_HELP = ("label maps drawn with `patterncnn sample --design uniform` (their metadata says \"sampling\": "
                "\"uniform\"), pull them into the labelled set and retrain with `patterncnn train`")


def combos() -> list[tuple[str, str | None]]:
    """(estimator, calibration scope) pairs validated: count needs no calibration."""
    return [(e, None) if e == "count" else (e, s) for e in ESTIMATORS for s in ((None,) if e == "count" else SCOPES)]


def score(pool: Rows, test: Rows, cross_validated: bool, seed: int = 0) -> tuple[dict, dict]:
    """Per-map vectors of ``test`` for every (estimator, scope), calibrated on ``pool``.

    Cross-validated, the rows of test fold k are calibrated on the pool rows of the other folds only.

    Returns:
        ({(estimator, scope): (R, n, 5)}, {fold: what calibrated it}).
    """
    n = len(test)
    labels = test.probs.argmax(1)[:, None]
    vectors = {(e, s): np.zeros((CAL_BOOTSTRAP + 1, n, len(LABELS))) for e, s in combos() if e != "count"}
    vectors[("count", None)] = example_sums("count", test.probs[:, None], labels, test.single, None)
    calibrated = {}
    for k in sorted(set(test.fold.tolist())) if cross_validated else [-1]:
        in_k = test.fold == k if cross_validated else np.ones(n, dtype=bool)
        base = pool.subset(pool.fold != k) if cross_validated else pool
        for enc in sorted(set(test.encoder[in_k].tolist())):
            sel = in_k & (test.encoder == enc)
            for scope in SCOPES:
                mask, used = scope_mask(base, scope, enc)
                cal = fit_calibration(base.subset(mask), CAL_BOOTSTRAP, seed)
                calibrated.setdefault(str(k), []).append({"encoder": enc, "scope": scope, "used": used,
                                                          "rows": cal.rows, "folds": cal.folds})
                for e in ("probs", "adjusted"):
                    vectors[(e, scope)][:, sel] = example_sums(e, test.probs[sel][:, None], labels[sel],
                                                               test.single[sel], cal)
    return vectors, calibrated


def cell(test: Rows, idx: np.ndarray, vectors: np.ndarray, seed: int) -> dict:
    """One (encoder, task) cell: estimate with intervals (maps grouped by input example) vs the hand shares."""
    _, inverse = np.unique(test.group[idx], return_inverse=True)
    sums = np.einsum("gn,rnk->rgk", np.eye(inverse.max() + 1)[:, inverse], vectors[:, idx])  # (R, G, 5)
    est = shares_with_intervals(sums, seed)
    hand = np.bincount(test.y[idx], minlength=len(LABELS)) / len(idx)
    covered = {part: [bool(ci[k][0] - 1e-9 <= hand[i] <= ci[k][1] + 1e-9) for i, k in enumerate(LABELS)]
               for part, ci in (("total", est["ci95"]), ("examples", est["ci95_parts"]["examples"]))}
    return {"maps": int(len(idx)), "hand": dict(zip(LABELS, hand.tolist())), **est, "covered": covered}


def encoder_summary(cells: dict) -> dict:
    """Cells of one encoder pooled with equal weight per task: share errors per class, interval coverage."""
    est = np.mean([[c["shares"][k] for k in LABELS] for c in cells.values()], axis=0)
    hand = np.mean([[c["hand"][k] for k in LABELS] for c in cells.values()], axis=0)
    err = np.abs(est - hand)
    w = int(err.argmax())
    cover = [x for c in cells.values() for x in c["covered"]["total"]]
    cover_ex = [x for c in cells.values() for x in c["covered"]["examples"]]
    return {"maps": sum(c["maps"] for c in cells.values()), "tasks": len(cells),
            "mean_abs_error": float(err.mean()), "abs_error": dict(zip(LABELS, err.tolist())),
            "worst": {"label": LABELS[w], "estimate": float(est[w]), "hand": float(hand[w]), "abs_error": float(err[w])},
            "coverage": float(np.mean(cover)), "coverage_examples_only": float(np.mean(cover_ex)),
            "covered_cells": int(sum(cover)), "cells": len(cover)}


def summarize_scores(test: Rows, vectors: dict, seed: int) -> list[dict]:
    """One result per (estimator, scope): per-encoder summaries, worst encoder, pooled coverage, and the cells."""
    results = []
    for (est, scope), v in vectors.items():
        cells = {enc: {task: cell(test, np.flatnonzero((test.encoder == enc) & (test.task == task)), v, seed)
                       for task in sorted(set(test.task[test.encoder == enc].tolist()))}
                 for enc in sorted(set(test.encoder.tolist()))}
        encs = {enc: encoder_summary(c) for enc, c in cells.items()}
        covered = sum(e["covered_cells"] for e in encs.values())
        total = sum(e["cells"] for e in encs.values())
        worst = max(e["mean_abs_error"] for e in encs.values())
        results.append({"estimator": est, "scope": scope, "encoders": encs, "worst_encoder_mean_abs_error": worst,
                        "coverage": covered / total, "coverage_examples_only": float(np.mean(
                            [x for c in cells.values() for t in c.values() for x in t["covered"]["examples"]])),
                        "meets_targets": bool(worst <= TARGET_ERROR and covered / total >= TARGET_COVERAGE),
                        "cells": cells})
    return results


def _validate(pool: Rows, test: Rows, mode: str, seed: int) -> dict:
    vectors, calibrated = score(pool, test, mode == "cross-validated", seed)
    results = summarize_scores(test, vectors, seed)
    best = best_result(results)
    return {"mode": mode, "maps": len(test), "seed": seed, "calibration_bootstrap": CAL_BOOTSTRAP,
            "targets": {"mean_abs_error": TARGET_ERROR, "coverage": TARGET_COVERAGE},
            "encoders": {e: {t: int(((test.encoder == e) & (test.task == t)).sum())
                             for t in sorted(set(test.task[test.encoder == e].tolist()))}
                         for e in sorted(set(test.encoder.tolist()))},
            "best": {"estimator": best["estimator"], "scope": best["scope"]}, "results": results,
            "calibrated_on": calibrated}


def validate_rows(rows: Rows, seed: int = 0) -> dict:
    """Cross-validated validation on the uniformly drawn rows among train's out-of-fold rows."""
    test = rows.subset(rows.uniform)
    if not len(test):
        raise ValueError(f"the labelled set has no maps drawn uniformly at random, so the share estimates cannot be "
                         f"validated; {UNIFORM_HELP}")
    return _validate(rows, test, "cross-validated", seed)


def validate_independent(pool: Rows, test: Rows, seed: int = 0) -> dict:
    """Validation on maps the classifier was neither trained nor calibrated on (all of ``pool`` calibrates)."""
    seen = set(pool.ids.tolist()) & set(test.ids.tolist())
    if seen:
        raise ValueError(f"{len(seen)} of these maps (e.g. {sorted(seen)[0]}) trained and calibrated this classifier; "
                         f"validate them cross-validated (`patterncnn validate` without --annotations)")
    test = test.subset(test.uniform)
    if not len(test):
        raise ValueError(f"no map of that labelled set was drawn uniformly at random; {UNIFORM_HELP}")
    return _validate(pool, test, "independent", seed)


def score_labelled(classifier, annotations: str | Path) -> Rows:
    """Rows for a labelled set scored by ``classifier`` (an :class:`patterncnn.infer.OnnxClassifier`)."""
    from .labelled import load_labelled

    data = load_labelled(annotations)
    probs = classifier.predict(data.maps, data.seps)
    return map_rows(data.ids, data.y, probs, np.full(len(data.y), -1), data.meta, data.seps)


def _pct(x: float) -> str:
    return f"{100 * x:.1f}"


def markdown_table(v: dict) -> str:
    """The validation as a Markdown table (model card, README), one row per estimator, scope and encoder."""
    lines = ["| estimator | calibrated on | encoder | maps (tasks) | mean \\|share error\\| per class, points | "
             "worst class: estimate vs hand, % | 95 % interval covers hand share | examples-only interval covers |",
             "| --- | --- | --- | --- | --- | --- | --- | --- |"]
    for r in v["results"]:
        best = (r["estimator"], r["scope"]) == (v["best"]["estimator"], v["best"]["scope"])
        name = f"**{r['estimator']}**" if best else r["estimator"]
        for enc, e in r["encoders"].items():
            w = e["worst"]
            lines.append(f"| {name} | {r['scope'] or '—'} | {enc} | {e['maps']} ({e['tasks']}) | "
                         f"{_pct(e['mean_abs_error'])} | {w['label']}: {_pct(w['estimate'])} vs {_pct(w['hand'])} | "
                         f"{e['covered_cells']}/{e['cells']} ({_pct(e['coverage'])} %) | "
                         f"{_pct(e['coverage_examples_only'])} % |")
    b = best_result(v["results"])
    lines.append("")
    lines.append(f"{v['mode'].capitalize()} on {v['maps']} uniformly drawn hand-labelled maps. Default (bold): "
                 f"**{b['estimator']}**{' calibrated on ' + b['scope'] + ' rows' if b['scope'] else ''}, worst "
                 f"encoder {_pct(b['worst_encoder_mean_abs_error'])} points, intervals cover "
                 f"{_pct(b['coverage'])} % of cells (targets: ≤ {_pct(TARGET_ERROR)} points, ≥ "
                 f"{_pct(TARGET_COVERAGE)} %: {'met' if b['meets_targets'] else '**not met**'}).")
    return "\n".join(lines)


def run_validation(classifier, out: str | Path, annotations: str | Path | None = None, seed: int = 0) -> dict:
    """``patterncnn validate``: validate, then write ``validation.json`` and ``validation.md`` into ``out``.

    Args:
        classifier: an :class:`patterncnn.infer.OnnxClassifier` trained by ``patterncnn train`` (it stores its rows).
        annotations: an independent labelled set; None validates cross-validated on the stored rows.
    """
    from . import __version__
    from .calibrate import stored_rows
    from .estimate import RETRAIN
    from .fileio import sha256_file, write_json, write_text
    from .infer import ClassifierError

    rows = stored_rows(classifier.metadata)
    if rows is None:
        raise ClassifierError(f"{classifier.path} stores no out-of-fold rows to calibrate and validate with; {RETRAIN}")
    v = validate_rows(rows, seed) if annotations is None else \
        validate_independent(rows, score_labelled(classifier, annotations), seed)
    v = {"created_by": f"patterncnn {__version__}", "classifier": {
        "path": str(classifier.path), "sha256": sha256_file(classifier.path), "version": classifier.model_version},
        "annotations": None if annotations is None else str(annotations), **v}
    out = Path(out)
    write_json(out / "validation.json", v)
    write_text(out / "validation.md", markdown_table(v) + "\n")
    return v
