"""`patterncnn train` end to end on a tiny labelled set: artifacts, metrics, model card, ONNX == checkpoint."""

import json

import numpy as np
import pytest
from synthetic import pattern_map

from patterncnn.classifier.model import load_checkpoint
from patterncnn.classifier.onnx import OnnxClassifier
from patterncnn.cli import main
from patterncnn.core.labels import LABELS


def test_train_writes_consistent_artifacts_and_card(labelled_set, tmp_path, capsys):
    import csv
    import shutil

    labelled_set = shutil.copytree(labelled_set, tmp_path / "labelled")  # ten labels made under guide 1.1
    with open(labelled_set / "labels.csv") as f:
        rows = list(csv.DictReader(f))
    with open(labelled_set / "labels.csv", "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=[*rows[0], "guide"])
        w.writeheader()
        w.writerows({**r, "guide": "1.1" if k < 10 else "1.0"} for k, r in enumerate(rows))
    out = tmp_path / "models"
    rc = main(["train", "--annotations", str(labelled_set), "--out", str(out), "--folds", "3", "--max-epochs", "4",
               "--members", "2", "--loeo-seeds", "1"])
    assert rc == 0
    printed = capsys.readouterr().out
    assert "60 maps, 3-fold grouped CV: macro-F1" in printed and "baseline features+logreg" in printed
    assert "share estimators not validated" in printed
    for name in ("patterncnn.pt", "patterncnn.onnx", "metrics.json", "README.md"):
        assert (out / name).is_file(), name
    m = json.loads((out / "metrics.json").read_text())
    assert m["data"]["maps"] == 60 and m["data"]["labels"] == {name: 12 for name in LABELS}
    assert m["data"]["guides"] == {"1.0": 50, "1.1": 10}  # the guide version behind each label
    assert m["conv_layers"] == 8 and m["train_config"]["folds"] == 3 and m["model_config"]["members"] == 2
    assert len(m["cv"]["best_epochs"]) == 3 * 2  # one per member per fold
    assert sum(sum(row) for row in m["cv"]["confusion_matrix"]) == 60  # every map scored out of fold once
    assert m["onnx_parity_max_abs_diff"] < 1e-4

    card = (out / "README.md").read_text()
    assert f"**Macro-F1 {m['cv']['macro_f1']:.3f}**" in card
    assert f"60 maps labelled by eye in Label Studio (`{labelled_set}`" in card
    assert "marked uncertain; annotation guide 1.0 for 50, 1.1 for 10." in card
    assert "$" not in card.replace("$$", "")  # every template field was filled
    assert "the mean of 2 such CNNs' probabilities" in card
    assert m["validation"] is None and "**Not validated.**" in card  # no uniformly drawn maps in this set
    assert len(m["calibration"]["rows"]["ids"]) == 60 and f"T = {m['calibration']['temperature']:.2f}" in card

    model, ckpt = load_checkpoint(out / "patterncnn.pt")
    clf = OnnxClassifier(out / "patterncnn.onnx")
    assert ckpt["data_hash"] == m["data"]["data_hash"] == clf.metadata["data_hash"]
    maps = [pattern_map(kind, 14, 6, seed=900 + k) for k, kind in enumerate(LABELS)]
    probs = clf.predict(maps, [[6, 13]] * len(maps))
    assert probs.shape == (5, 5) and np.allclose(probs.sum(1), 1, atol=1e-5)
    # the two files on disk are one classifier: the checkpoint's CNN gives the ONNX's probabilities
    import torch

    x = clf.prepare(np.stack(maps), [[6, 13]] * len(maps))
    with torch.inference_mode():
        torch_probs = torch.softmax(model.eval()(x), dim=1).numpy()
    np.testing.assert_allclose(clf.run(x), torch_probs, atol=1e-5)


def test_train_refuses_a_readme_and_a_damaged_votes_csv_before_any_fold_and_warns_of_an_empty_class(tmp_path, capsys,
                                                                                                     caplog):
    # Helper 99's review: a README.md in --out (the user's notes, a labelled set's datasheet) was replaced by the
    # model card without --overwrite; a damaged votes.csv was refused after the whole cross-validation; a set
    # without block trained without a word, its classifier never able to count block.
    import csv

    from synthetic import family_set

    root = family_set(tmp_path / "set", per_class=4)
    with open(root / "labels.csv") as f:
        rows = [r for r in csv.DictReader(f) if r["label"] != "block"]
    with open(root / "labels.csv", "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)
    out = tmp_path / "notes"
    out.mkdir()
    (out / "README.md").write_text("# my notes\n")
    args = ["train", "--annotations", str(root), "--folds", "3", "--max-epochs", "1", "--loeo-seeds", "1"]
    assert main([*args, "--out", str(out)]) == 2
    assert "README.md" in capsys.readouterr().err and (out / "README.md").read_text() == "# my notes\n"
    with open(root / "votes.csv", "a") as f:
        f.write("broken,row\n")
    caplog.clear()
    assert main([*args, "--out", str(tmp_path / "m")]) == 2
    assert "votes.csv" in capsys.readouterr().err
    assert "no map labelled block: the classifier never learns it" in caplog.text
    assert not list((tmp_path / "m").glob(".work/train/*"))  # refused before the first fold


def test_train_refuses_a_folder_without_labels(tmp_path, capsys):
    assert main(["train", "--annotations", str(tmp_path), "--out", str(tmp_path / "m")]) == 2
    assert "labels.csv not found" in capsys.readouterr().err


@pytest.mark.parametrize("command, option, value, fix", [
    ("train", "--max-epochs", "0", "at least 1"), ("train", "--max-epochs", "-2", "at least 1"),
    ("train", "--grid", "0", "at least 1"), ("train", "--folds", "1", "at least 2"),
    ("train", "--members", "0", "at least 1"), ("train", "--loeo-max-epochs", "0", "at least 1"),
    ("train", "--loeo-seeds", "0", "at least 1"), ("train", "--seed", "-1", "from 0 to 4294967295"),
    ("train", "--class-weight-power", "nan", "at least 0"), ("pretrain", "--grid", "0", "at least 1"),
    ("pretrain", "--seed", "-1", "from 0 to 4294967295")])
def test_train_and_pretrain_refuse_numbers_that_cannot_train_before_anything_runs(command, option, value, fix,
                                                                                  tmp_path, capsys):
    out = tmp_path / ("m" if command == "train" else "p.pt")
    small = (["--annotations", str(eight_maps(tmp_path.parent / f"{tmp_path.name}-set", ["vertical"] * 8)),
              "--max-epochs", "1", "--no-soft-labels", "--no-leave-one-encoder-out"] if command == "train" else
             ["--maps", "64", "--batch-size", "32", "--max-t", "16"])  # kept short should the option pass
    with pytest.raises(SystemExit) as e:  # argparse: not an internal error after the first fold began
        main([command, *small, "--out", str(out), option, value])
    err = capsys.readouterr().err
    assert e.value.code == 2 and f"argument {option}: must be a " in err and f" {fix} (got '{value}')" in err
    assert err.count("\n") == 1 and not out.exists() and not list(tmp_path.iterdir())


def eight_maps(root, kinds):
    """A labelled set of one map per kind, each of its own input example."""
    from synthetic import write_labelled_set

    recs = [({"id": f"m_{i:02d}", "task": "rte", "split": "dev", "example": i, "layer": 0, "head": 0, "T": 14,
              "seps": [6, 13]}, pattern_map(kind, 14, 6, seed=i)) for i, kind in enumerate(kinds)]
    rows = [{"map_id": f"m_{i:02d}", "label": kind, "uncertain": "False"} for i, kind in enumerate(kinds)]
    root.mkdir()
    return write_labelled_set(root, recs, rows)


def test_train_on_eight_maps_names_the_smallest_class_and_the_folds(tmp_path, capsys):
    two = eight_maps(tmp_path / "two", ["vertical"] * 3 + ["diagonal"] * 3 + ["heterogeneous"] * 2)
    assert main(["train", "--annotations", str(two), "--out", str(tmp_path / "m"), "--folds", "3"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "n_splits" not in err  # one line of ours, not scikit-learn's
    assert "the smallest class, heterogeneous, has 2 map(s): it allows at most --folds 2" in err and "not 3" in err
    one = eight_maps(tmp_path / "one", ["vertical"] * 3 + ["diagonal"] * 2 + ["heterogeneous"] * 2 + ["block"])
    assert main(["train", "--annotations", str(one), "--out", str(tmp_path / "m"), "--folds", "3"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "the smallest class, block, has 1 map(s): it allows no cross-validation" in err
    assert not (tmp_path / "m").exists()


@pytest.mark.slow
def test_a_stopped_train_keeps_its_finished_folds_and_resumes_to_the_same_model(labelled_set, tmp_path, capsys,
                                                                                monkeypatch):
    """Interrupted in its third fold, train keeps the two finished ones; run again, it fits only what is left and
    writes the model an uninterrupted run writes, bit for bit. A tie left unresolved is left out, and said."""
    import csv
    import shutil

    from synthetic import pattern_map

    import patterncnn.training.fit as fit
    from patterncnn.core.maps import MapStore

    data = tmp_path / "set"
    shutil.copytree(labelled_set, data)
    MapStore(data / "maps").append([({"id": "m_tie", "task": "rte", "split": "dev", "example": 999, "layer": 0,
                                      "head": 0, "T": 12, "seps": [5, 11]}, pattern_map("vertical", 12, 5))])
    rows = list(csv.DictReader(open(data / "labels.csv", encoding="utf-8")))
    with open(data / "labels.csv", "w", newline="") as f:  # and a map whose two annotators tied, left open
        w = csv.DictWriter(f, fieldnames=[*rows[0], "resolution"])
        w.writeheader()
        w.writerows([*({**r, "resolution": "majority"} for r in rows),
                     {"map_id": "m_tie", "label": "", "uncertain": "False", "resolution": "unresolved"}])
    args = ["train", "--annotations", str(data), "--folds", "3", "--max-epochs", "2", "--no-soft-labels",
            "--no-leave-one-encoder-out"]
    assert main([*args, "--out", str(tmp_path / "whole")]) == 0
    said = capsys.readouterr()
    assert "left out 1 map(s) whose annotators tied" in said.out
    assert "get one more annotator per task (`patterncnn annotate annotators --project P --per-task N`, N one more " \
           "than the annotators who tied) and pull again" in said.out and "a third annotator" not in said.out
    for bar in ("CV area-16 fold 1/3", "CV area-16 fold 3/3", "final fit on 60 maps"):  # tqdm, on stderr
        assert bar in said.err
    assert not (tmp_path / "whole" / ".work").exists()  # finished: nothing left behind

    real, calls = fit.fit_members, []

    def stop_in_the_third_fold(*a, **kw):
        calls.append(kw.get("seed"))
        if len(calls) == 3:
            raise KeyboardInterrupt
        return real(*a, **kw)

    monkeypatch.setattr(fit, "fit_members", stop_in_the_third_fold)
    out = tmp_path / "resumed"
    assert main([*args, "--out", str(out)]) == 130
    err = capsys.readouterr().err
    assert f"finished folds and fits (in .work/train) are saved under {out}" in err
    assert "\npatterncnn train: interrupted" in err  # the bar was closed first: the message is a line of its own
    assert len(list((out / ".work" / "train").glob("cv-*.npz"))) == 2 and not (out / "patterncnn.onnx").exists()
    calls.clear()
    assert main([*args, "--out", str(out)]) == 0
    assert calls == [2, 0]  # the third fold (seed 0 + 2) and the final fit: the first two folds were read back
    assert "fold 2 resumed" in capsys.readouterr().err
    assert (out / "patterncnn.onnx").read_bytes() == (tmp_path / "whole" / "patterncnn.onnx").read_bytes()
    assert (out / "patterncnn.pt").read_bytes() != b""

    def numbers(path):  # every figure but the run times
        m = json.loads(path.read_text())
        m.pop("seconds"), m["cv"].pop("seconds")
        return m

    assert numbers(out / "metrics.json") == numbers(tmp_path / "whole" / "metrics.json")
    assert not (out / ".work").exists()


def test_a_resumable_part_is_keyed_by_the_maps_separators_and_input_examples_too(labelled_set):
    """The CNN reads a map's separators and the folds group by its input example; both come from the map's
    metadata, not its values, so a part fitted under other metadata must not be read back as this one's."""
    import dataclasses

    from patterncnn.classifier.model import CNNConfig
    from patterncnn.core.work import run_key
    from patterncnn.labelling.sets import load_labelled
    from patterncnn.training.fit import TrainConfig, inputs

    data = load_labelled(labelled_set)
    cfg, tcfg = CNNConfig(), TrainConfig()
    key = run_key(inputs(data, cfg, tcfg, fold=0))
    assert run_key(inputs(load_labelled(labelled_set), cfg, tcfg, fold=0)) == key  # the same set: the same key
    seps = [list(s) if s else s for s in data.seps]
    seps[0] = [] if seps[0] else [1]
    other_seps = dataclasses.replace(data, seps=seps)
    other_groups = dataclasses.replace(data, groups=np.roll(data.groups, 1))
    assert other_seps.data_hash == other_groups.data_hash == data.data_hash
    assert run_key(inputs(other_seps, cfg, tcfg, fold=0)) != key
    assert run_key(inputs(other_groups, cfg, tcfg, fold=0)) != key


@pytest.mark.parametrize("stop", [KeyboardInterrupt, RuntimeError])
def test_a_train_stopped_in_its_first_fold_leaves_no_work_folder(labelled_set, tmp_path, capsys, monkeypatch, stop):
    """Ctrl-C or a crash before any fold has finished leaves nothing in OUT: no empty .work/train to puzzle over."""
    import patterncnn.training.fit as fit

    def stop_at_once(*a, **kw):
        raise stop("stopped in the first fold")

    monkeypatch.setattr(fit, "fit_members", stop_at_once)
    out = tmp_path / "m"
    code = main(["train", "--annotations", str(labelled_set), "--out", str(out), "--folds", "3", "--max-epochs", "1",
                 "--no-leave-one-encoder-out"])
    err = capsys.readouterr().err
    if stop is KeyboardInterrupt:
        assert code == 130 and f"no folds and fits (in .work/train) had finished, so nothing is saved under {out}" in err
    else:
        assert code == 70 and "internal error: RuntimeError: stopped in the first fold" in err
    assert not out.exists()  # the folder this command made goes too (an empty one is nothing to keep)


def test_a_damaged_map_in_the_labelled_set_is_named_not_a_crash(tmp_path, capsys):
    """The fuzz's case: a labelled set whose stored map is not a square map; train and validate name it, exit 2."""
    from synthetic import pattern_map, write_labelled_set

    recs = [({"id": f"m{i}", "task": "rte", "split": "dev", "example": i, "layer": 0, "head": 0, "T": 8,
              "seps": [3, 7]}, pattern_map("vertical", 8, 3, seed=i)) for i in range(3)]
    root = write_labelled_set(tmp_path / "set", recs, [{"map_id": f"m{i}", "label": "vertical", "uncertain": "False"}
                                                       for i in range(3)])
    (part,) = (root / "maps").glob("*.npz")  # then damaged on disk: one map that is not (T, T)
    with np.load(part) as z:
        members = {k: z[k] for k in z.files}
    members["m1"] = np.zeros(8, dtype=np.float32)
    np.savez(part, **members)
    assert main(["train", "--annotations", str(root), "--out", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err
    assert "map 'm1'" in err and "not a square 2-D map" in err and len(err.strip().splitlines()) == 1


def test_init_shipped_names_the_pretrained_cnn_installed_with_patterncnn(tmp_path, monkeypatch):
    # Helper 99's review: the documented models/pretrained-synthetic.pt exists only in a clone; an installed package
    # has it as package data, which no path the user knows reached.
    from repo import REPO

    from patterncnn.cli.train import init_checkpoint

    assert init_checkpoint("shipped") == str(REPO / "models" / "pretrained-synthetic.pt")  # this clone's, installed
    monkeypatch.chdir(tmp_path)
    (tmp_path / "shipped").write_bytes(b"")  # a file of that name is the user's: taken as the path it is
    assert init_checkpoint("shipped") == "shipped" and init_checkpoint(None) is None
