"""Separator positions -> segments: the one place that knows how an input is split into segments.

Encoders mark segment ends with separator tokens, in two layouts:

* BERT: ``[CLS] A [SEP] B [SEP]``, separators at [end of A, end of B];
* MPNet/RoBERTa: ``<s> A </s></s> B </s>``, separators at [end of A, A's second ``</s>``, end of B].

Consecutive separators belong together: a *run* of adjacent separator positions ends one
segment, and the next segment starts after the run's last token. So both layouts give the same
two segments, and everything that depends on segments (the segment and structure channels, the
block rule, the lines in the renders, the single-segment check, token type ids) asks this module.

Usage::

    seps = separators(tokens)          # [5, 11] for "[CLS] A [SEP] B [SEP]" (or token ids, with sep=the id)
    spans = segment_spans(t, seps)     # [(0, b), (b, t)] for a pair, [(0, t)] for one segment
    ids = segment_ids(t, seps)         # (T,) int: the segment of each token
    is_pair(t, seps)                   # two segments or more
    boundaries(t, seps)                # [b]: first token of each segment after the first
    rule_out_block(probs, seps)        # (N, 5): block set to 0 for single-segment inputs (the guide's rule 4)
"""

from __future__ import annotations

from typing import Hashable, Sequence

import numpy as np

from .labels import LABELS

BLOCK = LABELS.index("block")
# The separator tokens of the BERT-family tokenizers patterncnn knows: BERT's and MPNet/RoBERTa's.
SEPARATOR_TOKENS = ("[SEP]", "</s>")


def separators(tokens: Sequence[Hashable], sep: Hashable | None = None,
               special: Sequence[int] | None = None) -> list[int]:
    """Positions of the separator tokens in one input: the one place separators are found.

    Args:
        tokens: the input's tokens (strings, as ``convert_ids_to_tokens`` gives them) or token ids.
        sep: the separator (``tokenizer.sep_token`` or ``sep_token_id``); None: the first of
            :data:`SEPARATOR_TOKENS` that occurs in ``tokens``.
        special: the tokenizer's special-tokens mask for ``tokens`` (1 where its template put a special token);
            only those separators count. A text holding a separator's string (``[SEP]``) is tokenized to the
            separator token, and only this mask tells it from the template's. None: every separator counts.

    Returns:
        Sorted positions, e.g. [5, 11] for BERT's ``[CLS] A [SEP] B [SEP]`` or [5, 6, 11] for MPNet's
        ``<s> A </s></s> B </s>``; empty when there is none.
    """
    if special is not None and len(special) != len(tokens):
        raise ValueError(f"a special-tokens mask of {len(special)} positions for {len(tokens)} tokens; pass the mask "
                         f"the tokenizer gave with these tokens (return_special_tokens_mask=True)")
    if sep is None:
        present = set(tokens)
        sep = next((s for s in SEPARATOR_TOKENS if s in present), None)
        if sep is None:
            return []
    return [p for p, t in enumerate(tokens) if t == sep and (special is None or special[p])]


def valid_seps(t: int | None, seps: Sequence[int] | None) -> list[int]:
    """The separator positions that fall inside a length-T input (T None: all >= 0), sorted, no repeats."""
    return sorted({int(p) for p in (seps or []) if 0 <= int(p) and (t is None or int(p) < t)})


def segment_spans(t: int | None, seps: Sequence[int] | None) -> list[tuple[int, int]]:
    """Half-open token ranges [start, end) of the segments, covering 0..T.

    Each run of consecutive separators ends a segment; tokens after the last run (an input
    whose final separator was not given) belong to the last segment. No separators, or a
    single run, is one segment.

    Args:
        t: the input length T (special tokens included); None when unknown, and then the last
            segment ends after the last separator.
        seps: separator positions, e.g. [5, 11] for BERT or [5, 6, 11] for MPNet; None for unknown.

    Returns:
        At least one (start, end) pair; consecutive spans touch and the last ends at T.
    """
    s = valid_seps(t, seps)
    t = (s[-1] + 1 if s else 0) if t is None else t
    ends = [p + 1 for k, p in enumerate(s) if k + 1 == len(s) or s[k + 1] != p + 1]  # after each run
    starts = [0, *ends[:-1]]
    return list(zip(starts, [*ends[:-1], t]))


def boundaries(t: int, seps: Sequence[int] | None) -> list[int]:
    """First token of every segment after the first: where a boundary line is drawn (before it)."""
    return [start for start, _ in segment_spans(t, seps)[1:]]


def is_pair(t: int | None, seps: Sequence[int] | None) -> bool:
    """Whether the input has two segments or more (the only inputs that can show ``block``)."""
    return len(segment_spans(t, seps)) > 1


def segment_ids(t: int, seps: Sequence[int] | None) -> np.ndarray:
    """(T,) int64: the index of the segment each token belongs to (0 for A, 1 for B, ...)."""
    ids = np.zeros(t, dtype=np.int64)
    for b in boundaries(t, seps):
        ids[b:] += 1
    return ids


def same_segment(t: int, seps: Sequence[int] | None) -> np.ndarray:
    """(T, T) bool: query and key token in the same segment (the block squares; all True for one)."""
    ids = segment_ids(t, seps)
    return ids[:, None] == ids[None, :]


def single_segment(seps: Sequence[int] | None) -> bool:
    """Whether an input of these separators is known to hold one segment (None: unknown, taken as not)."""
    return seps is not None and not is_pair(None, seps)


def rule_out_block(probs: np.ndarray, seps: list[list[int] | None]) -> np.ndarray:
    """A single-segment input never gets ``block`` (ANNOTATION_GUIDE.md, rule 4): the segment rule.

    Its block probability is set to 0 and the rest renormalised, in place. Maps without separator
    information (``None``, e.g. from a plain .npz) are left as the CNN scored them.

    Args:
        probs: (N, 5) probabilities, LABELS order; changed in place and returned.
        seps: N separator lists (or None).
    """
    # The census passes one separator list per example, repeated for its L*H maps: decide each list once.
    decided: dict[int, bool] = {}

    def is_single(s) -> bool:
        if id(s) not in decided:
            decided[id(s)] = single_segment(s)
        return decided[id(s)]

    single = np.fromiter((is_single(s) for s in seps), dtype=bool, count=len(seps))
    if single.any():
        probs[single, BLOCK] = 0.0
        probs[single] /= probs[single].sum(1, keepdims=True)
    return probs
