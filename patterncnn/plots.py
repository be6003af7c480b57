"""Figures for people: census stacked bars (the paper's Figure 2), layer × head grids.

Colours are fixed per label (Okabe-Ito, colour-blind safe) so every figure reads the same way.
"""

from __future__ import annotations

import io

import numpy as np

from .labels import LABELS, SHORT

# Okabe-Ito colours, in LABELS order.
COLORS = dict(zip(LABELS, ("#0072B2", "#E69F00", "#009E73", "#CC79A7", "#999999")))


def _fig(w: float, h: float):
    import matplotlib

    matplotlib.use("Agg", force=False)
    from matplotlib.figure import Figure

    return Figure(figsize=(w, h), dpi=110)


def _png(fig) -> bytes:
    buf = io.BytesIO()
    fig.savefig(buf, format="png", bbox_inches="tight")
    return buf.getvalue()


def census_figure(result: dict) -> bytes:
    """Stacked bars: one bar per task, segments = pattern shares (%), each with its total 95% interval as a whisker."""
    tasks = list(result["tasks"])
    fig = _fig(max(4.5, 1.3 * len(tasks) + 2.5), 4.6)
    ax = fig.add_subplot(1, 1, 1)
    bottom = np.zeros(len(tasks))
    for k, name in enumerate(LABELS):
        vals = np.array([100 * result["tasks"][t]["shares"][name] for t in tasks])
        ax.bar(tasks, vals, bottom=bottom, color=COLORS[name], label=name, width=0.6, edgecolor="white")
        for i, t in enumerate(tasks):
            if vals[i] >= 4:
                ax.text(i, bottom[i] + vals[i] / 2, f"{vals[i]:.0f}%", ha="center", va="center", fontsize=8,
                        color="black" if name == LABELS[-1] else "white")  # dark text on the light grey
        lo, hi = (np.array([100 * result["tasks"][t]["ci95"][name][j] for t in tasks]) for j in (0, 1))
        # Each segment's whisker sits on its top edge, one x position per pattern so that they do not merge.
        yerr = np.clip(np.stack([vals - lo, hi - vals]), 0, None)  # (2, tasks)
        ax.errorbar(np.arange(len(tasks)) - 0.24 + 0.12 * k, bottom + vals, yerr=yerr, fmt="none", ecolor="black",
                    elinewidth=0.8, capsize=2)
        bottom += vals
    ax.set_ylabel("share of (example, layer, head) maps, %")
    ax.set_ylim(0, 100)
    enc = result["encoder"]["model"]
    n = {t: result["tasks"][t]["examples"] for t in tasks}
    estimator = result.get("estimator", {}).get("name", "count")
    ax.set_title(f"Self-attention patterns per task — {enc}\n{estimator} estimate, whiskers: 95% interval "
                 f"(examples + classifier)\n" + ", ".join(f"{t}: {n[t]} ex." for t in tasks), fontsize=9)
    ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize=8, frameon=False)
    return _png(fig)


def head_grid(ax, majority: np.ndarray, strength: np.ndarray, title: str, annotate: bool = True) -> None:
    """Draw an (L, H) grid: colour = label, intensity = strength in [0, 1]."""
    from matplotlib.colors import to_rgb

    layers, heads = majority.shape
    img = np.ones((layers, heads, 3))
    for l in range(layers):
        for h in range(heads):
            c = np.array(to_rgb(COLORS[LABELS[majority[l, h]]]))
            a = 0.25 + 0.75 * float(strength[l, h])
            img[l, h] = 1 - a * (1 - c)
    ax.imshow(img, aspect="equal", interpolation="nearest")
    ax.set_xticks(range(heads))
    ax.set_xticklabels([str(h) for h in range(heads)], fontsize=7)
    ax.set_yticks(range(layers))
    ax.set_yticklabels([str(l) for l in range(layers)], fontsize=7)
    ax.set_xlabel("head", fontsize=8)
    ax.set_ylabel("layer", fontsize=8)
    ax.set_title(title, fontsize=9)
    if annotate and heads <= 16:
        for l in range(layers):
            for h in range(heads):
                ax.text(h, l, SHORT[LABELS[majority[l, h]]], ha="center", va="center", fontsize=6)


def _legend(fig) -> None:
    from matplotlib.patches import Patch

    fig.legend(handles=[Patch(color=COLORS[n], label=n) for n in LABELS], loc="lower center", ncol=len(LABELS),
               fontsize=8, frameon=False, bbox_to_anchor=(0.5, -0.02))


def heads_figure(result: dict) -> bytes:
    """One layer × head grid per task: each head coloured by its majority pattern, shaded by its share."""
    tasks = list(result["tasks"])
    layers, heads = result["layers"], result["heads"]
    cols = min(3, len(tasks))
    rows = -(-len(tasks) // cols)
    fig = _fig(cols * (0.45 * heads + 1.2), rows * (0.45 * layers + 1.2) + 0.5)
    for i, t in enumerate(tasks):
        grid = result["tasks"][t]["heads"]
        maj = np.array([[LABELS.index(c["majority"]) for c in row] for row in grid])
        share = np.array([[c["majority_share"] for c in row] for row in grid])
        head_grid(fig.add_subplot(rows, cols, i + 1), maj, share, f"{t} (majority pattern; shade = its share)")
    _legend(fig)
    return _png(fig)


def analyze_figure(probs: np.ndarray, title: str) -> bytes:
    """(L, H, 5) probabilities of one input -> grid coloured by label, shaded by confidence."""
    fig = _fig(0.45 * probs.shape[1] + 1.4, 0.45 * probs.shape[0] + 1.6)
    head_grid(fig.add_subplot(1, 1, 1), probs.argmax(-1), probs.max(-1), title)
    _legend(fig)
    return _png(fig)
