"""The share error of each estimator on round 5's held-out maps, task-pooled (what the docs quoted: the error of the
share averaged over the five tasks) against per task (what a census prints: a share per task).

Input: the validation.json of `patterncnn validate --annotations annotations/round5-heldout-uniform` (24 uniformly drawn
maps per (encoder, task), GLUE train inputs, never trained on). Per-task error = mean over tasks x patterns of
|estimate - hand share| in each 24-map cell; part of it is those cells' own sampling noise (a hand share on 24 maps has
a standard error of up to 10 points), so a census's per-task error may be smaller; the pooled figure cannot be read as
a per-task accuracy, though.
Usage (from the repository root):
    patterncnn validate --classifier models/patterncnn.onnx --annotations annotations/round5-heldout-uniform --out runs/val-r5
    python research/intervals/round5_per_task.py runs/val-r5/validation.json
"""
import json
import sys

import numpy as np

L = ["vertical", "diagonal", "vertical+diagonal", "block", "heterogeneous"]
v = json.load(open(sys.argv[1] if len(sys.argv) > 1 else "runs/val-r5/validation.json"))
print("estimator scope    encoder           task-pooled  per-task  (mean |error| per pattern, points)")
for r in v["results"]:
    for enc, halves in r["cells"].items():
        cells = [c for tasks in halves.values() for c in tasks.values()]
        est = np.array([[c["shares"][k] for k in L] for c in cells])  # (tasks, 5)
        hand = np.array([[c["hand"][k] for k in L] for c in cells])
        pooled = np.abs(est.mean(0) - hand.mean(0)).mean()
        per_task = np.abs(est - hand).mean()
        maps = sorted({c["maps"] for c in cells})
        print(f"{r['estimator']:9} {str(r['scope']):8} {enc:17} {100 * pooled:11.1f} {100 * per_task:9.1f}"
              f"  ({len(cells)} tasks of {'/'.join(map(str, maps))} maps)")
