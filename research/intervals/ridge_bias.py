"""Deterministic bias of `adjusted` with an exactly known confusion (no sampling anywhere): the code's adjust_matrices
on the shipped classifier's confusion counts (uniform scope, 900 rows), applied to the exact argmax shares q = R'p of
true shares p. Also the singular values of R (how near-singular the inverted matrix is).
Usage: python research/intervals/ridge_bias.py"""
import json
import sys

import numpy as np

sys.path.insert(0, ".")
from patterncnn.shares.calibrate import adjust_matrices, fit_calibration, stored_rows
from patterncnn.shares.estimate import finish

m = json.load(open("models/metrics.json"))
rows = stored_rows(m)
u = rows.subset(rows.uniform)
cal = fit_calibration(u)
conf = cal.confusion[0]  # (2,5,5)
for kind, name in ((0, "single"), (1, "two-segment")):
    keep = [0, 1, 2, 4] if kind == 0 else [0, 1, 2, 3, 4]
    c = conf[kind][np.ix_(keep, keep)] + 0.5 * np.eye(len(keep))
    R = c / c.sum(1, keepdims=True)
    print(name, "rows", int(conf[kind].sum()), "singular values of R:", np.round(np.linalg.svd(R, compute_uv=False), 3),
          "condition", round(np.linalg.cond(R), 1))
A = adjust_matrices(conf[None])[0]
Rfull = conf[1] + 0.5 * np.eye(5); Rfull = Rfull / Rfull.sum(1, keepdims=True)
for p in ([0.70, 0.0, 0.07, 0.04, 0.19], [0.55, 0.15, 0.17, 0.01, 0.12], [0.45, 0.10, 0.25, 0.10, 0.10], [0.5, 0.1, 0.2, 0.2, 0.0]):
    p = np.array(p); q = Rfull.T @ p
    est = finish(A[1] @ q)
    print("true", p, "count", np.round(q, 3), "adjusted", np.round(est, 3), "error, points", np.round(100 * (est - p), 1))
