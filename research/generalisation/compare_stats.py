"""Real vs synthetic maps, class by class: a table of summary statistics (median [25 %, 75 %]).

Statistics per map:
    T          the number of tokens
    band       mass on the band |i - j| <= 1 (mean over rows)
    maxcol     the largest column mass share, max_j mean_i A[i, j]
    cls        mass on the [CLS] column, mean_i A[i, 0]
    entropy    row entropy / log T, mean over rows (1 = uniform rows)
    insq       mass inside the two segment squares, mean over rows (pairs only)
    rowmax     median over rows of the row's largest weight
    lit        share of cells above 10 % of the map's maximum (how much of the picture is not dark)
    spread     median over rows of the robust s.d. of log A (IQR / 1.35): the background's texture
    pair       share of two-segment inputs (one value per class)

A second table shows how the generator's check (``synthetic.judge``) reads the real maps of each
class: where the guide, as the check implements it, and the annotators' labels part.

Usage::

    python research/generalisation/compare_stats.py [--n 300] [--seed 0] [--t-prior class] [--markdown]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from realmaps import LABELS, load_real, same_segment  # noqa: E402

from patterncnn.training import synthetic  # noqa: E402

STATS = ("T", "band", "maxcol", "cls", "entropy", "insq", "rowmax", "lit", "spread")


def map_stats(a: np.ndarray, seps: list[int]) -> dict:
    """The summary statistics of one map (see the module docstring)."""
    a = np.asarray(a, np.float64)
    t = a.shape[0]
    i = np.arange(t)
    band = np.abs(i[:, None] - i[None, :]) <= 1
    same = same_segment(t, seps)
    pair = not same.all()
    la = np.log(np.maximum(a, 1e-12))
    ent = -(a * la).sum(1) / np.log(max(t, 2))
    q1, q3 = np.percentile(la, [25, 75], axis=1)
    return {"T": t, "band": a[band].sum() / t, "maxcol": a.mean(0).max(), "cls": a[:, 0].mean(),
            "entropy": ent.mean(), "insq": a[same].sum() / t if pair else np.nan,
            "rowmax": np.median(a.max(1)), "lit": (a > 0.1 * a.max()).mean(),
            "spread": float(np.median((q3 - q1) / 1.35)), "pair": float(pair)}


def summarise(rows: list[dict]) -> dict:
    out = {}
    for k in STATS:
        x = np.array([r[k] for r in rows], float)
        x = x[~np.isnan(x)]
        out[k] = np.percentile(x, [25, 50, 75]) if len(x) else np.full(3, np.nan)
    out["pair"] = np.mean([r["pair"] for r in rows])
    out["n"] = len(rows)
    return out


def fmt(q: np.ndarray, k: str) -> str:
    if np.isnan(q).any():
        return "—"
    if k == "T":
        return f"{q[1]:.0f} [{q[0]:.0f}, {q[2]:.0f}]"
    return f"{q[1]:.3f} [{q[0]:.2f}, {q[2]:.2f}]"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=300, help="synthetic maps per class")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--max-t", type=int, default=128, help="largest synthetic T (the real set stops at 128)")
    ap.add_argument("--t-prior", default="class", choices=("class", "shared"),
                    help="synthetic T prior (class: like the real per-class lengths)")
    ap.add_argument("--markdown", action="store_true", help="print a markdown table")
    args = ap.parse_args()
    real = load_real()
    rng = np.random.default_rng(args.seed)
    syn = synthetic.batch(args.n * len(LABELS), rng, max_t=args.max_t, t_prior=args.t_prior, shuffle=False)
    rows = []
    for lab in LABELS:
        r = summarise([map_stats(m.arr, m.seps) for m in real if m.label == lab])
        s = summarise([map_stats(x.map, x.seps) for x in syn if LABELS[x.label] == lab])
        rows.append((lab, r, s))
    print_table(rows, args.markdown)
    print()
    print_checker(real, syn, args.markdown)
    print()
    print_hard_cases(syn)


def print_table(rows: list, markdown: bool) -> None:
    """The statistics table: real and synthetic rows per class."""
    cols = ["n", "pair", *STATS]
    if markdown:
        print("| class | source | " + " | ".join(cols) + " |")
        print("|" + " --- |" * (len(cols) + 2))
    for lab, r, s in rows:
        for name, d in (("real", r), ("synthetic", s)):
            cells = [str(d["n"]), f"{d['pair']:.2f}", *[fmt(d[k], k) for k in STATS]]
            if markdown:
                print(f"| {lab if name == 'real' else ''} | {name} | " + " | ".join(cells) + " |")
            else:
                print(f"{lab if name == 'real' else '':18s} {name:9s} " + "  ".join(f"{c:>18s}" for c in cells))
        if not markdown:
            print()


def print_checker(real: list, syn: list, markdown: bool) -> None:
    """How the generator's check (synthetic.judge) reads the real maps of each class, and the synthetic ones.

    For each class: the share of its maps the check would accept as each label, and the share it
    leaves between labels (no label accepted). Synthetic maps are accepted as their own class by
    construction; the real rows show where the guide, as the check reads it, and the annotators part.
    """
    head = ["class", "source", "n", *LABELS, "none"]
    if markdown:
        print("| " + " | ".join(head) + " |")
        print("|" + " --- |" * len(head))
    else:
        print("  ".join(f"{h:>17s}" for h in head))
    for lab in LABELS:
        for name, maps in (("real", [(m.arr, m.seps) for m in real if m.label == lab]),
                           ("synthetic", [(x.map, x.seps) for x in syn if LABELS[x.label] == lab])):
            j = [synthetic.judge(a, s) for a, s in maps]
            shares = [np.mean([d[k] for d in j]) for k in LABELS]
            none = np.mean([not any(d.values()) for d in j])
            cells = [lab if name == "real" else "", name, str(len(j)), *[f"{v:.2f}" for v in shares], f"{none:.2f}"]
            if markdown:
                print("| " + " | ".join(cells) + " |")
            else:
                print("  ".join(f"{c:>17s}" for c in cells))


def print_hard_cases(syn: list) -> None:
    """How often the synthetic set holds the guide's hard cases (measured on the maps, synthetic.measure)."""
    m = {lab: [synthetic.measure(x.map, x.seps) for x in syn if LABELS[x.label] == lab] for lab in LABELS}

    def share(lab: str, f) -> str:
        return f"{np.mean([bool(f(d)) for d in m[lab]]):.2f}"

    print("hard cases in the synthetic maps (share of the class):")
    print("  diagonal with a clearly faint column (stands out >= 4x background in >= 50 % of rows, too dim "
          "to count):", share("diagonal", lambda d: d["faintcol"] >= 0.5 and d["colcov"] <= 0.4))
    print("  vertical with a findable but clearly faint diagonal (>= 6x background in >= 50 % of rows):",
          share("vertical", lambda d: d["faintdiag"] >= 0.5))
    print("  vertical+diagonal whose weaker part is < 0.35x the other's strength (still noticed):",
          share("vertical+diagonal", lambda d: min(d["diagstr"] / max(d["colstr"], 1e-9),
                                                   d["colstr"] / max(d["diagstr"], 1e-9)) < 0.35))
    print("  heterogeneous with a main diagonal (lines as bright as it):",
          share("heterogeneous", lambda d: d["diagcov"] >= 0.6))
    print("  heterogeneous without any column standing out in half of the rows (speckle/haze):",
          share("heterogeneous", lambda d: d["faintcol"] < 0.5))
    print("  block with own-separator columns (weaker than the squares):", share("block", lambda d: d["colcov"] >= 0.65))


if __name__ == "__main__":
    main()
