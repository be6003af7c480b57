"""Evaluate the classifier per encoder: the reports ``patterncnn train`` adds to its cross-validation.

Usage::

    oof = out_of_fold(data, cfg, tcfg)                                  # train's CV (patterncnn.training.train)
    report = evaluate(data, "annotations", oof, cfg, tcfg, EvalConfig())   # what `patterncnn train` stores
    report["per_encoder"]["mpnet"]["methods"]["CNN"]["agreed"]["macro_f1"]
    encoder_family("minilm-sst2-0633eb25_sst2_dev_00012_L03_H07")       # "minilm"

Reports, all on the folds of :func:`patterncnn.training.fit.folds` (grouped by input example, stratified):

- **per encoder family** (:func:`encoder_family`): the out-of-fold macro-F1 of the CNN and of the feature
  baselines on the family's maps, on all of them and on those where at least two annotators gave the
  same label (the set's ``votes.csv``). No second CV: the out-of-fold predictions are sliced.
- **against one annotator** (:func:`annotator_yardstick`): every method and one blind annotator on the same
  pairs: a map and one of its annotators, wherever more than half of the other annotators (two or more) agree;
  the annotator's label and each method's prediction are scored against the others' majority label. The annotators' score is
  how far a careful reader of the guide gets; the methods' on the same pairs is comparable with it.
- **soft labels**: the same CV (same folds, seeds and epochs budget) with the annotators' vote shares as
  cross-entropy targets instead of the resolved label, scored against the resolved label beside the hard one.
- **leave one encoder out**: each family held out in turn, trained on every other family's maps, tested on
  all of its own. Training maps whose input example also appears among the test maps are dropped (the
  example is one group, as in the CV); early stopping watches a split of the training maps, never the test
  family. The CNN is fitted with several seeds per direction and reported as mean ± sd over them: one fit
  moves by several points with its seed. A direction whose training maps are too few or of one class
  (:func:`loeo_plan`, decided before any fit) is not fitted, and the report says why.

A macro-F1 on a subset averages the F1 of the classes that subset's labels hold (a family without
``block`` maps is not charged a zero for it); the classes averaged are recorded beside it.
"""

from __future__ import annotations

import dataclasses
import logging
import time
from pathlib import Path

import numpy as np

from ..classifier.features import map_features, rule_scores
from ..core.labels import LABELS
from ..core.maps import families
from ..core.scores import classification_report, macro_f1, spread, subset_scores
from ..core.segments import rule_out_block
from ..core.work import progress_bar
from ..labelling.agreement import held_out_rater, held_out_scores, rater_votes
from ..labelling.sets import read_tables
from .fit import (
    INNER_SPLITS,
    NO_WORK,
    Work,
    correct_on,
    fit_members,
    folds,
    inputs,
    median_epoch,
    out_of_fold,
    predict_proba,
)

log = logging.getLogger(__name__)
BLOCK = LABELS.index("block")

CNN, SOFT = "CNN", "CNN (soft labels)"
TRAINED_BASELINES = ("features+logreg", "features+gboost")
RULE = "rule (pre-annotator, untrained)"
# The fewest training maps a leave-one-encoder-out direction is fitted on (what is left of the other families once
# the maps sharing an input example with the held-out family are dropped). Below it, what is left to train on once
# early stopping's fifth is held out is less than one batch (16 maps, TrainConfig's default): each epoch is a single
# update on a partial batch, and the fifth that picks the epoch holds three maps or so. The score is then its seed's,
# not the family's (round 5 alone leaves 6 maps: accuracy 0.283 +- 0.320 over 5 seeds). The repository's sets sit far
# on either side: rounds 5 and 12 alone leave 6 and 3 maps, round 4 alone 46 and 58, the shipped sets 453 or more.
MIN_LOEO_MAPS = 20


@dataclasses.dataclass
class EvalConfig:
    """Which of the extra reports ``train`` runs (the per-encoder slices cost nothing; these two retrain)."""

    soft_labels: bool = True  # a second CV with vote shares as targets (about one CV more)
    leave_one_encoder_out: bool = True  # each family held out in turn, trained on the others (seeds fits each)
    loeo_max_epochs: int = 40  # epoch cap of the leave-one-encoder-out fits (early stopping as in CV)
    loeo_seeds: int = 5  # CNN fits per direction (seeds): one fit's score moves by several points with the seed

    def __post_init__(self):
        if self.loeo_seeds < 1:
            raise ValueError(f"--loeo-seeds must be at least 1 (got {self.loeo_seeds})")


@dataclasses.dataclass
class Votes:
    """The annotators' votes per labelled map (each annotator's latest labelled, not skipped annotation)."""

    shares: np.ndarray  # (N, 5) vote shares; one-hot of the resolved label for a map without votes
    n: np.ndarray  # (N,) annotators who voted
    top: np.ndarray  # (N,) votes for the most voted label
    by_map: dict  # {map_id: {rater: Vote}} of these maps (patterncnn.labelling.agreement.rater_votes), for per-rater reports

    @property
    def agreed(self) -> np.ndarray:
        """(N,) bool: at least two annotators gave the same label."""
        return self.top >= 2


def load_votes(annotations, ids: list[str], y: np.ndarray) -> Votes:
    """The votes of the set's ``votes.csv`` (of each set's, for a list of sets) for the maps ``ids`` (labels ``y``);
    a map without votes has one, its label."""
    sets = [annotations] if isinstance(annotations, (str, Path)) else list(annotations)
    rows = [r for a in sets for r in read_tables(a).annotations.values()]
    wanted = set(ids)
    votes = {m: v for m, v in rater_votes(rows).items() if m in wanted}
    shares = np.eye(len(LABELS))[y]
    n, top = np.zeros(len(ids), dtype=int), np.zeros(len(ids), dtype=int)
    index = {name: k for k, name in enumerate(LABELS)}
    for i, map_id in enumerate(ids):
        counts = np.zeros(len(LABELS))
        for v in votes.get(map_id, {}).values():
            if v.label in index:
                counts[index[v.label]] += 1
        if counts.sum():
            shares[i], n[i], top[i] = counts / counts.sum(), int(counts.sum()), int(counts.max())
    return Votes(shares, n, top, votes)


def annotator_yardstick(votes: Votes, ids: list[str], fams: np.ndarray, preds: dict[str, np.ndarray]) -> dict:
    """One blind annotator against the others, and every method on the very same pairs, per family and over all.

    The pairs are :func:`patterncnn.labelling.agreement.held_out_rater`'s: for each map and each of its annotators whose
    other annotators (two or more) have a strict majority, the reference is that majority's label. A method's prediction for
    the map is scored against the same reference, once per pair, so both sides weigh the maps alike (with three
    annotators a unanimous map three times, a two-of-three map once, a three-way split not at all).

    Returns:
        {family or "all": {"pairs", "maps", "annotator": scores, "methods": {name: scores}}}, scores as
        :func:`patterncnn.labelling.agreement.held_out_scores` (pairs, maps, agree, kappa, macro_f1, per_class_f1); a family
        without pairs is left out; {} when no map has three or more annotators who leave a pair.
    """

    index = {m: i for i, m in enumerate(ids)}
    pairs = held_out_rater(votes.by_map)  # votes: :func:`load_votes` of these ``ids``
    at = np.array([index[p[0]] for p in pairs], dtype=int)
    out = {}
    for fam in [*sorted(set(fams.tolist())), "all"]:
        sel = [k for k in range(len(pairs)) if fam == "all" or fams[at[k]] == fam]
        if sel:
            mine = [pairs[k] for k in sel]
            out[fam] = {"pairs": len(sel), "maps": len({p[0] for p in mine}), "annotator": held_out_scores(mine),
                        "methods": {name: held_out_scores(mine, [LABELS[p[at[k]]] for k in sel])
                                    for name, p in preds.items()}}
    return out


def feature_matrix(data) -> np.ndarray:
    """(N, F) hand-crafted features of every labelled map (:func:`patterncnn.classifier.features.map_features`)."""
    return np.stack([map_features(m, s) for m, s in zip(data.maps, data.seps)])


def _makers(seed: int) -> dict:
    from sklearn.ensemble import HistGradientBoostingClassifier
    from sklearn.linear_model import LogisticRegression
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    return {"features+logreg": lambda: make_pipeline(StandardScaler(), LogisticRegression(
                max_iter=5000, class_weight="balanced", C=1.0)),
            "features+gboost": lambda: HistGradientBoostingClassifier(
                max_iter=200, learning_rate=0.05, class_weight="balanced", random_state=seed)}


def baseline_predictions(data, tcfg, feats: np.ndarray | None = None) -> tuple[dict, dict]:
    """Out-of-fold predictions of the feature baselines on :func:`patterncnn.training.fit.folds`, and the rule's.

    Returns:
        ({name: (N,) predicted label indices}, {name: per-fold macro-F1}).
    """

    feats = feature_matrix(data) if feats is None else feats
    preds, fold_f1 = {}, {}
    for name, make in _makers(tcfg.seed).items():
        pred, fold_f1[name] = np.zeros(len(data.y), dtype=int), []
        for tr, va, te in folds(data, tcfg):
            fit_idx = np.concatenate([tr, va])  # no early stopping: the baselines use all training data
            pred[te] = make().fit(feats[fit_idx], data.y[fit_idx]).predict(feats[te])
            fold_f1[name].append(macro_f1(data.y[te], pred[te]))
        preds[name] = pred
    preds[RULE] = np.array([int(np.argmax(rule_scores(m, s))) for m, s in zip(data.maps, data.seps)])
    return preds, fold_f1


def baselines(data, tcfg, preds: tuple[dict, dict] | None = None) -> dict:
    """Hand-crafted features -> logistic regression / gradient boosting on the same folds; and the rule."""

    preds, fold_f1 = preds or baseline_predictions(data, tcfg)
    return {name: {**classification_report(data.y, p), **({"fold_macro_f1": fold_f1[name]} if name in fold_f1 else {})}
            for name, p in preds.items()}


def per_encoder(y: np.ndarray, fams: np.ndarray, agreed: np.ndarray, preds: dict[str, np.ndarray]) -> dict:
    """Every method's scores per family (and over all maps), on all maps and on the agreed ones."""
    out = {}
    for fam in [*sorted(set(fams.tolist())), "all"]:
        sel = np.ones(len(y), dtype=bool) if fam == "all" else fams == fam
        methods = {name: {"all": subset_scores(y, p, sel), "agreed": subset_scores(y, p, sel & agreed)}
                   for name, p in preds.items()}
        base = {k: v["all"]["macro_f1"] for k, v in methods.items() if k not in (CNN, SOFT)}
        best = max(base, key=base.get) if base else None
        out[fam] = {"maps": int(sel.sum()), "agreed_maps": int((sel & agreed).sum()), "methods": methods,
                    "best_baseline": best, "cnn_beats_best_baseline": bool(
                        best is None or methods[CNN]["all"]["macro_f1"] > base[best])}
    return out


def soft_vs_hard(data, votes: Votes, hard_probs: np.ndarray, cfg, tcfg,
                 progress=None, work: Work = NO_WORK) -> tuple[dict, np.ndarray | None]:
    """The CV again with vote shares as targets (same folds and seeds), beside the hard-label CV.

    Returns:
        (report, soft out-of-fold probabilities (N, 5) or None when it was not run).
    """

    voted = int((votes.n >= 2).sum())
    if not voted:
        return {"run": False, "reason": "no map has votes from two annotators: vote shares equal the hard labels"}, None
    soft = out_of_fold(data, cfg, tcfg, progress, targets=votes.shares, work=work, name="CV soft labels")
    rep = {"run": True, "maps_with_several_votes": voted, "seconds": soft.seconds, "best_epochs": soft.best_epochs}
    for name, probs in (("hard", hard_probs), ("soft", soft.probs)):
        ce = -(votes.shares * np.log(np.maximum(probs, 1e-12))).sum(1)
        rep[name] = {"all": subset_scores(data.y, probs.argmax(1), np.ones(len(data.y), dtype=bool)),
                     "agreed": subset_scores(data.y, probs.argmax(1), votes.agreed),
                     "cross_entropy_to_vote_shares": float(ce.mean())}
    return rep, soft.probs


def _split_train(data, pool: np.ndarray, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """(train, validation) indices of ``pool``: one grouped, stratified fifth for early stopping.

    A family with fewer than 5 maps of its largest class, or from fewer than 5 input examples, gets a larger share
    held out (n_splits >= 2: ``pool`` needs two input examples, which :func:`loeo_directions` requires).
    """
    from sklearn.model_selection import StratifiedGroupKFold

    splits = int(min(INNER_SPLITS, max(2, np.bincount(data.y[pool]).max()), len(set(data.groups[pool].tolist()))))
    inner = StratifiedGroupKFold(n_splits=splits, shuffle=True, random_state=(seed + 1000) % 2**32)  # below 2**32
    itr, iva = next(inner.split(np.zeros(len(pool)), data.y[pool], data.groups[pool]))
    return pool[itr], pool[iva]


def share_error(data, pred: np.ndarray, test: np.ndarray) -> dict | None:
    """Signed error of ``count``'s pooled share per pattern on the uniformly drawn maps among ``test``.

    As :mod:`patterncnn.training.validate` pools a census: per task, the share of the maps predicted as each
    pattern minus the share hand-labelled so, then the tasks averaged with equal weight. None when ``test`` holds
    no uniformly drawn map (then no census share is measured).
    """
    uniform = test & np.array([m.get("sampling") == "uniform" for m in data.meta], dtype=bool)
    if not uniform.any():
        return None
    tasks = np.array([str(m.get("task")) for m in data.meta])
    diffs = []
    for t in sorted(set(tasks[uniform].tolist())):
        sel = uniform & (tasks == t)
        diffs.append(np.bincount(pred[sel], minlength=len(LABELS)) / sel.sum()
                     - np.bincount(data.y[sel], minlength=len(LABELS)) / sel.sum())
    return {"maps": int(uniform.sum()), "tasks": len(diffs), **dict(zip(LABELS, np.mean(diffs, axis=0).tolist()))}


def four_class(y: np.ndarray, pred: np.ndarray, mask: np.ndarray) -> dict | None:
    """:func:`subset_scores` on the maps not labelled block (the four classes a uniform sample holds)."""
    return subset_scores(y, pred, mask & (y != BLOCK))


@dataclasses.dataclass
class Direction:
    """One leave-one-encoder-out direction: fit on the families ``train`` names, test on every map of ``test``."""

    train: str  # the training families, joined by "+"
    test: str
    pool: np.ndarray  # (P,) indices of the training maps: the other families' maps, minus those sharing an input
    dropped: int  # the other families' maps dropped because their input example is among the test maps
    reason: str | None  # why the pool cannot be fitted; None: it can

    def record(self) -> dict:
        """What metrics.json keeps of a direction that is not fitted."""
        return {"train": self.train, "test": self.test, "train_maps": int(len(self.pool)),
                "dropped_shared_examples": self.dropped, "reason": self.reason}


def _pool_problems(y: np.ndarray, groups: np.ndarray) -> list[str]:
    """Why a training pool (labels ``y``, input examples ``groups``) cannot be fitted; [] when it can."""
    problems = [f"fewer than the {MIN_LOEO_MAPS} a direction is fitted on"] if len(y) < MIN_LOEO_MAPS else []
    classes = sorted(set(y.tolist()))
    if len(classes) < 2:  # the baselines and a classifier need two; the CNN would learn the one label
        problems.append(f"one class ({LABELS[classes[0]]})" if classes else "no map")
    elif len(set(groups.tolist())) < 2:  # early stopping's split is grouped: an input example is on one side
        problems.append("from one input example")
    return problems


def shared_examples(groups: np.ndarray, test: np.ndarray) -> np.ndarray:
    """Which maps outside ``test`` (a mask) share an input example (``groups``) with a map in it: a fit that scores
    ``test`` drops them (the example is one group, as in the CV)."""
    return ~test & np.isin(groups, groups[test])


def loeo_directions(data, fams: np.ndarray) -> list[Direction]:
    """Each family held out in turn (in name order): its training pool, and why it cannot be fitted, if so.

    The pool is every other family's maps minus those whose input example is also among the held-out family's (the
    example is one group, as in the CV). It can be fitted with :data:`MIN_LOEO_MAPS` maps or more, of two classes or
    more, from two input examples or more.
    """
    names = sorted(set(fams.tolist()))
    out = []
    for b in names:
        test = fams == b
        shared = shared_examples(data.groups, test)
        pool = np.flatnonzero(~test & ~shared)
        problems = _pool_problems(data.y[pool], data.groups[pool])
        reason = (f"{len(pool)} training map{'' if len(pool) == 1 else 's'} after dropping the {int(shared.sum())} "
                  f"that share input examples with {b}: {', '.join(problems)}") if problems else None
        out.append(Direction("+".join(n for n in names if n != b), b, pool, int(shared.sum()), reason))
    return out


def loeo_plan(data, fams: np.ndarray, enabled: bool = True) -> dict:
    """Whether leave one encoder out runs and which directions it skips, from the labels alone (before any fit).

    The one place that decides it: not asked for, one encoder family, or no direction whose pool
    :func:`loeo_directions` can fit skips it as a whole; a direction it cannot fit is skipped (neither the CNN nor
    the baselines) and logged. Returns the report's frame: {"run", "reason" (when not run), "pairs": [],
    "skipped": [:meth:`Direction.record`, ...]}; :func:`evaluate` fills "pairs".
    """
    if not enabled:
        return {"run": False, "reason": "skipped (--no-leave-one-encoder-out)", "pairs": []}
    names = sorted(set(fams.tolist()))
    if len(names) < 2:
        return {"run": False, "reason": f"one encoder family only ({names[0]})", "pairs": []}
    skipped = [d.record() for d in loeo_directions(data, fams) if d.reason]
    for s in skipped:
        log.warning("leave one encoder out: %s -> %s skipped: %s", s["train"], s["test"], s["reason"])
    if len(skipped) == len(names):
        return {"run": False, "pairs": [], "skipped": skipped, "reason": (
            f"no direction leaves a training pool it can be fitted on ({MIN_LOEO_MAPS} maps or more, of two classes "
            "or more): " + "; ".join(f"{s['train']} -> {s['test']}: {s['reason']}" for s in skipped))}
    return {"run": True, "pairs": [], "skipped": skipped}


def leave_one_encoder_out(data, fams: np.ndarray, agreed: np.ndarray, feats: np.ndarray, cfg, tcfg,
                          max_epochs: int, seeds: int = 1, progress=None, work: Work = NO_WORK) -> list[dict]:
    """Hold each family out in turn: train on every other family, test on all of the held-out family's maps.

    Training maps whose input example is also among the test maps are dropped (the example is one group, as in
    the CV); early stopping watches a grouped split of the training maps, never the test family. The CNN (the
    classifier ``cfg`` describes: with ``cfg.members`` > 1 each fit is an ensemble, as train exports) is fitted
    ``seeds`` times (seeds ``tcfg.seed``, ``tcfg.seed + 1``, ...: its early-stopping split, initialisation and
    batches, member s's with the seed + 1000·s; a fit's ``best_epoch`` is its members' median): one fit moves by
    several points with its seed, so a direction reports the spread over the fits (``cnn_over_seeds``: macro-F1,
    accuracy, the four-class macro-F1 without block maps, and |share error| of ``count`` per pattern on the test
    family's uniformly drawn maps) and each fit (``seeds``); ``methods`` holds the first seed's fit beside the
    baselines (fitted once: they use all training maps, no split). ``progress`` shows a bar of epochs per
    direction; ``work`` keeps each finished fit (:class:`patterncnn.training.fit.Work`). A direction whose pool
    cannot be fitted (:func:`loeo_directions`) is left out: not fitted, not returned (:func:`loeo_plan` records why).
    """
    out = []
    n_seeds = max(1, seeds)
    loeo = dataclasses.replace(tcfg, max_epochs=max_epochs)
    for d in loeo_directions(data, fams):
        if d.reason:
            continue
        t0 = time.time()
        b, train, pool = d.test, d.train, d.pool
        test = fams == b
        te = np.flatnonzero(test)
        per_fit = max_epochs * cfg.members

        def scores(pred: np.ndarray) -> dict:
            return {"all": subset_scores(data.y, pred, test), "agreed": subset_scores(data.y, pred, test & agreed)}

        per_seed = []
        with progress_bar(progress, n_seeds * per_fit, f"leave one encoder out {train} -> {b}", "ep") as bar:
            for k, seed in enumerate(range(tcfg.seed, tcfg.seed + n_seeds)):
                def compute(seed=seed) -> dict:
                    tr, va = _split_train(data, pool, seed)
                    model, epochs = fit_members(data, tr, va, cfg, loeo, seed=seed, tick=bar.update if bar else None)
                    if loeo.bias_correction:  # on its early-stopping maps, of the training families
                        correct_on(model, data, va, cfg)
                    probs = predict_proba(model, data, te, cfg).astype(np.float64)
                    # the census's labels: block ruled out for single-segment inputs
                    return {"pred": rule_out_block(probs, [data.seps[i] for i in te]).argmax(1),
                            "epochs": np.array(epochs)}

                part, _ = work.part("loeo", inputs(data, cfg, loeo, train=train, test=b, seed=seed,
                                                      rule="block ruled out for single segments"), compute)
                if bar:
                    bar.update((k + 1) * per_fit - bar.n)
                pred = np.full(len(data.y), -1)
                pred[te] = part["pred"]
                per_seed.append({"seed": seed, "best_epoch": median_epoch([int(e) for e in part["epochs"]]),
                                 **scores(pred), "four_classes": four_class(data.y, pred, test),
                                 "share_error": share_error(data, pred, test)})
        methods = {CNN: {k: per_seed[0][k] for k in ("all", "agreed")}}
        for name, make in _makers(tcfg.seed).items():
            pred = np.full(len(data.y), -1)
            pred[te] = make().fit(feats[pool], data.y[pool]).predict(feats[te])
            methods[name] = scores(pred)
        over = {"macro_f1": spread([r["all"]["macro_f1"] for r in per_seed]),
                "accuracy": spread([r["all"]["accuracy"] for r in per_seed]),
                "four_class_macro_f1": spread([r["four_classes"]["macro_f1"] for r in per_seed])}
        if per_seed[0]["share_error"] is not None:
            over["abs_share_error"] = {k: spread([abs(r["share_error"][k]) for r in per_seed]) for k in LABELS}
        out.append({"train": train, "test": b, "train_maps": int(len(pool)),
                    "dropped_shared_examples": d.dropped, "best_epoch": per_seed[0]["best_epoch"],
                    "max_epochs": max_epochs, "seconds": round(time.time() - t0, 1), "methods": methods,
                    "seeds": per_seed, "cnn_over_seeds": over})
        o = over["accuracy"]
        log.info("leave one encoder out: %s -> %s accuracy %.3f +- %.3f over %d seeds", train, b, o["mean"], o["sd"],
                 o["n"])
    return out


def unseen_family(pairs: list[dict], skipped: list[dict] = ()) -> dict | None:
    """What a census may expect on an encoder family the classifier never saw: the worst held-out family's mean
    accuracy and four-class macro-F1 over seeds, and per pattern the worst held-out family's mean |share error|
    (the band that widens ``count``'s interval for an unvalidated family). None without uniformly drawn test maps.
    ``skipped``: :func:`loeo_plan`'s directions that were not fitted; their families are recorded (``not_held_out``)
    as families the worst is not taken over, so that the census can say the band may understate."""
    pairs = [p for p in pairs if "abs_share_error" in p["cnn_over_seeds"]]
    if not pairs:
        return None
    worst = {k: max(p["cnn_over_seeds"]["abs_share_error"][k]["mean"] for p in pairs) for k in LABELS}
    return {"families": [p["test"] for p in pairs], "seeds": pairs[0]["cnn_over_seeds"]["accuracy"]["n"],
            **({"not_held_out": [s["test"] for s in skipped]} if skipped else {}),
            "accuracy": min(p["cnn_over_seeds"]["accuracy"]["mean"] for p in pairs),
            "four_class_macro_f1": min(p["cnn_over_seeds"]["four_class_macro_f1"]["mean"] for p in pairs),
            "mean_abs_error": float(np.mean(list(worst.values()))), "bias_band": worst}


def evaluate(data, annotations, oof, cfg, tcfg, ecfg: EvalConfig, progress=None, work: Work = NO_WORK,
             loeo: dict | None = None, votes: Votes | None = None) -> dict:
    """Every report of the module docstring, plus the baselines' classification reports (key ``baselines``).

    Args:
        data: the :class:`patterncnn.labelling.sets.Labelled` set; annotations: its folder (for its votes).
        oof: train's :class:`patterncnn.training.fit.OutOfFold` on :func:`patterncnn.training.fit.folds` with ``tcfg``.
        work: where the retraining reports keep their finished fits (:class:`patterncnn.training.fit.Work`).
        loeo: :func:`loeo_plan` of ``data`` and ``ecfg``, as train decided it before its first fit; None: decided here.
        votes: :func:`load_votes` of ``annotations``, as train read them before its first fit; None: read here.
    """
    fams = families(data.ids)
    votes = load_votes(annotations, data.ids, data.y) if votes is None else votes
    feats = feature_matrix(data)
    base_preds = baseline_predictions(data, tcfg, feats)
    preds = {CNN: oof.probs.argmax(1)}
    soft, soft_probs = ({"run": False, "reason": "skipped (--no-soft-labels)"}, None)
    if ecfg.soft_labels:
        soft, soft_probs = soft_vs_hard(data, votes, oof.probs, cfg, tcfg, progress, work)
    if soft_probs is not None:
        preds[SOFT] = soft_probs.argmax(1)
    preds.update(base_preds[0])
    loeo = loeo_plan(data, fams, ecfg.leave_one_encoder_out) if loeo is None else loeo
    if loeo["run"]:
        pairs = leave_one_encoder_out(data, fams, votes.agreed, feats, cfg, tcfg, ecfg.loeo_max_epochs,
                                      ecfg.loeo_seeds, progress, work)
        loeo = {**loeo, "pairs": pairs, "unseen_family": unseen_family(pairs, loeo.get("skipped", []))}
    return {"baselines": baselines(data, tcfg, base_preds), "config": dataclasses.asdict(ecfg),
            "families": {f: int((fams == f).sum()) for f in sorted(set(fams.tolist()))},
            "votes": {"maps_with_votes": int((votes.n > 0).sum()), "maps_with_several_votes": int((votes.n >= 2).sum()),
                      "agreed_maps": int(votes.agreed.sum()), "annotators_per_map": {
                          str(k): int((votes.n == k).sum()) for k in sorted(set(votes.n.tolist()))}},
            "per_encoder": per_encoder(data.y, fams, votes.agreed, preds),
            "annotator_yardstick": annotator_yardstick(votes, data.ids, fams, preds), "soft_labels": soft,
            "leave_one_encoder_out": loeo}
