"""Several annotators: agreement between them, and one label per map by majority or Dawid–Skene.

Usage::

    votes = rater_votes(annotation_rows)                      # {map_id: {rater: Vote}}, latest per rater
    resolved = resolve_votes(votes, "dawid-skene")            # {map_id: Resolution}
    report = agreement_report(annotation_rows, label_rows)    # pairwise Cohen's κ, Fleiss' κ, confusion
    print(format_report(report))
    pairs = held_out_rater(votes)                             # [(map_id, one rater's label, the others' label)]

A *vote* is one rater's label for one map: by default a rater is an annotator (Label Studio user)
and their vote is their latest labelled, not skipped annotation of the map. With
``raters="pass"`` each annotator's first, second, ... annotation of a map counts as a separate
rater ("me@x #1", "me@x #2"), which measures one annotator's self-agreement across blind passes.

Resolution methods:

* ``majority``: the label most raters gave. A *tie* (two or more labels share the most votes; with two
  raters, every disagreement) is left **unresolved**: no label, so the map is not trained on until a
  third annotator breaks it, or a named rule does (``majority-dawid-skene``).
* ``dawid-skene``: Dawid & Skene (1979). EM over all maps at once estimates each rater's confusion
  matrix and the class priors, then takes the label of highest posterior probability. A careful
  rater outvotes two careless ones. It needs many maps per rater (hundreds): on a few, the class
  priors dominate, and majority is the safer choice. It can also override a majority, even a
  unanimous one, when a group of raters shares no map with the others (below).
* ``majority-dawid-skene``: the majority wherever one label has the most votes; Dawid–Skene's label
  only for a tie (with three raters, a three-way split; with two, any disagreement).
* ``single``: a map that one rater labelled takes their label, whatever the method.

Every resolution says whether the votes were tied (``tie``), and the resolved label is *uncertain*
when more than half of the map's raters marked it so (guide rule 6), or when no rater gave it: one
annotator's flag alone does not make a map of several raters uncertain.
"""

from __future__ import annotations

import dataclasses
import json
import math
from collections import Counter, defaultdict
from itertools import combinations
from typing import Iterable, Sequence

import numpy as np

from ..core.labels import LABELS
from ..core.maps import encoder_family
from ..core.scores import subset_scores

# Dawid-Skene estimates each rater's confusion over five classes from their maps: a rater with fewer than this
# many is too few for it ("hundreds", above), and a tie it settles among them is its priors' call, not a measured one.
FEW_FOR_DAWID_SKENE = 100

METHODS = ("majority", "dawid-skene", "majority-dawid-skene")
# majority-dawid-skene: a map's label is its raters' majority where one label has the most votes, and
# Dawid-Skene's only where there is none (a tie; a three-way split for three raters). Dawid-Skene alone
# can override a majority, even a unanimous one, when a group of raters shares no map with the others:
# their confusion matrices are then fitted on their own maps only, and a label they use much more often
# than the rest of the set (block, on a pool pre-selected for block) gets read as another class.


@dataclasses.dataclass
class Vote:
    rater: str
    label: str
    uncertain: bool
    row: dict  # the annotation row (see patterncnn.labelling.sets.ANNOTATION_COLUMNS)


@dataclasses.dataclass
class Resolution:
    label: str  # "" for a tie left unresolved
    uncertain: bool  # more than half of the raters marked the map uncertain, or no rater gave the label
    vote: Vote | None  # the most recent vote for the chosen label (None: no rater gave it, or unresolved)
    method: str  # majority, dawid-skene, single, or unresolved (a tie that majority leaves open)
    p: float  # majority: share of votes for the label; dawid-skene: its posterior probability
    tie: bool = False  # two or more labels share the most votes
    n_uncertain: int = 0  # raters who marked the map uncertain


def _order(row: dict) -> tuple:
    """Sort key of an annotation by recency: updated_at (else created_at), then its id."""
    return (row.get("updated_at") or row.get("created_at") or "", int(row.get("ls_annotation_id") or 0))


def rater_votes(rows: Iterable[dict], raters: str = "annotator") -> dict[str, dict[str, Vote]]:
    """The votes per map: {map_id: {rater: Vote}} from annotation rows (skipped and empty ones do not vote).

    Args:
        rows: annotation rows (``map_id, annotator, label, uncertain, skipped, created_at, updated_at, ...``).
        raters: ``annotator`` (a rater's latest annotation counts) or ``pass`` (each annotation of an
            annotator counts as rater "annotator #k", k in order of creation).
    """
    if raters not in ("annotator", "pass"):
        raise ValueError(f"unknown raters {raters!r}; use 'annotator' or 'pass'")
    by_map: dict[str, list[dict]] = defaultdict(list)
    for r in rows:
        if r.get("label") and str(r.get("skipped")) != "True":
            by_map[r["map_id"]].append(r)
    votes: dict[str, dict[str, Vote]] = {}
    for map_id, anns in by_map.items():
        mine: dict[str, Vote] = {}
        seen: Counter = Counter()
        for r in sorted(anns, key=lambda r: (r.get("created_at") or "", int(r.get("ls_annotation_id") or 0))):
            who = r.get("annotator") or "?"
            seen[who] += 1
            rater = who if raters == "annotator" else f"{who} #{seen[who]}"
            if rater not in mine or _order(r) >= _order(mine[rater].row):
                mine[rater] = Vote(rater, r["label"], str(r.get("uncertain")) == "True", r)
        votes[map_id] = mine
    return votes


def _most_recent(votes: Iterable[Vote]) -> Vote | None:
    return max(votes, key=lambda v: _order(v.row), default=None)


def is_tie(votes: dict[str, Vote]) -> bool:
    """Whether two or more labels share the most votes (with two raters: whenever they disagree)."""
    top2 = Counter(v.label for v in votes.values()).most_common(2)
    return len(top2) > 1 and top2[0][1] == top2[1][1]


def uncertain_votes(votes: dict[str, Vote]) -> tuple[bool, int]:
    """(the map is uncertain: more than half of its raters marked it so, raters who marked it)."""
    n = sum(v.uncertain for v in votes.values())
    return 2 * n > len(votes), n


def majority(votes: dict[str, Vote]) -> Resolution:
    """The label most raters gave; a tie is left unresolved (label "", method ``unresolved``)."""
    counts = Counter(v.label for v in votes.values())
    top = max(counts.values())
    uncertain, n_uncertain = uncertain_votes(votes)
    if is_tie(votes):
        return Resolution("", uncertain, None, "unresolved", top / len(votes), True, n_uncertain)
    vote = _most_recent(v for v in votes.values() if counts[v.label] == top)
    return Resolution(vote.label, uncertain, vote, "majority", top / len(votes), False, n_uncertain)


@dataclasses.dataclass
class DawidSkene:
    posterior: np.ndarray  # (N, K) P(true class | votes) per item
    priors: np.ndarray  # (K,) class priors
    confusion: np.ndarray  # (J, K, K) P(rater j says l | true class k), rows sum to 1
    iterations: int


def dawid_skene(labels: np.ndarray, n_classes: int, max_iter: int = 500, tol: float = 1e-6,
                smoothing: float = 0.01, prior_correct: float = 1.0) -> DawidSkene:
    """Dawid–Skene EM: true-class posteriors, rater confusion matrices and class priors.

    Args:
        labels: (N, J) int class index that rater j gave item i, -1 where j did not label i.
        n_classes: K.
        smoothing: pseudo-count added to every confusion cell, so a rater never makes a label impossible.
        prior_correct: extra pseudo-count on the diagonal (a Dirichlet prior that raters are better
            than chance). Without it, a rater's row for a class they have not yet seen is uniform,
            and on small sets EM can prefer a common class that no rater gave.

    Returns:
        :class:`DawidSkene`. Initialised from the vote shares (soft majority), so with one rater, or
        with raters who always agree, it returns their labels.
    """
    labels = np.asarray(labels)
    n, j = labels.shape
    onehot = np.zeros((n, j, n_classes))  # (N, J, K)
    ii, jj = np.nonzero(labels >= 0)
    onehot[ii, jj, labels[ii, jj]] = 1.0
    voted = onehot.sum(1)  # (N, K)
    if (voted.sum(1) == 0).any():
        raise ValueError("every item needs at least one label")
    post = voted / voted.sum(1, keepdims=True)
    for it in range(1, max_iter + 1):
        priors = post.mean(0)  # (K,)
        conf = np.einsum("nk,njl->jkl", post, onehot) + smoothing + prior_correct * np.eye(n_classes)  # (J, K, K)
        conf /= conf.sum(2, keepdims=True)
        log_post = np.log(np.maximum(priors, 1e-12)) + np.einsum("njl,jkl->nk", onehot, np.log(conf))
        new = np.exp(log_post - log_post.max(1, keepdims=True))
        new /= new.sum(1, keepdims=True)
        done = np.abs(new - post).max() < tol
        post = new
        if done:
            break
    return DawidSkene(post, priors, conf, it)


def resolve_votes(votes: dict[str, dict[str, Vote]], method: str = "majority") -> dict[str, Resolution]:
    """One label per map from its raters' votes, by ``majority``, ``dawid-skene`` or ``majority-dawid-skene``.

    A map with one rater takes that rater's label (method ``single``). Dawid–Skene is fitted on the
    maps with two or more raters (with one rater per map it cannot tell a rater's errors apart). With
    ``majority`` a tie stays unresolved (:func:`majority`); the other two methods resolve it by Dawid–Skene.
    """
    if method not in METHODS:
        raise ValueError(f"unknown resolution {method!r}; use one of {', '.join(METHODS)}")
    out = {m: Resolution(v.label, v.uncertain, v, "single", 1.0, False, int(v.uncertain)) for m, vs in votes.items()
           if len(vs) == 1 for v in vs.values()}
    votes = {m: v for m, v in votes.items() if len(v) > 1}
    if method == "majority":
        return {**out, **{m: majority(v) for m, v in votes.items()}}
    if method == "majority-dawid-skene":
        tied = [m for m, v in votes.items() if is_tie(v)]
        ds = resolve_votes(votes, "dawid-skene") if tied else {}  # fitted on every map, used on the ties only
        return {**out, **{m: majority(v) for m, v in votes.items()}, **{m: ds[m] for m in tied}}
    if not votes:
        return out
    maps = sorted(votes)
    raters = sorted({r for v in votes.values() for r in v})
    col = {r: k for k, r in enumerate(raters)}
    matrix = np.full((len(maps), len(raters)), -1)
    for i, m in enumerate(maps):
        for r, v in votes[m].items():
            matrix[i, col[r]] = LABELS.index(v.label)
    ds = dawid_skene(matrix, len(LABELS))
    for i, m in enumerate(maps):
        k = int(np.argmax(ds.posterior[i]))
        vote = _most_recent(v for v in votes[m].values() if v.label == LABELS[k])
        uncertain, n_uncertain = uncertain_votes(votes[m])
        # A label no rater gave (possible when raters are judged unreliable) is marked uncertain.
        out[m] = Resolution(LABELS[k], uncertain or vote is None, vote, "dawid-skene", float(ds.posterior[i, k]),
                            is_tie(votes[m]), n_uncertain)
    return out


def cohen_kappa(a: Sequence[str], b: Sequence[str]) -> float:
    """Cohen's κ of two raters' labels on the same items (NaN when chance agreement is 1)."""
    if len(a) != len(b) or not a:
        raise ValueError("cohen_kappa needs two equally long, non-empty label lists")
    n = len(a)
    p_o = sum(x == y for x, y in zip(a, b)) / n
    ca, cb = Counter(a), Counter(b)
    p_e = sum(ca[k] * cb[k] for k in ca) / (n * n)
    return float("nan") if p_e == 1 else (p_o - p_e) / (1 - p_e)


def fleiss_kappa(counts: np.ndarray) -> float:
    """Fleiss' κ from (N, K) counts of raters per item and class.

    Items may have different numbers of raters (the usual generalisation: each item's agreement is
    computed over its own n_i raters); items with fewer than two raters are ignored.
    """
    counts = np.asarray(counts, dtype=float)
    n_i = counts.sum(1)
    counts, n_i = counts[n_i >= 2], n_i[n_i >= 2]
    if not len(counts):
        return float("nan")
    p_item = ((counts * (counts - 1)).sum(1) / (n_i * (n_i - 1))).mean()
    p_class = counts.sum(0) / n_i.sum()
    p_e = float((p_class**2).sum())
    return float("nan") if p_e == 1 else (p_item - p_e) / (1 - p_e)


def confusion(a: Sequence[str], b: Sequence[str]) -> np.ndarray:
    """(K, K) counts: row = a's label, column = b's label, in LABELS order."""
    m = np.zeros((len(LABELS), len(LABELS)), dtype=int)
    for x, y in zip(a, b):
        m[LABELS.index(x), LABELS.index(y)] += 1
    return m


def held_out_rater(votes: dict[str, dict[str, Vote]]) -> list[tuple[str, str, str]]:
    """One rater against the others: ``(map_id, the rater's label, the others' label)`` for each rater of each map
    whose other raters, two or more, have a strict majority (more than half of them gave one label).

    This is the yardstick for anything scored against a resolved label: how well one blind rater agrees with
    a label it had no part in. With three raters the other two must agree: a unanimous map gives three pairs
    (all agreeing), a two-of-three map one (the dissenter against the two), a three-way split none. With four,
    two of the other three suffice; with five, three of the other four (a two-two tie among them gives no
    pair). A classifier scored on the same pairs (its prediction against the same reference,
    :func:`patterncnn.training.evaluate.annotator_yardstick`) is compared with the raters on equal terms.
    """
    out = []
    for map_id, v in votes.items():
        v = {r: x for r, x in v.items() if x.label in LABELS}  # a label outside the five is no vote here
        if len(v) < 3:
            continue
        for rater, vote in v.items():
            (top, n), = Counter(x.label for r, x in v.items() if r != rater).most_common(1)
            if 2 * n > len(v) - 1:
                out.append((map_id, vote.label, top))
    return out


def _scores(mine: Sequence[str], ref: Sequence[str]) -> dict | None:
    """Labels against reference labels: agree, kappa, macro-F1 over the classes the references hold
    (:func:`patterncnn.core.scores.subset_scores`), per-class F1 and the confusion (rows: reference); None if empty."""

    if not ref:
        return None
    s = subset_scores(np.array([LABELS.index(x) for x in ref]), np.array([LABELS.index(x) for x in mine]),
                      np.ones(len(ref), dtype=bool))
    return {"maps": len(ref), "agree": s["accuracy"], "kappa": cohen_kappa(list(mine), list(ref)),
            "macro_f1": s["macro_f1"], "per_class_f1": s["per_class_f1"], "confusion": confusion(ref, mine).tolist()}


def held_out_scores(pairs: list[tuple[str, str, str]], labels: Sequence[str] | None = None) -> dict | None:
    """:func:`held_out_rater`'s pairs scored: the raters' labels (or ``labels``, one per pair: a classifier's
    prediction for each pair's map) against the pairs' references.

    Returns:
        {"pairs", "maps", "agree", "kappa", "macro_f1" (over the classes the references hold, as
        :func:`patterncnn.core.scores.subset_scores`), "per_class_f1"}; None without pairs.
    """
    if not pairs:
        return None
    s = _scores([p[1] for p in pairs] if labels is None else list(labels), [p[2] for p in pairs])
    return {"pairs": len(pairs), "maps": len({p[0] for p in pairs}),
            **{k: s[k] for k in ("agree", "kappa", "macro_f1", "per_class_f1")}}


def _pair(a: list[str], b: list[str]) -> dict:
    return {"n": len(a), "agree": sum(x == y for x, y in zip(a, b)) / len(a), "kappa": cohen_kappa(a, b)}


def agreement_report(annotation_rows: list[dict], label_rows: list[dict] | None = None,
                     raters: str = "annotator", prediction_rows: list[dict] | None = None) -> dict:
    """Agreement between raters, and of each rater and each pre-annotation source with the resolved labels.

    Args:
        prediction_rows: the set's ``predictions.csv`` rows: each source (``push rule-v1``, ``ml-backend
            ...``) is scored on every resolved map it predicted (its earliest prediction of the map). Without
            them (a set from before predictions were kept), the pre-annotation of each ``labels.csv`` row.

    Returns:
        {"raters": {rater: maps labelled}, "pairs": [{a, b, n, agree, kappa}], "fleiss": {maps, raters_per_map,
        kappa}, "confusion": (K, K) list pooled over every ordered pair of raters on a shared map,
        "vs_resolved": {rater: {n, agree, kappa}}, "pre_vs_resolved": {source model: {n, agree, kappa}},
        "vs_others": one rater against the others' majority label (:func:`held_out_scores`; None without such a
        pair, e.g. no map with three raters or only three-way splits, and with ``raters="pass"``)}.
    """
    votes = rater_votes(annotation_rows, raters)
    names = sorted({r for v in votes.values() for r in v})
    report: dict = {"raters_are": raters, "labels": list(LABELS),
                    "raters": {r: sum(r in v for v in votes.values()) for r in names}, "pairs": []}
    pooled = np.zeros((len(LABELS), len(LABELS)), dtype=int)
    for a, b in combinations(names, 2):
        shared = [m for m, v in votes.items() if a in v and b in v]
        if shared:
            la, lb = [votes[m][a].label for m in shared], [votes[m][b].label for m in shared]
            report["pairs"].append({"a": a, "b": b, **_pair(la, lb)})
            c = confusion(la, lb)
            pooled += c + c.T
    multi = [v for v in votes.values() if len(v) >= 2]
    counts = np.array([[sum(x.label == k for x in v.values()) for k in LABELS] for v in multi]).reshape(-1, len(LABELS))
    report["fleiss"] = {"maps": len(multi), "raters_per_map": dict(Counter(len(v) for v in multi)),
                        "kappa": fleiss_kappa(counts)}
    report["confusion"] = pooled.tolist()
    # one rater against the others; with raters="pass" the "others" would be the same annotator's other passes
    report["vs_others"] = held_out_scores(held_out_rater(votes)) if raters == "annotator" else None
    report["vs_resolved"], report["pre_vs_resolved"] = {}, {}
    resolved = {r["map_id"]: r for r in label_rows or [] if r.get("label")}  # an unresolved tie has no label
    for name in names:
        mine = [m for m, v in votes.items() if name in v and m in resolved]
        if mine:
            report["vs_resolved"][name] = _pair([votes[m][name].label for m in mine],
                                                [resolved[m]["label"] for m in mine])
    predicted = prediction_rows or [{"map_id": r["map_id"], "source": r.get("pre_source"),
                                     "model_version": r.get("pre_model"), "label": r.get("pre_label")}
                                    for r in resolved.values()]
    by_source: dict[str, dict[str, str]] = defaultdict(dict)
    for p in sorted(predicted, key=lambda p: p.get("created_at") or ""):
        if p.get("label") and p["map_id"] in resolved:
            by_source[" ".join(x for x in (p.get("source"), p.get("model_version")) if x)].setdefault(p["map_id"],
                                                                                                      p["label"])
    if len(by_source) > 1:  # over all sources: each map's own pre-annotation (labels.csv), counted once
        by_source["all"] = {m: r["pre_label"] for m, r in resolved.items() if r.get("pre_label")}
    for source, pre in sorted(by_source.items()):
        if pre:
            report["pre_vs_resolved"][source] = _pair(list(pre.values()), [resolved[m]["label"] for m in pre])
    return report


def agreement_by_encoder(annotation_rows: list[dict], label_rows: list[dict] | None = None,
                         raters: str = "annotator", prediction_rows: list[dict] | None = None) -> dict:
    """:func:`agreement_report` over all maps, and again for each encoder family's maps.

    Returns:
        {"all": report, "by_encoder": {family: report}}; the family of a map is
        :func:`patterncnn.core.maps.encoder_family` of its id (fine-tunes count with their base encoder).
    """

    groups: dict[str, tuple[list, list, list]] = defaultdict(lambda: ([], [], []))
    for k, rows in enumerate((annotation_rows, label_rows or [], prediction_rows or [])):
        for r in rows:
            groups[encoder_family(r["map_id"])][k].append(r)
    return {"all": agreement_report(annotation_rows, label_rows, raters, prediction_rows),
            "by_encoder": {f: agreement_report(a, l, raters, p) for f, (a, l, p) in sorted(groups.items())}}


def _kappa(x: float) -> str:
    return "n/a" if math.isnan(x) else f"{x:.3f}"


def format_report(report: dict) -> str:
    """The agreement report as text tables."""
    lines = [f"raters ({report['raters_are']}): " + ", ".join(f"{r} ({n} maps)" for r, n in report["raters"].items())]
    if report["pairs"]:
        lines.append("pairwise: " + "; ".join(f"{p['a']} vs {p['b']}: {p['n']} maps, {100 * p['agree']:.1f}% agree, "
                                                f"Cohen's kappa {_kappa(p['kappa'])}" for p in report["pairs"]))
        f = report["fleiss"]
        lines.append(f"Fleiss' kappa {_kappa(f['kappa'])} over {f['maps']} maps with 2+ raters "
                     f"(raters per map: {json.dumps(f['raters_per_map'], sort_keys=True)})")
        width = max(len(k) for k in LABELS) + 2
        lines.append("confusion between raters (every ordered pair on a shared map; rows: one rater, columns: "
                     "the other)")
        lines.append(" " * width + "".join(f"{k:>{width}}" for k in LABELS))
        for k, row in zip(LABELS, report["confusion"]):
            lines.append(f"{k:<{width}}" + "".join(f"{c:>{width}}" for c in row))
    else:
        lines.append("no map has labels from two raters: no agreement between raters to report")
    o = report.get("vs_others")
    if o:
        lines.append(f"one rater vs the majority of the others (more than half of the other raters, two or more): "
                     f"{o['pairs']} pairs on {o['maps']} maps, {100 * o['agree']:.1f}% agree, "
                     f"kappa {_kappa(o['kappa'])}, macro-F1 {o['macro_f1']:.3f}")
    for title, part in (("rater vs resolved label", report["vs_resolved"]),
                        ("pre-annotation vs resolved label", report["pre_vs_resolved"])):
        for name, p in part.items():
            lines.append(f"{title}: {name}: {p['n']} maps, {100 * p['agree']:.1f}% agree, kappa {_kappa(p['kappa'])}")
    return "\n".join(lines)


def two_agree(votes: dict[str, Vote]) -> bool:
    """Whether two or more of a map's raters gave the same label (an "agreed" map)."""
    return len(votes) >= 2 and max(Counter(v.label for v in votes.values()).values()) >= 2


def between_sets(votes: dict[str, dict[str, Vote]], resolved: dict[str, str], ref_votes: dict[str, dict[str, Vote]],
                 ref_resolved: dict[str, str], methods: dict[str, dict[str, str]] | None = None) -> dict:
    """A second labelled set of the same maps against a first (a test-retest of the labels), per family and over all.

    The two sets' raters labelled the same maps independently (another triad, another order of the pictures).
    Within one set, one rater against the others (:func:`held_out_rater`) measures how far raters who saw the
    maps in the same way agree; this measures how far the first set's labels reproduce when another group
    labels the same maps: a yardstick for a classifier trained on the first set and scored against it (the
    figures carry both sets' noise, and a classifier may learn habits of the first set that a second lacks).

    Args:
        votes, resolved: the second set's votes (:func:`rater_votes`) and resolved labels {map_id: label}.
        ref_votes, ref_resolved: the same of the reference set.
        methods: other labels of the maps to score against both sets, {name: {map_id: label}} (e.g. a
            classifier's out-of-fold predictions).

    Returns:
        {family or "all": {"maps": shared maps, "set_maps": the second set's maps, "resolved": the second set's label against the reference's,
        "both_agreed": the same on the maps where each set has two or more raters agreeing, "raters": {rater:
        that rater's label against the reference's}, "methods": {name: {"vs_reference", "vs_second"}}}}, scores as
        :func:`_scores` (rows of each confusion: the reference).
    """

    family = {m: encoder_family(m) for m in resolved}
    total = Counter(family.values())
    total["all"] = len(resolved)
    shared = sorted(m for m in resolved if m in ref_resolved)
    out = {}
    for fam in [*sorted({family[m] for m in shared}), "all"]:
        ms = [m for m in shared if fam == "all" or family[m] == fam]
        both = [m for m in ms if two_agree(votes.get(m, {})) and two_agree(ref_votes.get(m, {}))]
        ref = [ref_resolved[m] for m in ms]
        raters = sorted({r for m in ms for r in votes.get(m, {})})
        out[fam] = {
            "maps": len(ms), "set_maps": total[fam], "resolved": _scores([resolved[m] for m in ms], ref),
            "both_agreed": _scores([resolved[m] for m in both], [ref_resolved[m] for m in both]),
            "raters": {r: _scores([votes[m][r].label for m in ms if r in votes.get(m, {})],
                                  [ref_resolved[m] for m in ms if r in votes.get(m, {})]) for r in raters},
            "methods": {name: {"vs_reference": _scores([p[m] for m in ms if m in p], [ref_resolved[m] for m in ms if m in p]),
                               "vs_second": _scores([p[m] for m in ms if m in p], [resolved[m] for m in ms if m in p])}
                        for name, p in (methods or {}).items()}}
    return out


def format_between(report: dict, reference: str) -> str:
    """:func:`between_sets`'s report as text: one line per comparison, per family."""
    def line(what: str, s: dict | None) -> str:
        if not s:
            return f"  {what}: no maps"
        return (f"  {what}: {s['maps']} maps, {100 * s['agree']:.1f}% agree, kappa {_kappa(s['kappa'])}, "
                f"macro-F1 {s['macro_f1']:.3f} (over the classes of the labels compared to)")

    lines = []
    for fam, part in report.items():
        lines.append(f"{'all maps' if fam == 'all' else 'encoder ' + fam}: {part['maps']} of this set's "
                     f"{part['set_maps']} maps are in {reference}")
        lines.append(line("this set's resolved label vs the reference's", part["resolved"]))
        lines.append(line("  the same, on maps where each set has 2+ raters agreeing", part["both_agreed"]))
        for r, s in part["raters"].items():
            lines.append(line(f"rater {r} vs the reference's label", s))
        for name, s in part["methods"].items():
            lines.append(line(f"{name} vs the reference's label", s["vs_reference"]))
            lines.append(line(f"{name} vs this set's label", s["vs_second"]))
    return "\n".join(lines)
