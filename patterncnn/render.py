"""Attention map -> PNG for people, drawn as ANNOTATION_GUIDE.md asks.

* :func:`render_png`: one map, colour scale per map from 0 to its maximum, a thin line at each
  segment boundary (after ``[SEP]``, or after MPNet's ``</s></s>``) so the segments show, token
  labels when they fit, the map id in the title.
* :func:`contact_sheet`: many maps as one image grid (torchvision ``make_grid``), each map
  scaled per map and resized to the same cell, for looking through a batch quickly.

Usage::

    png_bytes = render_png(arr, tokens=meta["tokens"], seps=meta["seps"], title=meta["id"])
"""

from __future__ import annotations

import io

import numpy as np
import torch

from .segments import boundaries

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


def contact_sheet(maps: list[np.ndarray], seps: list[list[int] | None] | None = None, cell: int = 128,
                  per_row: int = 8) -> bytes:
    """Many maps as one PNG grid, in the given order (row-major)."""
    from PIL import Image
    from torchvision.utils import make_grid

    seps = seps or [None] * len(maps)
    imgs = torch.stack([map_image(m, cell, s) for m, s in zip(maps, seps)])
    grid = make_grid(imgs, nrow=per_row, padding=4, pad_value=1.0)  # (3, H, W)
    buf = io.BytesIO()
    Image.fromarray((grid * 255).round().to(torch.uint8).permute(1, 2, 0).numpy()).save(buf, format="PNG")
    return buf.getvalue()


def labelled_sheet(maps: list[np.ndarray], seps: list[list[int] | None], captions: list[str], cols: int = 4,
                   cell_inches: float = 2.6, dpi: int = 90) -> bytes:
    """Many maps as one PNG with a caption over each, for looking through a batch by eye.

    Each map keeps its own colour scale (0 to its max) and segment lines, as in :func:`render_png`.
    """
    import matplotlib

    matplotlib.use("Agg", force=False)
    from matplotlib.figure import Figure

    rows = max(1, -(-len(maps) // cols))
    fig = Figure(figsize=(cols * cell_inches, rows * (cell_inches + 0.25)), dpi=dpi)
    for k, (arr, sp, cap) in enumerate(zip(maps, seps, captions)):
        ax = fig.add_subplot(rows, cols, k + 1)
        arr = np.asarray(arr, dtype=np.float32)
        ax.imshow(arr, cmap=_CMAP, vmin=0.0, vmax=float(arr.max()) or 1.0, interpolation="nearest")
        for b in boundaries(arr.shape[0], sp):
            ax.axhline(b - 0.5, color="white", linewidth=0.6)
            ax.axvline(b - 0.5, color="white", linewidth=0.6)
        ax.set_title(cap, fontsize=9)
        ax.set_xticks([])
        ax.set_yticks([])
    fig.tight_layout(pad=0.4)
    buf = io.BytesIO()
    fig.savefig(buf, format="png")
    return buf.getvalue()
