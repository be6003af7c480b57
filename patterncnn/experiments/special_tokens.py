"""Where [CLS] and [SEP] get attention (paper Fig. 6 and 7), and punctuation and any token class named by a regex.

Usage (what ``patterncnn special-tokens`` runs)::

    res = special_tokens("minilm", tasks=["rte"], glue_dir="glue_data", token_classes={"digits": r"\\d+"})  # the API

    classes = TokenClasses.for_tokenizer(enc.tokenizer, {"digits": r"\\d+"})
    result = run_special_tokens(enc, [split], classes, out="runs/special", progress=tqdm)
    result["tasks"]["rte"]["share"]["cls"]     # (L, H): attention all tokens give to [CLS], over T
    result["tasks"]["rte"]["cls_row"]          # last layer, per head: the [CLS] row split over token classes

The measure of one (example, layer, head) map A (T x T, rows sum to 1) for a token class C is
``sum over queries i and keys j in C of A[i, j], divided by T``: the attention the T tokens give to C,
normalised by the sequence length as in the paper, so it lies in [0, 1] and the classes add up to 1.
It is averaged over examples. Every key token falls in exactly one class, tried in this order: the
tokenizer's own ``cls_token`` (``<s>`` for MPNet), its ``sep_token`` (``</s>``), the user's regexes
(matched against the token's whole text, :func:`token_text`), punctuation, other. A token's text is what it reads
as, for every tokenizer family alike: a byte-level BPE token (RoBERTa's ``âĢĻ``) is the character it encodes
(``’``), and word marks (WordPiece's ``##``, SentencePiece's ``▁``, byte-level BPE's ``Ġ``) are dropped. A token
with no text of its own (SentencePiece's lone ``▁``, the start of the word the next piece spells) takes the class of
the token after it.
"""

from __future__ import annotations

import dataclasses
import re
import time
import unicodedata
from pathlib import Path
from typing import Callable, Sequence

import numpy as np

from ..core import args
from ..core.errors import warn_truncated
from ..core.fileio import public_fingerprint, public_source
from ..core.glue import GlueSplit, dev_splits
from ..core.plots import cls_row_figure, grid_plot, png
from ..core.work import (
    finish,
    output_dir,
    prepare_out,
    progress_bars,
    provenance,
    run_windows,
    spread,
    truncated_examples,
    work_dir,
    write_result,
)
from ..encoders.load import Encoder, load_encoder
from .result import ExperimentResult

WINDOW = 64
RESULT = "special_tokens.json"
_PIECE_MARKS = ("##", "\u0120", "\u2581")  # BERT continuation, byte-level BPE space, SentencePiece space


def _bare(token: str) -> str:
    for mark in _PIECE_MARKS:
        if token.startswith(mark):
            return token[len(mark):]
    return token


def is_punctuation(text: str) -> bool:
    """Whether a token's text (:func:`token_text`) is punctuation and symbols only."""
    return bool(text) and all(unicodedata.category(c).startswith("P") or c in "$+<=>^`|~" for c in text)


def token_text(tokenizer) -> Callable[[str], str]:
    """token -> its text, for ``tokenizer``: ``convert_tokens_to_string([token])`` stripped of spaces, without a
    WordPiece continuation mark (the prefix of the tokenizer's WordPiece decoder, ``##``), so that byte-level BPE
    (``âĢĻ`` -> ``’``), SentencePiece (``▁the`` -> ``the``) and WordPiece (``##ing`` -> ``ing``) tokens are classified
    by the same characters. A tokenizer without ``convert_tokens_to_string``: the token without its word mark."""
    convert = getattr(tokenizer, "convert_tokens_to_string", None)
    if convert is None:
        return _bare
    decoder = getattr(getattr(tokenizer, "backend_tokenizer", None), "decoder", None)
    prefix = getattr(decoder, "prefix", "") if type(decoder).__name__ == "WordPiece" else ""
    seen: dict[str, str] = {}

    def text(token: str) -> str:
        if token not in seen:
            t = convert([token]).strip()
            seen[token] = t[len(prefix):] if prefix and t.startswith(prefix) and len(t) > len(prefix) else t
        return seen[token]

    return text


def token_class_error(name, pattern) -> str | None:
    """What is wrong with one user token class (a plain name not taken, a valid regex), or None: the one check,
    for ``special-tokens --token-class`` and ``special_tokens(token_classes=...)`` alike."""
    if not isinstance(name, str) or name in ("cls", "sep", "punctuation", "other") or not name.isidentifier():
        return f"the name {name!r} is taken or not a plain name; name it like a Python identifier, e.g. digits"
    if not isinstance(pattern, str):
        return f"the regex must be a str, not {type(pattern).__name__}"
    try:
        re.compile(pattern)
    except re.error as e:
        return f"{pattern!r} is not a valid regex ({e})"
    return None


@dataclasses.dataclass
class TokenClasses:
    """The token classes, in the order they are tried; ``cls``/``sep`` are the tokenizer's own special tokens."""

    cls_token: str
    sep_token: str
    user: dict[str, str] = dataclasses.field(default_factory=dict)  # name -> regex
    text: Callable[[str], str] = _bare  # token -> its text (:func:`token_text`)

    @classmethod
    def for_tokenizer(cls, tokenizer, user: dict[str, str] | None = None) -> "TokenClasses":
        """``user``: name -> regex, each already passed by :func:`token_class_error`."""
        return cls(tokenizer.cls_token, tokenizer.sep_token, dict(user or {}), token_text(tokenizer))

    @property
    def names(self) -> list[str]:
        return ["cls", "sep", *self.user, "punctuation", "other"]

    def assign(self, tokens: list[str]) -> np.ndarray:
        """(T,) int: the class index of each token."""
        compiled = [re.compile(p) for p in self.user.values()]
        punct, other = len(self.names) - 2, len(self.names) - 1
        out = np.empty(len(tokens), dtype=np.int64)
        for k in reversed(range(len(tokens))):  # from the end: a token without text takes the next one's class
            tok = tokens[k]
            if tok == self.cls_token:
                out[k] = 0
            elif tok == self.sep_token:
                out[k] = 1
            elif not (text := self.text(tok)):
                out[k] = out[k + 1] if k + 1 < len(tokens) and out[k + 1] > 1 else other
            else:
                hit = next((2 + i for i, rx in enumerate(compiled) if rx.fullmatch(text)), None)
                out[k] = hit if hit is not None else (punct if is_punctuation(text) else other)
        return out


def class_shares(maps: np.ndarray, classes: np.ndarray, n_classes: int) -> np.ndarray:
    """(L, H, T, T) maps and (T,) class ids -> (C, L, H): attention given to each class, over T."""
    t = maps.shape[-1]
    onehot = np.eye(n_classes)[classes]  # (T, C)
    received = maps.sum(axis=2)  # (L, H, T): each key's total attention from all queries
    return np.einsum("lht,tc->clh", received, onehot) / t


def cls_row(maps: np.ndarray, classes: np.ndarray, n_classes: int) -> np.ndarray:
    """(H, C): how the last layer's [CLS] row (query 0) spreads over the token classes."""
    return maps[-1, :, 0, :] @ np.eye(n_classes)[classes]


def special_window(enc: Encoder, window: list, classes: TokenClasses, batch_size: int = 16,
                   on_example: Callable | None = None) -> dict:
    """Sums over one window: {"share": (C, L, H), "cls_row": (H, C), "tokens": (C,) token fractions, "n": ()}, and
    the sums of squares of the first two ("share_sq", "cls_row_sq"), for their spread over examples."""
    c = len(classes.names)
    share, row, frac, n = np.zeros((c, enc.num_layers, enc.num_heads)), np.zeros((enc.num_heads, c)), np.zeros(c), 0
    share_sq, row_sq, cut = np.zeros_like(share), np.zeros_like(row), 0
    for ea in enc.iter_attentions(window, batch_size=batch_size, window=WINDOW):
        ids = classes.assign(ea.tokens)
        s = class_shares(ea.maps, ids, c)
        share += s
        share_sq += s**2
        if ids[0] == 0:  # the first token is [CLS] (or <s>) for every BERT-family tokenizer used here
            r = cls_row(ea.maps, ids, c)
            row += r
            row_sq += r**2
        frac += np.bincount(ids, minlength=c) / len(ids)
        n += 1
        cut += ea.truncated
        if on_example:
            on_example(ea)
    return {"share": share, "cls_row": row, "tokens": frac, "n": np.array(n), "share_sq": share_sq,
            "cls_row_sq": row_sq, "truncated": np.array(cut)}


def summarize(parts: list[dict], names: list[str]) -> dict:
    n = int(sum(int(p["n"]) for p in parts))
    share = sum(p["share"] for p in parts) / n  # (C, L, H)
    row = sum(p["cls_row"] for p in parts) / n  # (H, C)
    frac = sum(p["tokens"] for p in parts) / n
    share_std, row_std = spread(parts, "share_sq", share, n), spread(parts, "cls_row_sq", row, n)
    layer_mean = share.mean(2)  # (C, L)
    half = share.shape[1] / 2
    return {
        "examples": n, "truncated": truncated_examples(parts), "share": {k: np.round(share[i], 5).tolist() for i, k in enumerate(names)},
        "share_std": {k: np.round(share_std[i], 5).tolist() for i, k in enumerate(names)},  # over examples
        "layer_mean": {k: np.round(layer_mean[i], 5).tolist() for i, k in enumerate(names)},
        "token_fraction": {k: round(float(frac[i]), 5) for i, k in enumerate(names)},
        "cls_row": {k: np.round(row[:, i], 5).tolist() for i, k in enumerate(names)},
        "cls_row_std": {k: np.round(row_std[:, i], 5).tolist() for i, k in enumerate(names)},
        "peak_layer": {k: int(layer_mean[i].argmax()) for i, k in enumerate(names)},
        "cls_early_sep_late": bool(layer_mean[0].argmax() < half <= layer_mean[1].argmax()),
    }


def run_special_tokens(enc: Encoder, splits: list[GlueSplit], classes: TokenClasses, out: str | Path, seed: int = 0,
                       limit: int | None = None, batch_size: int = 16, progress: Callable | None = None,
                       overwrite: bool = False) -> dict:
    """Attention to each token class per layer x head for each split, into ``out`` (JSON, CSV, PNG per task)."""
    out = prepare_out(out, RESULT, overwrite, "special-tokens", [s.task.name for s in splits])
    result = provenance(experiment="special-tokens", model=public_fingerprint(enc.fingerprint), tag=enc.tag,
                        **({"encoder_weights": enc.weights_note} if enc.weights_note else {}),
                        layers=enc.num_layers, heads=enc.num_heads, max_length=enc.max_length, limit=limit, seed=seed,
                        classes={"order": classes.names, "cls_token": classes.cls_token,
                                 "sep_token": classes.sep_token, "user": classes.user,
                                 # since 2026-11-29 (before: the raw token strings); a run of each never mixes
                                 "tokens": "text"}, tasks={})
    for split in splits:
        t0 = time.time()
        params = {"task": split.task.name, "model": enc.fingerprint, "limit": limit, "seed": seed,
                  "max_length": enc.max_length, "source": split.source, "data": split.digest(),
                  # the classes (--token-class) and how tokens are read, apart: an unfinished run of the raw token
                  # strings (before 2026-11-29) is not resumed, and is not said to differ in --token-class
                  "classes": {k: v for k, v in result["classes"].items() if k != "tokens"},
                  "tokens": result["classes"]["tokens"]}
        work = work_dir(out, split.task.name, params, command="special-tokens")
        parts = run_windows(work, split.examples, WINDOW,
                            lambda window, tick: special_window(enc, window, classes, batch_size, tick), progress,
                            f"special {split.task.name}")
        result["tasks"][split.task.name] = {**summarize(parts, classes.names),
                                            "source": public_source(split.source), "of": split.total,
                                            "seconds": round(time.time() - t0, 1)}
    write_outputs(out, result)
    finish(out)
    return result


def special_tokens(model: str = "minilm", tasks: str | Sequence[str] = ("rte",), limit: int | None = 1000,
                   glue_dir: str | Path | None = None, out: str | Path | None = None, *,
                   token_classes: dict[str, str] | None = None, seed: int = 0, max_length: int = 128,
                   batch_size: int = 16, device: str = "auto", overwrite: bool = False,
                   progress: bool | Callable = False) -> ExperimentResult:
    """Attention to [CLS], [SEP], punctuation and regex token classes per layer × head (paper Fig. 6, 7).

    What ``patterncnn special-tokens`` runs.

    Args:
        model: the encoder; tasks: GLUE task names or ``"all"``; limit: examples per task; glue_dir: ``glue_data``.
        out: the result folder (resumable); None: a new temporary folder.
        token_classes: extra classes, name -> regex matched against a token's whole text (:func:`token_text`).
        device: ``auto``, ``cpu`` or ``cuda`` (untested).

    Returns:
        :class:`ExperimentResult`: ``.frame`` (task, layer, head and each class's share), ``.plot()``, ``.data``.

    Example::

        >>> res = patterncnn.special_tokens("minilm", tasks=["rte"], limit=100, glue_dir="../shared/glue")
        >>> res.data["tasks"]["rte"]["cls_early_sep_late"]   # [CLS] peaks early and [SEP] late, as in the paper
    """
    args.check(model=model, tasks=tasks, limit=limit, glue_dir=glue_dir, out=out, seed=seed, max_length=max_length,
               batch_size=batch_size, overwrite=overwrite, progress=progress)
    if token_classes is not None and not isinstance(token_classes, dict):
        raise args.ArgumentTypeError(f"token_classes must be a dict of name -> regex, e.g. {{'digits': r'\\d+'}}, not "
                                     f"{type(token_classes).__name__} {token_classes!r:.60}")
    for name, pattern in (token_classes or {}).items():
        error = token_class_error(name, pattern)
        if error:
            raise args.ArgumentError(f"token_classes {{{name!r}: {pattern!r}}}: {error}")
    splits = dev_splits(tasks, glue_dir, limit, seed)
    enc = load_encoder(model, max_length=max_length, device=device)
    classes = TokenClasses.for_tokenizer(enc.tokenizer, token_classes)
    folder = output_dir(out, "special-tokens")
    result = run_special_tokens(enc, splits, classes, folder, seed, limit, batch_size, progress_bars(progress),
                                overwrite)
    warn_truncated(result, "special_tokens.json")
    return ExperimentResult(result, folder, plot, rows)


def plot(result: dict, task: str | None = None):
    """Attention given to each token class per layer × head for one task (the first by default): a Figure."""
    task = task or next(iter(result["tasks"]))
    s = result["tasks"][task]
    panels = [(f"{k} (tokens: {100 * s['token_fraction'][k]:.0f}%)", np.array(s["share"][k]))
              for k in result["classes"]["order"] if k != "other"]
    return grid_plot(panels, f"attention given to each token class, over T — {result['tag']} on {task} "
                             f"({s['examples']} dev examples)", "viridis", 0.0, max(float(v.max()) for _, v in panels),
                     cols=len(panels))


def rows(result: dict) -> tuple[list[str], list[list]]:
    """(header, rows) of special_tokens.csv: one row per task, layer and head."""
    names = result["classes"]["order"]
    return ["task", "layer", "head", *names], [
        [task, l, h, *(s["share"][k][l][h] for k in names)]
        for task, s in result["tasks"].items() for l in range(result["layers"]) for h in range(result["heads"])]


def task_figure(task: str) -> str:
    """The file of a task's heatmaps in the output folder."""
    return f"special-{task}.png"


def write_outputs(out: Path, result: dict) -> None:
    """special_tokens.csv (one row per task, layer and head), special-<task>.png, cls-row.png, then the JSON."""
    figures = {task_figure(task): png(plot(result, task)) for task in result["tasks"]}
    figures["cls-row.png"] = cls_row_figure(result)
    write_result(out, RESULT, result, tables={"special_tokens.csv": rows(result)}, figures=figures)
