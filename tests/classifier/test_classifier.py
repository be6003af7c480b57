"""The CNN, its preprocessing, training folds, ONNX parity and `patterncnn classify`."""

import json

import numpy as np
import pytest
import torch
from synthetic import pattern_map

from patterncnn.classifier.model import CNNConfig, PatternCNN, count_conv_layers, preprocess
from patterncnn.classifier.onnx import OnnxClassifier, parity_check
from patterncnn.cli import main
from patterncnn.core.labels import LABELS
from patterncnn.labelling.sets import load_labelled
from patterncnn.training.evaluate import baselines
from patterncnn.training.fit import TrainConfig, cross_validate, folds


def test_cnn_has_exactly_eight_conv_layers_with_relu():
    model = PatternCNN(CNNConfig())
    assert count_conv_layers(model) == 8
    assert sum(isinstance(m, torch.nn.ReLU) for m in model.modules()) == 8
    assert model(torch.zeros(3, model.cfg.in_channels, 32, 32)).shape == (3, len(LABELS))
    with pytest.raises(ValueError, match="8 convolutional layers"):
        CNNConfig(widths=(8,) * 7)


@pytest.mark.parametrize("rep", ["area", "bilinear"])
@pytest.mark.parametrize("t", [5, 32, 77, 300])
def test_preprocess_shapes_and_scaling(rep, t):
    cfg = CNNConfig(grid=32, representation=rep, mass_channel=False)
    x = preprocess(torch.as_tensor(pattern_map("diagonal", t))[None], [[t // 2, t - 1]], cfg)
    assert x.shape == (1, cfg.in_channels, 32, 32) == (1, 4, 32, 32)
    assert float(x[0, 0].max()) == pytest.approx(1.0)  # scaled by the map's own maximum
    band, cols = x[0, 2], x[0, 3]
    assert float(band[16, 16]) > 0 and float(band[0, 31]) == pytest.approx(0.0, abs=1e-6)
    assert float(cols[10, 0]) > 0  # the [CLS] column
    if t >= 32:
        assert float(cols[10, 12]) == pytest.approx(0.0, abs=1e-6)
    seg = x[0, 1]
    assert float(seg[0, -1]) == pytest.approx(0.0, abs=1e-6)
    assert float(seg[0, 0]) == pytest.approx(1.0) and float(seg[-1, -1]) == pytest.approx(1.0)


def test_mass_channel_tells_concentrated_from_faint():
    """Channel 1 is log2(T * a) / 4: 0 for uniform mass, high where a row's mass piles up."""
    t = 40
    uniform = torch.full((1, t, t), 1.0 / t)
    column = torch.full((1, t, t), 0.1 / (t - 1))
    column[:, :, 0] = 0.9
    cfg = CNNConfig()
    xu, xc = preprocess(uniform, [None], cfg), preprocess(column, [None], cfg)
    assert xu.shape[1] == cfg.in_channels == 5
    # Max-scaling alone makes both maps' brightest cells 1.0; the mass channel tells them apart.
    assert float(xu[0, 0].max()) == float(xc[0, 0].max()) == pytest.approx(1.0)
    assert torch.allclose(xu[0, 1], torch.zeros(16, 16), atol=1e-5)
    assert float(xc[0, 1, :, 0].min()) > 0.75 and float(xc[0, 1, :, 5].max()) < 0
    assert CNNConfig(mass_channel=False).in_channels == 4


def test_column_channel_keeps_a_one_token_column_at_its_row_relative_strength():
    """A [CLS] column one token wide in a 96-token map (6 tokens a grid cell): the column channel holds each row's
    [CLS] cell against that row's maximum, averaged over the grid row's rows but not over the grid column's
    columns, only in the grid columns that hold a [CLS] or [SEP] column, and follows training's resampling."""
    t = 96
    a = torch.full((1, t, t), 0.1)
    a[0].fill_diagonal_(2.0)
    a[0, :, 0] = 1.0  # the [CLS] column: half of each row's maximum (the diagonal's cell)
    a[0, :, 46] = 2.0  # the first separator's column: each row's maximum
    a = a / a.sum(-1, keepdim=True)
    cfg = CNNConfig(column_channel=True)
    assert cfg.in_channels == CNNConfig().in_channels + 1
    x = preprocess(a, [[46, 95]], cfg)
    c = 1 + int(cfg.mass_channel)  # the column channel follows the mass channel (no row channel)
    col = x[0, c]
    assert x.shape == (1, cfg.in_channels, 16, 16)
    assert torch.allclose(col[:, 0], torch.full((16,), 0.5), atol=1e-6)
    assert torch.allclose(col[:, 7], torch.ones(16), atol=1e-6)  # token 46 sits in grid column 7
    # the final separator (95): faint (0.05) except in the last grid row, where row 95's own diagonal cell is it
    assert torch.allclose(col[:15, 15], torch.full((15,), 0.05), atol=1e-6)
    assert float(col[15, 15]) == pytest.approx((5 * 0.05 + 1) / 6)
    assert float(col[:, 1:7].abs().max()) == 0.0 and float(col[:, 8:15].abs().max()) == 0.0
    # resampled to 48 tokens as training's augmentation does (nearest: the even tokens): still undiluted
    r = preprocess(a, [[46, 95]], cfg, resample_to=48)[0, c]
    assert torch.allclose(r[:, 7], torch.ones(16), atol=1e-6) and torch.allclose(r[:, 0], torch.full((16,), 0.5), atol=1e-6)
    # maps with different seps in one call: each gets its own columns, as when preprocessed alone
    seps = [[46, 95], [20, 95], None]
    three = torch.cat([a, a, a])
    together = preprocess(three, seps, cfg)
    for i, sp in enumerate(seps):
        assert torch.equal(together[i], preprocess(a, [sp], cfg)[0])
    assert float(together[1, c, :, 7].abs().max()) == 0.0  # token 46 is no separator of the second map
    want = torch.full((16,), 0.05)
    want[3] = (5 * 0.05 + 1) / 6  # its separator 20, faint, is row 20's own diagonal cell
    assert torch.allclose(together[1, c, :, 3], want)
    assert float(together[2, c, :, 1:].abs().max()) == 0.0  # one segment, no separator: only the [CLS] column


def test_shared_and_per_map_seps_give_the_same_input():
    maps = torch.stack([torch.as_tensor(pattern_map(k, 20, 9)) for k in ("diagonal", "block", "vertical")])
    cfg = CNNConfig()
    shared = preprocess(maps, [[9, 19]] * 3, cfg)
    one_by_one = torch.cat([preprocess(maps[i : i + 1], [[9, 19]], cfg) for i in range(3)])
    assert torch.allclose(shared, one_by_one)
    mixed = preprocess(maps, [[9, 19], [19], None], cfg)
    s = 1 + int(cfg.mass_channel)  # the segment channel
    assert float(mixed[1, s].min()) == 1.0 and float(mixed[0, s].min()) == 0.0  # single segment: all ones


def test_area_pooling_keeps_a_one_token_diagonal_visible():
    # 300 tokens onto 32 cells: the diagonal must stay the brightest structure in every row.
    x = preprocess(torch.eye(300)[None], [None], CNNConfig(grid=32, representation="area"))[0, 0]
    assert all(int(x[i].argmax()) == i for i in range(32))
    assert float(x.diagonal().min()) > 5 * float(x.mean())


def test_folds_are_grouped_and_stratified(labelled_set):
    data = load_labelled(labelled_set)
    for tr, va, te in folds(data, TrainConfig()):
        assert not set(data.groups[te]) & set(data.groups[np.concatenate([tr, va])])
        assert not set(tr) & set(va)
        assert not set(data.groups[tr]) & set(data.groups[va])  # early stopping watches examples it never fits
        assert set(data.y[te]) == set(range(len(LABELS)))
    assert len(list(folds(data, TrainConfig(seed=2**32 - 1)))) == 5  # --seed's top value (sklearn refused seed + 100)


def test_cross_validation_learns_clear_patterns(labelled_set):
    data = load_labelled(labelled_set)
    cfg = CNNConfig(grid=16, widths=(4, 4, 8, 8, 8, 8, 16, 16))
    rep = cross_validate(data, cfg, TrainConfig(folds=3, max_epochs=20, patience=8, batch_size=8))
    assert rep["macro_f1"] > 0.5  # five balanced classes: chance is 0.2
    assert np.array(rep["confusion_matrix"]).sum() == len(data.y)
    base = baselines(data, TrainConfig())
    assert set(base) == {"features+logreg", "features+gboost", "rule (pre-annotator, untrained)"}


def test_onnx_parity_and_metadata(tiny_classifier, labelled_set):
    model, path = tiny_classifier
    data = load_labelled(labelled_set)
    assert parity_check(model, path, data.maps, data.seps) <= 1e-4
    clf = OnnxClassifier(path)
    assert clf.labels == LABELS and clf.cfg.grid == 16


def test_single_segment_never_block(tiny_classifier):
    _, path = tiny_classifier
    clf = OnnxClassifier(path)
    block = pattern_map("block", 20, 9)
    pair, single = clf.predict([block, block], [[9, 19], [19]])
    assert single[LABELS.index("block")] == 0.0 and single.sum() == pytest.approx(1.0, abs=1e-5)
    assert pair[LABELS.index("block")] > 0


def test_classify_cli_good_and_bad_maps(tiny_classifier, tmp_path, capsys):
    _, path = tiny_classifier
    good = pattern_map("diagonal", 20)
    np.savez(tmp_path / "m.npz", **{
        "good": good, "scaled": good * 2, "nonsquare": np.ones((3, 4)), "nan": np.full((4, 4), np.nan),
        "negative": -good})
    assert main(["classify", str(tmp_path / "m.npz"), "--out", str(tmp_path / "p.jsonl"),
                 "--classifier", str(path)]) == 0
    recs = {r["id"]: r for r in map(json.loads, (tmp_path / "p.jsonl").read_text().splitlines())}
    assert set(recs) == {"good", "scaled", "nonsquare", "nan", "negative"}
    assert recs["good"]["label"] in LABELS and sum(recs["good"]["probs"].values()) == pytest.approx(1.0, abs=1e-4)
    assert "warning" in recs["scaled"] and recs["scaled"]["label"] == recs["good"]["label"]
    assert "square" in recs["nonsquare"]["error"] and "NaN" in recs["nan"]["error"]
    assert "negative" in recs["negative"]["error"]
    err = capsys.readouterr().err
    assert "nonsquare: skipped" in err


def test_classify_gives_a_member_that_is_no_map_its_own_error_line_whatever_its_size(tiny_classifier, tmp_path):
    # a 1-D member longer than the map side limit (8192) is not a map, as a short one is: neither refuses the file
    _, path = tiny_classifier
    np.savez(tmp_path / "m.npz", good=pattern_map("diagonal", 12), vec=np.ones(10, np.float32),
             vec_big=np.ones(10_000, np.float32), words=np.array(["a" * 20]))
    assert main(["classify", str(tmp_path / "m.npz"), "--out", str(tmp_path / "p.jsonl"),
                 "--classifier", str(path)]) == 0
    recs = {r["id"]: r for r in map(json.loads, (tmp_path / "p.jsonl").read_text().splitlines())}
    assert recs["good"]["label"] in LABELS
    assert recs["vec"]["error"] == "shape (10,) is not a square 2-D map (T, T)"
    assert recs["vec_big"]["error"] == "shape (10000,) is not a square 2-D map (T, T)"
    assert recs["words"]["error"] == "dtype <U20 is not a real number type; send float maps"


@pytest.mark.parametrize("kind", ["npy", "npz", "store"])
def test_classify_writes_lines_in_input_order_with_an_error_line_where_the_map_was(
        kind, tiny_classifier, tmp_path, capsys, monkeypatch):
    import patterncnn.classifier.classify as classify_module
    from patterncnn.core.maps import MapStore

    monkeypatch.setattr(classify_module, "BATCH_MAPS", 2)  # the order holds across batches too
    _, path = tiny_classifier
    maps = np.stack([pattern_map(k, 12, sep=5) for k in ("diagonal", "vertical", "block", "diagonal", "vertical")])
    maps[1, 0, 0] = np.nan
    maps[3, 2, 2] = -1.0
    ids = ["0", "1", "2", "3", "4"]
    if kind == "npy":
        src = tmp_path / "m.npy"
        np.save(src, maps)
    elif kind == "npz":
        ids = ["e", "d", "c", "b", "a"]  # the file's key order, not sorted
        src = tmp_path / "m.npz"
        np.savez(src, **dict(zip(ids, maps)))
    else:
        src = tmp_path / "store"
        MapStore.create(src)
        (src / "part-00000.jsonl").write_text("".join(json.dumps({"id": i}) + "\n" for i in ids))
        np.savez(src / "part-00000.npz", **dict(zip(ids, maps)))  # written by hand: append() refuses bad maps
    assert main(["classify", str(src), "--out", "-", "--classifier", str(path)]) == 0
    recs = [json.loads(line) for line in capsys.readouterr().out.splitlines()]  # the summary goes to stderr
    assert [r["id"] for r in recs] == ids
    assert ["error" in r for r in recs] == [False, True, False, True, False]


def test_classify_cli_on_a_map_store(tiny_classifier, labelled_set, tmp_path, capsys):
    _, path = tiny_classifier
    assert main(["classify", str(labelled_set / "maps"), "--out", str(tmp_path / "p.jsonl"),
                 "--classifier", str(path)]) == 0
    assert len((tmp_path / "p.jsonl").read_text().splitlines()) == 60
    assert "no separator positions" not in capsys.readouterr().err  # a store's maps carry theirs


@pytest.mark.parametrize("lose_npz", [False, True])
def test_classify_refuses_a_store_with_no_maps_in_one_line(tmp_path, capsys, lose_npz):
    from patterncnn.core.maps import MapStore

    store = MapStore.create(tmp_path / "store")
    if lose_npz:
        store.append([({"id": "a"}, pattern_map("diagonal", 8))])
        (tmp_path / "store" / "part-00000.npz").unlink()
    assert main(["classify", str(tmp_path / "store"), "--out", str(tmp_path / "p.jsonl")]) == 2
    err = capsys.readouterr().err
    assert len(err.splitlines()) == 1 and "holds no" in err
    assert ("part-00000.npz is missing" in err and "damaged" in err) if lose_npz else "patterncnn sample" in err
    assert not (tmp_path / "p.jsonl").exists()


def test_classify_names_a_census_thumbnails_file_and_a_save_maps_root(tmp_path, capsys):
    from patterncnn.census.thumbnails import Keeper, write_thumbnails
    from patterncnn.core.maps import MapStore

    keep = Keeper(num_maps=2)
    maps = np.stack([pattern_map("diagonal", 9), pattern_map("vertical", 9)])[None]  # (L=1, H=2, T, T)
    keep.offer(0, np.eye(len(LABELS))[:2], maps, ["[CLS]"] + ["a"] * 7 + ["[SEP]"], [8])
    write_thumbnails(tmp_path, {"rte": keep.arrays()})
    assert main(["classify", str(tmp_path / "thumbnails.npz"), "--out", str(tmp_path / "p.jsonl")]) == 2
    err = capsys.readouterr().err
    assert "is a census's thumbnails.npz" in err and "OUT/maps/<task>" in err and "T <= " not in err
    for task in ("rte", "sst2"):  # what a census run with --save-maps leaves in OUT/maps
        MapStore.create(tmp_path / "maps" / task).append([({"id": f"{task}_0"}, pattern_map("diagonal", 8))])
    assert main(["classify", str(tmp_path / "maps"), "--out", str(tmp_path / "p.jsonl")]) == 2
    err = capsys.readouterr().err
    assert f"but it holds map stores (rte, sst2); pass one of them, e.g. {tmp_path / 'maps' / 'rte'}" in err


def test_missing_classifier_says_how_to_get_one(tmp_path, capsys):
    np.savez(tmp_path / "m.npz", **{"a": pattern_map("diagonal", 8)})
    assert main(["classify", str(tmp_path / "m.npz"), "--out", str(tmp_path / "p.jsonl"),
                 "--classifier", str(tmp_path / "none.onnx")]) == 2
    assert "patterncnn train" in capsys.readouterr().err


def test_a_pytorch_checkpoint_given_as_the_classifier_is_named_with_the_file_to_give(tmp_path, glue_dir, capsys):
    """`--classifier models/patterncnn.pt` (the checkpoint beside the ONNX file) said only that onnxruntime's protobuf
    parsing failed: the message says what the file is and what to give instead, in classify and census alike."""
    import shutil

    from repo import REPO

    import patterncnn
    from patterncnn.core.errors import ClassifierError

    np.savez(tmp_path / "m.npz", **{"a": pattern_map("diagonal", 8)})
    ckpt = tmp_path / "patterncnn.pt"
    shutil.copy(REPO / "models" / "patterncnn.pt", ckpt)

    def error(clf, command="classify"):
        args = ([str(tmp_path / "m.npz"), "--out", str(tmp_path / "p.jsonl")] if command == "classify" else
                ["--task", "rte", "--limit", "2", "--glue-dir", str(glue_dir), "--out", str(tmp_path / "c")])
        assert main([command, *args, "--classifier", str(clf)]) == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and "Protobuf" not in err, err
        return err.removeprefix(f"patterncnn {command}: error: ").rstrip("\n")

    what = (f"{ckpt} is a classifier checkpoint (patterncnn.pt from `patterncnn train`): PyTorch weights, which "
            f"`patterncnn adapt finish --checkpoint` takes, not the ONNX file a classifier runs from")
    assert error(ckpt) == f"{what}; pass the patterncnn.onnx written beside it (--classifier PATH/TO/patterncnn.onnx)"
    shutil.copy(REPO / "models" / "patterncnn.onnx", tmp_path / "patterncnn.onnx")
    assert error(ckpt) == f"{what}; pass the ONNX file beside it, --classifier {tmp_path / 'patterncnn.onnx'}"
    assert error(ckpt, "census") == error(ckpt)
    with pytest.raises(ClassifierError, match=r"; pass the ONNX file beside it, path='.*patterncnn\.onnx'$"):
        patterncnn.load_classifier(ckpt)  # the Python call names its keyword
    pretrained = tmp_path / "pretrained-synthetic.pt"
    shutil.copy(REPO / "models" / "pretrained-synthetic.pt", pretrained)
    assert error(pretrained) == (
        f"{pretrained} is a pretraining checkpoint (from `patterncnn pretrain`), not a classifier: it is what "
        f"`patterncnn train --init {pretrained} --out OUT` starts one from; pass the patterncnn.onnx that writes "
        f"(--classifier OUT/patterncnn.onnx)")
    (tmp_path / "bad.onnx").write_bytes(b"not a model")  # any other file: onnxruntime's reason, as before
    assert main(["classify", str(tmp_path / "m.npz"), "--out", str(tmp_path / "p.jsonl"), "--classifier",
                 str(tmp_path / "bad.onnx")]) == 2
    assert "bad.onnx is not a usable ONNX classifier ([ONNXRuntimeError]" in capsys.readouterr().err


def test_ensemble_is_the_mean_of_its_members_in_torch_onnx_and_the_checkpoint(labelled_set, tmp_path):
    from patterncnn.classifier.model import (
        MEMBER_SEED_STEP,
        PatternEnsemble,
        build_model,
        load_checkpoint,
        model_config_dict,
    )
    from patterncnn.classifier.onnx import export_onnx
    from patterncnn.training.fit import fit, fit_final, model_inputs

    with pytest.raises(ValueError, match="members must be a whole number >= 1"):
        CNNConfig(members=0)
    data = load_labelled(labelled_set)
    cfg = CNNConfig(widths=(4, 4, 8, 8, 8, 8, 16, 16), members=2)
    tcfg = TrainConfig(batch_size=8, seed=3)
    ens = fit_final(data, cfg, tcfg, epochs=3)
    assert isinstance(ens, PatternEnsemble) and len(ens.members) == 2 and count_conv_layers(ens) == 8
    # member s is the single CNN's fit with seed + 1000 s: member 0 is exactly what members=1 ships
    idx = np.arange(len(data.y))
    for s, member in enumerate(ens.members):
        alone, _, _ = fit(data, idx, None, cfg, tcfg, seed=3 + MEMBER_SEED_STEP * s, epochs=3)
        for a, b in zip(alone.state_dict().values(), member.state_dict().values()):
            assert torch.equal(a, b)
    assert not torch.equal(ens.members[0].features[0].weight, ens.members[1].features[0].weight)
    x = model_inputs(data.maps, data.seps, range(6), cfg)
    with torch.inference_mode():
        mean = torch.stack([torch.softmax(m(x), 1) for m in ens.members]).mean(0)
        assert torch.allclose(torch.softmax(ens(x), 1), mean, atol=1e-6)
    path = tmp_path / "ens.onnx"
    export_onnx(ens, path, {"data_hash": data.data_hash})
    clf = OnnxClassifier(path)
    assert clf.cfg.members == 2 and parity_check(ens, path, data.maps, data.seps) <= 1e-4
    assert np.allclose(clf.run(x), mean.numpy(), atol=1e-5)
    torch.save({"state_dict": ens.state_dict(), "model_config": model_config_dict(cfg)}, tmp_path / "ens.pt")
    back, _ = load_checkpoint(tmp_path / "ens.pt")
    with torch.inference_mode():
        assert torch.allclose(back(x), ens(x))
    assert isinstance(build_model(CNNConfig()), PatternCNN)


def test_an_ensemble_has_its_own_version_and_an_old_single_cnn_checkpoint_still_loads(tmp_path):
    from patterncnn.classifier.model import PatternEnsemble, build_model, load_checkpoint, model_config_dict
    from patterncnn.classifier.onnx import export_onnx

    torch.manual_seed(0)
    versions = {}
    for k in (1, 2):
        path = tmp_path / f"m{k}.onnx"
        export_onnx(build_model(CNNConfig(members=k)).eval(), path, {"data_hash": "ab" * 32})
        versions[k] = OnnxClassifier(path).model_version
    assert versions[1].endswith("-abababab") and versions[2] == versions[1] + "-x2"
    # a classifier exported since 2026-11-26 records its recipe: the same maps trained otherwise get another version
    from patterncnn.training.fit import TrainConfig
    from patterncnn.training.train import recipe_hash

    recipes = {recipe_hash(CNNConfig(), TrainConfig()), recipe_hash(CNNConfig(), TrainConfig(lr=1e-3)),
               recipe_hash(CNNConfig(row_channel=True), TrainConfig())}
    assert len(recipes) == 3 and recipe_hash(CNNConfig(), TrainConfig()) in recipes
    for k in (1, 2):
        path = tmp_path / f"r{k}.onnx"
        export_onnx(build_model(CNNConfig(members=k)).eval(), path, {"data_hash": "ab" * 32, "recipe": "dc863fcb36f6"})
        assert OnnxClassifier(path).model_version == versions[1] + "-rdc863f" + ("-x2" if k == 2 else "")
    # a checkpoint written before ensembles existed has no "members" in its config: one CNN
    single = PatternCNN(CNNConfig()).eval()
    old_config = model_config_dict(single.cfg)
    del old_config["members"]
    torch.save({"state_dict": single.state_dict(), "model_config": old_config}, tmp_path / "old.pt")
    back, _ = load_checkpoint(tmp_path / "old.pt")
    assert isinstance(back, PatternCNN) and back.cfg.members == 1
    # members must be single CNNs of the ensemble's config
    with pytest.raises(ValueError, match="every member must be a single CNN"):
        PatternEnsemble(CNNConfig(members=2), [PatternCNN(CNNConfig(grid=32)), PatternCNN(CNNConfig(grid=32))])
    # finite output even when every member is certain (log of a mean softmax would give -inf)
    ens = PatternEnsemble(CNNConfig(members=2)).eval()
    for m in ens.members:
        torch.nn.init.constant_(m.head[1].bias, 0.0)
        m.head[1].bias.data[0] = 500.0
    with torch.inference_mode():
        out = ens(torch.zeros(2, ens.cfg.in_channels, 16, 16))
    assert torch.isfinite(out).all() and torch.allclose(torch.softmax(out, 1)[:, 0], torch.ones(2))


def test_segment_rule_decides_each_separator_list_once_and_each_map_right():
    pair, single = [5, 11], [7]
    seps = [pair] * 3 + [single] * 3 + [None, [5, 11], [7], [2, 3, 9]]  # repeated objects, equal copies, MPNet-like
    probs = np.full((len(seps), len(LABELS)), 0.2)
    out = OnnxClassifier.apply_segment_rule(probs.copy(), seps)
    block = LABELS.index("block")
    assert out[:, block].tolist() == pytest.approx([0.2] * 3 + [0.0] * 3 + [0.2, 0.2, 0.0, 0.2])
    assert np.allclose(out.sum(1), 1.0)


@pytest.mark.parametrize("representation", ["area", "bilinear"])
def test_preprocess_builds_the_masks_one_channel_at_a_time_with_the_same_result(representation):
    # The masks are resized one channel at a time (a T = 8192 map needs one T x T mask beside it, not three):
    # the result must equal resizing the stacked channels, as the preprocessing was first written.
    import torch

    from patterncnn.classifier.model import CNNConfig, preprocess, resize, segment_masks, structure_masks

    cfg = CNNConfig(grid=16, representation=representation)
    rng = np.random.default_rng(0)
    for t, seps in ((37, [[17, 36]] * 3), (40, [[10, 39], None, [5, 6, 39]]), (9, [None] * 3)):
        maps = torch.tensor(rng.random((3, t, t)), dtype=torch.float32)
        for resample in (None, t + 5):
            got = preprocess(maps, seps, cfg, resample_to=resample)
            same = all(s == seps[0] for s in seps)
            masks_for = seps[:1] if same else seps
            m = torch.cat([segment_masks(t, masks_for).unsqueeze(1), structure_masks(t, masks_for)], dim=1)
            x = maps.float().unsqueeze(1)
            if resample:
                x = torch.nn.functional.interpolate(x, size=(resample, resample), mode="nearest")
                m = torch.nn.functional.interpolate(m, size=(resample, resample), mode="nearest")
            x = resize(x, 16, representation)
            rel = (x * t).clamp_min(2 ** -4).log2().clamp_max(6.0) / 4.0
            x = torch.cat([x / x.amax(dim=(2, 3), keepdim=True).clamp_min(1e-12), rel], dim=1)
            m = resize(m, 16, representation)
            want = torch.cat([x, m.expand(3, -1, -1, -1) if same else m], dim=1)
            assert torch.equal(got, want)
