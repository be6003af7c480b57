"""Re-export a trained ensemble's ONNX with the current forward (log-sum-exp), keeping its metadata; parity.

usage (from the repository root): python research/ablations/members/reexport.py research/ensemble-x2
(run once on the ensemble after training: printed max |p before - p after| 1.79e-07, 0 labels changed,
parity 7.15e-07 -> 7.45e-07, version patterncnn-0.1.0-222b7338-x2)
Since 2026-11-24 research/ensemble-x2 holds a fresh `patterncnn train --members 2` output instead (retrained
for the card's "Against one annotator" section: the same weights, bit for bit, exported with the log-sum-exp
forward directly; its calibration figures moved in the 8th digit); this script is kept as the record.
"""
import json
import sys
from pathlib import Path

import numpy as np
import onnx

from patterncnn.classifier.model import load_checkpoint
from patterncnn.classifier.onnx import OnnxClassifier, export_onnx, parity_check
from patterncnn.core.fileio import write_json, write_text
from patterncnn.labelling.sets import load_labelled
from patterncnn.training.modelcard import model_card

d = Path(sys.argv[1]); path = d / "patterncnn.onnx"
meta = {p.key: json.loads(p.value) for p in onnx.load(str(path)).metadata_props}
before = OnnxClassifier(path)
model, ckpt = load_checkpoint(d / "patterncnn.pt")
extra = {k: meta[k] for k in ("data_hash", "cv_macro_f1", "trained_on", "calibration", "validation")}
data = load_labelled("annotations")
p_before = before.predict(data.maps, data.seps)
export_onnx(model, path, extra)
after = OnnxClassifier(path)
p_after = after.predict(data.maps, data.seps)
print("max |p before - p after|", float(np.abs(p_before - p_after).max()), "labels changed", int((p_before.argmax(1) != p_after.argmax(1)).sum()))
m = json.loads((d / "metrics.json").read_text())
par = parity_check(model, path, data.maps, data.seps)
print("parity", m["onnx_parity_max_abs_diff"], "->", par, "version", after.model_version)
m["onnx_parity_max_abs_diff"] = par
write_json(d / "metrics.json", m); write_text(d / "README.md", model_card(m))
