"""Read-only access to the labelled real maps, and the picture helpers shared by the scripts.

This module reads ``annotations/`` directly (numpy + json + csv) instead of importing
``patterncnn``, so the scripts here do not depend on the package. The
segment logic and the picture (per-map scale 0..max, viridis, white line at each segment
boundary, nearest-neighbour upscaling) replicate ``patterncnn.segments`` and
``patterncnn.render.map_image``; the 16×16 grid replicates the ``area`` branch of
``patterncnn.model.preprocess`` (adaptive average pooling, then scaling by the grid's maximum).

Usage::

    real = load_real()                      # list of RealMap, every labelled map
    png = contact_sheet(maps, seps, captions)
"""

from __future__ import annotations

import csv
import dataclasses
import io
import json
from pathlib import Path

import numpy as np

ANNOTATIONS = Path(__file__).resolve().parents[2] / "annotations"
LABELS: tuple[str, ...] = ("vertical", "diagonal", "vertical+diagonal", "block", "heterogeneous")


@dataclasses.dataclass
class RealMap:
    """One labelled real map."""

    id: str
    label: str
    arr: np.ndarray
    seps: list[int]
    tokens: list[str]
    uncertain: bool
    votes: dict


def load_real(root: Path = ANNOTATIONS) -> list[RealMap]:
    """Every map of the store under ``root/maps`` that ``root/labels.csv`` labels.

    Args:
        root: the annotations folder (map store in ``maps/``, resolved labels in ``labels.csv``).

    Returns:
        One :class:`RealMap` per labelled map, in store order.
    """
    labels = {r["map_id"]: r for r in csv.DictReader(open(root / "labels.csv", encoding="utf-8"))}
    out = []
    for part in sorted((root / "maps").glob("part-*.npz")):
        z = np.load(part)
        with open(part.with_suffix(".jsonl"), encoding="utf-8") as f:
            for line in f:
                m = json.loads(line)
                r = labels.get(m["id"])
                if r is None:
                    continue
                out.append(RealMap(m["id"], r["label"], z[m["id"]].astype(np.float32), list(m.get("seps") or []),
                                   list(m.get("tokens") or []), r["uncertain"] == "True",
                                   json.loads(r["labels_seen"] or "{}")))
    return out


def segment_spans(t: int, seps: list[int] | None) -> list[tuple[int, int]]:
    """Half-open segment ranges: each run of consecutive separators ends a segment (as patterncnn.segments)."""
    s = sorted({int(p) for p in (seps or []) if 0 <= int(p) < t})
    ends = [p + 1 for k, p in enumerate(s) if k + 1 == len(s) or s[k + 1] != p + 1]
    starts = [0, *ends[:-1]]
    return list(zip(starts, [*ends[:-1], t]))


def boundaries(t: int, seps: list[int] | None) -> list[int]:
    """First token of each segment after the first (where the boundary line is drawn)."""
    return [a for a, _ in segment_spans(t, seps)[1:]]


def same_segment(t: int, seps: list[int] | None) -> np.ndarray:
    """(T, T) bool: query and key in the same segment (all True for one segment)."""
    ids = np.zeros(t, dtype=np.int64)
    for b in boundaries(t, seps):
        ids[b:] += 1
    return ids[:, None] == ids[None, :]


_VIRIDIS = None


def _lut() -> np.ndarray:
    global _VIRIDIS
    if _VIRIDIS is None:
        import matplotlib

        _VIRIDIS = matplotlib.colormaps["viridis"](np.linspace(0, 1, 256))[:, :3].astype(np.float32)
    return _VIRIDIS


def map_image(arr: np.ndarray, size: int, seps: list[int] | None = None, lines: bool = True) -> np.ndarray:
    """One map as an (size, size, 3) float image: per-map scale 0..max, viridis, white boundary lines.

    Same picture as ``patterncnn.render.map_image`` (nearest-neighbour, so one-token lines stay crisp).
    """
    a = np.asarray(arr, dtype=np.float32)
    a = a / (a.max() if a.max() > 0 else 1.0)
    rgb = _lut()[np.round(a * 255).astype(np.int64)]  # (T, T, 3)
    t = a.shape[0]
    idx = np.minimum((np.arange(size) * t) // size, t - 1)  # nearest neighbour
    img = rgb[idx][:, idx]
    if lines and seps is not None:
        for b in boundaries(t, seps):
            p = min(size - 1, round(b * size / t))
            img[p, :] = 1.0
            img[:, p] = 1.0
    return img


def grid16(arr: np.ndarray, grid: int = 16) -> np.ndarray:
    """The CNN's channel 0: adaptive average pooling to grid×grid, scaled by its own maximum.

    Replicates ``patterncnn.model.preprocess`` with ``representation="area"`` (torch's
    ``adaptive_avg_pool2d``: cell k covers rows floor(k*T/g) .. ceil((k+1)*T/g)).
    """
    import torch
    import torch.nn.functional as F

    x = F.adaptive_avg_pool2d(torch.as_tensor(np.asarray(arr, dtype=np.float32))[None, None], grid)[0, 0].numpy()
    return x / max(float(x.max()), 1e-12)


def grid_seps(t: int, seps: list[int] | None, grid: int = 16) -> list[int] | None:
    """Separator positions mapped onto the grid, so the boundary line lands where the segments split."""
    if not seps:
        return seps
    return [min(grid - 1, int(round((p + 1) * grid / t)) - 1) for p in seps]


def contact_sheet(maps: list[np.ndarray], seps: list[list[int] | None], captions: list[str] | None = None,
                  cell: int = 160, per_row: int = 6, title: str = "", lines: bool = True) -> bytes:
    """Many maps as one PNG grid, row-major, each with an optional caption strip above it.

    Args:
        maps: (T_i, T_i) arrays, each drawn with its own colour scale.
        seps: separator positions per map (None: no line).
        captions: one short text per map.
        cell: side of each map in pixels.
        per_row: maps per grid row.
        title: a line of text above the grid.
        lines: draw the segment-boundary lines.

    Returns:
        The PNG bytes.
    """
    from PIL import Image, ImageDraw, ImageFont

    pad, cap = 4, (16 if captions else 0)
    head = 22 if title else 0
    rows = (len(maps) + per_row - 1) // per_row
    w = per_row * (cell + pad) + pad
    h = head + rows * (cell + cap + pad) + pad
    canvas = np.ones((h, w, 3), dtype=np.float32)
    for k, (m, s) in enumerate(zip(maps, seps)):
        r, c = divmod(k, per_row)
        y, x = head + pad + r * (cell + cap + pad) + cap, pad + c * (cell + pad)
        canvas[y:y + cell, x:x + cell] = map_image(m, cell, s, lines)
    img = Image.fromarray((canvas * 255).round().astype(np.uint8))
    draw = ImageDraw.Draw(img)
    font = ImageFont.load_default(size=12)
    if title:
        draw.text((pad, 3), title, fill=(0, 0, 0), font=ImageFont.load_default(size=15))
    for k, text in enumerate(captions or []):
        r, c = divmod(k, per_row)
        draw.text((pad + c * (cell + pad) + 1, head + pad + r * (cell + cap + pad) + 1), text, fill=(0, 0, 0),
                  font=font)
    buf = io.BytesIO()
    img.save(buf, format="PNG")
    return buf.getvalue()


def side_by_side(left: bytes, right: bytes, gap: int = 16) -> bytes:
    """Two PNGs next to each other (left | right) as one PNG."""
    from PIL import Image

    a, b = Image.open(io.BytesIO(left)), Image.open(io.BytesIO(right))
    out = Image.new("RGB", (a.width + gap + b.width, max(a.height, b.height)), (255, 255, 255))
    out.paste(a, (0, 0))
    out.paste(b, (a.width + gap, 0))
    buf = io.BytesIO()
    out.save(buf, format="PNG")
    return buf.getvalue()
