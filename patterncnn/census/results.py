"""Finished census results read back, checked, shown and compared: what ``census --compare`` and the report need.

Nothing here runs an encoder or a classifier, so reading a result imports neither torch nor onnxruntime.
"""

from __future__ import annotations

import math
from pathlib import Path

from ..core.census_folder import FILE, CensusError, census_file, no_census  # noqa: F401 - imported from here too
from ..core.fileio import parse_json
from ..core.labels import LABELS
from ..shares.estimate import bias_band, describe, pattern_errors


def load_result(path: str | Path) -> dict:
    """A finished census (its folder or its ``census.json``; a folder of several is refused naming them:
    :func:`~patterncnn.core.census_folder.census_file`), checked to hold what :func:`compare` and :func:`table` read:
    a damaged or foreign file is refused naming the field at fault."""
    p = census_file(path)
    fix = f"run `patterncnn census` again to write {p}"
    result = parse_json(p.read_bytes(), f"{p} (a census result)", fix, CensusError)
    problem = result_problem(result)
    if problem:
        raise CensusError(f"{p} is not a census result: {problem}; {fix}")
    return result


def _number(x) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x)


def _per_label(x, path: str, interval: bool = False) -> str | None:
    """What is wrong with an object holding a number (or an interval) per pattern, or None."""
    if not isinstance(x, dict):
        return f"{path} must be an object with one entry per pattern"
    for name in LABELS:
        v = x.get(name)
        ok = isinstance(v, list) and len(v) == 2 and all(map(_number, v)) if interval else _number(v)
        if not ok:
            return f"{path}.{name} must be {'two numbers' if interval else 'a number'}"
    return None


def result_problem(r) -> str | None:
    """What is wrong with a census result for :func:`compare` and :func:`table`, or None."""
    if not isinstance(r, dict):
        return "it must be a JSON object"
    if not isinstance(r.get("encoder"), dict) or not isinstance(r["encoder"].get("model"), str):
        return "encoder.model must be a string"
    if not isinstance(r.get("tasks"), dict) or not r["tasks"]:
        return "tasks must be an object with one entry per task"
    for task, s in r["tasks"].items():
        where = f"tasks.{task}"
        if not isinstance(s, dict):
            return f"{where} must be an object"
        if not isinstance(s.get("examples"), int) or isinstance(s.get("examples"), bool):
            return f"{where}.examples must be a whole number"
        problem = _per_label(s.get("shares"), f"{where}.shares") or _per_label(s.get("ci95"), f"{where}.ci95", True)
        parts = s.get("ci95_parts", {})
        if not problem and (not isinstance(parts, dict) or "examples" in parts):
            problem = _per_label(parts.get("examples") if isinstance(parts, dict) else None,
                                 f"{where}.ci95_parts.examples", True)
        precision = s.get("precision")
        if not problem and precision and (not isinstance(precision, dict) or not isinstance(precision.get("budget"), int)
                                          or isinstance(precision.get("budget"), bool)):
            problem = f"{where}.precision must be an object with a whole-number budget"
        problem = problem or _heads_problem(s.get("heads"), f"{where}.heads")
        if problem:
            return problem
    e = r.get("estimator")
    if not isinstance(e, dict) or not isinstance(e.get("name"), str):
        return "estimator must be an object with a name"
    v = e.get("validated_share_error")
    if isinstance(v, dict):
        if v.get("bias_band") is not None and _per_label(v["bias_band"], "estimator.validated_share_error.bias_band"):
            return _per_label(v["bias_band"], "estimator.validated_share_error.bias_band")
        if v.get("abs_error"):
            return _per_label(v["abs_error"], "estimator.validated_share_error.abs_error")
        if not _number(v.get("mean_abs_error")):
            return "estimator.validated_share_error.mean_abs_error must be a number"
    return None


def _heads_problem(heads, where: str) -> str | None:
    """What is wrong with a task's per-head cells (what the report's grid reads), or None."""
    if not isinstance(heads, list) or not heads or not all(isinstance(row, list) for row in heads):
        return f"{where} must be a list of layers, each a list of heads"
    for i, row in enumerate(heads):
        for j, c in enumerate(row):
            if (not isinstance(c, dict) or not isinstance(c.get("majority"), str)
                    or not _number(c.get("majority_share"))):
                return f"{where}[{i}][{j}] must be an object with a majority and its majority_share"
            if problem := _per_label(c.get("shares"), f"{where}[{i}][{j}].shares"):
                return problem
            ci = c.get("majority_ci95")  # since 2026-11-29; a census of before has neither
            if ci is not None and not (isinstance(ci, list) and len(ci) == 2 and all(map(_number, ci))):
                return f"{where}[{i}][{j}].majority_ci95 must be two numbers, its interval's ends"
            if "clear" in c and not isinstance(c["clear"], bool):
                return f"{where}[{i}][{j}].clear must be true or false"
    return None


def census_text(result: dict, name: str | None = None) -> str:
    """What ``patterncnn census`` prints of one census (``CensusResult.table()`` gives the same): the encoder (``name``
    as the command was given it, else census.json's), its tag and backend, a note when its maps come from converted
    weights, the estimator and its interval, the table, each task's stopping reason under ``--precision`` and each
    task's warning (too few examples for its intervals)."""
    name, tag = name or result["encoder"].get("model"), result.get("encoder_tag")
    lines = [f"{name} ({f'{tag}, ' if tag else ''}backend {result.get('backend')}): share of (example, layer, head) maps"]
    if result.get("encoder_weights"):
        lines.append(f"note: the maps of {name} come from converted weights: {result['encoder_weights']}")
    lines += [describe(result["estimator"]), table(result)]
    lines += [f"{task}: {s['precision']['reason']}" for task, s in result["tasks"].items() if s.get("precision")]
    lines += [f"warning: {s['warning']}" for s in result["tasks"].values() if s.get("warning")]
    if note := clipped_note(result):
        lines.append(note)
    return "\n".join(lines)


def clipped_note(result: dict, tasks: list[str] | None = None) -> str | None:
    """One line naming the shares the estimator took below zero, which the table shows as 0.0% (census.json's
    ``clipped_at_zero``), or None when there are none. ``tasks``: only these (those compared); None: all."""
    clipped = [f"{name} on {task} ({100 * v:+.1f}%)" for task, s in result["tasks"].items()
               if tasks is None or task in tasks for name, v in (s.get("clipped_at_zero") or {}).items()]
    if not clipped:
        return None
    return (f"note: {result['estimator']['name']} took {', '.join(clipped)} below zero, shown as 0.0%: an "
            f"extrapolation, not an estimate (the argmax mix lies outside what its calibration produces; "
            f"census.json's shares_by_estimator.count has count's share)")


def table(result: dict) -> str:
    """A terminal table: one row per task, one column per pattern (share and 95% CI)."""
    head = f"{'task':<8} {'examples':>8} " + " ".join(f"{n:>21}" for n in LABELS)
    lines = [head, "-" * len(head)]
    for task, s in result["tasks"].items():
        cells = " ".join(f"{100 * s['shares'][n]:5.1f}% [{100 * s['ci95'][n][0]:4.1f},{100 * s['ci95'][n][1]:5.1f}]"
                         .rjust(21) for n in LABELS)
        used = f"{s['examples']}/{s['precision']['budget']}" if s.get("precision") else str(s["examples"])
        lines.append(f"{task:<8} {used:>8} {cells}")
    return "\n".join(lines)


def _inputs_note(task: str, a: dict, b: dict) -> str | None:
    """One line when A and B did not read the same inputs of ``task`` (another GLUE file, another sample of it, or
    inputs cut at another ``--max-length``, where either cut one), or None. Each difference then holds the inputs' difference too: the
    intervals over examples allow for another sample, not for another file or another cut."""
    sa, sb = a["tasks"][task], b["tasks"][task]
    data = [s.get("data") for s in (sa, sb)]
    said = []
    if None not in data and data[0] != data[1]:
        said.append("different GLUE files (their contents differ)")
    of = [s.get("of") for s in (sa, sb)]
    n = [s.get("examples") for s in (sa, sb)]
    whole = [x == y for x, y in zip(n, of)]
    reseeded = not all(whole) and a.get("seed") != b.get("seed")  # the seed draws the sample of a part
    # two --precision runs of one seed and one --limit take the file in the same shuffled order and stop where the
    # data say: the shorter sample is the start of the longer, which the intervals over examples allow for (two
    # limits draw two samples first, whose orders share little: 8 of STS-B's first 128 for 300 and 400)
    stopped = (all(s.get("precision") for s in (sa, sb)) and not reseeded and of[0] == of[1]
               and a.get("limit") == b.get("limit"))
    if ((n[0], of[0]) != (n[1], of[1]) or reseeded) and not stopped:
        seeds = f", seed {a.get('seed')} and {b.get('seed')}" if reseeded else ""
        said.append(f"different examples (A {n[0]} of {of[0]}, B {n[1]} of {of[1]}{seeds})")
    cut = [s.get("truncated") for s in (sa, sb)]
    if a.get("max_length") != b.get("max_length") and any(c != 0 for c in cut):  # None: not recorded, maybe cut
        said.append(f"inputs cut at different lengths (--max-length {a.get('max_length')} and {b.get('max_length')})")
    if not said:
        return None
    return (f"note: on {task}, A and B read {' and '.join(said)}, so each difference holds that difference too; "
            f"run both with the same --glue-dir, --limit, --seed and --max-length to compare encoders on the same "
            f"inputs")


def _apart(x: list[float], y: list[float]) -> bool:
    return x[0] > y[1] or y[0] > x[1]


def has_classifier_part(e: dict) -> bool:
    """Whether a census's intervals include the classifier: a calibration, or count's validated band."""
    return bool(e.get("calibration")) or bias_band(e.get("validated_share_error")) is not None


def _points(d: float, marks: str) -> str:
    """A difference in percentage points, to 0.1; a marked one that rounds to 0.0 gets two significant digits, so
    that it does not read as nothing (a share of 0.035 % against exactly 0, intervals apart, printed +0.0*)."""
    x = 100 * d
    if marks and round(x, 1) == 0 and x != 0:
        decimals = 1 - math.floor(math.log10(abs(x)))
        return f"{x:+6.{decimals}f}" if decimals <= 4 else f"{x:+6.1e}"
    return f"{round(x, 1) + 0.0:+6.1f}"  # + 0.0: a small fall prints +0.0, not -0.0


def _estimator(result: dict) -> str:
    """A census's estimator as compared: its name, and for a calibrated one the calibration's rows (two scopes give
    two estimates of one map's shares: MiniLM's adjusted moved RTE's diagonal 8.5 points from the uniform 900 to all
    1865 maps)."""
    e = result.get("estimator", {})
    scope = (e.get("calibration") or {}).get("scope")
    return e.get("name", "count") + (f" ({scope} scope)" if scope else "")


def compare(a: dict, b: dict) -> tuple[str, dict]:
    """Per-task, per-pattern share differences (b − a) between two census results, as text and data.

    Three checks per difference: the two example-bootstrap intervals are apart; the total intervals
    (examples and the classifier's calibration, or count's validated band) are apart; the difference exceeds the two censuses'
    validated share errors for that pattern added together (None when either is unknown). None of them (all None)
    when the two used different estimators (or calibrations) or classifiers: the difference then holds theirs too.

    Raises:
        CensusError: the two share no task (nothing to compare).
    """
    if not set(a["tasks"]) & set(b["tasks"]):
        raise CensusError(f"the two censuses share no task (A: {', '.join(a['tasks']) or 'none'}; B: "
                          f"{', '.join(b['tasks']) or 'none'}); compare two censuses run with a --task in common")
    est = [_estimator(r) for r in (a, b)]
    clf = [r.get("classifier") or {} for r in (a, b)]
    # other classifiers label the same maps otherwise: their difference is not the encoders' (helper 104's review)
    other_clf = all(c.get("sha256") for c in clf) and clf[0]["sha256"] != clf[1]["sha256"]
    mixed = est[0] != est[1] or other_clf
    err = [pattern_errors(r.get("estimator", {})) for r in (a, b)]
    no_part = [x for x, r in zip("AB", (a, b)) if not has_classifier_part(r.get("estimator", {}))]
    diff = {}
    lines = [f"B - A, percentage points (A: {a['encoder']['model']}, {est[0]}; B: {b['encoder']['model']}, {est[1]})",
             f"{'task':<8} " + " ".join(f"{n:>19}" for n in LABELS)]
    for task in a["tasks"]:
        if task not in b["tasks"]:
            continue
        sa, sb = a["tasks"][task], b["tasks"][task]
        d = {n: sb["shares"][n] - sa["shares"][n] for n in LABELS}
        if mixed:  # the difference holds the estimators' difference too: nothing is checked
            ex = tot = val = dict.fromkeys(LABELS)
        else:
            ex = {n: _apart(*(s.get("ci95_parts", {}).get("examples", s["ci95"])[n] for s in (sa, sb)))
                  for n in LABELS}
            # Count without a validated band has no classifier part: its total interval is the examples' alone.
            tot = {n: None if no_part else _apart(sa["ci95"][n], sb["ci95"][n]) for n in LABELS}
            val = {n: None if None in err else bool(abs(d[n]) > err[0][n] + err[1][n]) for n in LABELS}
        diff[task] = {"difference": d, "separated_examples": ex, "separated_total": tot, "exceeds_validated_error": val}
        marks = {n: ("*" if ex[n] else "") + ("*" if ex[n] and tot[n] else "") + ("!" if val[n] else "") for n in LABELS}
        lines.append(f"{task:<8} " + " ".join(f"{_points(d[n], marks[n])}{marks[n]:<3}".rjust(19) for n in LABELS))
    lines += [f"{x}: {note}" for x, r in zip("AB", (a, b)) if (note := clipped_note(r, list(diff)))]
    lines += [note for task in a["tasks"] if task in b["tasks"] and (note := _inputs_note(task, a, b))]
    if other_clf:
        names = [c.get("version") or c["sha256"][:12] for c in clf]
        lines.append(f"not checked: A's maps were classified by {names[0]} and B's by {names[1]}, so each difference "
                     f"holds the classifiers' difference too; run both censuses with the same --classifier to "
                     f"compare them")
        return "\n".join(lines), diff
    if mixed:
        one_name = len({e.split(" (")[0] for e in est}) == 1  # one estimator, two calibration scopes
        scopes = ", and the same --calibration-scope" if one_name else ""
        lines.append(f"not checked: A used the {est[0]} estimator and B the {est[1]} estimator, so each difference "
                     f"holds the estimators' difference too; run both censuses with the same --estimator (e.g. "
                     f"--estimator count{scopes}) to compare them")
        return "\n".join(lines), diff
    lines += ["*  the 95% intervals over examples do not overlap (the classifier held fixed)",
              "** the total 95% intervals (examples and the classifier's error) do not overlap either"
              if not no_part else "   (** not checked: the intervals of " + " and ".join(no_part) + " hold no classifier "
              "part: count with a classifier that was not validated)",
              "!  the difference exceeds the validated share errors of A and B for that pattern, added" if None not in err
              else "   (the classifier's validated share error is unknown for " + " and ".join(
                  x for x, e in zip("AB", err) if e is None) + ": not checked against it)"]
    return "\n".join(lines), diff
