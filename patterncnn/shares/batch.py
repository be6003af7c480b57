"""Pattern shares with intervals over one's own batch of examples, as the census estimates a task's.

Usage::

    clf = patterncnn.load_classifier()
    patterns = clf.classify_attentions(outputs.attentions, attention_mask=mask, tokens=tokens)
    table = patterncnn.estimate_shares(patterns, clf, encoder=enc)   # enc: load_encoder(...), or None
    table.loc["vertical", ["share", "low", "high"]], table.attrs["estimator"]

The census's estimate of one task (:meth:`patterncnn.shares.estimate.Plan.estimate`), with the estimator and band
the classifier validated for the encoder: an encoder patterncnn does not know (``encoder=None``, an in-memory model,
a family it was never validated on) takes ``count`` with the band measured by holding a family out, and the
warning that goes with it, as its census would.
"""

from __future__ import annotations

import warnings as _warnings
from typing import TYPE_CHECKING, Any

import numpy as np

from ..classifier.attentions import HeadPatterns
from ..core import args
from ..core.errors import caller_level
from ..core.labels import LABELS
from ..core.segments import single_segment
from .estimate import ESTIMATORS, MIN_EXAMPLES, few_examples_warning, plan_for

if TYPE_CHECKING:
    import pandas as pd


class EstimateWarning(UserWarning):
    """What limits an estimate of :func:`estimate_shares`: too few examples, an encoder family the classifier was
    never validated on, a batch classified without its tokens (also in the table's ``attrs["warnings"]``)."""


UNKNOWN = "unknown"  # the tag an encoder patterncnn was not told of takes: a family never validated


def estimate_shares(patterns, classifier, encoder: Any = None, estimator: str | None = None,
                    seed: int = 0) -> "pd.DataFrame":
    """The share of each pattern over a batch's (example, layer, head) maps, with its 95% interval.

    Args:
        patterns: what ``classifier.classify_attentions`` returned for the batch (a ``HeadPatterns``), every
            head of every example; the examples are the units the interval resamples.
        classifier: the classifier that classified them (``load_classifier()``): its validation chooses the
            estimator and its share error for this encoder.
        encoder: the encoder the attentions came from: an ``Encoder`` (``load_encoder``), or its tag as a census
            records it (``minilm-53aa5117``); None for one patterncnn does not know (an in-memory model), which
            counts as a family the classifier was never validated on.
        estimator: ``count``, ``probs`` or ``adjusted``; None: the one the census would use for this encoder.
        seed: of the bootstrap.

    Returns:
        One row per pattern: ``share``, ``low`` and ``high`` (the 95% interval), its two parts
        (``examples_low/high``, ``classifier_low/high``) and the argmax ``count``; fractions. ``attrs`` holds
        ``estimator`` (how it was estimated and how far that was validated, as census.json records it),
        ``examples``, ``maps``, ``single_segment`` (examples whose tokens hold one segment) and ``warnings``
        (each also raised as an :class:`EstimateWarning`).

    Example::

        >>> table = patterncnn.estimate_shares(patterns, clf, encoder=enc)
        >>> table[["share", "low", "high"]]
    """
    import pandas as pd

    if not isinstance(patterns, HeadPatterns):
        raise args.ArgumentTypeError(f"patterns must be what classify_attentions returns (HeadPatterns), not "
                                     f"{type(patterns).__name__}: classify every head of each example with "
                                     f"classifier.classify_attentions(outputs.attentions, ...)")
    if not hasattr(classifier, "metadata"):
        raise args.ArgumentTypeError(f"classifier must be a loaded classifier (patterncnn.load_classifier()), not "
                                     f"{type(classifier).__name__}")
    if estimator is not None:
        estimator = args.one_of("estimator", estimator, ESTIMATORS)
    seed = args.whole("seed", seed)
    tag = _tag(encoder)
    shape = np.shape(patterns.probs)
    if len(shape) != 4 or shape[-1] != len(LABELS):
        raise args.ArgumentError(f"patterns.probs must be (examples, layers, heads, {len(LABELS)}), as "
                                 f"classify_attentions makes it; got shape {shape}")
    n, layers, heads, _ = shape
    if n == 0:
        raise args.ArgumentError("patterns holds no example: classify at least one")
    if not np.isfinite(patterns.probs).all():
        raise args.ArgumentError("patterns.probs holds NaN or infinite values: classify the batch again")
    probs = np.asarray(patterns.probs, dtype=np.float32).reshape(n, layers * heads, len(LABELS))
    labels = probs.argmax(-1)
    seps = list(patterns.seps) + [None] * (n - len(patterns.seps))
    # the segment band of count, and adjusted's correction, differ for one-segment inputs; without tokens the
    # segments are unknown, and an example counts as a pair (as the segment rule leaves its block share)
    single = np.array([single_segment(s) for s in seps], dtype=bool)
    plan = plan_for(classifier.metadata, estimator, None, tag, seed)
    part = plan.estimate(probs, labels, single, seed)
    described = plan.describe()
    few = few_examples_warning("the batch", n, n, fix=f"classify a batch of at least {MIN_EXAMPLES} examples")
    warnings = [few] if few else []
    if all(s is None for s in seps):  # helper 108: 16 SST-2 examples of MiniLM moved by up to 12.5 points, silently
        warnings.append("the batch was classified without its tokens, so the classifier saw no segments and block was "
                        "not ruled out for one-sentence inputs: the labels and shares differ from a census's of the "
                        "same examples; pass tokens= to classify_attentions")
    validated = described["validated_share_error"]
    if isinstance(validated, dict) and validated.get("warning"):
        warnings.append(validated["warning"])
    for w in warnings:  # a Python warning, as classify's MapWarning and census()'s TruncationWarning (helper 109)
        _warnings.warn(w, EstimateWarning, stacklevel=caller_level())
    counts = np.bincount(labels.ravel(), minlength=len(LABELS))
    rows = [{"pattern": name, "share": part["shares"][name], "low": part["ci95"][name][0],
             "high": part["ci95"][name][1], "examples_low": part["ci95_parts"]["examples"][name][0],
             "examples_high": part["ci95_parts"]["examples"][name][1],
             "classifier_low": part["ci95_parts"]["classifier"][name][0],
             "classifier_high": part["ci95_parts"]["classifier"][name][1], "count": int(counts[k])}
            for k, name in enumerate(LABELS)]
    table = pd.DataFrame(rows).set_index("pattern")
    table.attrs.update(estimator=described, encoder=tag, examples=n, maps=n * layers * heads,
                       single_segment=int(single.sum()), warnings=warnings,
                       **({"clipped_at_zero": part["clipped_at_zero"]} if "clipped_at_zero" in part else {}))
    return table


def _tag(encoder) -> str:
    """The encoder tag the estimate is chosen by: an Encoder's, a given tag, or :data:`UNKNOWN`."""
    if encoder is None:
        return UNKNOWN
    if isinstance(encoder, str):
        return args.text("encoder", encoder)
    tag = getattr(encoder, "tag", None)
    if not isinstance(tag, str):
        raise args.ArgumentTypeError(f"encoder must be an Encoder (patterncnn.load_encoder), its tag or None, not "
                                     f"{type(encoder).__name__}: for a model patterncnn did not load, pass None")
    return tag
