"""One input through the encoder and the classifier: the pattern of every layer × head.

Usage (what ``patterncnn analyze`` and the service's ``/v1/analyze`` run)::

    res = analyze(load_encoder("minilm"), OnnxClassifier(), ("The cat sat.", "A cat sat."))
    res["labels"]     # (L, H) label names;  res["probs"]: (L, H, 5) array
    print(grid_text(res["labels"]))
"""

from __future__ import annotations

from collections import Counter

from ..core.glue import Example
from ..core.labels import LABELS, SHORT
from ..encoders.load import Encoder, EncoderError


def check_texts(texts: tuple[str, ...]) -> None:
    """One sentence, or two for a pair, none of them blank: the input of ``analyze`` (the CLI and the service)."""
    if not 1 <= len(texts) <= 2:
        raise ValueError(f"give one sentence, or two for a pair (got {len(texts)})")
    blank = [k + 1 for k, t in enumerate(texts) if not t.strip()]
    if blank:
        which = "the sentence" if len(texts) == 1 else " and ".join(("the first", "the second")[k - 1] for k in blank)
        raise ValueError(f"{which} is empty or only spaces: give one sentence, or two for a pair")


def analyze(encoder: Encoder, classifier, texts: tuple[str, ...], truncate: bool = True) -> dict:
    """Classify every head's map for one input (one sentence or a pair), tokenized once.

    Args:
        classifier: an :class:`patterncnn.classifier.onnx.OnnxClassifier` (``predict_same_length``).
        truncate: cut an input longer than the encoder's ``max_length`` (the CLI); False refuses it
            before the encoder runs (the service).

    Raises:
        EncoderError: ``truncate`` is False and the input is longer than ``max_length`` tokens.

    Returns:
        {"tokens", "seps", "truncated", "probs": (L, H, 5) array, "labels": (L, H) label names}.
    """
    check_texts(tuple(texts))
    ids, cut = encoder.tokenize(tuple(texts))
    if cut and not truncate:
        raise EncoderError(f"the input is longer than the encoder's limit of {encoder.max_length} tokens (the "
                           f"--max-length it was loaded with); shorten it")
    ea = encoder.attend(Example("input", "-", 0, tuple(texts), None), ids, cut)
    L, H, t, _ = ea.maps.shape
    probs = classifier.predict_same_length(ea.maps.reshape(L * H, t, t), [ea.seps] * (L * H)).reshape(L, H, -1)
    return {"tokens": ea.tokens, "seps": ea.seps, "truncated": ea.truncated, "probs": probs,
            "labels": [[LABELS[int(k)] for k in row] for row in probs.argmax(-1)]}


def grid_text(labels: list[list[str]]) -> str:
    """The (L, H) grid of labels as short codes, one row per layer, with a legend."""
    heads = len(labels[0])
    lines = ["layer\\head " + " ".join(f"{h:>3}" for h in range(heads))]
    lines += [f"{l:>10} " + " ".join(f"{SHORT[x]:>3}" for x in row) for l, row in enumerate(labels)]
    lines.append(", ".join(f"{SHORT[n]} {n}" for n in LABELS))
    return "\n".join(lines)


def shares_text(labels: list[list[str]]) -> str:
    """``shares: vertical 74%, ...`` over the heads of one input."""
    c = Counter(x for row in labels for x in row)
    n = sum(c.values())
    return "shares: " + ", ".join(f"{k} {100 * c.get(k, 0) / n:.0f}%" for k in LABELS)
