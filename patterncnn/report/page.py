"""One census as one self-contained HTML page: figures as inline PNGs, the grid's data and script inline, no request.

Usage::

    html = page(collect("runs/census"))     # str: the whole file

The page holds: where the numbers come from (encoder, classifier, estimator, validation, and the
warning for an encoder family the classifier was never validated on); each task's share of each
pattern with its interval, as a figure and a table; the layer × head grid of each pattern's share,
per task, whose heads open their shares and the example maps the census kept (the tokens show on
hover); and the drift, special-token, disable and link results found with the census.
"""

from __future__ import annotations

import base64
import json
from html import escape
from importlib import resources

from ..census.result import figure_html, provenance_html, shares_html
from ..classifier.render import thumbnail_png
from ..core.labels import LABELS, SHORT
from ..core.plots import COLORS, census_plot, cls_row_figure, disable_plot, link_plot
from ..core.version import __version__
from ..experiments import disable as disable_experiment
from ..experiments import drift as drift_experiment
from ..experiments import special_tokens as special_experiment
from .collect import Run

PER_PATTERN = 3  # example maps shown per head and pattern (the best over all tasks)


def _asset(name: str) -> str:
    return resources.files("patterncnn.report").joinpath("assets", name).read_text(encoding="utf-8")


def _png_img(data: bytes, alt: str) -> str:
    return f'<img class="figure" alt="{escape(alt)}" src="data:image/png;base64,{base64.b64encode(data).decode()}">'


def _figure(fig, alt: str) -> str:
    return figure_html(fig, alt).replace("<img ", '<img class="figure" ', 1)


def thumbnails(run: Run) -> dict[str, list[dict]]:
    """Per head ("layer,head"), the kept maps: up to PER_PATTERN per pattern, the surest first, as PNG data URIs."""
    by_head: dict[str, list[dict]] = {}
    rows = sorted(run.census.examples(), key=lambda r: (r["layer"], r["head"], LABELS.index(r["label"]),
                                                            -r["prob"], r["task"], r["example"]))
    for r in rows:
        key = f"{r['layer']},{r['head']}"
        mine = by_head.setdefault(key, [])
        if sum(x["label"] == r["label"] for x in mine) >= PER_PATTERN:
            continue
        src = "data:image/png;base64," + base64.b64encode(thumbnail_png(r["map"], r["seps"])).decode()
        mine.append({"label": r["label"], "task": r["task"], "example": r["example"], "prob": round(r["prob"], 4),
                     "tokens": r["tokens"], "src": src})
    return by_head


def _extras(run: Run, layers: int, heads: int) -> list[dict]:
    """Per-head values of the experiments (drift cosine, disabling effect), shown when a head is opened."""
    out = []
    for _, d in run.experiments["drift"]:
        for task, s in d["tasks"].items():
            if (len(s["cosine"]), len(s["cosine"][0])) == (layers, heads):
                out.append({"label": f"drift cosine, {d['tag_a']} vs {d['tag_b']} on {task} (1 = unchanged)",
                            "values": [[f"{c:.3f}" for c in row] for row in s["cosine"]]})
    for _, d in run.experiments["disable"]:
        if (len(d["heads"]), len(d["heads"][0])) == (layers, heads):
            told = disable_experiment.outside_rule(d) == disable_experiment.TOLD_FROM_NOISE
            out.append({"label": f"disabled in {d['tag']} on {d['task']}: change of {d['metric']}, points",
                        "values": [[f"{100 * c['change']:+.1f} [{100 * c['ci95'][0]:+.1f}, {100 * c['ci95'][1]:+.1f}]"
                                    + ((" (told from noise)" if told else " (interval excludes 0)")
                                       if c["outside"] else "") for c in row]
                                   for row in d["heads"]]})
    return out


def _warning(text: str | None) -> str:
    return f'<p class="warning"><b>warning:</b> {escape(text)}</p>' if text else ""


def _experiments_html(run: Run) -> str:
    parts = []
    for folder, d in run.experiments["drift"]:
        lines = "".join(f"<li>{escape(t)} ({s['examples']} examples): mean cosine per layer "
                        f"{', '.join(f'{v:.3f}' for v in s['layer_mean'])}; the last two layers change most: "
                        f"{escape(drift_experiment.verdict(s))}</li>" for t, s in d["tasks"].items())
        parts.append(f"<section id='drift'><h2>Drift: {escape(d['tag_a'])} vs {escape(d['tag_b'])}</h2>"
                     f"<p class='note'>From <code>{escape(folder.name)}</code>: the cosine similarity of the two "
                     f"encoders' maps per layer × head (paper Fig. 5).</p><ul>{lines}</ul>"
                     f"{_figure(drift_experiment.plot(d), 'drift per layer and head')}</section>")
    for folder, d in run.experiments["special-tokens"]:
        figs = "".join(_figure(special_experiment.plot(d, t), f"special tokens, {t}") for t in d["tasks"])
        lines = "".join(f"<li>{escape(t)} ({s['examples']} examples): [CLS] peaks in an early layer and [SEP] in a "
                        f"late one: {'yes' if s['cls_early_sep_late'] else 'no'}</li>" for t, s in d["tasks"].items())
        parts.append(f"<section id='special-tokens'><h2>Special tokens: {escape(d['tag'])}</h2>"
                     f"<p class='note'>From <code>{escape(folder.name)}</code>: the attention all tokens give to each "
                     f"token class, over T (paper Fig. 6, 7).</p><ul>{lines}</ul>{figs}"
                     f"{_png_img(cls_row_figure(d), 'the last layer [CLS] row')}</section>")
    for folder, d in run.experiments["disable"]:
        b = d["baseline"]
        rule = disable_experiment.outside_rule(d)
        boxed = "told from noise" if rule == disable_experiment.TOLD_FROM_NOISE else "95% interval alone, an older run"
        cells = [c for row in d["heads"] for c in row]
        parts.append(f"<section id='disable'><h2>Disabling heads: {escape(d['tag'])} on {escape(d['task'])}</h2>"
                     f"<p class='note'>From <code>{escape(folder.name)}</code>: {d['examples']} dev examples, baseline "
                     f"{escape(d['metric'])} {b['metric']:.3f} [{b['ci95'][0]:.3f}, {b['ci95'][1]:.3f}]"
                     f"{_second_metric(d)}; "
                     f"{sum(c['outside'] for c in cells)} of {len(cells)} heads' changes are "
                     f"{escape(rule)} (paper Fig. 8, 9).</p>"
                     f"{_warning(disable_experiment.chance_warning(d))}"
                     f"{_figure(disable_plot(d, boxed), 'disable')}</section>")
    for folder, d in run.experiments["link"]:
        t = d["test"]
        what = (f"heterogeneous − vertical mean drop {100 * t['difference']:+.2f} points, permutation p = "
                f"{t['p_value']:.3f} ({t['n_a']} vs {t['n_b']} heads)" if t.get("difference") is not None
                else escape(t.get("note", "no test")))
        parts.append(f"<section id='link'><h2>Patterns and function: {escape(d['task'])}</h2>"
                     f"<p class='note'>From <code>{escape(folder.name)}</code>: {what}.</p>"
                     f"{_figure(link_plot(d), 'link')}</section>")
    return "".join(parts)


def _json_script(data: dict) -> str:
    text = json.dumps(data, ensure_ascii=False, separators=(",", ":")).replace("</", "<\\/")
    return f'<script type="application/json" id="report-data">{text}</script>'


def _heads_estimator_note(r: dict) -> str:
    """What the grid's per-head shares are against the table's, when the census's estimator is not ``count``."""
    name = (r.get("estimator") or {}).get("name", "count")
    if name == "count":
        return ", as the table above"
    return (f", uncorrected: the table above uses <code>{escape(name)}</code>, so a pattern's mean over the heads is its "
            f"<code>count</code> share (census.json's <code>shares_by_estimator</code>), not the table's")


def page(run: Run) -> str:
    """The whole HTML file of one census and its experiments."""
    r = run.census.data
    grid_data = {"layers": r["layers"], "heads": r["heads"], "labels": list(LABELS), "short": SHORT,
                 "colors": COLORS, "task_order": list(r["tasks"]),
                 "tasks": {t: {"heads": [[{"shares": c["shares"], "majority": c["majority"],
                                           "majority_share": c["majority_share"], "tied": c.get("tied"),
                                           "ci": c.get("majority_ci95"), "clear": c.get("clear")}
                                          for c in row] for row in s["heads"]]}
                           for t, s in r["tasks"].items()},
                 "thumbs": thumbnails(run), "extras": _extras(run, r["layers"], r["heads"])}
    title = f"patterncnn census report: {r['encoder'].get('model')}"
    legend = "".join(f'<span><i style="background:{COLORS[n]}"></i>{escape(n)} ({SHORT[n]})</span>' for n in LABELS)
    return f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">
<meta http-equiv="Content-Security-Policy" content="default-src 'none'; img-src data:; style-src 'unsafe-inline'; script-src 'unsafe-inline'">
<title>{escape(title)}</title><link rel="icon" href="data:,"><style>{_asset("report.css")}</style></head>
<body><main>
<h1>{escape(title)}</h1>
<section id="provenance"><h2>Where these numbers come from</h2>{provenance_html(r)}
<p class="note">Each share is the share of (example, layer, head) maps given that pattern. Its 95% interval holds the
examples' noise and the classifier's error as far as it was validated (hover over a cell of the table for the two
parts); it does not hold the disagreement between annotators or encoders and tasks the classifier was not checked on.
</p></section>
<section id="shares"><h2>Pattern shares per task</h2>{_figure(census_plot(r), "pattern shares per task")}
{shares_html(r)}</section>
<section id="heads"><h2>Layer × head</h2>
<p class="note">Each cell is one head of one task: coloured by the pattern chosen below (or by the head's majority
pattern; <code>*</code> marks a tie for it, shown as the first pattern, and <code>?</code> a majority that other
examples could overturn: its 95% interval over the examples reaches the runner-up's), shaded by that pattern's share
of the head's maps; the number is the share in percent. A head's shares count
the classifier's labels (its most probable pattern per map, the <code>count</code> estimator){_heads_estimator_note(r)}.
Click a head for its shares in every task and the example maps the census kept of it (hover over a map for the query and
key tokens).</p>
<div class="controls" id="task-buttons"></div><div class="controls" id="pattern-buttons"></div>
<div class="legend">{legend}</div>
<div class="gridwrap"><table class="grid" id="grid"></table><div id="detail"></div></div></section>
{_experiments_html(run)}
<footer>Written by patterncnn {escape(__version__)} from <code>{escape(run.census.out.name if run.census.out else "")}</code>.
One self-contained file: its figures and data are inline and it makes no network request.</footer>
</main><div id="tip"></div>
{_json_script(grid_data)}
<script>{_asset("report.js")}</script>
</body></html>
"""


def _second_metric(d: dict) -> str:
    """GLUE's second metric of a disable run's task, as its baseline's note gives it (", accuracy 0.812 (recorded
    without an interval)"), or nothing: a task with none, or a run from before 2026-11-29, which did not record it."""
    name, value = d.get("second_metric"), d["baseline"].get("second")
    if not name or value is None:
        return ""
    return f", {escape(name)} {value:.3f} (without an interval; the changes below are of {escape(d['metric'])})"
