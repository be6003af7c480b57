"""The learning-curve tables of docs/pages/commands/adapt.md, from adapt_curve.jsonl.

    python research/generalisation/adapt_table.py NAME [NAME ...]

One markdown row per (run name, how the adapting fits treated the BatchNorm statistics, and the classifier's bias shift, k): fits, accuracy mean ± sd (each fit), four-class macro-F1, count's share error
(mean per pattern over the fits, and the worst pattern of any fit), in points.
"""

import json
import sys
from collections import defaultdict
from pathlib import Path

import numpy as np

rows = defaultdict(list)
for line in open(Path(__file__).resolve().parent / "adapt_curve.jsonl"):
    r = json.loads(line)
    # lines without adapt_bn re-estimated the statistics while adapting (k = 0 and refits do not adapt)
    bn = r.get("adapt_bn") or ("re-estimate" if r["k"] and not r.get("refit") else "")
    rows[(r["name"], bn, r.get("adapt_shift", ""), r["k"])].append(r)
for name in sys.argv[1:]:
    for (n, bn, how, k), rs in sorted(rows.items(), key=lambda kv: (kv[0][0], kv[0][1], kv[0][3], kv[0][2])):
        if n != name:
            continue
        acc = [r["accuracy"] for r in rs]
        sd = f" ± {np.std(acc, ddof=1):.3f}" if len(acc) > 1 else ""
        f1 = [r["four_class_macro_f1"] for r in rs]
        worst = max(abs(v) for r in rs for key, v in r["share_error"].items() if key not in ("maps", "tasks"))
        each = ", ".join(f"{a:.3f}" for a in acc)
        kk = f"all {rs[0]['pool']}" if k >= rs[0]["pool"] else str(k)
        print(f"| {n} | {bn} | {how} | {kk} | {len(rs)} | {np.mean(acc):.3f}{sd} ({each}) | {np.mean(f1):.3f} | "
              f"{100 * np.mean([r['mean_abs_share_error'] for r in rs]):.1f} | {100 * worst:.1f} |")
