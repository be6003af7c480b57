"""`patterncnn sample` (alias `export`) end to end on excerpts of the real RTE/SST-2 dev files with the tiny BERT."""

from collections import Counter

import numpy as np
import pytest

from patterncnn.cli import main
from patterncnn.core.maps import MapStore
from patterncnn.labelling.sample import plan_samples


def test_plan_samples_stratified_and_distinct():
    rng = np.random.default_rng(0)
    triples = plan_samples(n_examples=20, num_layers=6, num_heads=12, n=50, rng=rng)
    assert len(triples) == len(set(triples)) == 50
    per_layer = Counter(layer for _, layer, _ in triples)
    assert set(per_layer) == set(range(6)) and max(per_layer.values()) - min(per_layer.values()) <= 1
    # Small splits: more maps than examples still works, triples stay distinct.
    assert len(set(plan_samples(2, 2, 2, 8, np.random.default_rng(1)))) == 8
    with pytest.raises(ValueError, match="exceeds"):
        plan_samples(2, 2, 2, 9, np.random.default_rng(1))


def test_sample_cli(tiny_bert, glue_dir, tmp_path, capsys):
    args = ["sample", "--task", "rte", "--task", "SST-2", "--per-task", "7", "--model", str(tiny_bert),
            "--glue-dir", str(glue_dir), "--seed", "3"]
    assert main(args + ["--out", str(tmp_path / "a")]) == 0
    assert "wrote 14 maps" in capsys.readouterr().out
    store = MapStore(tmp_path / "a")
    assert len(store) == 14
    assert store.header["model"]["sha256"] and store.header["seed"] == 3
    for task in ("rte", "sst2"):
        metas = [m for m in store.meta if m["task"] == task]
        assert len(metas) == 7
        assert {m["layer"] for m in metas} == {0, 1, 2}  # every layer of the 3-layer model
    for meta, arr in store:
        assert arr.shape == (meta["T"], meta["T"]) == (len(meta["tokens"]),) * 2
        np.testing.assert_allclose(arr.sum(1), 1.0, atol=1e-5)
        assert meta["model_sha256"] and meta["split"] == "dev"
        assert (tmp_path / "a" / "png" / f"{meta['id']}.png").read_bytes()[:4] == b"\x89PNG"
    # Each stored map is the encoder's map of the example, layer and head its id names (a sample that stored layer 0,
    # head 0 for every map passed the lines above: helper 100's review).
    from patterncnn.core.glue import load_split
    from patterncnn.encoders.load import load_encoder

    enc = load_encoder(str(tiny_bert))
    for task in ("rte", "sst2"):
        examples = {ex.index: ex for ex in load_split(task, "dev", glue_dir).examples}
        for meta in (m for m in store.meta if m["task"] == task):
            ea = next(enc.iter_attentions([examples[meta["example"]]]))
            assert meta["id"].endswith(f"_{meta['example']:05d}_L{meta['layer']:02d}_H{meta['head']:02d}")
            np.testing.assert_allclose(store.get(meta["id"]), ea.maps[meta["layer"], meta["head"]], atol=1e-6)
            assert meta["tokens"] == ea.tokens and meta["seps"] == ea.seps
    # Same seed, same sample.
    assert main(args + ["--out", str(tmp_path / "b"), "--no-png"]) == 0
    assert MapStore(tmp_path / "b").ids == store.ids
    np.testing.assert_array_equal(MapStore(tmp_path / "b").get(store.ids[0]), store.get(store.ids[0]))


def test_sample_errors(tiny_bert, glue_dir, tmp_path, capsys):
    base = ["sample", "--per-task", "2", "--model", str(tiny_bert), "--glue-dir", str(glue_dir)]
    assert main(base + ["--task", "nope", "--out", str(tmp_path / "x")]) == 2
    assert "valid tasks are: cola, sst2" in capsys.readouterr().err
    assert main(base + ["--task", "rte", "--out", str(tmp_path / "y")]) == 0
    assert main(base + ["--task", "rte", "--out", str(tmp_path / "y")]) == 2
    assert "already holds store.json; pass --overwrite" in capsys.readouterr().err
    assert main(base + ["--task", "rte", "--out", str(tmp_path / "y"), "--overwrite", "--no-png"]) == 0
    assert not (tmp_path / "y" / "png").exists() and len(list((tmp_path / "y").glob("part-*.npz"))) == 1
    assert main(base + ["--task", "qnli", "--split", "train", "--out", str(tmp_path / "z")]) == 2
    assert "has no QNLI/train.tsv" in capsys.readouterr().err
    assert main(["sample", "--task", "rte", "--per-task", "2", "--model", str(tmp_path), "--glue-dir",
                 str(glue_dir), "--out", str(tmp_path / "w")]) == 2
    assert "has no config.json, so it is not a Hugging Face model folder" in capsys.readouterr().err


def test_a_refused_or_interrupted_sample_leaves_no_store_and_the_rerun_works(tiny_bert, glue_dir, tmp_path,
                                                                             capsys, caplog, monkeypatch):
    from patterncnn.labelling import sample as sample_mod

    base = ["sample", "--task", "rte", "--task", "sst2", "--model", str(tiny_bert), "--glue-dir", str(glue_dir)]
    out = tmp_path / "s"
    with pytest.raises(SystemExit) as e:  # argparse: before anything loads
        main(base + ["--per-task", "0", "--out", str(out)])
    assert e.value.code == 2 and "--per-task: must be a whole number" in capsys.readouterr().err and not out.exists()
    assert main(base + ["--per-task", "100000", "--out", str(out)]) == 2  # more maps than the split has
    assert "exceeds" in capsys.readouterr().err and not (out / "store.json").exists()
    real = sample_mod.render_png
    calls = []

    def interrupt_on_second_task(arr, tokens, seps, **kw):  # the first task's maps and PNGs are written by now
        if "_sst2_" in kw["title"]:
            raise KeyboardInterrupt
        calls.append(kw["title"])
        return real(arr, tokens, seps, **kw)

    monkeypatch.setattr(sample_mod, "render_png", interrupt_on_second_task)
    caplog.clear()
    assert main(base + ["--per-task", "3", "--out", str(out)]) == 130
    assert "interrupted" in capsys.readouterr().err
    assert any("unfinished map store in" in r.getMessage() for r in caplog.records)  # the CLI's log says it
    assert len(calls) == 3 and not (out / "store.json").exists()  # rte was written, then all of it removed
    assert not out.exists()  # nor the folders it made (png/, then --out itself)
    mine = tmp_path / "mine"  # a folder the user made stays, with what was in it
    mine.mkdir()
    (mine / "notes.txt").write_text("keep")
    assert main(base + ["--per-task", "3", "--out", str(mine)]) == 130
    assert sorted(p.name for p in mine.iterdir()) == ["notes.txt"]
    monkeypatch.setattr(sample_mod, "render_png", real)
    assert main(base + ["--per-task", "3", "--out", str(out)]) == 0  # the same command again: a whole store
    assert len(MapStore(out)) == 6 and len(list((out / "png").glob("*.png"))) == 6
    stray = tmp_path / "stray"  # parts without a header are not taken in (nor removed by a failed sample)
    stray.mkdir()
    (stray / "part-00000.jsonl").write_text("")
    assert main(base + ["--per-task", "3", "--out", str(stray)]) == 2
    assert "but no store.json: a damaged store" in capsys.readouterr().err
    assert (stray / "part-00000.jsonl").exists()


@pytest.mark.parametrize("signum", ["SIGINT", "SIGTERM"])
def test_a_signal_during_a_picture_stops_the_sample_and_removes_it(tiny_bert, glue_dir, tmp_path, capsys,
                                                                     monkeypatch, signum, ctrl_c):
    # Helper 100's review: Ctrl-C raised inside one of matplotlib's weakref callbacks was printed and dropped, and
    # the sample ran on to the end (exit 0); a time limit's SIGTERM killed it, leaving half a store that read as whole.
    import os
    import signal
    import weakref

    from patterncnn.labelling import sample as sample_mod

    real, calls = sample_mod.render_png, []

    class Figure:  # stands for matplotlib's objects, whose weakref callbacks run as a figure is dropped
        pass

    def signalled_in_a_callback(arr, tokens, seps, **kw):
        calls.append(kw["title"])
        if len(calls) == 2:
            fig = Figure()
            ref = weakref.ref(fig, lambda r: os.kill(os.getpid(), getattr(signal, signum)))
            del fig  # the callback runs here, and the signal with it
            assert ref() is None
        return real(arr, tokens, seps, **kw)

    monkeypatch.setattr(sample_mod, "render_png", signalled_in_a_callback)
    out = tmp_path / "s"
    before = signal.signal(signal.SIGTERM, signal.SIG_DFL)  # a fresh process's (an earlier test's Ray leaves its own)
    try:
        assert main(["sample", "--task", "rte", "--task", "sst2", "--model", str(tiny_bert), "--glue-dir",
                     str(glue_dir), "--per-task", "3", "--out", str(out)]) == 130
        assert signal.getsignal(signal.SIGTERM) == signal.SIG_DFL  # main puts the handler back
    finally:
        signal.signal(signal.SIGTERM, before)
    assert "interrupted" in capsys.readouterr().err
    assert len(calls) == 2 and not out.exists()  # stopped after the picture it came in, and all of it removed


def test_a_task_given_twice_is_refused_before_any_work(tiny_bert, glue_dir, tmp_path, capsys):
    assert main(["sample", "--task", "rte", "--task", "RTE", "--model", str(tiny_bert / "nowhere"), "--glue-dir",
                 str(glue_dir), "--out", str(tmp_path / "s")]) == 2  # refused before the encoder would fail to load
    assert "--task rte is given twice" in capsys.readouterr().err and not (tmp_path / "s").exists()


@pytest.mark.parametrize("command", ["sample", "finetune"])
def test_help(command, capsys):
    with pytest.raises(SystemExit) as e:
        main([command, "--help"])
    assert e.value.code == 0 and "usage: patterncnn" in capsys.readouterr().out


def test_uniform_samples_cover_all_triples_evenly():
    from patterncnn.labelling.sample import uniform_samples

    triples = uniform_samples(n_examples=50, num_layers=4, num_heads=3, n=600, rng=np.random.default_rng(0))
    assert len(set(triples)) == 600 and all(0 <= e < 50 and 0 <= l < 4 and 0 <= h < 3 for e, l, h in triples)
    # Without stratification each layer's count is hypergeometric around 150 (sd ~ 9.5): not dealt out evenly.
    per_layer = Counter(l for _, l, _ in triples)
    assert all(115 < c < 185 for c in per_layer.values())
    assert len(uniform_samples(2, 2, 2, 8, np.random.default_rng(1))) == 8  # all of them
    with pytest.raises(ValueError, match="exceeds"):
        uniform_samples(2, 2, 2, 9, np.random.default_rng(1))


def test_sample_records_its_design(tiny_bert, glue_dir, tmp_path):
    args = ["sample", "--task", "rte", "--per-task", "5", "--model", str(tiny_bert), "--glue-dir", str(glue_dir),
            "--no-png", "--design", "uniform", "--out", str(tmp_path / "u")]
    assert main(args) == 0
    store = MapStore(tmp_path / "u")
    assert store.header["design"] == "uniform" and {m["sampling"] for m in store.meta} == {"uniform"}
    assert all(set(m) >= {"id", "model", "task", "example", "layer", "head", "tokens", "seps", "texts"}
               for m in store.meta)


@pytest.mark.parametrize("design", ["stratified", "uniform"])
def test_excluded_maps_are_drawn_again_and_nothing_else_moves(design):
    from patterncnn.labelling.sample import DESIGNS

    draw = DESIGNS[design]
    first = draw(30, 4, 3, 40, np.random.default_rng(5))
    assert draw(30, 4, 3, 40, np.random.default_rng(5), exclude=set()) == first  # no exclusion: the seed's sample
    excluded = set(first[::4])  # ten of them are labelled already
    again = draw(30, 4, 3, 40, np.random.default_rng(5), exclude=excluded)
    assert len(again) == len(set(again)) == 40 and not set(again) & excluded
    if design == "uniform":  # the draws that were not excluded stay where they were
        assert [t for t in again if t in set(first)] == [t for t in first if t not in excluded]
    else:  # still every layer dealt out evenly
        assert Counter(layer for _, layer, _ in again) == Counter(layer for _, layer, _ in first)
    with pytest.raises(ValueError, match="not labelled yet"):
        draw(2, 2, 2, 8, np.random.default_rng(1), exclude={(0, 0, 0)})


def test_sample_says_which_maps_are_labelled_and_skips_them(tiny_bert, glue_dir, tmp_path, capsys):
    args = ["sample", "--task", "rte", "--per-task", "12", "--model", str(tiny_bert), "--glue-dir", str(glue_dir),
            "--no-png", "--seed", "4"]
    assert main(args + ["--out", str(tmp_path / "a")]) == 0
    first = MapStore(tmp_path / "a").ids
    labelled = tmp_path / "set"  # a labelled set holding three of those maps (and one unresolved tie, not labelled)
    labelled.mkdir()
    (labelled / "labels.csv").write_text("map_id,label,resolution\n" + "".join(f"{m},vertical,\n" for m in first[:3])
                                         + f"{first[3]},,unresolved\n")
    capsys.readouterr()
    assert main(args + ["--labelled-set", str(labelled), "--out", str(tmp_path / "b")]) == 0
    out = capsys.readouterr().out
    assert f"note: 3 of these maps are already labelled in {labelled} (e.g. {first[0]})" in out
    assert "--skip-labelled" in out and MapStore(tmp_path / "b").ids == first  # reported, still drawn
    (labelled / "labels.csv").write_text(f"map_id,label\n{first[0]},vertical\n")  # one map: "is", not "are"
    assert main(args + ["--labelled-set", str(labelled), "--out", str(tmp_path / "b1")]) == 0
    assert f"note: 1 of these maps is already labelled in {labelled} (e.g. {first[0]})" in capsys.readouterr().out
    (labelled / "labels.csv").write_text("map_id,label,resolution\n" + "".join(f"{m},vertical,\n" for m in first[:3])
                                         + f"{first[3]},,unresolved\n")
    assert main(args + ["--labelled-set", str(labelled), "--skip-labelled", "--out", str(tmp_path / "c")]) == 0
    assert f"none of these maps is labelled in {labelled} yet" in capsys.readouterr().out
    skipped = MapStore(tmp_path / "c").ids
    assert len(skipped) == 12 and not set(skipped) & set(first[:3]) and first[3] in skipped
    assert main(args + ["--labelled-set", str(tmp_path / "nothing"), "--out", str(tmp_path / "d")]) == 2
    assert "labels.csv not found" in capsys.readouterr().err
