"""From the shipped classifier's stored cross-validated validation cells (models/metrics.json): how often the hand share
lies in (a) the printed total interval (what the census quotes: "held the hand-labelled share in N % of cells"),
(b) the examples' part alone, (c) the classifier part alone (count: +-band of the other half; calibrated: the calibration
bootstrap) - (c) is what is left of a census interval at census scale, where the examples' part is +-0.3-1 point.
Also the maps per cell. Usage: python research/intervals/cell_coverage.py"""
import json

import numpy as np

m = json.load(open("models/metrics.json"))
L = ["vertical", "diagonal", "vertical+diagonal", "block", "heterogeneous"]
print(f"{'estimator':9} {'scope':8} {'encoder':22} maps/cell  total  examples  classifier-part  (coverage %, cells)")
for r in m["validation"]["results"]:
    for enc, cells in r["cells"].items():
        tot = ex = cl = n = 0
        maps = []
        for h, tc in cells.items():
            for t, c in tc.items():
                maps.append(c["maps"])
                for k in L:
                    hand = c["hand"][k]
                    a = c["ci95"][k]; b = c["ci95_parts"]["examples"][k]; d = c["ci95_parts"]["classifier"][k]
                    tot += a[0] - 1e-9 <= hand <= a[1] + 1e-9
                    ex += b[0] - 1e-9 <= hand <= b[1] + 1e-9
                    cl += d[0] - 1e-9 <= hand <= d[1] + 1e-9
                    n += 1
        print(f"{r['estimator']:9} {str(r['scope']):8} {enc:22} {min(maps):3d}-{max(maps):3d}   {100*tot/n:5.1f}  {100*ex/n:7.1f}  {100*cl/n:10.1f}   ({n})")
# The examples' part's half-width in those cells (block left out: it is 0 on single-segment tasks), which is what makes
# their coverage; a census's is +-0.3-1 point. (Added when the script was copied here from the review; the review's
# output held these lines from a snippet run beside it.)
for est, scope in (("count", None), ("adjusted", "uniform")):
    r = next(r for r in m["validation"]["results"] if r["estimator"] == est and r["scope"] == scope)
    for enc, cells in r["cells"].items():
        hw = [100 * (c["ci95_parts"]["examples"][k][1] - c["ci95_parts"]["examples"][k][0]) / 2
              for tc in cells.values() for c in tc.values() for k in L if k != "block"]
        print(f"mean half-width of the examples' part in the validation cells (block left out), {est}/{scope} {enc}: "
              f"{np.mean(hw):.1f} points (median {np.median(hw):.1f}, max {np.max(hw):.1f})")
