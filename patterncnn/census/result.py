"""A finished census as a Python object: its shares as a DataFrame, its figures, its example maps, its HTML.

Usage::

    res = patterncnn.census("minilm", tasks=["rte"], limit=200, glue_dir="glue_data")   # or CensusResult.load(folder)
    res.shares          # pandas DataFrame: one row per (task, pattern), share and its 95% interval and parts
    res.heads           # one row per (task, layer, head): the share of each pattern among its maps
    res.plot()          # matplotlib Figure: the shares per task with their intervals
    res.examples(3, 7)  # the example maps the census kept for layer 3, head 7
    res.to_json()       # census.json's text

In Jupyter the object shows itself (``_repr_html_``): where the numbers come from, the shares table
and the figure. :func:`provenance_html` and :func:`shares_html` are the same fragments the HTML
report (``patterncnn report``) uses.
"""

from __future__ import annotations

import base64
import dataclasses
import json
from html import escape
from pathlib import Path
from typing import TYPE_CHECKING

from ..core import args
from ..core.census_folder import census_file
from ..core.labels import LABELS
from ..core.plots import census_plot, heads_plot, png
from ..shares.estimate import describe
from .results import census_text, clipped_note, load_result
from .thumbnails import read_thumbnails

if TYPE_CHECKING:
    import pandas as pd
    from matplotlib.figure import Figure


def provenance(result: dict) -> dict[str, str]:
    """What the numbers of a census come from, one line each: encoder, classifier, estimator, validation."""
    enc, clf, est = result["encoder"], result["classifier"], result.get("estimator", {})
    v = est.get("validated_share_error")
    rows = {"encoder": f"{enc.get('model')} (weights sha256 {str(enc.get('sha256') or enc.get('revision'))[:12]}, "
                       f"backend {result.get('backend')}, max length {result.get('max_length')}, "
                       f"{result.get('layers')} layers x {result.get('heads')} heads)",
            **({"encoder weights": result["encoder_weights"]} if result.get("encoder_weights") else {}),
            "classifier": f"{clf.get('version')} ({clf.get('path')}, sha256 {str(clf.get('sha256'))[:12]})",
            "estimator": describe(est).split("\n")[0].removeprefix("estimator ") if est else "count",
            "validation": describe(est).split("\n", 1)[1].split("\nwarning:")[0] if isinstance(v, dict) else str(v),
            "data": ", ".join(f"{t} {s['examples']} of {s['of']} ({s.get('source', '')})"
                              for t, s in result["tasks"].items()) + f"; seed {result.get('seed')}"}
    if result.get("precision"):
        rows["precision"] = result["precision"]["rule"] + " (examples in a seeded random order)"
    if result.get("device"):
        rows["device"] = f"encoder {result['device']['encoder']}, classifier {', '.join(result['device']['classifier'])}"
    rows["produced by"] = result.get("created_by", "")
    return rows


def warning(result: dict) -> str | None:
    """The warning a census carries when its encoder's family was never validated (None otherwise)."""
    v = result.get("estimator", {}).get("validated_share_error")
    return v.get("warning") if isinstance(v, dict) else None


def provenance_html(result: dict) -> str:
    """The provenance lines as an HTML table, the unvalidated-family warning when there is one, and each task's
    (too few examples for its intervals)."""
    rows = "".join(f"<tr><th>{escape(k)}</th><td>{escape(v)}</td></tr>" for k, v in provenance(result).items())
    warnings = [warning(result)] + [s.get("warning") for s in result["tasks"].values()]
    note = "".join(f'<p class="warning"><b>warning:</b> {escape(w)}</p>' for w in warnings if w)
    if clipped := clipped_note(result):
        note += f'<p class="warning">{escape(clipped)}</p>'
    return f'<table class="provenance">{rows}</table>{note}'


def shares_html(result: dict) -> str:
    """Each task's share of each pattern with its 95% interval (and the interval's two parts, on hover)."""
    head = "<tr><th>task</th><th>examples</th>" + "".join(f"<th>{escape(n)}</th>" for n in LABELS) + "</tr>"
    body = []
    for task, s in result["tasks"].items():
        cells = []
        for n in LABELS:
            ex, cl = s["ci95_parts"]["examples"][n], s["ci95_parts"]["classifier"][n]
            tip = (f"examples' part [{100 * ex[0]:.1f}, {100 * ex[1]:.1f}], classifier's part "
                   f"[{100 * cl[0]:.1f}, {100 * cl[1]:.1f}]")
            cells.append(f'<td title="{tip}">{100 * s["shares"][n]:.1f}% <span class="ci">[{100 * s["ci95"][n][0]:.1f}, '
                         f'{100 * s["ci95"][n][1]:.1f}]</span></td>')
        stop = s.get("precision")
        used = f'{s["examples"]}' + (f' <span class="ci" title="{escape(stop["reason"])}">of {stop["budget"]}</span>'
                                     if stop else "")
        body.append(f"<tr><th>{escape(task)}</th><td>{used}</td>{''.join(cells)}</tr>")
    return f'<table class="shares">{head}{"".join(body)}</table>'


def figure_html(fig, alt: str) -> str:
    """A matplotlib figure as an inline PNG ``<img>`` (a data URI: no file, no network)."""
    data = base64.b64encode(png(fig)).decode("ascii")
    return f'<img alt="{escape(alt)}" src="data:image/png;base64,{data}">'


@dataclasses.dataclass
class CensusResult:
    """A finished census: ``data`` is its ``census.json``, ``out`` the folder that holds its files.

    Attributes:
        data: the census result (the dict of ``census.json``).
        out: the census folder (None when the result was built from a dict alone).
    """

    data: dict
    out: Path | None = None

    @classmethod
    def load(cls, path: str | Path) -> "CensusResult":
        """A finished census from its folder (or its ``census.json``). A folder of several censuses (``census --model
        A --model B``: one per encoder) is refused naming them; one holding a single census in a subfolder is that one.

        Example::

            >>> res = CensusResult.load("runs/census")
            >>> res.tasks
            ['sst2', 'rte', 'mrpc', 'stsb', 'qnli']
        """
        file = census_file(args.path("path", path))  # the lookup report, link and census --compare use
        return cls(load_result(file), file.parent)

    @property
    def tasks(self) -> list[str]:
        return list(self.data["tasks"])

    @property
    def shares(self) -> "pd.DataFrame":
        """One row per (task, pattern): ``share`` and its 95% interval (``low``, ``high``), the interval's two parts
        (``examples_low/high``, ``classifier_low/high``), the argmax ``count`` and the ``examples`` used. Fractions."""
        import pandas as pd

        rows = []
        for task, s in self.data["tasks"].items():
            for n in LABELS:
                ex, cl = s["ci95_parts"]["examples"][n], s["ci95_parts"]["classifier"][n]
                rows.append({"task": task, "pattern": n, "share": s["shares"][n], "low": s["ci95"][n][0],
                             "high": s["ci95"][n][1], "examples_low": ex[0], "examples_high": ex[1],
                             "classifier_low": cl[0], "classifier_high": cl[1], "count": s["counts"][n],
                             "examples": s["examples"]})
        return pd.DataFrame(rows).set_index(["task", "pattern"])

    @property
    def heads(self) -> "pd.DataFrame":
        """One row per (task, layer, head): the share of the head's maps given each pattern, its majority pattern
        (``tied``: the patterns that tie for it, joined by ``|``, or empty), the majority share's 95% interval over the
        examples (``majority_low``, ``majority_high``: Wilson; the classifier's errors are not in it) and ``clear``:
        whether that interval lies above the runner-up's (None in a census of before 2026-11-29).

        These shares count the classifier's argmax labels (the ``count`` estimator) whatever estimator :attr:`shares`
        used: a pattern's mean over a task's heads is its ``count`` share, not its ``adjusted`` or ``probs`` one."""
        import pandas as pd

        rows = [{"task": task, "layer": l, "head": h, **cell["shares"], "majority": cell["majority"],
                 "majority_share": cell["majority_share"], "tied": "|".join(cell.get("tied", ())),
                 "majority_low": (cell.get("majority_ci95") or [None, None])[0],
                 "majority_high": (cell.get("majority_ci95") or [None, None])[1], "clear": cell.get("clear")}
                for task, s in self.data["tasks"].items() for l, row in enumerate(s["heads"]) for h, cell in enumerate(row)]
        return pd.DataFrame(rows).set_index(["task", "layer", "head"])

    def plot(self, kind: str = "shares") -> "Figure":
        """``shares``: the pattern shares per task with their intervals; ``heads``: the layer × head grids.

        Returns:
            A matplotlib Figure (shown by Jupyter; ``fig.savefig(path)`` to keep it).
        """
        args.one_of("kind", kind, ("shares", "heads"))
        return census_plot(self.data) if kind == "shares" else heads_plot(self.data)

    def examples(self, layer: int | None = None, head: int | None = None, task: str | None = None) -> list[dict]:
        """The example maps the census kept: for each head and each pattern it was given, the few maps the
        classifier was surest of, per task. None for ``layer``, ``head`` or ``task`` means all.

        Returns:
            [{"task", "layer", "head", "label", "prob", "example", "map": (T, T) floats scaled to the map's maximum,
            "tokens", "seps"}].

        Example::

            >>> res = patterncnn.census("minilm", tasks=["rte"], limit=50, glue_dir="../shared/glue")
            >>> [(e["label"], round(e["prob"], 2)) for e in res.examples(0, 3, task="rte")][:4]
            [('vertical', 0.56), ('diagonal', 0.95), ('diagonal', 0.94), ('diagonal', 0.94)]
        """
        args.whole("layer", layer, most=self.data["layers"] - 1, none=True)
        args.whole("head", head, most=self.data["heads"] - 1, none=True)
        args.one_of("task", task, self.tasks, none=True)
        if self.out is None:
            return []
        return [r for r in read_thumbnails(self.out, self.data["heads"], self.data["layers"] * self.data["heads"])
                if (layer is None or r["layer"] == layer) and (head is None or r["head"] == head)
                and (task is None or r["task"] == task)]

    def to_json(self, indent: int = 2) -> str:
        """The census as JSON text (what ``census.json`` holds)."""
        return json.dumps(self.data, indent=args.whole("indent", indent, none=True), ensure_ascii=False)

    def table(self) -> str:
        """What ``patterncnn census`` prints of it: the encoder, the estimator and its interval, the table."""
        return census_text(self.data)

    def __repr__(self) -> str:
        tasks = ", ".join(f"{t} ({s['examples']} ex.)" for t, s in self.data["tasks"].items())
        return f"<CensusResult {self.data['encoder'].get('model')}: {tasks}; {self.out or 'not on disk'}>"

    def _repr_html_(self) -> str:
        fig = figure_html(census_plot(self.data), "pattern shares per task with their 95% intervals")
        where = f"<p>files: <code>{escape(str(self.out))}</code></p>" if self.out else ""
        return (f"<div><h4>patterncnn census: {escape(str(self.data['encoder'].get('model')))}</h4>"
                f"{provenance_html(self.data)}{shares_html(self.data)}{fig}{where}</div>")
