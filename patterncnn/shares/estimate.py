"""Pattern shares from the classifier's outputs, corrected for its errors, with intervals in two parts.

Usage::

    plan = plan_for(classifier.metadata, estimator=None, scope=None, encoder=enc.tag)  # None: the validated best
    part = plan.estimate(probs, labels, single)      # (N, M, 5), (N, M), (N,) of one task's N examples
    part["shares"], part["ci95"], part["ci95_parts"]["examples"], part["ci95_parts"]["classifier"]

Estimators (:data:`ESTIMATORS`):

- ``count``: the share of maps whose most probable pattern is each one (argmax counting);
- ``probs``: the mean of temperature-scaled probabilities (:mod:`patterncnn.shares.calibrate`);
- ``adjusted``: adjusted classify-and-count (Forman 2008): the argmax shares pushed through the
  inverse of the out-of-fold confusion matrix (its ridge least-squares form), clipped at 0 and
  renormalised.

Every estimator here is a sum over maps of a per-map vector, then :func:`finish`. That makes the
intervals cheap: :func:`shares_with_intervals` resamples examples (the census's examples, with the
calibration fixed) and, separately, takes the calibration's bootstrap replicates (the census's maps
fixed); their joint resampling gives the total interval. ``count`` has no calibration: its
classifier part is instead the classifier's validated share error for each pattern (the ``bias_band``
of :mod:`patterncnn.training.validate`: the largest pooled error it made on that pattern in cross-validated
validation), added to the examples' interval in quadrature. Without a validation it has none, and
its interval covers the examples only.
"""

from __future__ import annotations

import dataclasses
import logging
from typing import Callable

import numpy as np

from ..core.errors import ClassifierError
from ..core.labels import LABELS
from ..core.maps import encoder_family, is_fine_tune
from .calibrate import CAL_BOOTSTRAP, Calibration, Rows, fit_calibration, scope_mask, stored_rows, temper

log = logging.getLogger(__name__)

ESTIMATORS = ("count", "probs", "adjusted")
BOOTSTRAP = 1000  # resamples of the examples
TARGET_ERROR = 0.03  # validated mean |share error| per class, per encoder
TARGET_COVERAGE = 0.90  # share of (task, class) cells whose 95% interval holds the hand-labelled share
# An encoder validated on fewer maps of its own defaults to count, with its band: a calibrated estimator's interval
# carries no share error, and coverage measured on a few maps per task (whose hand shares and intervals are wide)
# says little of a census's intervals over thousands of maps (walkthrough 8: probs on 42 maps "held" 92% of cells,
# then printed +-1.2 points under a validated error of 4.7). The shipped encoders have 120 to 360.
MIN_CALIBRATED_MAPS = 100
# The examples' part of every interval is a percentile bootstrap over the task's examples, which few examples cannot
# support: simulated with the classifier's error switched off (research/intervals/sim_few_examples.py, its .out beside
# it; true shares 55 / 15 / 17 / 1 / 12%, 144 maps per example from a per-example mix, 400 replicates, so +-2 points
# per figure), the "95%" interval held vertical's true share in
# 0 / 47 / 81 / 88 / 92 / 93% of replicates at 1 / 2 / 5 / 10 / 20 / 64 examples, and block's (a rare pattern) in
# 0 / 38 / 67 / 79 / 87 / 93%. 20 is the fewest simulated at which the common pattern reached TARGET_COVERAGE; a
# census of a task with fewer warns (:func:`few_examples_warning`). With 1 example the interval has zero width.
MIN_EXAMPLES = 20


def too_few_to_judge(maps: int | None) -> bool:
    """Whether an encoder validated on ``maps`` maps of its own (None: not recorded) is too few to judge the targets
    on: its errors and coverage come from cells of a few maps each (6 maps of one class show no error and full
    coverage), so its targets are never met."""
    return maps is not None and maps < MIN_CALIBRATED_MAPS


def few_maps_reason(maps: int) -> str:
    """Why an encoder validated on ``maps`` (< MIN_CALIBRATED_MAPS) maps of its own counts: the census and ``adapt``
    say it in these words."""
    return f"its {maps} maps are too few to validate a calibrated estimator's intervals"
RETRAIN = "retrain it with `patterncnn train` (it stores the calibration with the model)"


def few_examples_warning(task: str, n: int, of: int, fix: str | None = None) -> str | None:
    """The warning a census records for ``task`` when its ``n`` examples (of the ``of`` its split holds) are fewer
    than MIN_EXAMPLES, else None; ``fix``: what to do instead of the census's advice on --limit."""
    if n >= MIN_EXAMPLES:
        return None
    fix = fix or (f"give a larger --limit (limit= in Python; at least {MIN_EXAMPLES}, the paper's census takes 1000)"
                  if n < of else "its split holds no more (a larger --limit cannot help)")
    return (f"{task} has only {n} example{'' if n == 1 else 's'}, fewer than the {MIN_EXAMPLES} that the bootstrap "
            f"over examples needs: in simulation its 95% interval held a common pattern's true share in 88% of cases "
            f"at 10 examples and 47% at 2, and it has zero width at 1, so {task}'s intervals are narrower than they "
            f"claim; {fix}")


def wilson(share: float, n: int, z: float = 1.96) -> tuple[float, float]:
    """The Wilson score 95% interval of a proportion ``share`` of ``n`` independent examples (a head's share of
    one pattern: one map per example). It holds the examples' noise only, not the classifier's errors."""
    if n <= 0:
        return 0.0, 1.0
    centre = (share + z * z / (2 * n)) / (1 + z * z / n)
    half = z * np.sqrt(share * (1 - share) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return float(max(0.0, centre - half)), float(min(1.0, centre + half))


def finish(x: np.ndarray) -> np.ndarray:
    """Summed per-map vectors (..., 5) -> shares: clipped at 0, renormalised (uniform if nothing is left)."""
    x = np.clip(x, 0.0, None)
    s = x.sum(-1, keepdims=True)
    return np.divide(x, s, out=np.full(x.shape, 1 / x.shape[-1]), where=s > 0)


def clipped_at_zero(x: np.ndarray) -> dict:
    """{pattern: its share before :func:`finish` clipped it} for the patterns whose summed per-map vector ``x`` (5,)
    is negative ({} when none is): ``adjusted`` goes below zero where the argmax mix lies outside what the
    calibration's confusion can produce, and its other shares are renormalised over what is left."""
    total = float(x.sum())
    return {name: float(v / total) for name, v in zip(LABELS, x) if v < 0} if total > 0 else {}


def example_sums(estimator: str, probs: np.ndarray, labels: np.ndarray, single: np.ndarray,
                 cal: Calibration | None) -> np.ndarray:
    """Each example's summed per-map vectors, per calibration replicate.

    Args:
        probs: (N, M, 5) probabilities of the M maps of N examples (segment rule applied).
        labels: (N, M) argmax labels.
        single: (N,) bool, single-segment inputs.
        cal: the calibration (None for ``count``).

    Returns:
        (R, N, 5); R = 1 for ``count``, else the calibration's replicates.
    """
    counts = np.stack([(labels == k).sum(1) for k in range(len(LABELS))], axis=1).astype(np.float64)  # (N, 5)
    if estimator == "count":
        return counts[None]
    if cal is None:
        raise ValueError(f"the {estimator} estimator needs a calibration")
    if estimator == "adjusted":
        kinds = (single, ~single)
        return sum(np.einsum("rij,nj->rni", cal.adjust[:, k], counts * kinds[k][:, None]) for k in (0, 1))
    if estimator == "probs":
        temps, which = np.unique(cal.temperature, return_inverse=True)  # the grid repeats: temper each T once
        sums = np.stack([temper(probs, t).sum(1) for t in temps])  # (U, N, 5)
        return sums[which]
    raise ValueError(f"unknown estimator {estimator!r}; choose one of {', '.join(ESTIMATORS)}")


def _ci(samples: np.ndarray) -> dict:
    lo, hi = np.percentile(samples, [2.5, 97.5], axis=0)
    return {name: [float(a), float(b)] for name, a, b in zip(LABELS, lo, hi)}


def shares_with_intervals(sums: np.ndarray, seed: int = 0, band: np.ndarray | None = None) -> dict:
    """Shares and 95% percentile intervals from per-example sums (R, N, 5) (:func:`example_sums`).

    ``examples``: N examples resampled with replacement, calibration replicate 0. ``classifier``:
    the calibration's replicates 1..R-1 on all examples; with no replicates (R = 1, ``count``), the
    point ± ``band`` (5,) (the validated share error per pattern), or zero width without one.
    ``ci95`` (total): both at once, resample b paired with replicate b; with a band, the examples'
    interval widened on each side by the band in quadrature. Intervals are clipped to [0, 1].
    """
    r, n, _ = sums.shape
    rng = np.random.default_rng(seed)
    w = rng.multinomial(n, np.full(n, 1 / n), size=BOOTSTRAP).astype(np.float64)  # (B, N)
    point = finish(sums[0].sum(0))
    examples = finish(w @ sums[0])  # (B, 5)
    if r > 1:
        k = min(r - 1, BOOTSTRAP)
        classifier = finish(sums[1:].sum(1))
        total = finish(np.einsum("bn,bnk->bk", w[:k], sums[1 : k + 1]))
    elif band is not None:
        return _banded(point, _ci(examples), np.asarray(band, dtype=np.float64))
    else:
        classifier, total = point[None], examples
    return {"shares": {name: float(s) for name, s in zip(LABELS, point)}, "ci95": _ci(total),
            "ci95_parts": {"examples": _ci(examples), "classifier": _ci(classifier)}}


def _banded(point: np.ndarray, examples: dict, band: np.ndarray) -> dict:
    """Point shares with the examples' interval and a systematic ± ``band`` per pattern, combined in quadrature."""
    def clip(x: float) -> float:
        return float(min(max(x, 0.0), 1.0))

    total, classifier = {}, {}
    for name, p, b in zip(LABELS, point, band):
        lo, hi = examples[name]
        total[name] = [clip(p - np.hypot(p - lo, b)), clip(p + np.hypot(hi - p, b))]
        classifier[name] = [clip(p - b), clip(p + b)]
    return {"shares": {name: float(s) for name, s in zip(LABELS, point)}, "ci95": total,
            "ci95_parts": {"examples": examples, "classifier": classifier}}


def bias_band(validated: dict | str | None) -> np.ndarray | None:
    """(5,) the validated share error per pattern that widens ``count``'s interval, or None when unknown
    (``validated``: a :func:`validated_error` record, or what a census records when there is none)."""
    b = validated.get("bias_band") if isinstance(validated, dict) else None
    return None if b is None else np.array([b[name] for name in LABELS], dtype=np.float64)


def segment_band(band: np.ndarray | None, single: np.ndarray) -> np.ndarray | None:
    """``band`` for a task whose inputs are ``single`` (N,) bool: with no input of two segments block cannot occur
    (the segment rule), so its band is 0; else ``band`` as it is."""
    if band is None or not len(single) or not bool(np.all(single)):
        return band
    band = np.array(band, dtype=np.float64)
    band[LABELS.index("block")] = 0.0
    return band


def _add_warning(v: dict, text: str) -> dict:
    """``v`` with ``text`` added to its warning (a second warning never replaces the first)."""
    v["warning"] = f"{v['warning']}. Also: {text}" if v.get("warning") else text
    return v


def unseen_family(unseen: dict | None, family: str, estimator: str = "count") -> dict:
    """The error record of an encoder family the classifier was never validated on (and maybe never saw).

    With the classifier's leave-one-family-out measurement (``unseen``: :func:`patterncnn.training.evaluate.
    unseen_family`), the band is what holding a family out cost: per pattern, the worst held-out family's mean
    |share error| over seeds; without it, the validated encoders' worst band stays and the warning says that
    it is unmeasured.
    """
    if not unseen:
        return {"warning": (
            f"the encoder family {family} is none the classifier was validated on, and how far it errs there is "
            f"unmeasured; label ~100 of its maps drawn with `patterncnn sample --design uniform` and check them with "
            f"`patterncnn validate --annotations`, or adapt the classifier to it (`patterncnn adapt`), before trusting "
            f"these intervals")}
    band, missing = unseen["bias_band"], unseen.get("not_held_out") or []
    # a family loeo_plan could not hold out (too few maps to train without it) is not in the worst: say so
    untested = (f"; {', '.join(missing)} could not be held out (too few maps of the others to train without it), so "
                f"the band may understate" if missing else "")
    return {"encoder": f"not validated on the family {family}; the band is what holding a family out cost "
                       f"({', '.join(unseen['families'])}, {unseen['seeds']} seeds each{untested})",
            "mean_abs_error": unseen["mean_abs_error"], "abs_error": band, "bias_band": band, "coverage": None,
            "warning": (f"the encoder family {family} is none the classifier was validated on. Holding out each "
                        f"family it was trained on ({', '.join(unseen['families'])}; mean over {unseen['seeds']} "
                        f"seeds{untested}), it labelled {100 * unseen['accuracy']:.0f}% of the maps right on the "
                        f"family it did worst on, and misestimated a pattern's share by "
                        f"{100 * unseen['mean_abs_error']:.1f} points on average (the worst family per pattern; up to "
                        f"{100 * max(band.values()):.1f}); "
                        + ("the intervals carry that band" if estimator == "count" else
                           f"{estimator}'s intervals do not carry that band (`--estimator count`'s do)")
                        + ". For a validated interval of its own, label ~100 of its maps and adapt the classifier to "
                          "it (`patterncnn adapt`)")}


def validated_error(validation: dict | None, estimator: str, scope: str | None, encoder: str) -> dict | None:
    """The validated share error of (estimator, scope) for ``encoder`` (all validated encoders pooled if absent)."""
    if not validation:
        return None
    for res in validation["results"]:
        if res["estimator"] == estimator and res["scope"] in (scope, None):
            if encoder in res["encoders"]:
                return _coverage_warning({"encoder": encoder, **res["encoders"][encoder],
                                          **_cell_maps(res.get("cells"), [encoder])})

            encs = list(res["encoders"].values())
            family = encoder_family(encoder)
            worst = {"encoder": f"not validated on {encoder}; worst of the validated encoders "
                                f"({', '.join(res['encoders'])})",
                     "mean_abs_error": res["worst_encoder_mean_abs_error"], "coverage": res["coverage"],
                     **_cell_maps(res.get("cells"), list(res["encoders"]))}
            for key in ("abs_error", "bias_band"):  # per pattern, the worst encoder's
                if all(key in e for e in encs):
                    worst[key] = {n: max(e[key][n] for e in encs) for n in LABELS}
            if family not in {encoder_family(e) for e in res["encoders"]}:
                worst.update(unseen_family(validation.get("unseen_family"), family, estimator))
            elif estimator != "count" and worst["mean_abs_error"] > TARGET_ERROR:
                # count's interval carries the worst encoder's band; the calibrated estimators' intervals do not
                _add_warning(worst, f"{encoder} has no validated maps of its own; with {estimator} the validated "
                                    f"encoders erred by up to {100 * worst['mean_abs_error']:.1f} points per pattern "
                                    f"on average (target {100 * TARGET_ERROR:.0f}), which its intervals do not "
                                    f"carry. `--estimator count` gives intervals that carry the validated encoders' "
                                    f"band; for a validated interval of its own, label ~100 of its maps and adapt the "
                                    f"classifier to it (`patterncnn adapt`)")
            return _coverage_warning(worst)
    return None


def _cell_maps(cells: dict | None, encoders: list[str]) -> dict:
    """``{"cell_maps": [fewest, most]}``: the hand-labelled maps per validation cell (one half of one task's maps of
    one encoder) over ``encoders``' cells, which is what the validated coverage was measured on; {} when the
    validation does not hold its cells."""
    sizes = [c["maps"] for enc in encoders for half in (cells or {}).get(enc, {}).values() for c in half.values()
             if isinstance(c, dict) and "maps" in c]
    return {"cell_maps": [min(sizes), max(sizes)]} if sizes else {}


def _coverage_warning(v: dict) -> dict:
    """``v`` with a warning when its 95% intervals held the hand-labelled share in fewer than TARGET_COVERAGE of
    the validation's cells, added to any warning it carries: the census's intervals are then narrower than they
    claim."""
    if v.get("coverage") is not None and v["coverage"] < TARGET_COVERAGE and "held the hand" not in v.get("warning", ""):
        _add_warning(v, f"in validation, this estimator's 95% intervals held the hand-labelled share in only "
                        f"{100 * v['coverage']:.0f}% of cells (target {100 * TARGET_COVERAGE:.0f}%), so these "
                        f"intervals are narrower than they claim; for a better-founded choice, label more uniformly "
                        f"drawn maps of this encoder (`patterncnn sample --design uniform`, then `patterncnn validate "
                        f"--annotations` or `patterncnn adapt`)")
    return v


@dataclasses.dataclass
class Plan:
    """How a census estimates shares: the estimator, its calibration, and how far it was validated."""

    estimator: str
    scope: str | None  # calibration scope used (None for count)
    calibration: Calibration | None
    chosen_by: str
    validated: dict | None

    def estimate(self, probs: np.ndarray, labels: np.ndarray, single: np.ndarray, seed: int = 0) -> dict:
        """Shares and intervals of one task, plus the point shares of every estimator available."""
        band = segment_band(bias_band(self.validated), single) if self.estimator == "count" else None
        sums = example_sums(self.estimator, probs, labels, single, self.calibration)
        out = shares_with_intervals(sums, seed, band)
        clipped = clipped_at_zero(sums[0].sum(0))
        if clipped:
            out["clipped_at_zero"] = clipped
        names = ESTIMATORS if self.calibration is not None else ("count",)
        point = self.calibration.first() if self.calibration is not None else None
        out["shares_by_estimator"] = {e: dict(zip(LABELS, finish(
            example_sums(e, probs, labels, single, point)[0].sum(0)).tolist())) for e in names}
        return out

    def describe(self) -> dict:
        """What census.json records about the estimate."""
        c = self.calibration
        return {"name": self.estimator, "chosen_by": self.chosen_by, "calibration": None if c is None else {
            "scope": self.scope, "rows": c.rows, "temperature": float(c.temperature[0]),
            "bootstrap_replicates": c.replicates - 1},
            "validated_share_error": self.validated or "unknown: this classifier was not validated on uniformly "
                                                        "drawn hand-labelled maps (`patterncnn validate`)"}


def describe(e: dict) -> str:
    """A census's ``estimator`` record (:meth:`Plan.describe`) in two lines for the terminal."""
    c = e["calibration"]
    v = e["validated_share_error"]
    banded = bias_band(v) is not None
    how = (f"estimator {e['name']} ({e['chosen_by']})" + (f", calibrated on {c['rows']} labelled maps ({c['scope']} "
           f"scope, temperature {c['temperature']:.2f})" if c else "") + "; 95% interval over examples"
           + (" and the classifier's calibration" if c else " and the classifier's validated share error per pattern"
              if banded else " only (the classifier's errors are not in it)"))
    if not isinstance(v, dict):
        return f"{how}\nvalidated share error: {v}"
    on = f"{v['encoder']}, {v['maps']} hand-labelled maps" if "maps" in v else v["encoder"]
    return (f"{how}\nvalidated share error ({on}): mean {100 * v['mean_abs_error']:.1f} points per pattern"
            + (f", worst {v['worst']['label']} {100 * v['worst']['abs_error']:.1f}" if "worst" in v else "")
            + (f"\n{cells_measured_on(v)}: their 95% intervals held the hand-labelled share in "
               f"{100 * v['coverage']:.0f}% (not the coverage of this census's intervals)"
               if v.get("coverage") is not None else "; how often its intervals hold the true share is unmeasured")
            + (f"\nwarning: {v['warning']}" if "warning" in v else ""))


def cells_measured_on(v: dict) -> str:
    """What a validated coverage was measured on: validation cells, and how many maps each held (the examples' part
    of their intervals, wide on so few maps, makes most of that coverage; a census's intervals over far more maps
    are mostly the classifier's part, and hold less often: docs/pages/commands/census.md, 'How far the intervals
    hold')."""
    if v.get("cell_maps"):
        return f"validation cells of {v['cell_maps'][0]}-{v['cell_maps'][1]} maps each"
    if all(isinstance(v.get(k), int) and v[k] for k in ("maps", "tasks", "halves")):  # a census.json of before
        return f"validation cells of about {v['maps'] / (v['tasks'] * v['halves']):.0f} maps each"
    return "validation cells of a few dozen maps each at most"


def pattern_errors(e: dict) -> dict | None:
    """Per-pattern validated share error in a census's ``estimator`` record, or None when unknown."""
    v = e.get("validated_share_error")
    if not isinstance(v, dict):
        return None
    return v.get("abs_error") or {n: v["mean_abs_error"] for n in LABELS}


def plan_for(metadata: dict, estimator: str | None, scope: str | None, encoder: str, seed: int = 0,
             chosen_by: str | None = None) -> Plan:
    """The census's estimate for a classifier (its metadata) and an encoder tag.

    ``estimator`` None means the one that validated best on ``encoder``'s uniformly drawn maps (the
    validation's ``best_per_encoder``; ``count`` when they are fewer than MIN_CALIBRATED_MAPS), else on those of an
    encoder of its family (a fine-tune takes its base encoder's); for a family never validated ``count`` when the
    validation holds the leave-one-family-out measurement (``unseen_family``), else the best over all validated encoders; without validation ``count``;
    ``scope`` None the scope validated with it, else the best validated scope for that estimator, else
    ``encoder`` (widened as needed). ``chosen_by``, when given, is recorded as the reason instead.
    """
    validation, estimator, scope, why = _choose(metadata, estimator, scope, encoder)
    chosen_by = chosen_by or why
    if estimator == "count":
        return Plan("count", None, None, chosen_by, validated_error(validation, "count", None, encoder))
    rows: Rows | None = stored_rows(metadata)
    if rows is None:
        raise ClassifierError(f"the {estimator} estimator needs the classifier's calibration, which this classifier "
                              f"lacks; {RETRAIN}, or use --estimator count")
    if scope is None:
        chosen = best_result([r for r in (validation or {}).get("results", []) if r["estimator"] == estimator])
        scope = chosen["scope"] if chosen else "encoder"
    mask, used = scope_mask(rows, scope, encoder)
    if used != scope:
        log.info("calibration scope %s has fewer rows than needed for %s; using %s", scope, encoder, used)
    cal = fit_calibration(rows.subset(mask), CAL_BOOTSTRAP, seed)
    # Validation ran each scope as asked, widening it as here: look it up by the scope asked for.
    return Plan(estimator, used, cal, chosen_by, validated_error(validation, estimator, scope, encoder))


def default_estimator(metadata: dict, encoder: str) -> str:
    """The estimator a census of ``encoder`` (a tag) uses when none is given (:func:`plan_for`)."""
    return _choose(metadata, None, None, encoder)[1]


def _choose(metadata: dict, estimator: str | None, scope: str | None,
            encoder: str) -> tuple[dict | None, str, str | None, str]:
    """(the classifier's validation, the estimator, the scope asked for, why) for :func:`plan_for`."""
    validation = _current_choices(metadata.get("validation"))
    on, mine = _validated_default(validation, encoder)
    best = mine or (validation or {}).get("best") or {}
    few = (f"validation on {on}: count, with its band ({few_maps_reason(mine['few_maps'])})"
           if mine and mine.get("few_maps") else None)
    chosen_by = "given" if estimator else few or (f"validation on {on} (best share error)" if mine else
                                           "validation (best share error)" if best else
                                           "default without validation: count")
    if not estimator and mine and on != encoder and mine["estimator"] != "count":
        # Inherited from a kin encoder: a calibrated estimator's interval does not carry the error it showed on the
        # validated encoders; when that error is over the target, count, whose interval carries their band.
        inherited = validated_error(validation, mine["estimator"], mine["scope"], encoder)
        if inherited and inherited["mean_abs_error"] > TARGET_ERROR:
            chosen_by = (f"no validated maps of its own; {on}'s {mine['estimator']} erred up to "
                         f"{100 * inherited['mean_abs_error']:.1f} points on the validated encoders: count, with "
                         f"their band")
            best = mine = {"estimator": "count", "scope": None}
    if not estimator and not mine and (validation or {}).get("unseen_family"):
        # A family never validated: count, whose interval carries the band measured by holding families out.
        best, chosen_by = {"estimator": "count"}, "the encoder's family was never validated: count, with the " \
                                                   "leave-one-family-out band"
    if not estimator and mine and scope is None:
        scope = mine["scope"]
    if estimator and scope is None:
        # the encoder's default given by name is the default: its scope too (the pooled best's scope otherwise, all
        # 1865 maps for MiniLM where its default takes the 900 uniform ones: other shares for the same name)
        _, default, default_scope, _ = _choose(metadata, None, None, encoder)
        if default == estimator:
            scope = default_scope
    estimator = estimator or best.get("estimator", "count")
    if estimator not in ESTIMATORS:
        raise ValueError(f"unknown estimator {estimator!r}; choose one of {', '.join(ESTIMATORS)}")
    return validation, estimator, scope, chosen_by


def _current_choices(validation: dict | None) -> dict | None:
    """``validation`` with its default choices (``best``, ``best_per_encoder``) made again from its results by
    today's rule, so that a classifier trained before a change of the rule is planned by it too; the stored choices
    where the results are too old to hold what the rule reads."""
    if not validation or not validation.get("results"):
        return validation
    try:
        best, per = best_result(validation["results"]), best_by_encoder(validation["results"])
    except (KeyError, TypeError):
        return validation
    return {**validation, "best": {"estimator": best["estimator"], "scope": best["scope"]}, "best_per_encoder": per}


def _validated_default(validation: dict | None, encoder: str) -> tuple[str | None, dict | None]:
    """(validated encoder, its best_per_encoder entry) for ``encoder``: itself, else one of its family, the
    pretrained base (tag ``family-hash``) before its validated fine-tunes (``family-task-hash``)."""

    per = (validation or {}).get("best_per_encoder") or {}
    if encoder in per:
        return encoder, per[encoder]
    kin = sorted((k for k in per if encoder_family(k) == encoder_family(encoder)), key=lambda k: (is_fine_tune(k), k))
    return (kin[0], per[kin[0]]) if kin else (None, None)


def _best(items: list, coverage: Callable, error: Callable):
    """The item with the smallest ``error`` among those whose ``coverage`` reaches TARGET_COVERAGE; when none does,
    the one whose intervals come nearest to it (the highest coverage; the smaller error among equals), so that the
    intervals a census prints are the least overconfident at hand; None when there are no items."""
    good = [x for x in items if coverage(x) >= TARGET_COVERAGE]
    if good:
        return min(good, key=error)
    return min(items, key=lambda x: (-coverage(x), error(x))) if items else None


def best_result(results: list[dict]) -> dict | None:
    """The validated result to use: smallest worst-encoder error among those whose 95% intervals cover the hand
    shares in at least TARGET_COVERAGE of the cells (the highest coverage when none does)."""
    return _best(results, lambda r: r["coverage"], lambda r: r["worst_encoder_mean_abs_error"])


def best_by_encoder(results: list[dict]) -> dict[str, dict]:
    """Per validated encoder tag, the (estimator, scope) to use by default: its smallest mean share error among
    those whose 95% intervals hold the hand shares in at least TARGET_COVERAGE of its cells (the highest coverage
    when none does); ``count`` for an encoder validated on fewer than MIN_CALIBRATED_MAPS maps (``few_maps``), whose
    targets are never met (too few maps to judge them).

    Returns:
        {encoder: {"estimator", "scope", "mean_abs_error", "coverage", "meets_targets", "cell_maps" (the fewest and
        most maps of its validation cells, when the results hold them)}}.
    """
    out = {}
    for enc in sorted({e for r in results for e in r["encoders"]}):
        found = [(r, r["encoders"][enc]) for r in results if enc in r["encoders"]]
        maps = found[0][1].get("maps")
        few = too_few_to_judge(maps) and any(r["estimator"] == "count" for r, _ in found)
        r, e = _best([re for re in found if re[0]["estimator"] == "count"] if few else found,
                     lambda re: re[1]["coverage"], lambda re: re[1]["mean_abs_error"])
        out[enc] = {"estimator": r["estimator"], "scope": r["scope"], "mean_abs_error": e["mean_abs_error"],
                    "coverage": e["coverage"], "meets_targets": bool(
                        not too_few_to_judge(maps) and e["mean_abs_error"] <= TARGET_ERROR
                        and e["coverage"] >= TARGET_COVERAGE),
                    **_cell_maps(r.get("cells"), [enc]), **({"few_maps": maps} if few else {})}
    return out
