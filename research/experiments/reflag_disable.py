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
only removes flags) would not change. Usage, from the repository root: python research/experiments/reflag_disable.py
"""
import json
import sys
from pathlib import Path

sys.path.insert(0, ".")
from patterncnn.core.glue import get_task  # noqa: E402
from patterncnn.core.plots import link_plot, png  # noqa: E402
from patterncnn.core.work import write_result  # noqa: E402
from patterncnn.experiments import link  # noqa: E402
from patterncnn.experiments.disable import exact_paired_p, told_from_noise, write_outputs  # noqa: E402

ROOT = Path("research/experiments")
NOTE = ("reflagged 2026-11-29 by research/experiments/reflag_disable.py: gains, losses and paired_p follow from change "
        "and changed_predictions (a binary task scored by accuracy), outside by the rule of that day")

for folder in sorted(ROOT.glob("disable-*")):
    r = json.loads((folder / "disable.json").read_text())
    task = get_task(r["task"])
    if r["metric"] != "accuracy" or task.num_labels != 2:
        print(f"{folder.name}: {r['metric']} on {r['task']}: left as it is "
              f"({sum(c['outside'] for row in r['heads'] for c in row)} head(s) flagged)")
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
