"""census --precision: the target's two forms, the stop after a window, a random sample rather than the file's head,
the record of what was used and why, resume to the identical result, and the refusal of a target that cannot be met."""

import json

import numpy as np
import pytest

from patterncnn.census.run import MIN_PRECISION_EXAMPLES, run_census, shuffle
from patterncnn.classifier.onnx import OnnxClassifier
from patterncnn.cli import main
from patterncnn.core.glue import load_split
from patterncnn.core.labels import LABELS
from patterncnn.core.maps import MapStore
from patterncnn.encoders.load import load_encoder
from patterncnn.shares.precision import Precision, PrecisionError, half_widths


class Boom:
    """A progress bar that interrupts the run after a number of examples, like Ctrl-C."""

    def __init__(self, after):
        self.after = after

    def __call__(self, **kw):
        return self

    def update(self, n=1):
        self.after -= n
        if self.after < 0:
            raise KeyboardInterrupt

    def close(self):
        pass


@pytest.mark.parametrize("text, points, rel", [("1", 1.0, None), ("0.5", 0.5, None), (2, 2.0, None),
                                                ("0.33x", None, 0.33), (" .5x ", None, 0.5),
                                                ("1e-9", 1e-9, None), ("2.5E-1x", None, 0.25)])
def test_the_target_reads_in_points_or_as_a_fraction_of_the_classifier_part(text, points, rel):
    p = Precision.parse(text)
    assert (p.points, p.of_classifier) == (points, rel)
    assert Precision.parse(str(p)) == p


@pytest.mark.parametrize("text", ["0", "-1", "x", "abc", "1xx", "0x", "", "0e5", "1e999", "inf", "nan", "1e"])
def test_a_bad_target_says_what_to_pass(text):
    with pytest.raises(PrecisionError, match="share points"):
        Precision.parse(text)


def _part(ex_half: float, cls_half: float, p: float = 0.3) -> dict:
    return {"shares": {n: p for n in LABELS},
            "ci95_parts": {"examples": {n: [p - ex_half, p + ex_half / 2] for n in LABELS},
                           "classifier": {n: [p - cls_half, p + cls_half] for n in LABELS}}}


def test_the_check_takes_the_wider_side_on_every_pattern():
    assert half_widths(_part(0.01, 0.03)["shares"], _part(0.01, 0.03)["ci95_parts"]["examples"])["block"] == \
        pytest.approx(1.0)  # points; the lower side is the wider one
    assert Precision.parse("1.2").check(_part(0.011, 0.03))["reached"]
    assert not Precision.parse("1").check(_part(0.011, 0.03))["reached"]
    assert Precision.parse("0.4x").check(_part(0.011, 0.03))["reached"]  # 1.1 <= 0.4 * 3
    miss = Precision.parse("0.3x").check(_part(0.011, 0.03))
    assert not miss["reached"] and miss["target"]["vertical"] == pytest.approx(0.9)
    one = _part(0.011, 0.03)
    one["ci95_parts"]["examples"]["diagonal"] = [0.2, 0.3]  # one pattern 10 points wide on its lower side
    check = Precision.parse("5").check(one)
    assert not check["reached"] and check["widest"] == "diagonal"


@pytest.fixture()
def setup(tiny_bert, tiny_classifier, glue_dir):
    return load_encoder(str(tiny_bert), max_length=48), OnnxClassifier(tiny_classifier[1]), glue_dir


def test_a_loose_target_stops_after_two_windows_a_tight_one_uses_every_example(setup, tmp_path):
    enc, clf, glue = setup
    split = load_split("rte", "dev", glue, limit=150, seed=3)
    loose = run_census(enc, clf, [split], tmp_path / "loose", limit=150, seed=3, precision="50")
    s = loose["tasks"]["rte"]
    assert s["examples"] == MIN_PRECISION_EXAMPLES == s["precision"]["examples_used"] < 150
    assert s["precision"]["reached"] and s["precision"]["stopped_early"] and s["precision"]["budget"] == 150
    assert "stopped after 128 of 150 examples" in s["precision"]["reason"]
    assert s["maps"] == 128 * 3 * 4 and loose["precision"]["target"] == "50"
    tight = run_census(enc, clf, [split], tmp_path / "tight", limit=150, seed=3, precision=0.001)
    t = tight["tasks"]["rte"]
    assert t["examples"] == 150 and not t["precision"]["reached"] and not t["precision"]["stopped_early"]
    assert "all 150 examples used without reaching the target" in t["precision"]["reason"]
    assert all(t["precision"]["examples_half_width"][n] >= 0 for n in LABELS)
    saved = json.loads((tmp_path / "tight" / "census.json").read_text())
    assert saved["tasks"]["rte"]["precision"] == t["precision"]


def test_early_stopped_examples_are_a_seeded_random_sample(setup, tmp_path):
    enc, clf, glue = setup
    split = load_split("rte", "dev", glue, limit=150, seed=3)
    run_census(enc, clf, [split], tmp_path / "c", limit=150, seed=3, precision="50", save_maps=True)
    used = sorted({m["example"] for m in MapStore(tmp_path / "c" / "maps" / "rte").meta})
    first = sorted(ex.index for ex in split.examples)[:128]
    assert len(used) == 128 and used != first  # not the head of the file
    assert used == sorted(ex.index for ex in shuffle(split, 3).examples[:128])
    assert [ex.index for ex in shuffle(split, 3).examples] == [ex.index for ex in shuffle(split, 3).examples]
    assert [ex.index for ex in shuffle(split, 4).examples] != [ex.index for ex in shuffle(split, 3).examples]


def test_interrupted_precision_census_resumes_to_the_identical_result(setup, tmp_path):
    enc, clf, glue = setup
    split = load_split("rte", "dev", glue, limit=160, seed=5)
    whole = run_census(enc, clf, [split], tmp_path / "whole", limit=160, seed=5, precision="8")
    with pytest.raises(KeyboardInterrupt):
        run_census(enc, clf, [split], tmp_path / "cut", limit=160, seed=5, precision="8", progress=Boom(100))
    assert len(list((tmp_path / "cut" / ".work" / "rte").glob("window-*.npz"))) == 1
    resumed = run_census(enc, clf, [split], tmp_path / "cut", limit=160, seed=5, precision="8")
    a, b = whole["tasks"]["rte"], resumed["tasks"]["rte"]
    for key in ("counts", "shares", "ci95", "ci95_parts", "heads", "precision", "examples"):
        assert a[key] == b[key], key
    # windows of a run without --precision (file order) are never mixed into one with it
    with pytest.raises(KeyboardInterrupt):
        run_census(enc, clf, [split], tmp_path / "mixed", limit=160, seed=5, progress=Boom(70))
    from patterncnn.core.work import RunError

    with pytest.raises(RunError, match="other arguments"):
        run_census(enc, clf, [split], tmp_path / "mixed", limit=160, seed=5, precision="8")


def test_a_relative_target_needs_a_classifier_part(setup, tmp_path):
    enc, clf, glue = setup  # the tiny classifier was never validated: count has no band
    with pytest.raises(PrecisionError, match="in points"):
        run_census(enc, clf, [load_split("rte", "dev", glue, limit=20)], tmp_path / "c", limit=20, seed=0,
                   precision="0.33x")


def test_the_relative_target_follows_the_classifier_band(tiny_bert, glue_dir, tmp_path):
    """The shipped classifier carries a validation: tiny BERT gets the widest validated band as its classifier part."""
    enc, clf = load_encoder(str(tiny_bert), max_length=48), OnnxClassifier()
    res = run_census(enc, clf, [load_split("rte", "dev", glue_dir, limit=150, seed=1)], tmp_path / "c", limit=150,
                     seed=1, precision="0.5x")
    s = res["tasks"]["rte"]
    band = res["estimator"]["validated_share_error"]["bias_band"]  # the classifier part: the share ± band, clipped
    for n in LABELS:  # the target is half the classifier's half-width: half the band, or less where clipped at 0 or 1
        p = s["shares"][n]
        assert s["precision"]["target_half_width"][n] == pytest.approx(50 * max(min(band[n], p),
                                                                                min(band[n], 1 - p)), abs=1e-3)
    if s["precision"]["reached"]:
        assert all(s["precision"]["examples_half_width"][n] <= s["precision"]["target_half_width"][n] for n in LABELS)


def test_census_cli_precision(tiny_bert, tiny_classifier, glue_dir, tmp_path, capsys):
    args = ["census", "--task", "rte", "--model", str(tiny_bert), "--limit", "150", "--glue-dir", str(glue_dir),
            "--classifier", str(tiny_classifier[1]), "--out", str(tmp_path / "c")]
    assert main(args + ["--precision", "50"]) == 0
    out = capsys.readouterr().out
    assert "128/150" in out and "rte: stopped after 128 of 150 examples" in out
    assert main(args + ["--precision", "1y", "--overwrite"]) == 2
    assert "--precision '1y'" in capsys.readouterr().err
    assert main(args + ["--precision", "1", "--ray", "local", "--overwrite"]) == 2
    assert "not --ray" in capsys.readouterr().err
    assert np.isfinite(json.loads((tmp_path / "c" / "census.json").read_text())["seconds"])
