"""Attention map -> PNG for people, drawn as ANNOTATION_GUIDE.md asks.

* :func:`render_png`: one map, colour scale per map from 0 to its maximum, a thin line at each
  segment boundary (after ``[SEP]``, or after MPNet's ``</s></s>``) so the segments show, token
  labels when they fit, the map id in the title.
* :func:`contact_sheet`: many maps as one image grid (torchvision ``make_grid``), each map
  scaled per map, resized to the same cell and captioned (``annotate sheets``), for looking
  through a batch quickly.

Usage::

    png_bytes = render_png(arr, tokens=meta["tokens"], seps=meta["seps"], title=meta["id"])
    small = thumbnail_png(arr, seps=meta["seps"])     # 2 pixels per token, for the HTML report
"""

from __future__ import annotations

import functools
import io
import random
from pathlib import Path

import numpy as np
import torch

from ..core.fileio import output_folder, write_bytes, write_json
from ..core.maps import MapFormatError, require_maps
from ..core.segments import boundaries

# Token labels stop fitting above this many tokens: they overlap at any readable font size.
MAX_LABELLED_TOKENS = 48
_CMAP = "viridis"


def _lut() -> torch.Tensor:
    import matplotlib

    return torch.tensor(matplotlib.colormaps[_CMAP](np.linspace(0, 1, 256))[:, :3], dtype=torch.float32)


def render_png(
    arr: np.ndarray,
    tokens: list[str] | None = None,
    seps: list[int] | None = None,
    title: str = "",
    subtitle: str = "",
    dpi: int = 100,
) -> bytes:
    """Draw one (T, T) map as a PNG heatmap and return the PNG bytes.

    Args:
        arr: (T, T) attention map; row = query token, column = key token.
        tokens: T token strings, drawn on both axes when T <= MAX_LABELLED_TOKENS.
        seps: positions of separator tokens; a thin line is drawn at each segment boundary.
        title: shown on top (the map id).
        subtitle: a second, smaller title line (e.g. model, task, layer, head).
    """
    import matplotlib

    matplotlib.use("Agg", force=False)
    from matplotlib.figure import Figure

    arr = np.asarray(arr, dtype=np.float32)
    t = arr.shape[0]
    labelled = tokens is not None and len(tokens) == t and t <= MAX_LABELLED_TOKENS
    side = 6.4 if labelled else 5.2
    fig = Figure(figsize=(side + 1.2, side + 0.6), dpi=dpi)
    ax = fig.add_axes((0.16 if labelled else 0.08, 0.14 if labelled else 0.06, 0.72, 0.76))
    vmax = float(arr.max()) or 1.0
    im = ax.imshow(arr, cmap=_CMAP, vmin=0.0, vmax=vmax, interpolation="nearest", aspect="equal")
    cax = fig.add_axes((0.90, 0.14 if labelled else 0.06, 0.025, 0.76))
    fig.colorbar(im, cax=cax)
    for b in boundaries(t, seps):  # before the first token of each later segment
        ax.axhline(b - 0.5, color="white", linewidth=0.8, alpha=0.9)
        ax.axvline(b - 0.5, color="white", linewidth=0.8, alpha=0.9)
    if labelled:
        size = 7 if t <= 30 else 5
        ax.set_xticks(range(t))
        ax.set_xticklabels(tokens, rotation=90, fontsize=size)
        ax.set_yticks(range(t))
        ax.set_yticklabels(tokens, fontsize=size)
    else:
        ax.set_xlabel("key token (attended)", fontsize=8)
        ax.set_ylabel("query token (attending)", fontsize=8)
        ax.tick_params(labelsize=7)
    fig.suptitle(title, fontsize=9, y=0.985)
    if subtitle:
        fig.text(0.5, 0.935, subtitle, ha="center", fontsize=7, color="dimgray")
    buf = io.BytesIO()
    fig.savefig(buf, format="png")
    return buf.getvalue()


def map_image(arr: np.ndarray, size: int, seps: list[int] | None = None) -> torch.Tensor:
    """One map as a (3, size, size) float image in [0, 1]: per-map scale, viridis, segment lines.

    Nearest-neighbour resizing keeps single-token lines one cell wide and crisp.
    """
    from torchvision.transforms.functional import InterpolationMode, resize

    a = torch.as_tensor(np.asarray(arr, dtype=np.float32))
    a = a / (a.max() if a.max() > 0 else 1.0)
    rgb = _lut()[(a * 255).round().long()].permute(2, 0, 1)  # (3, T, T)
    img = resize(rgb, [size, size], interpolation=InterpolationMode.NEAREST, antialias=False)
    t = a.shape[0]
    for b in boundaries(t, seps):
        p = min(size - 1, round(b * size / t))
        img[:, p, :] = 1.0
        img[:, :, p] = 1.0
    return img


@functools.lru_cache(maxsize=1)
def _palette() -> list[int]:
    """A PNG palette: 255 steps of the colour map, then white (index 255, the segment lines)."""
    rgb = (_lut()[np.linspace(0, 255, 255).round().astype(int)].numpy() * 255).round().astype(np.uint8)
    return [*rgb.ravel().tolist(), 255, 255, 255]


def thumbnail_png(arr: np.ndarray, seps: list[int] | None = None, scale: int = 2) -> bytes:
    """One map as a small palette PNG: per-map scale, the colour map, ``scale`` pixels per token, a white line
    before each later segment. The HTML report's thumbnails (a few hundred per report, so small and quick)."""
    from PIL import Image

    a = np.asarray(arr, dtype=np.float32)
    top = float(a.max())
    idx = np.round(a * (254.0 / top if top > 0 else 0.0)).astype(np.uint8)
    idx = np.repeat(np.repeat(idx, scale, axis=0), scale, axis=1)
    for b in boundaries(a.shape[0], seps):
        idx[b * scale, :] = 255
        idx[:, b * scale] = 255
    img = Image.fromarray(idx, mode="P")
    img.putpalette(_palette())
    buf = io.BytesIO()
    img.save(buf, format="PNG")
    return buf.getvalue()


CAPTION_PX = 18  # height of the caption strip above each cell


def contact_sheet(maps: list[np.ndarray], seps: list[list[int] | None] | None = None,
                  captions: list[str] | None = None, cell: int = 224, per_row: int = 4) -> bytes:
    """Many maps as one PNG grid, in the given order (row-major), each with an optional caption above it.

    Args:
        maps: (T_i, T_i) maps; each keeps its own colour scale (0 to its max) and [SEP] lines.
        captions: one short text per map (e.g. its running number), drawn in a strip above the cell.
        cell: the side of each map in pixels (nearest-neighbour, so single-token lines stay crisp).
    """
    from PIL import Image, ImageDraw, ImageFont
    from torchvision.utils import make_grid

    seps = seps or [None] * len(maps)
    top = CAPTION_PX if captions else 0
    imgs = torch.ones((len(maps), 3, cell + top, cell))
    for k, (m, s) in enumerate(zip(maps, seps)):
        imgs[k, :, top:] = map_image(m, cell, s)
    grid = make_grid(imgs, nrow=per_row, padding=4, pad_value=1.0)  # (3, H, W)
    img = Image.fromarray((grid * 255).round().to(torch.uint8).permute(1, 2, 0).numpy())
    if captions:
        draw = ImageDraw.Draw(img)
        font = ImageFont.load_default(size=13)
        for k, text in enumerate(captions):
            row, col = divmod(k, per_row)
            draw.text((4 + col * (cell + 4) + 2, 4 + row * (cell + top + 4) + 2), text, fill=(0, 0, 0), font=font)
    buf = io.BytesIO()
    img.save(buf, format="PNG")
    return buf.getvalue()


def write_sheets(maps, out: str | Path, per_sheet: int = 16, shuffle: int | None = None,
                 overwrite: bool = False) -> dict:
    """Write ``maps`` (a map source) as numbered contact sheets ``sheet-NNN.png`` plus ``index.json``.

    Each map is checked as ``classify`` checks it (:func:`patterncnn.core.maps.classifier_input`): one that is
    not square, empty, NaN/inf (also once cast to float32), negative, or whose separators fall outside it is
    skipped (not drawn, not numbered, not in the index) and listed in the result, while the rest are drawn.

    Args:
        shuffle: a seed to shuffle the maps with first (so a batch is not seen in store order).
        overwrite: replace the sheets already in ``out`` (:func:`patterncnn.core.fileio.output_folder`);
            older sheets past the new count are removed.

    Returns:
        {"sheets": n written, "drawn": n maps, "skipped": [(map id, why), ...]}

    Raises:
        MapFormatError: ``maps`` holds no maps, or none that can be drawn (nothing is written then).
    """
    if per_sheet < 1:
        raise ValueError(f"--per-sheet must be at least 1 (got {per_sheet})")
    out = output_folder(out, ("index.json",), overwrite)
    metas = list(require_maps(maps).meta)
    if shuffle is not None:
        random.Random(shuffle).shuffle(metas)
    index, skipped, chunk = [], [], []

    def draw() -> None:
        sheet, start = len(index) // per_sheet, len(index)
        if not index:  # the index is written last; the old one goes before the first new sheet, so that a run
            # stopped half way leaves no index naming the old maps beside new sheets (helper 103's review)
            (out / "index.json").unlink(missing_ok=True)
        captions = [f"#{start + k}  T={a.shape[0]}" for k, (_, a) in enumerate(chunk)]
        write_bytes(out / f"sheet-{sheet:03d}.png",
                    contact_sheet([a for _, a in chunk], [m.get("seps") for m, _ in chunk], captions))
        index.extend({"n": start + k, "sheet": sheet, "id": m["id"]} for k, (m, _) in enumerate(chunk))
        chunk.clear()

    for m in metas:
        arr, errors, _ = maps.input_of(m)
        if errors:
            skipped.append((m["id"], errors[0]))
            continue
        chunk.append((m, arr))
        if len(chunk) == per_sheet:
            draw()
    if chunk:
        draw()
    if not index:
        map_id, why = skipped[0]
        raise MapFormatError(f"none of the {len(skipped)} map(s) can be drawn (map {map_id!r}: {why}); pass square "
                             f"maps of finite, non-negative attention weights")
    write_json(out / "index.json", index)
    sheets = -(-len(index) // per_sheet)
    for old in out.glob("sheet-*.png"):  # an earlier, longer set of sheets
        if old.stem[6:].isdigit() and int(old.stem[6:]) >= sheets:
            old.unlink()
    return {"sheets": sheets, "drawn": len(index), "skipped": skipped}
