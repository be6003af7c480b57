"""Validate the share estimators on hand-labelled maps drawn uniformly at random (``patterncnn validate``).

Usage::

    v = validate_rows(rows)                          # cross-validated, from train's out-of-fold rows
    data, probs = predict_labelled(classifier, "annotations-new")
    v = validate_independent(rows, labelled_rows(data, probs))   # maps it never saw
    lab = label_scores(data, probs, "annotations-new")           # and how well it labels them
    print(markdown_report({**v, "labels": lab}))

Only maps whose metadata says ``"sampling": "uniform"`` (``patterncnn sample --design uniform``) are
scored: their hand-labelled shares estimate the census's shares. Each estimator estimates the shares
of each (encoder, task) cell from the classifier's outputs on those maps alone, with the census's
intervals, and is compared with the hand labels.

Cross-validated, in two halves: the CV folds are split in two halves (folds 0..⌈K/2⌉-1 and the
rest). A map is scored by the fold model that did not see it (its out-of-fold probabilities) and
calibrated only on the rows of the *other half's* folds, and its half's shares are compared with
its half's hand labels; errors are averaged over the halves. So no map is estimated with a
calibration fitted on any map it is compared with. (Calibrating each fold on the other four and
pooling the folds would not do: each fold's calibration would hold the very misclassifications of
the other folds, and their errors would cancel in the pooled shares, up to an exact match for
adjusted classify-and-count calibrated on the sample itself.) The price is honest noise: a half has
half the maps, and its hand-labelled shares carry their own sampling error (reported beside).

Per encoder, tasks are pooled with equal weight; reported: the mean and worst absolute share error
per pattern, the standard error of the hand-labelled shares, and how often the 95% interval holds
the hand-labelled share over the (half, task, pattern) cells. ``count`` has no calibration: its
intervals are widened by a band per pattern (:func:`error_band`, stored as ``bias_band`` for the
census), and here each half only by the band of the other half (cross-fitted).

On an independent labelled set (``--annotations``) the classifier's labels are also scored against the
hand labels (:func:`label_scores`), on every map of the set, uniformly drawn or not: macro-F1, accuracy,
per-class F1 and Cohen's kappa, over all maps, per encoder family and per encoder, on all maps and on
the maps where at least two annotators agreed. A set without uniformly drawn maps gets only this part.
"""

from __future__ import annotations

from pathlib import Path
from typing import Callable

import numpy as np

from ..core.errors import ClassifierError
from ..core.fileio import output_folder, public_path, sha256_file, staged_outputs, write_json, write_text
from ..core.labels import LABELS
from ..core.maps import families, tag_of
from ..core.scores import classification_report, subset_scores
from ..core.version import __version__
from ..labelling.sets import load_labelled
from ..shares.calibrate import CAL_BOOTSTRAP, SCOPES, Rows, fit_calibration, map_rows, scope_mask, stored_rows
from ..shares.estimate import (
    ESTIMATORS,
    MIN_CALIBRATED_MAPS,
    RETRAIN,
    TARGET_COVERAGE,
    TARGET_ERROR,
    best_by_encoder,
    best_result,
    bias_band,
    example_sums,
    segment_band,
    shares_with_intervals,
    too_few_to_judge,
    validated_error,
)
from .evaluate import annotator_yardstick, load_votes

UNIFORM_HELP = ("label maps drawn with `patterncnn sample --design uniform` (their metadata says \"sampling\": "
                "\"uniform\"), pull them into the labelled set and retrain with `patterncnn train`")
# --annotations: a set the classifier never saw; retraining on it would make its maps the classifier's own
INDEPENDENT_HELP = ("to validate the shares, label maps of new inputs drawn with `patterncnn sample --design uniform` "
                    "and pass that set with --annotations (maps the classifier trained on are refused there)")


def combos() -> list[tuple[str, str | None]]:
    """(estimator, calibration scope) pairs validated: count needs no calibration."""
    return [(e, None) if e == "count" else (e, s) for e in ESTIMATORS for s in ((None,) if e == "count" else SCOPES)]


def halves(folds: np.ndarray) -> np.ndarray:
    """(n,) 0 or 1: the half of each row's CV fold (folds 0..⌈K/2⌉-1, then the rest)."""
    ks = sorted(set(folds.tolist()))
    return np.isin(folds, ks[(len(ks) + 1) // 2:]).astype(int)


def score(pool: Rows, test: Rows, half: np.ndarray | None, seed: int = 0) -> tuple[dict, dict]:
    """Per-map vectors of ``test`` for every (estimator, scope), calibrated on ``pool``.

    Args:
        half: (n,) the half of each test row; its rows are calibrated on the pool rows of the folds outside
            that half only. None: one half, calibrated on all of ``pool`` (independent maps).

    Returns:
        ({(estimator, scope): (R, n, 5)}, {half: the folds that calibrated it and each fit}).
    """
    n = len(test)
    labels = test.probs.argmax(1)[:, None]
    vectors = {("count", None): example_sums("count", test.probs[:, None], labels, test.single, None)}
    vectors.update({(e, s): np.zeros((CAL_BOOTSTRAP + 1, n, len(LABELS))) for e, s in combos() if e != "count"})
    calibrated = {}
    cross = half is not None
    half = half if cross else np.zeros(n, dtype=int)
    for h in sorted(set(half.tolist())):
        in_h = half == h
        base = pool.subset(~np.isin(pool.fold, test.fold[in_h])) if cross else pool
        calibrated[str(h)] = {"scored_folds": sorted(set(test.fold[in_h].tolist())), "fits": []}
        for enc in sorted(set(test.encoder[in_h].tolist())):
            sel = in_h & (test.encoder == enc)
            for scope in SCOPES:
                mask, used = scope_mask(base, scope, enc)
                cal = fit_calibration(base.subset(mask), CAL_BOOTSTRAP, seed)
                calibrated[str(h)]["fits"].append({"encoder": enc, "scope": scope, "used": used, "rows": cal.rows,
                                                   "folds": cal.folds})
                for e in ("probs", "adjusted"):
                    vectors[(e, scope)][:, sel] = example_sums(e, test.probs[sel][:, None], labels[sel],
                                                               test.single[sel], cal)
    return vectors, calibrated


def cell(test: Rows, idx: np.ndarray, vectors: np.ndarray, seed: int, band: np.ndarray | None = None) -> dict:
    """One (encoder, half, task) cell: estimate with intervals (maps grouped by input example) vs the hand shares;
    ``band``: count's validated share error per pattern (:func:`patterncnn.shares.estimate.shares_with_intervals`)."""
    _, inverse = np.unique(test.group[idx], return_inverse=True)
    sums = np.einsum("gn,rnk->rgk", np.eye(inverse.max() + 1)[:, inverse], vectors[:, idx])  # (R, G, 5)
    est = shares_with_intervals(sums, seed, segment_band(band, test.single[idx]))
    hand = np.bincount(test.y[idx], minlength=len(LABELS)) / len(idx)
    covered = {part: [bool(ci[k][0] - 1e-9 <= hand[i] <= ci[k][1] + 1e-9) for i, k in enumerate(LABELS)]
               for part, ci in (("total", est["ci95"]), ("examples", est["ci95_parts"]["examples"]))}
    return {"maps": int(len(idx)), "hand": dict(zip(LABELS, hand.tolist())), **est, "covered": covered}


def half_errors(halves_: dict) -> dict[str, np.ndarray]:
    """Per half of one encoder's cells {half: {task: cell}}: the signed share error (5,) with tasks pooled equally."""
    return {h: np.mean([[c["shares"][k] - c["hand"][k] for k in LABELS] for c in cells.values()], axis=0)
            for h, cells in halves_.items()}


def error_band(errors, maps: int) -> np.ndarray:
    """(5,) count's band from signed pooled errors (one (5,) per half) measured on ``maps`` maps: the largest |error|
    per pattern, at least 3 / maps (the rule of three: an error never seen in n maps may still be up to 3/n)."""
    return np.maximum(np.max(np.abs(list(errors)), axis=0), 3.0 / maps)


def encoder_summary(halves_: dict) -> dict:
    """One encoder's cells, {half: {task: cell}}: tasks pooled with equal weight within a half, errors averaged
    over the halves; the hand shares' standard error; interval coverage over all cells; the bias band (the largest
    pooled |error| per pattern over the halves, floored by :func:`error_band`), which widens ``count``'s census
    intervals."""
    est, hand, se = [], [], []
    for cells in halves_.values():
        est.append(np.mean([[c["shares"][k] for k in LABELS] for c in cells.values()], axis=0))
        h = np.array([[c["hand"][k] for k in LABELS] for c in cells.values()])  # (tasks, 5)
        hand.append(h.mean(0))
        n = np.array([c["maps"] for c in cells.values()])[:, None]
        se.append(np.sqrt((h * (1 - h) / n).sum(0)) / len(h))  # binomial SE of the task-weighted hand share
    signed = half_errors(halves_)
    band = error_band(signed.values(), encoder_maps(halves_))
    err = np.abs(list(signed.values())).mean(0)  # (5,) per pattern, averaged over halves
    est, hand = np.mean(est, 0), np.mean(hand, 0)
    w = int(err.argmax())
    cells = [c for cs in halves_.values() for c in cs.values()]
    cover = [x for c in cells for x in c["covered"]["total"]]
    return {"maps": sum(c["maps"] for c in cells), "tasks": len({t for cs in halves_.values() for t in cs}),
            "halves": len(halves_), "mean_abs_error": float(err.mean()), "abs_error": dict(zip(LABELS, err.tolist())),
            "worst": {"label": LABELS[w], "abs_error": float(err[w]), "estimate": float(est[w]), "hand": float(hand[w])},
            "hand_se": float(np.mean(se)), "coverage": float(np.mean(cover)), "coverage_examples_only": float(
                np.mean([x for c in cells for x in c["covered"]["examples"]])),
            "covered_cells": int(sum(cover)), "cells": len(cover),
            "half_errors": {h: dict(zip(LABELS, e.tolist())) for h, e in signed.items()},
            "bias_band": dict(zip(LABELS, band.tolist()))}


def summarize_scores(test: Rows, half: np.ndarray, vectors: dict, seed: int,
                     bands: Callable[[str, str, dict], np.ndarray | None] | None = None) -> list[dict]:
    """One result per (estimator, scope): per-encoder summaries, worst encoder, pooled coverage, and the cells.

    ``bands(encoder, half, that encoder's count cells)``: the band that widens count's intervals in that half
    (None: no band); count's cells are scored a second time with it.
    """
    def encoder_cells(enc: str, v: np.ndarray, band: Callable[[str], np.ndarray | None]) -> dict:
        return {str(h): {t: cell(test, np.flatnonzero(sel & (test.task == t)), v, seed, band(str(h)))
                         for t in sorted(set(test.task[sel].tolist()))}
                for h in sorted(set(half[test.encoder == enc].tolist()))
                for sel in [(test.encoder == enc) & (half == h)]}

    results = []
    for (est, scope), v in vectors.items():
        cells = {enc: encoder_cells(enc, v, lambda h: None) for enc in sorted(set(test.encoder.tolist()))}
        if est == "count" and bands is not None:
            cells = {enc: encoder_cells(enc, v, lambda h, enc=enc, c=c: bands(enc, h, c)) for enc, c in cells.items()}
        encs = {enc: encoder_summary(c) for enc, c in cells.items()}
        covered, total = sum(e["covered_cells"] for e in encs.values()), sum(e["cells"] for e in encs.values())
        worst = max(e["mean_abs_error"] for e in encs.values())
        results.append({"estimator": est, "scope": scope, "encoders": encs, "worst_encoder_mean_abs_error": worst,
                        "coverage": covered / total, "coverage_examples_only": float(np.mean(
                            [e["coverage_examples_only"] for e in encs.values()])),
                        "meets_targets": bool(worst <= TARGET_ERROR and covered / total >= TARGET_COVERAGE and not any(
                            too_few_to_judge(e["maps"]) for e in encs.values())),
                        "cells": cells})
    return results


def other_half_band(enc: str, h: str, cells: dict) -> np.ndarray | None:
    """Cross-fitted band for count in half ``h``: the other halves' largest pooled |error| per pattern, with the floor
    the census uses (3 / all of the encoder's maps: a count, not a label); None when the encoder has no other half."""
    errs = [e for k, e in half_errors(cells).items() if k != h]
    return error_band(errs, encoder_maps(cells)) if errs else None


def encoder_maps(cells: dict) -> int:
    """The maps of one encoder's cells {half: {task: cell}}."""
    return sum(c["maps"] for cs in cells.values() for c in cs.values())


def _validate(pool: Rows, test: Rows, mode: str, seed: int, stored: dict | None = None) -> dict:
    """``stored``: the classifier's own validation, whose bands widen count's intervals on independent maps."""

    half = halves(test.fold) if mode == "cross-validated" else np.zeros(len(test), dtype=int)
    vectors, calibrated = score(pool, test, half if mode == "cross-validated" else None, seed)
    if mode == "cross-validated":
        bands = other_half_band
    else:
        bands = (lambda enc, h, cells: bias_band(validated_error(stored, "count", None, enc))) if stored else None
    results = summarize_scores(test, half, vectors, seed, bands)
    best = best_result(results)
    return {"mode": mode, "maps": len(test), "seed": seed, "calibration_bootstrap": CAL_BOOTSTRAP,
            "targets": {"mean_abs_error": TARGET_ERROR, "coverage": TARGET_COVERAGE},
            "encoders": {e: {t: int(((test.encoder == e) & (test.task == t)).sum())
                             for t in sorted(set(test.task[test.encoder == e].tolist()))}
                         for e in sorted(set(test.encoder.tolist()))},
            "best": {"estimator": best["estimator"], "scope": best["scope"]},
            "best_per_encoder": best_by_encoder(results), "results": results,
            "calibrated_on": calibrated}


def validate_rows(rows: Rows, seed: int = 0) -> dict:
    """Cross-validated validation on the uniformly drawn rows among train's out-of-fold rows."""
    test = rows.subset(rows.uniform)
    if not len(test):
        raise ValueError(f"the labelled set has no maps drawn uniformly at random, so the share estimates cannot be "
                         f"validated; {UNIFORM_HELP}")
    return _validate(rows, test, "cross-validated", seed)


TRAINED_IDS = "also_trained_on"  # an adapted classifier's maps that trained it besides its calibration rows
VALIDATE_SEEN = ("validate it on maps it never saw, or cross-validated on its stored rows (`patterncnn validate` "
                 "without --annotations)")


def seen_ids(metadata: dict) -> set[str]:
    """The ids of every map a classifier (its ONNX metadata or checkpoint) was trained or calibrated on: its stored
    calibration rows, and the maps an adapted classifier was fine-tuned on besides them, as the extra sets of
    ``adapt --annotations`` (recorded since 2026-11-29; a classifier adapted before records none)."""
    rows = stored_rows(metadata)
    return set(() if rows is None else rows.ids.tolist()) | set(metadata.get(TRAINED_IDS) or ())


def refuse_seen(seen, test_ids, fix: str = VALIDATE_SEEN) -> None:
    """Maps scored as ones the classifier never saw (``test_ids``) must hold none of ``seen`` (:func:`seen_ids`).

    Raises:
        ValueError: one line, how many and one of them, then ``fix``."""
    both = set(seen) & set(np.asarray(test_ids).tolist())
    if both:
        raise ValueError(f"{len(both)} of these maps (e.g. {sorted(both)[0]}) trained or calibrated this classifier, "
                         f"so its scores of them are not out of sample; {fix}")


def shared_inputs(pool: Rows, test: Rows) -> dict:
    """``{"shared_inputs": {...}, "warning": ...}`` when maps of an independent set ``test`` share an input example
    (other layers or heads of one sentence) with ``pool`` (the classifier's stored rows), else {}: refused by id they
    are not, but the CV keeps such maps in one fold, as they are not independent of each other."""
    shared = np.isin(test.group, pool.group)
    if not shared.any():
        return {}
    same = shared & np.isin(np.char.add(test.encoder, test.group), np.char.add(pool.encoder, pool.group))
    return {"shared_inputs": {"maps": int(shared.sum()), "same_encoder": int(same.sum()), "of": len(test)},
            "warning": f"{int(shared.sum())} of these {len(test)} maps ({int(same.sum())} of the same encoder) share "
                       f"an input example with maps that trained or calibrated this classifier (other layers or heads "
                       f"of the same sentence), so their figures are less out of sample than maps of new sentences; "
                       f"label maps of sentences the classifier was not trained on (`patterncnn sample` draws its "
                       f"examples by --seed from --split; a split no labelled set used holds none of them)"}


def validate_independent(pool: Rows, test: Rows, seed: int = 0, stored: dict | None = None, seen=None) -> dict:
    """Validation on maps the classifier was neither trained nor calibrated on (all of ``pool`` calibrates);
    ``stored``: the classifier's cross-validated validation (its bands widen count's intervals, as in a census);
    ``seen``: the ids of the maps it was trained or calibrated on (:func:`seen_ids`; default: ``pool``'s)."""
    refuse_seen(pool.ids.tolist() if seen is None else seen, test.ids)
    test = test.subset(test.uniform)
    if not len(test):
        raise ValueError(f"no map of that labelled set was drawn uniformly at random; {INDEPENDENT_HELP}")
    return _validate(pool, test, "independent", seed, stored)


def predict_labelled(classifier, annotations: str | Path):
    """(the labelled set, ``classifier``'s probabilities for its maps); ``classifier``: an
    :class:`patterncnn.classifier.onnx.OnnxClassifier`."""

    data = load_labelled(annotations)
    return data, classifier.predict(data.maps, data.seps)


def labelled_rows(data, probs: np.ndarray) -> Rows:
    """Rows (as the census's calibration reads them) of a labelled set scored by a classifier."""
    return map_rows(data.ids, data.y, probs, np.full(len(data.y), -1), data.meta, data.seps)


def label_scores(data, probs: np.ndarray, annotations: str | Path) -> dict:
    """How well the classifier labels a labelled set it never saw, against the resolved hand labels.

    Returns:
        {"maps", "votes": maps with two or more annotator votes, "report": per class precision/recall/F1/support,
        the confusion matrix and Cohen's kappa (None when the labels hold one class), "groups": {"all" |
        "family F" | "encoder E": {"all": scores, "agreed": scores}}}, where scores are
        :func:`patterncnn.core.scores.subset_scores` (macro-F1 over the classes the subset's labels hold) and
        "agreed" keeps the maps where at least two annotators gave the same label (None without votes), and
        "against_one_annotator": :func:`patterncnn.training.evaluate.annotator_yardstick` with the classifier as its one
        method ({} without three annotators per map).
    """
    from sklearn.metrics import cohen_kappa_score

    pred = probs.argmax(1)
    votes = load_votes(annotations, data.ids, data.y)
    agreed = votes.agreed
    tags = np.array([tag_of(i) for i in data.ids])
    fams = families(data.ids)
    masks = {"all": np.ones(len(pred), dtype=bool)}
    masks.update({f"family {f}": fams == f for f in sorted(set(fams.tolist()))})
    if len(set(tags.tolist())) > len(set(fams.tolist())):
        masks.update({f"encoder {t}": tags == t for t in sorted(set(tags.tolist()))})
    full = classification_report(data.y, pred)  # its macro-F1 would charge absent classes a zero: not kept
    one_class = len(set(data.y.tolist()) | set(pred.tolist())) < 2
    report = {k: full[k] for k in ("per_class", "accuracy", "confusion_matrix", "confusion_matrix_order")}
    report["cohen_kappa"] = None if one_class else float(cohen_kappa_score(data.y, pred,
                                                                            labels=list(range(len(LABELS)))))
    return {"maps": len(pred), "votes": int((votes.n >= 2).sum()), "report": report,
            "groups": {g: {"all": subset_scores(data.y, pred, m), "agreed": subset_scores(data.y, pred, m & agreed)}
                       for g, m in masks.items()},
            "against_one_annotator": annotator_yardstick(votes, data.ids, fams, {"classifier": pred})}


def _pct(x: float) -> str:
    return f"{100 * x:.1f}"


def markdown_table(v: dict) -> str:
    """The validation as a Markdown table (model card, README), one row per estimator, scope and encoder."""
    lines = ["| estimator | calibrated on | encoder | maps (tasks) | mean \\|share error\\| per pattern, points | "
             "worst pattern: \\|error\\| (estimate vs hand, %) | SE of the hand shares, points | "
             "95 % interval holds the hand share | interval over examples only |",
             "| --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    for r in v["results"]:
        best = (r["estimator"], r["scope"]) == (v["best"]["estimator"], v["best"]["scope"])
        name = f"**{r['estimator']}**" if best else r["estimator"]
        for enc, e in r["encoders"].items():
            w = e["worst"]
            lines.append(f"| {name} | {r['scope'] or '—'} | {enc} | {e['maps']} ({e['tasks']}) | "
                         f"{_pct(e['mean_abs_error'])} | {w['label']}: {_pct(w['abs_error'])} ({_pct(w['estimate'])} "
                         f"vs {_pct(w['hand'])}) | {_pct(e['hand_se'])} | {e['covered_cells']}/{e['cells']} "
                         f"({_pct(e['coverage'])} %) | {_pct(e['coverage_examples_only'])} % |")
    b = best_result(v["results"])
    how = ("cross-validated in two halves (each half calibrated on the other half's folds only; errors averaged "
           "over the halves)" if v["mode"] == "cross-validated" else "on maps this classifier never saw")
    lines += ["", f"Measured {how}, on {v['maps']} uniformly drawn hand-labelled maps. Best over all encoders "
                  f"(bold: the smallest worst-encoder error among those whose intervals hold the hand share in "
                  f"≥ {_pct(TARGET_COVERAGE)} % of cells): "
                  f"**{b['estimator']}**{' calibrated on ' + b['scope'] + ' rows' if b['scope'] else ''}: worst encoder "
                  f"{_pct(b['worst_encoder_mean_abs_error'])} points, intervals hold the hand share in "
                  f"{_pct(b['coverage'])} % of cells (targets: ≤ {_pct(TARGET_ERROR)} points for every encoder, "
                  f"≥ {_pct(TARGET_COVERAGE)} % of cells: {'met' if b['meets_targets'] else '**not met**'}"
                  + (f"; {few} maps of an encoder are too few to judge them, under {MIN_CALIBRATED_MAPS}"
                     if (few := min(e["maps"] for e in b["encoders"].values())) < MIN_CALIBRATED_MAPS else "")
                  + ")."]
    return "\n".join(lines)


def labels_table(lab: dict) -> str:
    """:func:`label_scores` as Markdown: one row per group, all maps and agreed maps."""
    def cell(sc):
        return "—" if sc is None else f"{sc['macro_f1']:.3f} / {sc['accuracy']:.3f} ({sc['maps']})"

    lines = ["| maps | macro-F1 / accuracy (maps), all | agreed | per-class F1 (all): "
             + ", ".join(LABELS) + " |", "| --- | --- | --- | --- |"]
    cm = lab["report"]["confusion_matrix"]
    for g, sc in lab["groups"].items():
        f1 = " / ".join(f"{v:.2f}" if v is not None else "—" for v in sc["all"]["per_class_f1"].values())
        lines.append(f"| {g} | {cell(sc['all'])} | {cell(sc['agreed'])} | {f1} |")
    kappa = lab["report"]["cohen_kappa"]
    predicted = [sum(row[k] for row in cm) for k in range(len(LABELS))]
    wrong = [f"{LABELS[k]} on {n} map{'s' if n != 1 else ''}" for k, n in enumerate(predicted) if n and not sum(cm[k])]
    lines += ["", f"The classifier's labels against the hand labels on {lab['maps']} maps it never saw: Cohen's kappa "
                  + ("n/a (one class only)" if kappa is None else f"{kappa:.3f}")
                  + ". A macro-F1 averages the classes the maps' labels hold (\"—\": a class no map is labelled"
                  + (f"; the classifier still predicted {', '.join(wrong)}, all wrong" if wrong else "")
                  + "); \"agreed\": at least two annotators gave the same label"
                  + (" (no map of this set has two annotator votes in votes.csv, so none is measured)."
                     if not lab.get("votes") else "."), "",
              "| label \\ prediction | " + " | ".join(LABELS) + " |", "| --- |" + " --- |" * len(LABELS)]
    lines += [f"| {name} | " + " | ".join(str(c) for c in row) + " |" for name, row in zip(LABELS, cm)]
    y = lab.get("against_one_annotator")
    if y:
        lines += ["", "Against one annotator: for each map and each of its annotators where more than half of the other "
                      "annotators (two or more) agree, that annotator's label and the classifier's are scored against "
                      "their label (the same pairs for both; macro-F1 / accuracy (pairs)):", "",
                  "| maps | one annotator | the classifier |", "| --- | --- | --- |"]
        def pairs(sc):
            return f"{sc['macro_f1']:.3f} / {sc['agree']:.3f} ({sc['pairs']})"

        lines += [f"| {fam} ({r['maps']} maps) | {pairs(r['annotator'])} | {pairs(r['methods']['classifier'])} |"
                  for fam, r in y.items()]
    return "\n".join(lines)


def markdown_report(v: dict) -> str:
    """What ``patterncnn validate`` prints and writes to ``validation.md``: the share estimators' table, and
    with an independent labelled set the classifier's labels against the hand labels."""
    parts = [markdown_table(v)] if v.get("results") else [f"Share estimates not validated: {v['shares_skipped']}"]
    if v.get("warning"):
        parts.insert(0, f"**Warning:** {v['warning']}.")
    if v.get("best_per_encoder"):
        best = "; ".join(f"{enc} **{d['estimator']}**{' (' + d['scope'] + ' rows)' if d['scope'] else ''}"
                         for enc, d in v["best_per_encoder"].items())
        parts.append(f"Best per encoder here: {best}. The census takes each encoder's default estimator from the "
                     f"classifier's own validation (its model card, *Share estimators*), not from this run.")
    if v.get("labels"):
        parts.append(labels_table(v["labels"]))
    return "\n\n".join(parts)


RESULTS = ("validation.json", "validation.md")


def run_validation(classifier, out: str | Path, annotations: str | Path | None = None, seed: int = 0,
                   overwrite: bool = False) -> dict:
    """``patterncnn validate``: validate, then write ``validation.json`` and ``validation.md`` into ``out``.

    An earlier validation in ``out`` needs ``overwrite`` (:func:`patterncnn.core.fileio.output_folder`).

    Args:
        classifier: an :class:`patterncnn.classifier.onnx.OnnxClassifier` trained by ``patterncnn train`` (it stores its rows).
        annotations: an independent labelled set; None validates cross-validated on the stored rows. Its
            labels are scored too (:func:`label_scores`); without uniformly drawn maps, only they are.
    """
    out = output_folder(out, RESULTS, overwrite)
    rows = stored_rows(classifier.metadata)
    if rows is None:
        raise ClassifierError(f"{classifier.path} stores no out-of-fold rows to calibrate and validate with; {RETRAIN}")
    if annotations is None:
        v = validate_rows(rows, seed)
    else:
        data, probs = predict_labelled(classifier, annotations)
        test = labelled_rows(data, probs)
        seen = seen_ids(classifier.metadata)
        if test.uniform.any():
            v = validate_independent(rows, test, seed, classifier.metadata.get("validation"), seen)
        else:
            refuse_seen(seen, test.ids)
            v = {"mode": "independent", "maps": 0, "seed": seed,
                 "shares_skipped": f"no map of {annotations} was drawn uniformly at random; {INDEPENDENT_HELP}"}
        v["labels"] = label_scores(data, probs, annotations)
        v.update(shared_inputs(rows, test))
    v = {"created_by": f"patterncnn {__version__}", "classifier": {
        "path": public_path(classifier.path), "sha256": sha256_file(classifier.path), "version": classifier.model_version},
        "annotations": None if annotations is None else str(annotations), **v}
    with staged_outputs(out, ("validation.md", "validation.json")) as stage:  # the json, what is read, marks it done
        write_text(stage / "validation.md", markdown_report(v) + "\n")
        write_json(stage / "validation.json", v)
    return v
