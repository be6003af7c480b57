"""Contact sheets: synthetic maps next to real maps of the same class, drawn the same way.

Writes to ``research/generalisation/sheets/``:

* ``<class>.png`` (five files): left, 24 synthetic maps of the class; right, 24 real maps of
  that class drawn at random from ``annotations/`` (labels.csv; block has only 16).
  Each map is scaled per map from 0 to its maximum, viridis, with a white line at the segment
  boundary, nearest-neighbour upscaled: the picture the annotators labelled from.
* ``grid16.png``: the same kind of comparison after the CNN's preprocessing (adaptive average
  pooling to 16×16, scaled by the grid's maximum; ``patterncnn.model.preprocess``, channel 0):
  per class, 12 synthetic maps above 12 real ones.

Usage::

    python research/generalisation/sheets.py [--seed 0] [--n 24] [--t-prior class]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from realmaps import LABELS, contact_sheet, grid16, grid_seps, load_real, side_by_side  # noqa: E402

from patterncnn.training import synthetic  # noqa: E402

OUT = HERE / "sheets"


def pick_real(real: list, label: str, n: int, rng: np.random.Generator) -> list:
    """n real maps of one class, at random (all of them if fewer)."""
    pool = [m for m in real if m.label == label]
    idx = rng.choice(len(pool), min(n, len(pool)), replace=False)
    return [pool[i] for i in sorted(idx)]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--n", type=int, default=24, help="maps per side and class")
    ap.add_argument("--t-prior", default="class", choices=("class", "shared"))
    ap.add_argument("--max-t", type=int, default=256)
    ap.add_argument("--out", type=Path, default=OUT)
    args = ap.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(args.seed)
    real = load_real()
    g_syn, g_real = [], []
    for lab in LABELS:
        syn = synthetic.batch(args.n, rng, {lab: 1.0}, max_t=args.max_t, t_prior=args.t_prior)
        rl = pick_real(real, lab, args.n, rng)
        left = contact_sheet([s.map for s in syn], [s.seps for s in syn], [f"T={s.map.shape[0]}" for s in syn],
                             cell=128, per_row=6, title=f"synthetic: {lab}")
        right = contact_sheet([m.arr for m in rl], [m.seps for m in rl],
                              [f"T={m.arr.shape[0]} {m.id.split('-')[0]}{' ?' if m.uncertain else ''}" for m in rl],
                              cell=128, per_row=6, title=f"real: {lab} ({len(rl)} of "
                                                        f"{sum(m.label == lab for m in real)}; ? = uncertain)")
        (args.out / f"{lab.replace('+', '_')}.png").write_bytes(side_by_side(left, right, gap=24))
        g_syn.append(syn[:12])
        g_real.append(rl[:12])
    # the CNN's view: 16x16 area pooling; per class a row of synthetic maps above a row of real ones
    rows = []
    for lab, syn, rl in zip(LABELS, g_syn, g_real):
        rows.append(contact_sheet([grid16(s.map) for s in syn], [grid_seps(s.map.shape[0], s.seps) for s in syn],
                                  [f"syn T={s.map.shape[0]}" for s in syn], cell=96, per_row=12,
                                  title=f"{lab}: synthetic"))
        rows.append(contact_sheet([grid16(m.arr) for m in rl], [grid_seps(m.arr.shape[0], m.seps) for m in rl],
                                  [f"real T={m.arr.shape[0]}" for m in rl], cell=96, per_row=12,
                                  title=f"{lab}: real"))
    (args.out / "grid16.png").write_bytes(stack(rows, title="16x16 area-pooled maps (the CNN's channel 0, "
                                                            "scaled to the grid's max)"))


def stack(pngs: list[bytes], title: str = "") -> bytes:
    """PNGs one above the other, with a title line."""
    import io

    from PIL import Image, ImageDraw, ImageFont

    imgs = [Image.open(io.BytesIO(p)) for p in pngs]
    head = 24 if title else 0
    out = Image.new("RGB", (max(i.width for i in imgs), head + sum(i.height + 8 for i in imgs)), (255, 255, 255))
    y = head
    for im in imgs:
        out.paste(im, (0, y))
        y += im.height + 8
    if title:
        ImageDraw.Draw(out).text((4, 4), title, fill=(0, 0, 0), font=ImageFont.load_default(size=15))
    buf = io.BytesIO()
    out.save(buf, format="PNG")
    return buf.getvalue()


if __name__ == "__main__":
    main()
