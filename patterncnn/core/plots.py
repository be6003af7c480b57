"""Figures for people: census stacked bars (the paper's Figure 2), layer × head grids.

Colours are fixed per label (Okabe-Ito, colour-blind safe) so every figure reads the same way.
Each ``*_plot`` returns a matplotlib ``Figure`` built without pyplot (so no backend is chosen or
changed: a notebook's own plotting is left alone) that shows itself in Jupyter; each ``*_figure``
returns the same figure's PNG bytes, for files.
"""

from __future__ import annotations

import functools
import io

import numpy as np

from .labels import LABELS, SHORT

# Okabe-Ito colours, in LABELS order.
COLORS = dict(zip(LABELS, ("#0072B2", "#E69F00", "#009E73", "#CC79A7", "#999999")))


@functools.lru_cache(maxsize=1)
def _figure_class():
    from matplotlib.figure import Figure  # matplotlib loads with the first figure, not with this module

    class ShownFigure(Figure):
        """A Figure that Jupyter shows as a PNG even when pyplot was never imported."""

        def _repr_png_(self) -> bytes:
            return png(self)

    return ShownFigure


def _fig(w: float, h: float):
    return _figure_class()(figsize=(w, h), dpi=110)


def png(fig) -> bytes:
    """A figure as PNG bytes."""
    buf = io.BytesIO()
    fig.savefig(buf, format="png", bbox_inches="tight")
    return buf.getvalue()


def census_figure(result: dict) -> bytes:
    """:func:`census_plot` as PNG bytes."""
    return png(census_plot(result))


def census_plot(result: dict):
    """Stacked bars: one bar per task, segments = pattern shares (%), each with its total 95% interval as a whisker.

    Returns:
        A matplotlib ``Figure`` (not attached to pyplot: display it in Jupyter or save it).
    """
    tasks = list(result["tasks"])
    fig = _fig(max(4.5, 1.3 * len(tasks) + 2.5), 4.6)
    ax = fig.add_subplot(1, 1, 1)
    bottom = np.zeros(len(tasks))
    top = 100.0  # the highest whisker end: the top segment's whisker may reach above 100 %
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
        top = max(top, float((bottom + vals + yerr[1]).max(initial=0)))
        bottom += vals
    ax.set_ylabel("share of (example, layer, head) maps, %")
    ax.set_ylim(0, top + 1)  # no whisker cut off; the ticks stop at 100
    ax.set_yticks(np.arange(0, 101, 20))
    n = {t: result["tasks"][t]["examples"] for t in tasks}
    estimator = result.get("estimator", {}).get("name", "count")
    ax.set_title(f"Self-attention patterns per task — {measured_on(result)}\n{estimator} estimate; whiskers: each "
                 f"share's 95% interval (examples + classifier), at its segment's top\n"
                 + ", ".join(f"{t}: {n[t]} ex." for t in tasks), fontsize=9)
    ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize=8, frameon=False)
    return fig


def head_grid(ax, majority: np.ndarray, strength: np.ndarray, title: str, annotate: bool = True,
              tied: np.ndarray | None = None, unclear: np.ndarray | None = None) -> None:
    """Draw an (L, H) grid: colour = label, intensity = strength in [0, 1]; ``tied`` (L, H) bool: a ``*`` after
    the letter of a head whose majority is tied; ``unclear`` (L, H) bool: a ``?`` after that of a head whose
    majority other examples could overturn (its interval reaches the runner-up's)."""
    from matplotlib.colors import to_rgb

    layers, heads = majority.shape
    img = np.ones((layers, heads, 3))
    for l in range(layers):
        for h in range(heads):
            c = np.array(to_rgb(COLORS[LABELS[majority[l, h]]]))
            a = 0.25 + 0.75 * float(strength[l, h])
            img[l, h] = 1 - a * (1 - c)
    ax.imshow(img, aspect="equal", interpolation="nearest")
    _layer_head_axes(ax, layers, heads, title)
    if annotate and heads <= 16:
        for l in range(layers):
            for h in range(heads):
                mark = ("*" if tied is not None and tied[l, h] else
                        "?" if unclear is not None and unclear[l, h] else "")
                ax.text(h, l, SHORT[LABELS[majority[l, h]]] + mark, ha="center", va="center", fontsize=6)


def _layer_head_axes(ax, layers: int, heads: int, title: str) -> None:
    """Label a layer × head grid's axes: a tick per head and per layer."""
    ax.set_xticks(range(heads))
    ax.set_xticklabels([str(h) for h in range(heads)], fontsize=7)
    ax.set_yticks(range(layers))
    ax.set_yticklabels([str(l) for l in range(layers)], fontsize=7)
    ax.set_xlabel("head", fontsize=8)
    ax.set_ylabel("layer", fontsize=8)
    ax.set_title(title, fontsize=9)


def _legend(fig, y: float = -0.02) -> None:
    from matplotlib.patches import Patch

    fig.legend(handles=[Patch(color=COLORS[n], label=n) for n in LABELS], loc="lower center", ncol=len(LABELS),
               fontsize=8, frameon=False, bbox_to_anchor=(0.5, y))


def measured_on(result: dict) -> str:
    """What a census's figures were measured on, for their titles: the encoder's tag (its name and weights' hash:
    two folders of one name differ) and the classifier's version; a figure pasted into a paper says it itself."""
    enc = result.get("encoder_tag") or (result.get("encoder") or {}).get("model") or "an encoder"
    clf = (result.get("classifier") or {}).get("version")
    return f"{enc}, classifier {clf}" if clf else enc


def heads_figure(result: dict) -> bytes:
    """:func:`heads_plot` as PNG bytes."""
    return png(heads_plot(result))


def heads_plot(result: dict):
    """One layer × head grid per task: each head coloured by its majority pattern, shaded by its share (a Figure)."""
    tasks = list(result["tasks"])
    layers, heads = result["layers"], result["heads"]
    cols = min(3, len(tasks))
    rows = -(-len(tasks) // cols)
    fig = _fig(cols * (0.45 * heads + 1.2), rows * (0.45 * layers + 1.2) + 0.5)
    for i, t in enumerate(tasks):
        grid = result["tasks"][t]["heads"]
        maj = np.array([[LABELS.index(c["majority"]) for c in row] for row in grid])
        share = np.array([[c["majority_share"] for c in row] for row in grid])
        tied = np.array([["tied" in c for c in row] for row in grid])
        unclear = np.array([[c.get("clear") is False for c in row] for row in grid])  # None: a census of before
        note = ("; * a tie, shown as its first pattern" if tied.any() else "") + (
            "\n? a majority other examples could overturn" if (unclear & ~tied).any() else "")
        head_grid(fig.add_subplot(rows, cols, i + 1), maj, share, f"{t} (majority pattern; shade = its share{note})",
                  tied=tied, unclear=unclear)
    fig.suptitle(f"Majority pattern per layer and head — {measured_on(result)}", fontsize=9)
    _legend(fig)
    return fig


def analyze_figure(probs: np.ndarray, title: str) -> bytes:
    """:func:`head_grid_plot` as PNG bytes."""
    return png(head_grid_plot(probs, title))


def head_grid_plot(probs: np.ndarray, title: str):
    """(L, H, 5) probabilities of one input -> grid coloured by label, shaded by confidence (a Figure)."""
    fig = _fig(0.45 * probs.shape[1] + 1.4, 0.45 * probs.shape[0] + 1.6)
    head_grid(fig.add_subplot(1, 1, 1), probs.argmax(-1), probs.max(-1), title)
    _legend(fig)
    return fig


def value_grid(ax, values: np.ndarray, title: str, cmap: str = "viridis", vmin=None, vmax=None, fmt: str = "{:.2f}",
               marks: np.ndarray | None = None):
    """Draw an (L, H) heatmap of numbers with each cell's value written in it; ``marks`` (L, H) bool adds a box.

    Returns:
        The image (for a colour bar).
    """
    layers, heads = values.shape
    im = ax.imshow(values, cmap=cmap, vmin=vmin, vmax=vmax, aspect="equal", interpolation="nearest")
    _layer_head_axes(ax, layers, heads, title)
    if heads <= 16:
        lo = np.nanmin(values) if vmin is None else vmin
        hi = np.nanmax(values) if vmax is None else vmax
        for l in range(layers):
            for h in range(heads):
                dark = (values[l, h] - lo) < 0.5 * (hi - lo) if cmap == "viridis" else False  # white on dark cells
                ax.text(h, l, fmt.format(values[l, h]), ha="center", va="center", fontsize=5.5,
                        color="white" if dark else "black")
    if marks is not None:
        from matplotlib.patches import Rectangle

        for l, h in zip(*np.nonzero(marks)):
            ax.add_patch(Rectangle((h - 0.5, l - 0.5), 1, 1, fill=False, edgecolor="black", linewidth=1.4))
    return im


def grid_figure(panels: list[tuple[str, np.ndarray]], title: str, cmap: str = "viridis", vmin=None, vmax=None,
                fmt: str = "{:.2f}", marks: list | None = None, cols: int = 3) -> bytes:
    """:func:`grid_plot` as PNG bytes."""
    return png(grid_plot(panels, title, cmap, vmin, vmax, fmt, marks, cols))


def grid_plot(panels: list[tuple[str, np.ndarray]], title: str, cmap: str = "viridis", vmin=None, vmax=None,
              fmt: str = "{:.2f}", marks: list | None = None, cols: int = 3):
    """Several (L, H) heatmaps side by side (one per task or per token class), one shared colour scale (a Figure)."""
    cols = min(cols, len(panels))
    rows = -(-len(panels) // cols)
    layers, heads = panels[0][1].shape
    fig = _fig(cols * (0.42 * heads + 1.4), rows * (0.42 * layers + 1.1) + 0.6)
    im = None
    for i, (name, values) in enumerate(panels):
        ax = fig.add_subplot(rows, cols, i + 1)
        im = value_grid(ax, values, name, cmap, vmin, vmax, fmt, None if marks is None else marks[i])
    fig.colorbar(im, ax=fig.axes, shrink=0.8)
    fig.suptitle(title, fontsize=9)
    return fig


def disable_figure(result: dict) -> bytes:
    """:func:`disable_plot` as PNG bytes."""
    return png(disable_plot(result))


def disable_plot(result: dict, boxed: str = "told from noise, disable.json's outside"):
    """Paper Fig. 8/9: metric change per disabled head (boxes: ``outside``, which ``boxed`` names) and per disabled
    layer."""
    heads = np.array([[c["change"] for c in row] for row in result["heads"]]) * 100
    outside = np.array([[c["outside"] for c in row] for row in result["heads"]])
    lim = max(1e-6, float(np.abs(heads).max()))
    fig = _fig(0.42 * heads.shape[1] + 5.2, 0.42 * heads.shape[0] + 1.9)
    ax = fig.add_subplot(1, 2, 1)
    im = value_grid(ax, heads, f"one head disabled: change, points\n(box: {boxed})",
                    "RdBu", -lim, lim, "{:+.1f}", outside)
    fig.colorbar(im, ax=ax, shrink=0.8)
    if result["layers"]:
        ax2 = fig.add_subplot(1, 2, 2)
        ch = np.array([c["change"] for c in result["layers"]]) * 100
        lo = np.array([c["ci95"][0] for c in result["layers"]]) * 100
        hi = np.array([c["ci95"][1] for c in result["layers"]]) * 100
        ax2.barh(range(len(ch)), ch, xerr=np.stack([ch - lo, hi - ch]), color="#0072B2", capsize=2)
        ax2.axvline(0, color="black", linewidth=0.8)
        ax2.invert_yaxis()
        ax2.set_yticks(range(len(ch)))
        ax2.set_ylabel("layer", fontsize=8)
        ax2.set_xlabel(f"change of {result['metric']}, points", fontsize=8)
        ax2.set_title("all heads of one layer disabled", fontsize=9)
    b = result["baseline"]
    second = f"; {result['second_metric']} {100 * b['second']:.1f}" if "second" in b else ""
    fig.suptitle(f"disable — {result['tag']} on {result['task']} ({result['examples']} dev examples); baseline "
                 f"{result['metric']} {100 * b['metric']:.1f} [{100 * b['ci95'][0]:.1f}, {100 * b['ci95'][1]:.1f}]"
                 f"{second}", fontsize=9)
    return fig


def cls_row_figure(result: dict) -> bytes:
    """:func:`cls_row_plot` as PNG bytes."""
    return png(cls_row_plot(result))


def cls_row_plot(result: dict):
    """Paper Fig. 7: per task, how each last-layer head's [CLS] row spreads over the token classes (stacked bars),
    averaged over the task's examples (their number in each panel's title)."""
    tasks = list(result["tasks"])
    names = result["classes"]["order"]
    palette = ["#D55E00", "#009E73", "#56B4E9", "#F0E442", "#CC79A7", "#0072B2", "#999999"]
    colors = {k: palette[i] if k != "other" else "#BBBBBB" for i, k in enumerate(names)}
    heads = result["heads"]
    fig = _fig(max(4.0, 0.32 * heads + 1.5) * len(tasks), 3.4)
    for i, t in enumerate(tasks):
        ax = fig.add_subplot(1, len(tasks), i + 1)
        bottom = np.zeros(heads)
        for k in names:
            vals = np.array(result["tasks"][t]["cls_row"][k])
            ax.bar(range(heads), vals, bottom=bottom, color=colors[k], label=k, width=0.8)
            bottom += vals
        ax.set_xticks(range(heads))
        ax.set_xticklabels([str(h) for h in range(heads)], fontsize=7)
        ax.set_xlabel("head (last layer)", fontsize=8)
        ax.set_ylim(0, 1)
        ax.set_title(f"{t} ({result['tasks'][t]['examples']} ex.): [CLS] row of layer {result['layers'] - 1}",
                     fontsize=9)
    fig.axes[0].set_ylabel("share of the [CLS] row", fontsize=8)
    fig.axes[-1].legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize=7, frameon=False)
    fig.suptitle(f"where the last layer's [CLS] attends — {result['tag']}", fontsize=9, y=1.04)
    return fig


def link_figure(result: dict) -> bytes:
    """:func:`link_plot` as PNG bytes."""
    return png(link_plot(result))


def link_plot(result: dict):
    """Per head: disabling effect against the heterogeneous share and against drift, coloured by majority pattern."""
    rows = result["heads"]
    drop = -100 * np.array([r["change"] for r in rows])
    col = [COLORS[r["majority"]] for r in rows]
    panels = [("heterogeneous share of the head's maps (census)", np.array([r["heterogeneous"] for r in rows]))]
    if rows[0]["drift_cosine"] is not None:
        panels.append(("drift: 1 - cosine (pretrained vs fine-tuned)", 1 - np.array([r["drift_cosine"] for r in rows])))
    fig = _fig(4.2 * len(panels) + 1.6, 3.8)
    for i, (xlabel, x) in enumerate(panels):
        ax = fig.add_subplot(1, len(panels), i + 1)
        ax.scatter(x, drop, c=col, s=22, edgecolors="black", linewidths=0.3)
        ax.axhline(0, color="black", linewidth=0.6)
        ax.set_xlabel(xlabel, fontsize=8)
        ax.set_ylabel(f"drop of {result['metric']} when disabled, points", fontsize=8)
    t = result["test"]
    p = "n/a" if t.get("p_value") is None else f"{t['p_value']:.3f}"
    diff = "n/a" if t.get("difference") is None else f"{100 * t['difference']:+.2f}"
    n = f", {result['disable_examples']} dev examples" if result.get("disable_examples") else ""
    fig.suptitle(f"link — {result['task']}, {result['disable_model']}{n}: heterogeneous − vertical mean drop "
                 f"{diff} points (permutation p = {p}; {t['n_a']} vs {t['n_b']} heads)", fontsize=9)
    _legend(fig, y=-0.1)
    return fig
