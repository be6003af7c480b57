"""The census on the tiny BERT and a tiny classifier: outputs, resume, overwrite protection, analyze."""

import json

import numpy as np
import pytest

from patterncnn.census.run import CensusError, compare, run_census
from patterncnn.classifier.onnx import OnnxClassifier
from patterncnn.cli import main
from patterncnn.core.fileio import OutputError
from patterncnn.core.glue import load_split
from patterncnn.core.labels import LABELS
from patterncnn.core.maps import MapStore
from patterncnn.core.work import RunError
from patterncnn.encoders.load import load_encoder


@pytest.fixture()
def setup(tiny_bert, tiny_classifier, glue_dir):
    enc = load_encoder(str(tiny_bert), max_length=48)
    clf = OnnxClassifier(tiny_classifier[1])
    return enc, clf, glue_dir


def test_census_outputs(setup, tmp_path):
    enc, clf, glue = setup
    splits = [load_split("rte", "dev", glue, limit=30, seed=1), load_split("sst2", "dev", glue, limit=20),
              load_split("qqp", "dev", glue)]  # the QQP excerpt holds 2 malformed rows
    res = run_census(enc, clf, splits, tmp_path / "c", limit=30, seed=1)
    for task, n in (("rte", 30), ("sst2", 20)):
        s = res["tasks"][task]
        assert s["examples"] == n and s["maps"] == n * 3 * 4
        assert sum(s["shares"].values()) == pytest.approx(1.0)
        assert all(lo <= s["shares"][k] <= hi for k, (lo, hi) in s["ci95"].items())
        assert len(s["heads"]) == 3 and len(s["heads"][0]) == 4
        assert "warning" not in s  # MIN_EXAMPLES (20) examples or more: enough for the bootstrap over examples
    assert res["tasks"]["sst2"]["shares"]["block"] == 0.0  # single sentences never get block
    for f in ("census.json", "census.csv", "heads.csv", "census.png", "heads.png"):
        assert (tmp_path / "c" / f).stat().st_size > 0
    assert not (tmp_path / "c" / ".work").exists()
    saved = json.loads((tmp_path / "c" / "census.json").read_text())
    assert saved["encoder"]["sha256"] and saved["classifier"]["sha256"] and saved["limit"] == 30
    assert {t: s["skipped_rows"] for t, s in saved["tasks"].items()} == {"rte": 0, "sst2": 0, "qqp": 2}
    with pytest.raises(OutputError, match="already holds census.json; pass --overwrite"):
        run_census(enc, clf, splits, tmp_path / "c", limit=30, seed=1)


def test_a_task_with_too_few_examples_for_its_intervals_is_warned_about(setup, tmp_path):
    # Found by the statistician's review (F3): with --limit 1 the interval over examples had zero width and nothing
    # said so; below MIN_EXAMPLES examples the bootstrap over examples holds the share far less often than 95%.
    from patterncnn.census.result import provenance_html
    from patterncnn.census.results import census_text

    enc, clf, glue = setup
    res = run_census(enc, clf, [load_split("rte", "dev", glue, limit=3, seed=1)], tmp_path / "c", limit=3, seed=1)
    saved = json.loads((tmp_path / "c" / "census.json").read_text())["tasks"]["rte"]["warning"]
    assert saved == res["tasks"]["rte"]["warning"]
    assert saved.startswith("rte has only 3 examples, fewer than the 20") and "larger --limit" in saved
    assert f"warning: {saved}" in census_text(res).splitlines()  # on screen, under the table
    assert "rte has only 3 examples" in provenance_html(res)  # and in the HTML report


def test_a_share_taken_below_zero_is_named_under_the_table():
    # From helper 92's review: a clipped share (census.json's clipped_at_zero) showed as a plain 0.0% on screen.
    from patterncnn.census.results import clipped_note

    res = {"estimator": {"name": "adjusted"}, "tasks": {"rte": {"clipped_at_zero": {"block": -0.0177}},
                                                        "sst2": {}, "mrpc": {"clipped_at_zero": {"block": -0.004}}}}
    assert clipped_note(res) == ("note: adjusted took block on rte (-1.8%), block on mrpc (-0.4%) below zero, shown "
                                 "as 0.0%: an extrapolation, not an estimate (the argmax mix lies outside what its "
                                 "calibration produces; census.json's shares_by_estimator.count has count's share)")
    assert clipped_note(res, ["rte"]).startswith("note: adjusted took block on rte (-1.8%) below zero")  # compared
    res["tasks"] = {"rte": {}}
    assert clipped_note(res) is None


def test_a_share_taken_below_zero_is_named_in_the_report_the_comparison_and_the_csv(setup, tmp_path):
    # helper 93's review: the note reached the terminal table only
    from patterncnn.census.result import provenance_html
    from patterncnn.census.results import compare
    from patterncnn.census.run import write_outputs

    enc, clf, glue = setup
    res = run_census(enc, clf, [load_split("rte", "dev", glue, limit=3, seed=1)], tmp_path / "c", limit=3, seed=1)
    res["tasks"]["rte"]["clipped_at_zero"] = {"block": -0.0177}
    assert "took block on rte (-1.8%) below zero" in provenance_html(res)
    assert "A: note: " in compare(res, res)[0] and "B: note: " in compare(res, res)[0]
    write_outputs(tmp_path / "d", res)
    rows = (tmp_path / "d" / "census.csv").read_text().splitlines()
    assert rows[0].endswith(",before_clipping")
    assert [r.split(",")[-1] for r in rows[1:] if r.startswith("rte,block,")] == ["-0.01770"]
    assert all(r.endswith(",") for r in rows[1:] if not r.startswith("rte,block,"))


def test_save_maps(setup, tmp_path):
    from patterncnn.core.maps import MapStore

    enc, clf, glue = setup
    run_census(enc, clf, [load_split("rte", "dev", glue, limit=5, seed=1)], tmp_path / "c", limit=5, seed=1,
               save_maps=True)
    store = MapStore(tmp_path / "c" / "maps" / "rte")
    assert len(store) == 5 * 3 * 4 and {m["layer"] for m in store.meta} == {0, 1, 2}
    meta, arr = next(iter(store))
    assert arr.shape == (meta["T"], meta["T"]) and meta["tokens"][0] == "[CLS]"
    # its header says which seeded sample of which file it holds, as a sampled store's does, with no local path
    h = store.header
    assert (h["made_by"], h["seed"], h["limit"], h["order"], h["layers"], h["heads"]) == ("census", 1, 5, "file", 3, 4)
    split = load_split("rte", "dev", glue, limit=5, seed=1)  # the excerpt's rows, and a digest of their content
    assert h["tasks"] == {"rte": {"split": "dev", "source": "RTE/dev.tsv", "examples": 160, "data": split.digest()}}
    assert h["model"]["sha256"] == enc.fingerprint["sha256"] and "/" not in h["model"]["path"]


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


def test_interrupted_census_resumes_to_the_same_result(setup, tmp_path):
    enc, clf, glue = setup
    split = load_split("rte", "dev", glue, limit=150, seed=2)
    whole = run_census(enc, clf, [split], tmp_path / "whole", limit=150, seed=2)
    with pytest.raises(KeyboardInterrupt):
        run_census(enc, clf, [split], tmp_path / "cut", limit=150, seed=2, progress=Boom(100))
    done = sorted((tmp_path / "cut" / ".work" / "rte").glob("window-*.npz"))
    assert len(done) == 1  # 64 examples finished; the second window was cut mid-way and not saved
    resumed = run_census(enc, clf, [split], tmp_path / "cut", limit=150, seed=2)
    assert resumed["tasks"]["rte"]["counts"] == whole["tasks"]["rte"]["counts"]
    assert resumed["tasks"]["rte"]["heads"] == whole["tasks"]["rte"]["heads"]
    # what `seconds` timed: the resumed run computed 86 of the 150 examples; 64 were read back (helper 104's review)
    assert (whole["tasks"]["rte"]["examples_computed_here"], resumed["tasks"]["rte"]["examples_computed_here"]) == (
        150, 86)


def test_unfinished_census_with_other_arguments_is_not_mixed(setup, tmp_path):
    enc, clf, glue = setup
    with pytest.raises(KeyboardInterrupt):
        run_census(enc, clf, [load_split("rte", "dev", glue, limit=100, seed=2)], tmp_path / "c", limit=100, seed=2,
                   progress=Boom(80))
    with pytest.raises(RunError, match="other arguments"):
        run_census(enc, clf, [load_split("rte", "dev", glue, limit=100, seed=3)], tmp_path / "c", limit=100, seed=3)


def test_a_rerun_that_leaves_out_a_task_with_finished_windows_is_refused_and_keeps_them(setup, tmp_path):
    """Rerun with fewer --task after an interruption, the census would finish without the task left out and drop its
    finished windows (the work folder goes when a census finishes): refused, naming the tasks; --overwrite drops them."""
    enc, clf, glue = setup
    splits = [load_split(t, "dev", glue, limit=100, seed=2) for t in ("mrpc", "rte")]  # 64 and 100 examples
    with pytest.raises(KeyboardInterrupt):  # mrpc finished, rte cut in its first window
        run_census(enc, clf, splits, tmp_path / "c", limit=100, seed=2, progress=Boom(100))
    kept = sorted((tmp_path / "c" / ".work").rglob("window-*.npz"))
    assert [p.parent.name for p in kept] == ["mrpc"]
    with pytest.raises(RunError, match=r"unfinished census run of mrpc, which this run leaves out; run it with those "
                                       r"tasks too \(--task: rte, mrpc\)"):
        run_census(enc, clf, splits[1:], tmp_path / "c", limit=100, seed=2)
    assert sorted((tmp_path / "c" / ".work").rglob("window-*.npz")) == kept
    assert not (tmp_path / "c" / "census.json").exists()
    resumed = run_census(enc, clf, splits, tmp_path / "c", limit=100, seed=2)  # all of them: resumes
    assert list(resumed["tasks"]) == ["mrpc", "rte"]
    with pytest.raises(KeyboardInterrupt):
        run_census(enc, clf, splits, tmp_path / "o", limit=100, seed=2, progress=Boom(100))
    only = run_census(enc, clf, splits[1:], tmp_path / "o", limit=100, seed=2, overwrite=True)
    assert list(only["tasks"]) == ["rte"] and not (tmp_path / "o" / ".work").exists()


def test_a_census_cut_before_its_first_window_leaves_nothing_to_refuse(setup, tmp_path):
    """Stopped before any window was saved, an unfinished run holds no work: other arguments simply start over."""
    enc, clf, glue = setup
    with pytest.raises(KeyboardInterrupt):
        run_census(enc, clf, [load_split("rte", "dev", glue, limit=100, seed=2)], tmp_path / "c", limit=100, seed=2,
                   progress=Boom(10))
    assert list((tmp_path / "c" / ".work" / "rte").iterdir()) == [tmp_path / "c" / ".work" / "rte" / "run.json"]
    other = run_census(enc, clf, [load_split("rte", "dev", glue, limit=70, seed=3)], tmp_path / "c", limit=70, seed=3)
    fresh = run_census(enc, clf, [load_split("rte", "dev", glue, limit=70, seed=3)], tmp_path / "f", limit=70, seed=3)
    assert other["tasks"]["rte"]["counts"] == fresh["tasks"]["rte"]["counts"] and other["tasks"]["rte"]["examples"] == 70
    # with --save-maps, a store that holds no map yet (its store.json alone) is nothing to keep either
    with pytest.raises(KeyboardInterrupt):
        run_census(enc, clf, [load_split("rte", "dev", glue, limit=100, seed=2)], tmp_path / "m", limit=100, seed=2,
                   progress=Boom(10), save_maps=True)
    run_census(enc, clf, [load_split("rte", "dev", glue, limit=70, seed=3)], tmp_path / "m", limit=70, seed=3,
               save_maps=True)
    assert len(MapStore(tmp_path / "m" / "maps" / "rte")) == 70 * enc.num_layers * enc.num_heads


def test_a_census_cut_after_saving_maps_but_before_its_window_keeps_them(setup, tmp_path, monkeypatch):
    """--save-maps writes a window's maps before the window itself: cut between the two, the maps are kept work,
    so other arguments are refused rather than mixed into the same store."""
    import patterncnn.census.run as run

    enc, clf, glue = setup

    def cut(*a, **kw):
        raise KeyboardInterrupt

    monkeypatch.setattr(run, "save_window", cut)
    with pytest.raises(KeyboardInterrupt):
        run_census(enc, clf, [load_split("rte", "dev", glue, limit=100, seed=2)], tmp_path / "m", limit=100, seed=2,
                   save_maps=True)
    assert len(MapStore(tmp_path / "m" / "maps" / "rte")) > 0
    monkeypatch.undo()
    with pytest.raises(RunError, match="other arguments"):
        run_census(enc, clf, [load_split("rte", "dev", glue, limit=70, seed=3)], tmp_path / "m", limit=70, seed=3,
                   save_maps=True)


def test_save_maps_given_on_resume_stores_every_window_and_left_out_is_warned_of(setup, tmp_path, caplog):
    """A census stopped after a window, resumed with --save-maps, stored only the windows computed after the resume
    (149 of RTE's 277 examples, helper 95's review); the windows finished before are computed again for their maps.
    Stopped with --save-maps and resumed without, its partial store is warned of."""
    enc, clf, glue = setup
    split = load_split("rte", "dev", glue, limit=100, seed=2)
    n_maps = enc.num_layers * enc.num_heads
    with pytest.raises(KeyboardInterrupt):  # the first window (64 examples) is finished
        run_census(enc, clf, [split], tmp_path / "c", limit=100, seed=2, progress=Boom(70))
    resumed = run_census(enc, clf, [split], tmp_path / "c", limit=100, seed=2, save_maps=True)
    assert len(MapStore(tmp_path / "c" / "maps" / "rte")) == 100 * n_maps
    fresh = run_census(enc, clf, [split], tmp_path / "f", limit=100, seed=2)
    assert resumed["tasks"]["rte"]["counts"] == fresh["tasks"]["rte"]["counts"]
    with pytest.raises(KeyboardInterrupt):
        run_census(enc, clf, [split], tmp_path / "r", limit=100, seed=2, progress=Boom(70), save_maps=True)
    with caplog.at_level("WARNING"):
        run_census(enc, clf, [split], tmp_path / "r", limit=100, seed=2)
    assert "holds the maps of only 64 of this census's 100 rte examples" in caplog.text, caplog.text


def test_overwrite_with_save_maps_replaces_another_census_s_maps(setup, tmp_path, caplog):
    """--overwrite --save-maps kept the earlier census's store, and no map whose id it held was rewritten: after a
    change of --max-length every stored map was still the earlier one (helper 95's review)."""
    tiny, clf, glue = setup
    split = load_split("rte", "dev", glue, limit=20, seed=1)
    run_census(tiny, clf, [split], tmp_path / "c", limit=20, seed=1, save_maps=True)
    short = load_encoder(tiny.name, max_length=8)
    with caplog.at_level("WARNING"):
        run_census(short, clf, [split], tmp_path / "c", limit=20, seed=1, save_maps=True, overwrite=True)
    store = MapStore(tmp_path / "c" / "maps" / "rte")
    assert store.header["max_length"] == 8 and len(store) == 20 * tiny.num_layers * tiny.num_heads
    assert max(m["T"] for m in store.meta) == 8
    assert "held the maps of another census (its max_length differ); replaced" in caplog.text, caplog.text
    caplog.clear()  # without --save-maps, another census's store beside this census is warned of (helper 98)
    with caplog.at_level("WARNING"):
        run_census(tiny, clf, [split], tmp_path / "c", limit=20, seed=1, overwrite=True)
    assert "holds the maps of another census (its max_length differ), not this census's" in caplog.text


def test_overwrite_refused_for_its_arguments_leaves_the_finished_census_as_it_was(setup, tmp_path):
    """--overwrite dropped census.json before the estimator was checked, so a refused rerun (the tiny classifier has
    no calibration for adjusted) lost the finished census (helper 104's review)."""
    from patterncnn.classifier.onnx import ClassifierError
    from patterncnn.shares.precision import PrecisionError

    tiny, clf, glue = setup
    split = load_split("rte", "dev", glue, limit=20, seed=1)
    run_census(tiny, clf, [split], tmp_path / "c", limit=20, seed=1)
    before = {p.name: p.read_bytes() for p in (tmp_path / "c").iterdir() if p.is_file()}
    with pytest.raises(ClassifierError, match="needs the classifier's calibration"):
        run_census(tiny, clf, [split], tmp_path / "c", limit=20, seed=1, overwrite=True, estimator="adjusted")
    with pytest.raises(PrecisionError, match="relative to the classifier's part"):
        run_census(tiny, clf, [split], tmp_path / "c", limit=20, seed=1, overwrite=True, precision="0.5x")
    assert {p.name: p.read_bytes() for p in (tmp_path / "c").iterdir() if p.is_file()} == before
    assert "census.json" in before


def test_a_data_file_changed_in_place_is_not_resumed_as_the_old_one(setup, tmp_path):
    """A census stopped, its GLUE file changed in place, then resumed mixed the windows of the two files: its
    shares were of neither (helper 95's review). The windows are keyed by the examples read, too."""
    import shutil

    enc, clf, glue = setup
    data = shutil.copytree(glue, tmp_path / "glue")
    with pytest.raises(KeyboardInterrupt):
        run_census(enc, clf, [load_split("rte", "dev", data, limit=100, seed=2)], tmp_path / "c", limit=100, seed=2,
                   progress=Boom(70))
    rows = (data / "RTE" / "dev.tsv").read_text().split("\n")
    swapped = [rows[0]] + ["\t".join([c[0], c[2], c[1], *c[3:]]) for c in (r.split("\t") for r in rows[1:] if r)]
    (data / "RTE" / "dev.tsv").write_text("\n".join(swapped) + "\n")
    with pytest.raises(RunError, match="the GLUE file's content"):
        run_census(enc, clf, [load_split("rte", "dev", data, limit=100, seed=2)], tmp_path / "c", limit=100, seed=2)


def test_a_census_of_a_changed_file_replaces_the_maps_and_is_not_kept_as_finished(setup, tmp_path, caplog):
    """After a GLUE file changed in place, --overwrite --save-maps kept every old map under the new census's ids, and
    a census of several encoders kept a finished one of the old file as "made with these arguments" (helper 98)."""
    import shutil

    from patterncnn.census.run import finished_earlier, maps_saved

    enc, clf, glue = setup
    data = shutil.copytree(glue, tmp_path / "glue")
    split = load_split("rte", "dev", data, limit=10, seed=1)
    done = run_census(enc, clf, [split], tmp_path / "c", limit=10, seed=1, save_maps=True)
    assert finished_earlier(tmp_path / "c", enc, clf, [split], 10, 1, save_maps=True) is not None
    assert maps_saved(tmp_path / "c", done, enc)
    rows = (data / "RTE" / "dev.tsv").read_text().split("\n")
    swapped = [rows[0]] + ["\t".join([c[0], c[2], c[1], *c[3:]]) for c in (r.split("\t") for r in rows[1:] if r)]
    (data / "RTE" / "dev.tsv").write_text("\n".join(swapped) + "\n")
    changed = load_split("rte", "dev", data, limit=10, seed=1)
    assert finished_earlier(tmp_path / "c", enc, clf, [changed], 10, 1) is None
    with caplog.at_level("WARNING"):
        run_census(enc, clf, [changed], tmp_path / "c", limit=10, seed=1, save_maps=True, overwrite=True)
    assert "held the maps of another census (its tasks differ); replaced" in caplog.text, caplog.text
    fresh = run_census(enc, clf, [changed], tmp_path / "f", limit=10, seed=1, save_maps=True)
    a, b = MapStore(tmp_path / "c" / "maps" / "rte"), MapStore(tmp_path / "f" / "maps" / "rte")
    assert len(a) == len(b) and all(np.array_equal(a.get(m["id"]), b.get(m["id"])) for m in b.meta)
    assert fresh["tasks"]["rte"]["data"] == changed.digest() != split.digest()
    for path in (tmp_path / "c" / "maps" / "rte").glob("part-*.jsonl"):  # a store missing maps is not all saved
        path.with_suffix(".npz").unlink()
        path.unlink()
    assert not maps_saved(tmp_path / "c", fresh, enc)


def test_another_limit_is_named_alone(setup, tmp_path):
    """The examples' digest was of the drawn examples: another --limit was also named as another GLUE file (helper
    97's walk of the docs)."""
    enc, clf, glue = setup
    with pytest.raises(KeyboardInterrupt):
        run_census(enc, clf, [load_split("rte", "dev", glue, limit=100, seed=2)], tmp_path / "c", limit=100, seed=2,
                   progress=Boom(70))
    with pytest.raises(RunError) as e:
        run_census(enc, clf, [load_split("rte", "dev", glue, limit=90, seed=2)], tmp_path / "c", limit=90, seed=2)
    assert "--limit: was 100, now 90" in str(e.value) and "GLUE file" not in str(e.value), str(e.value)


def test_census_cli_and_compare(tiny_bert, tiny_classifier, glue_dir, tmp_path, capsys):
    args = ["census", "--task", "RTE", "--model", str(tiny_bert), "--limit", "12", "--glue-dir", str(glue_dir),
            "--classifier", str(tiny_classifier[1])]
    assert main(args + ["--out", str(tmp_path / "a")]) == 0
    out = capsys.readouterr().out
    assert "rte" in out and "vertical" in out and "census.png" in out
    assert main(args + ["--out", str(tmp_path / "a")]) == 2
    assert "already holds census.json; pass --overwrite" in capsys.readouterr().err
    assert main(args + ["--out", str(tmp_path / "b"), "--seed", "5"]) == 0
    capsys.readouterr()
    assert main(["census", "--compare", str(tmp_path / "a"), str(tmp_path / "b")]) == 0
    assert "B - A" in capsys.readouterr().out
    assert main(args[:-2] + ["--limit", "0", "--out", str(tmp_path / "z")]) == 2
    assert "--limit must be at least 1" in capsys.readouterr().err
    assert main(["census", "--out", str(tmp_path / "y")]) == 2
    assert "pass --task" in capsys.readouterr().err


def test_compare_reports_differences():
    def res(v):
        return {"encoder": {"model": "m"}, "tasks": {"rte": {
            "shares": {k: (v if k == "vertical" else (1 - v) / 4) for k in LABELS},
            "ci95": {k: [0.0, 1.0] for k in LABELS}}}}
    text, diff = compare(res(0.4), res(0.6))
    assert diff["rte"]["difference"]["vertical"] == pytest.approx(0.2)


def test_compare_marks_only_what_each_interval_can_say():
    def res(v, calibration):
        ci = {k: [v - 0.01, v + 0.01] for k in LABELS}  # narrow: apart from the other census's
        total = {k: [v - 0.15, v + 0.15] for k in LABELS} if calibration else ci  # wide with a calibration part
        err = {k: 0.03 for k in LABELS}
        return {"encoder": {"model": "m"}, "estimator": {
            "name": "adjusted" if calibration else "count", "calibration": {"rows": 100} if calibration else None,
            "validated_share_error": {"encoder": "m", "mean_abs_error": 0.03, "abs_error": err}},
            "tasks": {"rte": {"shares": {k: v for k in LABELS}, "ci95": total,
                              "ci95_parts": {"examples": ci, "classifier": total}}}}

    text, diff = compare(res(0.2, False), res(0.3, False))  # count: no calibration part
    assert diff["rte"]["separated_examples"]["vertical"] and diff["rte"]["separated_total"]["vertical"] is None
    assert "+10.0*!" in text and "**" not in text.split("\n")[2] and "** not checked" in text
    text, diff = compare(res(0.2, True), res(0.3, True))  # the classifier's part overlaps: one star only
    assert diff["rte"]["separated_total"]["vertical"] is False and "+10.0*!" in text
    text, diff = compare(res(0.2, True), res(0.6, True))
    assert diff["rte"]["separated_total"]["vertical"] is True and "+40.0**!" in text
    banded = [res(v, False) for v in (0.2, 0.3)]  # count with its validated band: a classifier part to check
    for r in banded:
        r["estimator"]["validated_share_error"]["bias_band"] = {k: 0.14 for k in LABELS}
        r["tasks"]["rte"]["ci95"] = {k: [r["tasks"]["rte"]["shares"][k] - 0.14, r["tasks"]["rte"]["shares"][k] + 0.14]
                                     for k in LABELS}
    text, diff = compare(*banded)
    assert diff["rte"]["separated_total"]["vertical"] is False and "not checked" not in text
    far = res(0.5, False)
    far["estimator"]["validated_share_error"]["bias_band"] = {k: 0.14 for k in LABELS}
    far["tasks"]["rte"]["ci95"] = {k: [0.36, 0.64] for k in LABELS}
    text, diff = compare(banded[0], far)  # banded intervals apart: the difference survives the classifier's band
    assert diff["rte"]["separated_total"]["vertical"] is True and "+30.0**!" in text
    text, diff = compare(banded[0], res(0.5, False))  # one census without a band: ** cannot be checked
    assert diff["rte"]["separated_total"]["vertical"] is None and "** not checked: the intervals of B" in text


def test_a_marked_difference_that_rounds_to_zero_shows_its_digits():
    # Found in walkthrough 6: block 0.035 % against exactly 0, intervals apart, was printed "+0.0*".
    def res(block):
        shares = {k: (1 - block) / 4 for k in LABELS} | {"block": block}
        ci = {k: [v, v] for k, v in shares.items()}
        return {"encoder": {"model": "m"}, "estimator": {"name": "count"},
                "tasks": {"rte": {"shares": shares, "ci95": ci, "ci95_parts": {"examples": ci}}}}

    text, diff = compare(res(0.0), res(0.00035))
    assert diff["rte"]["separated_examples"]["block"] and "+0.035*" in text and "+0.0* " not in text, text
    assert "-0.0087*" in text  # the other patterns' shares fell by 0.035 / 4 points
    text, _ = compare(res(0.0), res(0.0))
    assert "+0.0  " in text and "+0.000" not in text  # no difference, no mark: as before
    assert "+4.0e-06*" in compare(res(0.0), res(4e-8))[0]  # however small: two significant digits
    unmarked = {"encoder": {"model": "m"}, "estimator": {"name": "count"}, "tasks": {"rte": {
        "shares": {k: 0.2 for k in LABELS}, "ci95": {k: [0.1, 0.3] for k in LABELS}}}}
    fallen = {**unmarked, "tasks": {"rte": {**unmarked["tasks"]["rte"], "shares": {k: 0.2 - 6e-5 for k in LABELS}}}}
    assert "-0.0" not in compare(unmarked, fallen)[0]  # an unmarked fall that rounds to nothing (walkthrough 59)


def test_analyze_cli(tiny_bert, tiny_classifier, tmp_path, capsys):
    assert main(["analyze", "The cat sat.", "A cat was sitting.", "--model", str(tiny_bert), "--classifier",
                 str(tiny_classifier[1]), "--out", str(tmp_path / "g.png")]) == 0
    out = capsys.readouterr().out
    assert "layer\\head" in out and len([l for l in out.splitlines() if l.strip().startswith(("0 ", "1 ", "2 "))]) == 3
    assert (tmp_path / "g.png").read_bytes()[:4] == b"\x89PNG"


@pytest.mark.parametrize("damage", ["truncate", "lying header", "wrong shape", "nan"])
def test_a_damaged_window_is_computed_again_saying_so(setup, tmp_path, caplog, damage):
    # Found by the probe: resuming with a truncated window file ended in a BadZipFile traceback and no result.
    import io

    from hostile import npy_header, zip_of

    enc, clf, glue = setup
    split = load_split("rte", "dev", glue, limit=100, seed=2)
    whole = run_census(enc, clf, [split], tmp_path / "whole", limit=100, seed=2)
    with pytest.raises(KeyboardInterrupt):
        run_census(enc, clf, [split], tmp_path / "cut", limit=100, seed=2, progress=Boom(80))
    window = tmp_path / "cut" / ".work" / "rte" / "window-00000.npz"
    data = window.read_bytes()
    with np.load(io.BytesIO(data)) as z:
        arrays = {k: z[k] for k in z.files}
    if damage == "truncate":
        window.write_bytes(data[: len(data) // 3])
    elif damage == "lying header":  # declares a 32 TiB array: refused before anything is allocated
        window.write_bytes(zip_of({"index.npy": npy_header((2**21, 2**21))}))
    else:
        key, value = ("labels", arrays["labels"][:, :5]) if damage == "wrong shape" else \
            ("probs", np.full_like(arrays["probs"], np.nan))
        buf = io.BytesIO()
        np.savez(buf, **{**arrays, key: value})
        window.write_bytes(buf.getvalue())
    with caplog.at_level("WARNING"):
        resumed = run_census(enc, clf, [split], tmp_path / "cut", limit=100, seed=2)
    assert any("window-00000.npz is damaged" in r.getMessage() and "computing it again" in r.getMessage()
               for r in caplog.records)
    assert resumed["tasks"]["rte"]["counts"] == whole["tasks"]["rte"]["counts"]


def test_a_damaged_work_stamp_starts_the_task_over(setup, tmp_path, caplog):
    enc, clf, glue = setup
    split = load_split("rte", "dev", glue, limit=100, seed=2)
    with pytest.raises(KeyboardInterrupt):
        run_census(enc, clf, [split], tmp_path / "c", limit=100, seed=2, progress=Boom(80))
    (tmp_path / "c" / ".work" / "rte" / "run.json").write_text("[1, 2")
    with caplog.at_level("WARNING"):
        res = run_census(enc, clf, [split], tmp_path / "c", limit=100, seed=2)
    assert res["tasks"]["rte"]["examples"] == 100
    assert any("run.json is damaged; the unfinished run of rte starts over" in r.getMessage() for r in caplog.records)


@pytest.mark.parametrize("damage,phrase", [
    (lambda r: r.update(tasks=[]), "tasks must be an object"),
    (lambda r: r["tasks"]["sst2"].pop("shares"), "tasks.sst2.shares must be an object with one entry per pattern"),
    (lambda r: r["tasks"]["sst2"]["ci95"].update(block=[0.1]), "tasks.sst2.ci95.block must be two numbers"),
    (lambda r: r["tasks"]["sst2"]["shares"].update(vertical="x"), "tasks.sst2.shares.vertical must be a number"),
    (lambda r: r.update(encoder=None), "encoder.model must be a string"),
    # fields the report and `census` read (helper 100's review: an internal error, "this is a bug")
    (lambda r: r.pop("estimator"), "estimator must be an object with a name"),
    (lambda r: r["tasks"]["sst2"]["heads"][1][2].pop("majority_share"),
     "tasks.sst2.heads[1][2] must be an object with a majority and its majority_share"),
    (lambda r: r["tasks"]["sst2"].update(heads=[]), "tasks.sst2.heads must be a list of layers"),
    (lambda r: r["tasks"]["sst2"]["heads"][0][0].update(majority_ci95=[0.1]),
     "tasks.sst2.heads[0][0].majority_ci95 must be two numbers"),
    (lambda r: r["tasks"]["sst2"]["heads"][0][0].update(clear="yes"), "tasks.sst2.heads[0][0].clear must be true"),
    (lambda r: r["estimator"].update(validated_share_error={"bias_band": 5}),
     "estimator.validated_share_error.bias_band must be an object"),
])
def test_compare_refuses_a_damaged_census_naming_the_field(tmp_path, capsys, damage, phrase):
    from repo import REPO

    shipped = REPO / "research" / "census" / "minilm" / "census.json"
    result = json.loads(shipped.read_text())
    damage(result)
    (tmp_path / "a.json").write_text(json.dumps(result))
    assert main(["census", "--compare", str(tmp_path / "a.json"), str(shipped)]) == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and "is not a census result: " + phrase in err, err
    (tmp_path / "a.json").write_text("[" * 100_000)
    assert main(["census", "--compare", str(tmp_path / "a.json"), str(shipped)]) == 2
    assert "is not valid JSON (nested too deeply)" in capsys.readouterr().err


def test_a_result_whose_precision_record_is_damaged_is_refused(tmp_path):
    from patterncnn.census.results import CensusError, load_result

    shares = dict.fromkeys(LABELS, 0.2)
    result = {"encoder": {"model": "m"}, "tasks": {"rte": {"examples": 3, "shares": shares,
                                                           "ci95": {k: [0.1, 0.3] for k in LABELS},
                                                           "precision": {"x": 1}}}}
    (tmp_path / "census.json").write_text(json.dumps(result))
    with pytest.raises(CensusError, match="precision must be an object with a whole-number budget"):
        load_result(tmp_path)


def test_a_folder_of_several_censuses_is_refused_naming_them_and_one_in_a_subfolder_is_found(tmp_path, capsys):
    """`census --model A --model B --out DIR` writes one census folder per encoder inside DIR: where one census is
    read (`census --compare`, CensusResult.load) DIR is refused naming its censuses, not as a folder of none; a DIR
    holding one census in a subfolder is that census, as `report DIR` finds it (one lookup: core/census_folder.py)."""
    import shutil

    from repo import REPO

    from patterncnn.census.result import CensusResult

    shipped = REPO / "research" / "census" / "minilm" / "census.json"
    two = tmp_path / "rte-pre-vs-ft"
    for name in ("minilm-53aa5117", "ft-0123abcd"):
        (two / name).mkdir(parents=True)
        shutil.copy(shipped, two / name / "census.json")
    several = (f"{two} holds 2 censuses in its subfolders: {two / 'ft-0123abcd'}, {two / 'minilm-53aa5117'}; give "
               f"one of them")
    assert main(["census", "--compare", str(two), str(shipped)]) == 2
    err = capsys.readouterr().err
    assert err == f"patterncnn census: error: {several}\n", err
    with pytest.raises(CensusError) as raised:
        CensusResult.load(two)
    assert str(raised.value) == several
    shutil.move(two / "minilm-53aa5117", tmp_path / "minilm-53aa5117")  # one census left, in a subfolder
    assert CensusResult.load(two).out == two / "ft-0123abcd"
    assert main(["census", "--compare", str(two), str(tmp_path / "minilm-53aa5117")]) == 0
    assert "B - A" in capsys.readouterr().out


def test_a_model_given_twice_is_refused_before_any_work(tiny_classifier, glue_dir, tmp_path, capsys):
    out = tmp_path / "x2"
    assert main(["census", "--task", "rte", "--model", "minilm", "--model", "minilm", "--limit", "2", "--glue-dir",
                 str(glue_dir), "--classifier", str(tiny_classifier[1]), "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "--model minilm is given twice; give each encoder once" in err, err
    assert not out.exists()


def test_compare_of_censuses_without_a_common_task_says_so(tmp_path):
    def res(task):
        return {"encoder": {"model": "m"}, "tasks": {task: {"shares": {k: 0.2 for k in LABELS},
                                                            "ci95": {k: [0.0, 1.0] for k in LABELS}}}}
    with pytest.raises(CensusError, match=r"the two censuses share no task \(A: rte; B: sst2\); compare two "
                                          r"censuses run with a --task in common"):
        compare(res("rte"), res("sst2"))


def test_a_tie_for_a_heads_majority_is_recorded_and_marked():
    from patterncnn.census.run import summarize
    from patterncnn.core.plots import heads_plot

    labels = np.array([[1, 0], [1, 0], [0, 0], [0, 2]])  # head 0: diagonal 2, vertical 2 -> tied; head 1: vertical
    s = summarize(labels, 1, 2)
    tied, clear = s["heads"][0]
    assert tied["majority"] == "vertical" and tied["tied"] == ["vertical", "diagonal"] and tied["majority_share"] == 0.5
    assert clear["majority"] == "vertical" and "tied" not in clear
    fig = heads_plot({"layers": 1, "heads": 2, "tasks": {"rte": s}, "encoder_tag": "minilm-53aa5117",
                      "classifier": {"version": "patterncnn-0.1.0-x"}})
    # what it was measured on, in the figure itself (helper 104's review: heads.png named no encoder)
    assert fig._suptitle.get_text() == "Majority pattern per layer and head — minilm-53aa5117, classifier " \
                                       "patterncnn-0.1.0-x"
    ax = fig.axes[0]
    assert [t.get_text() for t in ax.texts] == ["V*", "V?"] and "* a tie" in ax.get_title()  # V: 3 of 4 examples
    assert "? a majority other examples could overturn" in ax.get_title()


def test_compare_checks_nothing_between_two_estimators():
    # Found by a walkthrough: MiniLM (adjusted) against its RTE fine-tune (count) marked diagonal -11.7 points `*!`;
    # both counted, the difference was -0.7. The estimators' own difference is not the encoders'.
    a, b = _census(0.2, "count"), _census(0.6, "adjusted")
    text, diff = compare(a, b)
    assert diff["rte"]["difference"]["vertical"] == pytest.approx(0.4)
    assert all(diff["rte"][k]["vertical"] is None
               for k in ("separated_examples", "separated_total", "exceeds_validated_error"))
    assert "+40.0 " in text and "*" not in text and "!" not in text
    assert "A used the count estimator and B the adjusted estimator" in text and "--estimator count" in text
    assert "--calibration-scope" not in text  # two estimators, not two scopes of one (helper 105's review)
    assert "+40.0*!" in compare(a, _census(0.6, "count"))[0]  # the same estimator: checked
    # one estimator calibrated on other maps is another estimate of the same maps (MiniLM's adjusted: RTE's diagonal
    # 8.5 points apart between the uniform and the all scope, helper 104's review): not checked either
    uniform, every = _census(0.2, "adjusted"), _census(0.6, "adjusted")
    uniform["estimator"]["calibration"]["scope"], every["estimator"]["calibration"]["scope"] = "uniform", "all"
    text = compare(uniform, every)[0]
    assert "*" not in text and "A used the adjusted (uniform scope) estimator and B the adjusted (all scope)" in text
    assert "and the same --calibration-scope" in text
    assert "+40.0*" in compare(uniform, {**every, "estimator": uniform["estimator"]})[0]  # one scope: checked
    # two classifiers label the same maps otherwise (helper 104's review): not checked, and said
    old_clf = {**_census(0.2, "count"), "classifier": {"sha256": "a" * 64, "version": "patterncnn-0.1.0-222b7338"}}
    new_clf = {**_census(0.6, "count"), "classifier": {"sha256": "b" * 64, "version": "patterncnn-0.1.0-9f40f2d2"}}
    text = compare(old_clf, new_clf)[0]
    assert "*" not in text and "!" not in text and "A's maps were classified by patterncnn-0.1.0-222b7338 and B's " \
           "by patterncnn-0.1.0-9f40f2d2" in text and "the same --classifier" in text
    assert "+40.0*" in compare(old_clf, {**new_clf, "classifier": old_clf["classifier"]})[0]  # one classifier


def test_compare_says_when_the_two_read_other_inputs():
    # Found by a docs walk: two censuses of 150 and 408 MRPC examples were compared without a word.
    def res(examples, of=408, seed=0, data="d1", max_length=128):
        r = _census(0.2, "count")
        r.update(seed=seed, max_length=max_length)
        r["tasks"]["rte"].update(examples=examples, of=of, data=data)
        return r

    def note(b, a=None):
        return [line for line in compare(a or res(150), b)[0].splitlines() if line.startswith("note: on rte")]

    assert note(res(150)) == []  # the same sample of the same file
    assert note(res(408, seed=1), res(408, seed=0)) == []  # the whole split: the seed draws nothing
    assert "different examples (A 150 of 408, B 408 of 408)" in note(res(408))[0]
    assert "different examples (A 150 of 408, B 150 of 408, seed 0 and 1)" in note(res(150, seed=1))[0]
    assert "different GLUE files" in note(res(150, data="d2"))[0]
    assert "--max-length 128 and 64" in note(res(150, max_length=64))[0]
    uncut = [res(150), res(150, max_length=256)]
    for r in uncut:
        r["tasks"]["rte"]["truncated"] = 0
    assert note(uncut[1], uncut[0]) == []  # neither cut an input: the same inputs (helper 101's review)
    early = [res(576), res(676)]
    for r in early:
        r["tasks"]["rte"]["precision"] = {"budget": 1000}
    assert note(early[1], early[0]) == []  # two --precision stops of one seed: one shuffled order, a prefix
    early[1]["limit"] = 800  # another --limit draws another sample before its order (helper 104's review)
    assert "different examples (A 576 of 408, B 676 of 408)" in note(early[1], early[0])[0]
    assert "same --glue-dir, --limit, --seed and --max-length" in note(res(408))[0]


def _census(v, estimator):
    ci = {k: [v - 0.01, v + 0.01] for k in LABELS}
    return {"encoder": {"model": "m"}, "estimator": {
        "name": estimator, "calibration": {"rows": 100} if estimator != "count" else None,
        "validated_share_error": {"encoder": "m", "mean_abs_error": 0.03, "abs_error": {k: 0.03 for k in LABELS}}},
        "tasks": {"rte": {"shares": {k: v for k in LABELS}, "ci95": ci, "ci95_parts": {"examples": ci}}}}


def test_two_encoders_whose_default_estimators_differ_are_both_counted(tiny_bert, glue_dir, tmp_path):
    # The shipped classifier's default for MiniLM is adjusted; for a family it never saw (a tiny random BERT), count.
    from repo import REPO

    from patterncnn.census.run import run_censuses
    from patterncnn.shares.estimate import default_estimator

    clf = OnnxClassifier(REPO / "models" / "patterncnn.onnx")
    split = [load_split("rte", "dev", glue_dir, limit=3, seed=0)]
    runs = list(run_censuses(["minilm", str(tiny_bert)], split, clf, tmp_path / "two", limit=3, seed=0))
    tags = [enc.tag for enc, _, _ in runs]
    assert [default_estimator(clf.metadata, t) for t in tags] == ["adjusted", "count"]
    for _, _, result in runs:
        assert result["estimator"]["name"] == "count"
        assert result["estimator"]["chosen_by"] == (f"the compared encoders' defaults differ ({tags[0]} adjusted, "
                                                    f"{tags[1]} count): count for both")
    text, _ = compare(runs[0][2], runs[1][2])
    assert "A used the" not in text and "*  the 95% intervals" in text  # one estimator: the checks are made
    # asked for, the estimator is used as given, for both
    runs = list(run_censuses(["minilm", str(tiny_bert)], split, clf, tmp_path / "given", limit=3, seed=0,
                             estimator="adjusted"))
    assert [(r["estimator"]["name"], r["estimator"]["chosen_by"]) for _, _, r in runs] == [("adjusted", "given")] * 2
    # three encoders (a grid, nothing compared) each keep their own default
    from types import SimpleNamespace

    from patterncnn.census.run import same_estimator

    assert same_estimator(clf, [SimpleNamespace(tag=t) for t in (*tags, "mpnet-78c0197b")], None) == {}
    # alone, MiniLM keeps its own default
    ((_, _, alone),) = run_censuses(["minilm"], split, clf, tmp_path / "one", limit=3, seed=0)
    assert alone["estimator"]["name"] == "adjusted"


def test_a_census_of_two_encoders_stopped_after_the_first_resumes_past_it(tiny_bert, tiny_mpnet, tiny_classifier,
                                                                          glue_dir, tmp_path, caplog):
    # Found by a review: the first encoder's finished census.json made the same command refuse (--overwrite).
    from patterncnn.census.run import run_censuses

    clf = OnnxClassifier(tiny_classifier[1])
    split = [load_split("rte", "dev", glue_dir, limit=70, seed=0)]
    models, out = [str(tiny_bert), str(tiny_mpnet)], tmp_path / "two"
    runs = run_censuses(models, split, clf, out, limit=70, seed=0, progress=Boom(70 + 66))
    with pytest.raises(KeyboardInterrupt):  # the first census finishes; the second stops after its first window
        for _ in runs:
            pass
    (first,) = [p for p in out.iterdir() if (p / "census.json").is_file()]
    before = (first / "census.json").read_bytes()
    with caplog.at_level("WARNING"):
        again = list(run_censuses(models, split, clf, out, limit=70, seed=0))
    assert (first / "census.json").read_bytes() == before and "kept the finished census" in caplog.text
    whole = list(run_censuses(models, split, clf, tmp_path / "whole", limit=70, seed=0))
    assert [r["tasks"]["rte"]["counts"] for _, _, r in again] == [r["tasks"]["rte"]["counts"] for _, _, r in whole]
    # other arguments are not taken for the finished census: refused, as before
    with pytest.raises(OutputError, match="already holds census.json"):
        list(run_censuses(models, split, clf, out, limit=60, seed=0))


def test_a_census_of_two_encoders_stopped_between_them_says_the_first_is_kept(tiny_bert, tiny_mpnet, tiny_classifier,
                                                                              glue_dir, tmp_path, monkeypatch, capsys,
                                                                              caplog):
    # Stopped after the first census was written and before the second's first window: nothing of the second is
    # saved, but the first is, and the same command keeps it (it said "nothing is saved ... from the beginning").
    from patterncnn.cli import census as census_cli

    out = tmp_path / "two"
    args = ["census", "--task", "rte", "--limit", "70", "--seed", "0", "--model", str(tiny_bert), "--model",
            str(tiny_mpnet), "--glue-dir", str(glue_dir), "--classifier", str(tiny_classifier[1]), "--out", str(out)]
    monkeypatch.setattr(census_cli, "progress", lambda: Boom(70))  # the first's 70 examples, then the second's batch
    assert main(args) == 130
    err = capsys.readouterr().err
    (first,) = [p for p in out.iterdir() if (p / "census.json").is_file()]
    assert "nothing is saved" not in err and "no windows of the rest had finished" in err, err
    assert "(it keeps the finished census of " in err and f" in {first})" in err, err
    assert not list(out.glob("*/.work/*/window-*.npz"))  # indeed no window of the second
    monkeypatch.setattr(census_cli, "progress", lambda: None)
    with caplog.at_level("WARNING"):
        assert main(args) == 0
    assert "kept the finished census" in caplog.text and "; --overwrite recomputes it" in caplog.text
    assert len(list(out.glob("*/census.json"))) == 2
    # with --overwrite the same command recomputes it: the message says so (the second review)
    monkeypatch.setattr(census_cli, "progress", lambda: Boom(70))
    assert main([*args, "--overwrite"]) == 130
    assert "(without --overwrite it keeps the finished census of " in capsys.readouterr().err


def test_threads_bound_torch_too_while_the_census_runs_and_are_restored_after(tiny_bert, tiny_classifier, glue_dir,
                                                                             tmp_path, monkeypatch):
    """--threads said "onnxruntime (and torch) threads", and torch ran on its default, every core, in the local
    census's encoder (helper 104's review)."""
    import torch

    import patterncnn.census.run as run_mod

    seen, real = [], run_mod.load_encoder

    def recording(*a, **kw):  # the encoder, its forward passes noting torch's thread count
        enc = real(*a, **kw)
        forward = enc.model.forward
        enc.model.forward = lambda *x, **y: (seen.append(torch.get_num_threads()), forward(*x, **y))[1]
        return enc

    monkeypatch.setattr(run_mod, "load_encoder", recording)
    before = torch.get_num_threads()
    torch.set_num_threads(2)
    try:
        split = load_split("rte", "dev", glue_dir, limit=4, seed=1)
        runs = run_mod.run_censuses([str(tiny_bert)], [split], OnnxClassifier(tiny_classifier[1]), tmp_path / "c",
                                    limit=4, seed=1, max_length=48, threads=1, backend="torch")
        result = next(runs)[2]
        assert result["tasks"]["rte"]["examples"] == 4 and seen and set(seen) == {1}
        runs.close()
        assert torch.get_num_threads() == 2  # the caller's setting, back
    finally:
        torch.set_num_threads(before)


def test_the_census_counts_are_the_classifiers_labels_of_its_own_maps_per_layer_and_head(setup, tmp_path):
    """Every census test checked shapes, sums and self-consistency, so a census that filed labels under the wrong
    (layer, head) passed them all (helper 104's review, by a mutation). Here the saved maps are classified again, one
    by one, and counted per layer and head."""
    from collections import Counter

    _, _, glue = setup
    enc, clf = load_encoder("minilm", max_length=48), OnnxClassifier()  # real maps and classifier: the heads differ
    split = load_split("rte", "dev", glue, limit=4, seed=3)
    res = run_census(enc, clf, [split], tmp_path / "c", limit=4, seed=3, save_maps=True)["tasks"]["rte"]
    store = MapStore(tmp_path / "c" / "maps" / "rte")
    per_head, total = {}, Counter()
    for meta in store.meta:
        arr, errors, _ = store.input_of(meta)
        assert not errors
        label = str(clf.classify(arr, seps=meta["seps"]).labels)
        per_head.setdefault((meta["layer"], meta["head"]), Counter())[label] += 1
        total[label] += 1
    assert res["counts"] == {k: total[k] for k in LABELS}
    heads = {(layer, head): h["shares"] for layer, row in enumerate(res["heads"]) for head, h in enumerate(row)}
    assert heads.keys() == per_head.keys()
    for cell, counts in per_head.items():
        assert heads[cell] == {k: round(counts[k] / 4, 4) for k in LABELS}, cell
    assert len({tuple(sorted(c.items())) for c in per_head.values()}) > 1  # the heads differ: a swap would show


def test_a_finished_census_of_another_calibration_scope_is_not_kept_as_this_ones(tiny_bert, glue_dir, tmp_path):
    """A several-model census rerun kept an encoder's finished census when its estimator's name matched, whatever
    calibration scope it had; one name, two calibrations give other shares (helper 105's review)."""
    from patterncnn.census.run import finished_earlier

    enc, clf = load_encoder(str(tiny_bert), max_length=48), OnnxClassifier()
    split = load_split("rte", "dev", glue_dir, limit=4, seed=1)
    run_census(enc, clf, [split], tmp_path / "c", limit=4, seed=1, estimator="adjusted", scope="uniform")
    same = dict(limit=4, seed=1, estimator="adjusted")
    assert finished_earlier(tmp_path / "c", enc, clf, [split], scope="uniform", **same) is not None
    assert finished_earlier(tmp_path / "c", enc, clf, [split], **same) is None  # planned: the pooled scope, not uniform


def test_a_map_store_is_kept_whatever_the_encoder_path_spelling(tmp_path):
    # the same folder given as a relative and an absolute path: its saved maps are this census's (they were replaced
    # and computed again); other weights are still another census's
    from patterncnn.census.run import census_store
    from patterncnn.core.maps import MapStore

    def info(path, sha="ab" * 32):
        return {"model": {"model": path, "path": path, "sha256": sha, "tokenizer": "t"}, "max_length": 128,
                "seed": 0, "limit": None, "order": "file", "tasks": {"rte": {"source": "RTE/dev.tsv"}}}

    MapStore.create(tmp_path / "maps", info=info("runs/ft"))
    (tmp_path / "maps" / "part-00000.jsonl").write_text("")  # what replacing the store removes
    census_store(tmp_path / "maps", info("ft"))  # as public_fingerprint records /abs/runs/ft
    assert (tmp_path / "maps" / "part-00000.jsonl").exists()
    census_store(tmp_path / "maps", info("ft", sha="cd" * 32))
    assert not (tmp_path / "maps" / "part-00000.jsonl").exists()


def test_a_heads_majority_share_has_its_interval_over_the_examples():
    # per-head shares had no interval (an item left open since stop 60, F9): a head's majority share gets its Wilson
    # 95% interval over the examples, and `clear` says whether the examples could overturn it
    from patterncnn.census.run import summarize
    from patterncnn.shares.estimate import wilson

    assert wilson(0.5, 100) == pytest.approx((0.4038, 0.5962), abs=1e-4)  # the textbook values
    assert wilson(0.0, 10) == pytest.approx((0.0, 0.2775), abs=1e-4)
    labels = np.zeros((40, 2), dtype=np.uint8)  # head 0: vertical on all 40 examples
    labels[:19, 1] = 1  # head 1: diagonal on 19, vertical on 21: a majority the examples could overturn
    first, second = summarize(labels, 1, 2)["heads"][0]
    assert first["majority_ci95"] == pytest.approx([0.9124, 1.0], abs=1e-4) and first["clear"] is True
    assert second["majority"] == "vertical" and second["majority_share"] == 0.525 and second["clear"] is False
    assert second["majority_ci95"] == pytest.approx(list(wilson(0.525, 40)), abs=1e-4)
