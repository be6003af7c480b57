"""Re-flag the committed disable runs, and the link runs that copy their flags, by the rule of 2026-11-29.

Until then a head's change was flagged (``outside``) when its paired bootstrap interval excluded 0. Helper 91's review
found that flag fires at 4-5 changed predictions all one way, where McNemar's exact test gives p = 0.06-0.13;
since 2026-11-29 ``disable`` also asks the exact paired test for p < 0.05
(``patterncnn.experiments.disable.told_from_noise``).
The runs here cannot be re-run (their fine-tuned models are not kept, and they took 9-53 minutes each), but on a binary
task scored by accuracy a unit's gains and losses follow exactly from what each run recorded: gains - losses =
change x examples and gains + losses = changed_predictions. Those runs get ``gains``, ``losses``, ``paired_p`` and
today's ``outside``, and their csv and png are written again by the package's own writers. A run of another metric
(MRPC's F1) is left as it is: its gains and losses do not follow, and it flagged no unit, which today's rule (which
only removes flags) would not change.

The runs were also made before ``disable`` recorded whether the undisabled model is at chance (``baseline.chance``,
``at_chance``), which ``link`` and ``report`` read to warn: every run without them gets them, chance computed as
``disable`` computes it on the same examples (the split's dev set, sampled down to the run's ``examples`` with its
``seed`` by ``load_split``, as the run did), and a link run of an at-chance disable run gets the note ``link`` gives.
Usage, from the repository root: python research/experiments/reflag_disable.py [GLUE_DIR (default ../shared/glue)]
"""
import json
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, ".")
from patterncnn.core.glue import get_task, load_split  # noqa: E402
from patterncnn.core.plots import link_plot, png  # noqa: E402
from patterncnn.core.work import write_result  # noqa: E402
from patterncnn.experiments import link  # noqa: E402
from patterncnn.experiments.disable import (  # noqa: E402
    chance_level,
    chance_warning,
    exact_paired_p,
    told_from_noise,
    write_outputs,
)

ROOT = Path("research/experiments")
GLUE = sys.argv[1] if len(sys.argv) > 1 else "../shared/glue"
NOTE = ("reflagged 2026-11-29 by research/experiments/reflag_disable.py: gains, losses and paired_p follow from change "
        "and changed_predictions (on a binary task scored by accuracy), outside by the rule of that day; baseline "
        "chance and at_chance computed on the run's examples where the run lacked them")

def link_note(r: dict) -> None:
    """The note ``link`` gives of an at-chance disable run, added to the link runs of ``r``."""
    warning = chance_warning(r)
    for lf in sorted(ROOT.glob("link-*")):
        res = json.loads((lf / "link.json").read_text())
        if res["disable_model"] != r["tag"] or res["task"] != r["task"] or not warning:
            continue
        note = f"in the disable run, {warning}"
        if note not in res.setdefault("notes", []):
            res["notes"].append(note)
            res["reflagged"] = NOTE
            write_result(lf, "link.json", res, tables={"link.csv": link.table(res)},
                         figures={"link.png": png(link_plot(res))})
            print(f"  {lf.name}: the at-chance note added")


for folder in sorted(ROOT.glob("disable-*")):
    r = json.loads((folder / "disable.json").read_text())
    task = get_task(r["task"])
    b = r["baseline"]
    if "at_chance" not in b:
        split = load_split(task, r["split"], GLUE, limit=r["examples"] if r["examples"] < r["of"] else None,
                           seed=r["seed"])
        assert len(split.examples) == r["examples"], folder
        labels = [ex.label for ex in split.examples]
        b["chance"] = round(chance_level(task, np.array(labels)), 5)
        b["at_chance"] = bool(b["ci95"][0] <= b["chance"])
        r["reflagged"] = NOTE
        print(f"{folder.name}: baseline {b['metric']} {b['ci95']}, chance {b['chance']}: "
              f"{'at chance' if b['at_chance'] else 'above chance'}")
    if r["metric"] != "accuracy" or task.num_labels != 2:
        print(f"{folder.name}: {r['metric']} on {r['task']}: flags left as they are "
              f"({sum(c['outside'] for row in r['heads'] for c in row)} head(s) flagged)")
        if r.get("reflagged"):
            write_outputs(folder, r)
        link_note(r)
        continue
    n, before, after = r["examples"], 0, 0
    for c in [c for row in r["heads"] for c in row] + r["layers"]:
        net = round(c["change"] * n)
        assert abs(c["change"] * n - net) < 0.01 and (c["changed_predictions"] + net) % 2 == 0, (folder, c)
        gains = (c["changed_predictions"] + net) // 2
        test = {"gains": gains, "losses": c["changed_predictions"] - gains,
                "paired_p": exact_paired_p(gains, c["changed_predictions"] - gains)}
        before += c["outside"]
        c.update(test, outside=told_from_noise(c["ci95"], test))
        after += c["outside"]
    r["reflagged"] = NOTE
    write_outputs(folder, r)
    print(f"{folder.name}: units flagged (heads and layers) {before} -> {after}")
    link_note(r)
    for lf in sorted(ROOT.glob("link-*")):
        res = json.loads((lf / "link.json").read_text())
        if res["disable_model"] != r["tag"] or res["task"] != r["task"]:
            continue
        flags = {(h["layer"], h["head"]): r["heads"][h["layer"]][h["head"]]["outside"] for h in res["heads"]}
        changed = sum(h["outside"] != flags[(h["layer"], h["head"])] for h in res["heads"])
        for h in res["heads"]:
            h["outside"] = flags[(h["layer"], h["head"])]
        res["reflagged"] = NOTE
        write_result(lf, "link.json", res, tables={"link.csv": link.table(res)},
                     figures={"link.png": png(link_plot(res))})
        print(f"  {lf.name}: {changed} head flag(s) changed")
