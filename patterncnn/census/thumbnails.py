"""A few example maps per head and pattern, kept while the census streams: what the HTML report shows.

Usage::

    keep = Keeper(num_maps=L * H)                       # one per census window
    keep.offer(example_index, probs, maps, tokens, seps)   # probs (L*H, 5), maps (L, H, T, T)
    arrays = keep.arrays()                              # stored in the window's file
    best = merge([arrays_w0, arrays_w1, ...])           # the task's best, whichever windows they came from
    write_thumbnails(out, {"rte": best, ...}); read_thumbnails(out)   # thumbnails.npz in the census folder

For every (layer, head) and every pattern some of its maps were given, the census keeps the
``PER_HEAD`` maps the classifier gave that pattern with the highest probability (ties: the lower
example index), each scaled to its own maximum and stored as uint8 (T, T), with the example's tokens
and separators. The choice is a total order on (probability, example), so it does not depend on
how examples were batched or which window held them: a resumed or a Ray census keeps the same maps.
"""

from __future__ import annotations

import io
from pathlib import Path

import numpy as np

from ..core.arrayfile import PART_LIMITS, ArrayFileError, read_arrays
from ..core.errors import DataError
from ..core.fileio import write_bytes
from ..core.labels import LABELS

PER_HEAD = 3  # maps kept per (layer, head, pattern)
FILE = "thumbnails.npz"
_JOIN = "\x1f"  # between the tokens of one example (no tokenizer emits it)
_NO_INDEX = np.iinfo(np.int64).max
MAX_T = 1 << 16  # the longest input a kept map may come from (a window's check)


def quantize(a: np.ndarray) -> np.ndarray:
    """A (T, T) map scaled to its own maximum, as uint8 (0 to 255): how a person looks at it."""
    top = float(a.max())
    return np.round(a * (255.0 / top if top > 0 else 0.0)).astype(np.uint8)


class Keeper:
    """The best ``PER_HEAD`` maps of each (map position, pattern) among the examples offered so far."""

    def __init__(self, num_maps: int, per_head: int = PER_HEAD):
        self.per_head = per_head
        self.best: dict[tuple[int, int], list[tuple[float, int, np.ndarray]]] = {}
        self.floor_p = np.full((num_maps, len(LABELS)), -1.0)  # the worst kept entry once a list is full
        self.floor_i = np.full((num_maps, len(LABELS)), _NO_INDEX, dtype=np.int64)
        self.texts: dict[int, tuple[list[str], list[int]]] = {}

    def offer(self, index: int, probs: np.ndarray, maps: np.ndarray, tokens: list[str], seps: list[int]) -> None:
        """One example: ``probs`` (M, 5) of its M = L*H maps, ``maps`` (L, H, T, T)."""
        m = np.arange(len(probs))
        cls = probs.argmax(1)
        p = probs[m, cls].astype(np.float64)
        fp, fi = self.floor_p[m, cls], self.floor_i[m, cls]
        better = np.flatnonzero((p > fp) | ((p == fp) & (index < fi)))
        if better.size == 0:
            return
        flat = maps.reshape(len(probs), *maps.shape[-2:])
        for k in better:
            c = int(cls[k])
            kept = self.best.setdefault((int(k), c), [])
            kept.append((float(p[k]), index, quantize(flat[k])))
            kept.sort(key=lambda e: (-e[0], e[1]))
            del kept[self.per_head:]
            if len(kept) == self.per_head:
                self.floor_p[k, c], self.floor_i[k, c] = kept[-1][0], kept[-1][1]
        self.texts[index] = (list(tokens), list(seps))

    def arrays(self) -> dict[str, np.ndarray]:
        """What a window stores: the kept maps (flat uint8), their keys, and the tokens of their examples."""
        entries = [(m * len(LABELS) + c, p, i, a) for (m, c), kept in sorted(self.best.items()) for p, i, a in kept]
        used = sorted({i for _, _, i, _ in entries})
        return _pack(entries, {i: self.texts[i] for i in used})


def _pack(entries: list[tuple[int, float, int, np.ndarray]], texts: dict[int, tuple[list[str], list[int]]]) -> dict:
    flat = [a.ravel() for *_, a in entries]
    return {"thumb_key": np.array([e[0] for e in entries], dtype=np.int32),
            "thumb_prob": np.array([e[1] for e in entries], dtype=np.float64),
            "thumb_index": np.array([e[2] for e in entries], dtype=np.int64),
            "thumb_t": np.array([a.shape[0] for *_, a in entries], dtype=np.int32),
            "thumb_maps": np.concatenate(flat) if flat else np.zeros(0, dtype=np.uint8),
            "text_index": np.array(list(texts), dtype=np.int64),
            "text_tokens": np.array([_JOIN.join(t) for t, _ in texts.values()], dtype=str),
            "text_seps": np.array([",".join(map(str, s)) for _, s in texts.values()], dtype=str)}


def _unpack(arrays) -> tuple[list[tuple[int, float, int, np.ndarray]], dict[int, tuple[list[str], list[int]]]]:
    if "thumb_key" not in arrays:  # a window written before thumbnails existed
        return [], {}
    t = arrays["thumb_t"]
    ends = np.cumsum(t.astype(np.int64) ** 2)
    starts = ends - t.astype(np.int64) ** 2
    maps = arrays["thumb_maps"]
    entries = [(int(k), float(p), int(i), maps[s:e].reshape(n, n)) for k, p, i, n, s, e in
               zip(arrays["thumb_key"], arrays["thumb_prob"], arrays["thumb_index"], t, starts, ends)]
    texts = {int(i): (str(tok).split(_JOIN) if str(tok) else [], [int(x) for x in str(s).split(",") if x])
             for i, tok, s in zip(arrays["text_index"], arrays["text_tokens"], arrays["text_seps"])}
    return entries, texts


def problem(arrays: dict, num_maps: int) -> str | None:
    """What is wrong with the example maps stored among ``arrays`` (a window's or one task's), or None."""
    if "thumb_key" not in arrays:  # none kept (a window written before thumbnails existed)
        return None
    names = ("thumb_key", "thumb_prob", "thumb_index", "thumb_t", "thumb_maps", "text_index", "text_tokens",
             "text_seps")
    if any(k not in arrays or arrays[k].ndim != 1 for k in names):
        return "its example maps' arrays are missing or not flat"
    n, m = len(arrays["thumb_key"]), len(arrays["text_index"])
    if any(len(arrays[k]) != n for k in names[:4]) or any(len(arrays[k]) != m for k in names[6:]):
        return "its example maps' arrays do not agree in length"
    if any(arrays[k].dtype.kind not in "iu" for k in ("thumb_key", "thumb_index", "thumb_t", "text_index")) \
            or arrays["thumb_maps"].dtype != np.uint8 or any(arrays[k].dtype.kind != "U" for k in names[6:]):
        return "its example maps' arrays have the wrong types"
    if arrays["thumb_prob"].dtype.kind != "f":
        return "its example maps' probabilities are not numbers"
    t, keys, prob = arrays["thumb_t"], arrays["thumb_key"], arrays["thumb_prob"]
    if n and (t.min() < 1 or t.max() > MAX_T or keys.min() < 0 or keys.max() >= num_maps * len(LABELS)
              or not (np.isfinite(prob).all() and prob.min() >= 0 and prob.max() <= 1)):
        return "an example map's size, key or probability is out of range"
    if len(arrays["thumb_maps"]) != sum(int(x) ** 2 for x in t):  # Python ints: no overflow
        return "its example maps do not fill their array"
    if not set(arrays["thumb_index"].tolist()) <= set(arrays["text_index"].tolist()):
        return "an example map's input has no tokens stored"
    if any(sep and not all(x.isdigit() for x in str(sep).split(",")) for sep in arrays["text_seps"]):
        return "a separator list is not comma-separated positions"
    return None


def merge(parts: list, per_head: int = PER_HEAD) -> dict[str, np.ndarray]:
    """The best ``per_head`` maps of each (map position, pattern) over several windows' arrays."""
    entries, texts = [], {}
    for part in parts:
        e, t = _unpack(part)
        entries += e
        texts.update(t)
    entries.sort(key=lambda e: (e[0], -e[1], e[2]))
    kept, count = [], {}
    for e in entries:
        if count.get(e[0], 0) < per_head:
            count[e[0]] = count.get(e[0], 0) + 1
            kept.append(e)
    return _pack(kept, {i: texts[i] for i in sorted({e[2] for e in kept})})


def thumbnails_bytes(per_task: dict[str, dict]) -> bytes:
    """The census's ``thumbnails.npz``: each task's merged arrays, their names prefixed ``<task>.``."""
    buf = io.BytesIO()
    np.savez_compressed(buf, **{f"{task}.{k}": v for task, arrays in per_task.items() for k, v in arrays.items()})
    return buf.getvalue()


def write_thumbnails(out: Path, per_task: dict[str, dict]) -> None:
    write_bytes(Path(out) / FILE, thumbnails_bytes(per_task))


def read_thumbnails(out: str | Path, num_heads: int, num_maps: int | None = None) -> list[dict]:
    """The example maps of a finished census (empty when it has none): one dict per map.

    The file is read bounded and checked (:func:`problem`); ``num_maps`` (layers × heads) bounds the keys.

    Returns:
        [{"task", "layer", "head", "label", "prob", "example", "map": (T, T) float in [0, 1], "tokens", "seps"}],
        in (task, layer, head, pattern, rank) order.

    Raises:
        DataError: the file is damaged (run the census again with --overwrite).
    """
    path = Path(out) / FILE
    if not path.is_file():
        return []
    fix = "run the census again (with --overwrite) to write it anew"
    try:
        z = read_arrays(path, PART_LIMITS)
    except ArrayFileError as e:
        raise DataError(f"{path} is damaged ({e}); {fix}") from None
    rows = []
    files = list(z)
    tasks = sorted({k.split(".", 1)[0] for k in files}, key=[k.split(".", 1)[0] for k in files].index)
    for task in tasks:
        arrays = {k.split(".", 1)[1]: z[k] for k in files if k.startswith(task + ".") and "." in k}
        why = problem(arrays, num_maps if num_maps is not None else 1 << 40)
        if why:
            raise DataError(f"{path}: task {task}: {why}; {fix}")
        entries, texts = _unpack(arrays)
        for key, p, i, a in entries:
            m, c = divmod(key, len(LABELS))
            layer, head = divmod(m, num_heads)
            tokens, seps = texts.get(i, ([], []))
            rows.append({"task": task, "layer": layer, "head": head, "label": LABELS[c], "prob": p, "example": i,
                         "map": a.astype(np.float32) / 255.0, "tokens": tokens, "seps": seps})
    return rows
