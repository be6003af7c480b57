"""`patterncnn pretrain` and `train --init`: synthetic maps labelled by construction, a resumable stream, and fits
that start from the pretrained weights (or refuse a checkpoint that cannot serve)."""

import dataclasses
import json

import numpy as np
import pytest
import torch
from repo import REPO

from patterncnn.classifier.model import CNNConfig, PatternCNN
from patterncnn.cli import main
from patterncnn.core.fileio import sha256_file
from patterncnn.core.labels import LABELS
from patterncnn.labelling.sets import load_labelled
from patterncnn.training import pretrain as pretrain_mod
from patterncnn.training import synthetic as generator
from patterncnn.training.fit import TrainConfig, TrainError, fit, inputs, load_init
from patterncnn.training.pretrain import PretrainConfig, PretrainError, pretrain

TINY = dict(maps=256, batch_size=32, held_out=20, max_t=64, pool=64)  # 8 steps, 2 per pool


def test_the_generator_draws_attention_maps_of_every_class_reproducibly():
    a = generator.batch(40, np.random.default_rng(3), max_t=64)
    b = generator.batch(40, np.random.default_rng(3), max_t=64)
    assert np.bincount([s.label for s in a], minlength=len(LABELS)).tolist() == [8] * len(LABELS)
    for s, r in zip(a, b):
        t = s.map.shape[0]
        assert s.map.shape == (t, t) and s.map.dtype == np.float32 and 3 <= t <= 64
        assert np.allclose(s.map.sum(1), 1, atol=1e-4) and (s.map >= 0).all()  # rows are attention distributions
        assert all(0 < p < t for p in s.seps) and s.seps[-1] == t - 1
        assert s.label == r.label and np.array_equal(s.map, r.map)  # the same seed draws the same maps
    assert not np.array_equal(a[0].map, generator.batch(1, np.random.default_rng(4), max_t=64)[0].map)
    blocks = [s for s in a if LABELS[s.label] == "block"]
    assert blocks and all(len(s.seps) >= 2 for s in blocks)  # block is always a pair of segments


# The generator's stream before the faint-column variant existed (synthetic.py at ae4e7b0; maps rounded to 3 places,
# so that the last bits of a vector exp on another CPU do not matter): the shipped pretraining's maps are unchanged.
STREAM_AE4E7B0 = "0ad00954a0314bad2a7b5ea2c45f1b23c2a4839cea06f61abe52bbcd84c8f822"


def test_the_faint_column_variant_draws_diagonal_maps_with_a_dark_column_and_leaves_the_default_stream_alone():
    import hashlib

    digest = hashlib.sha256()
    for s in generator.batch(30, np.random.default_rng(5), max_t=64):
        digest.update(np.round(s.map, 3).tobytes())
        digest.update(str(s.seps).encode())
        digest.update(bytes([s.label]))
    assert digest.hexdigest() == STREAM_AE4E7B0
    props = {"diagonal": 1.0, "vertical+diagonal": 1.0}
    stats = {v: generator.batch(600, np.random.default_rng(6), props, max_t=96, with_stats=True, faint_columns=v)
             for v in (False, True)}

    def with_column(fc):  # diagonal maps whose column stands out in most rows (the check's coverage)
        return [m for s, m in stats[fc] if LABELS[s.label] == "diagonal" and m["colcov"] >= generator.COL_ON]

    assert len(with_column(True)) >= 10 > len(with_column(False))  # about 9 % of 300 against 0.2 %
    vd = [m for s, m in stats[True] if LABELS[s.label] == "vertical+diagonal"]
    assert vd and min(m["colstr"] for m in vd) >= generator.SEEN_COL  # the variant's vertical+diagonal is lit
    assert min(m["colstr"] for s, m in stats[False] if LABELS[s.label] == "vertical+diagonal") < generator.SEEN_COL


def test_pretraining_writes_a_checkpoint_that_train_can_start_from(tmp_path):
    out = tmp_path / "pre.pt"
    rec = pretrain(out, CNNConfig(), PretrainConfig(**TINY))
    ckpt = torch.load(out, weights_only=True)
    assert ckpt["pretrained_on"]["synthetic_maps"] == 256 and rec["held_out"] == 20
    # which version of the generator drew its maps (helper 107: the record held a fixed string)
    assert ckpt["pretrained_on"]["generator_sha256"] == sha256_file(generator.__file__)
    assert 0 <= rec["held_out_accuracy"] <= 1 and not (tmp_path / "pre.pt.partial").exists()
    state = load_init(out, CNNConfig(members=3))  # each member of an ensemble starts from the one CNN
    assert set(state) == set(PatternCNN(CNNConfig()).state_dict())


def stopping_bar(starts: list, stop):
    """A progress-bar class that records the step each run starts at in ``starts`` and raises KeyboardInterrupt, as
    Ctrl-C does, at the update ``stop(n)`` picks (n counts the bar's updates from 1)."""

    class Bar:
        def __init__(self, **kw):
            self.n = 0
            starts.append(kw["initial"])

        def update(self, k):
            self.n += 1
            if stop(self.n):
                raise KeyboardInterrupt

        def set_postfix_str(self, s):
            pass

        def close(self):
            pass

    return Bar


def test_a_stopped_pretraining_resumes_to_the_same_weights(tmp_path, monkeypatch):
    monkeypatch.setattr(pretrain_mod, "SAVE_EVERY", 3)
    whole = tmp_path / "whole.pt"
    pretrain(whole, CNNConfig(), PretrainConfig(**TINY))

    starts = []
    Stop = stopping_bar(starts, lambda n: n == 5)  # its 5th update is Ctrl-C

    out = tmp_path / "resumed.pt"
    with pytest.raises(KeyboardInterrupt):
        pretrain(out, CNNConfig(), PretrainConfig(**TINY), progress=Stop)
    partial = tmp_path / "resumed.pt.partial"
    assert not out.exists() and torch.load(partial, weights_only=True)["step"] == 3
    with pytest.raises(PretrainError, match="other options"):  # the partial run is not mixed with another
        pretrain(out, CNNConfig(), PretrainConfig(**{**TINY, "lr": 1e-3}))
    Record = stopping_bar(starts, lambda n: False)  # the same bar, never stopping

    rec = pretrain(out, CNNConfig(), PretrainConfig(**TINY), progress=Record)
    assert starts == [0, 3 * 32]  # the second run began where the partial file left off, not at the start
    a, b = torch.load(whole, weights_only=True), torch.load(out, weights_only=True)
    assert all(torch.equal(a["state_dict"][k], b["state_dict"][k]) for k in a["state_dict"])
    assert rec["held_out_accuracy"] == a["pretrained_on"]["held_out_accuracy"] and not partial.exists()


def test_a_stopped_pretraining_of_other_options_is_named_and_overwrite_starts_over(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(pretrain_mod, "SAVE_EVERY", 3)
    starts = []
    Bar = stopping_bar(starts, lambda n: len(starts) == 1 and n == 5)  # stops the first run at its 5th step
    out = tmp_path / "pre.pt"
    with pytest.raises(KeyboardInterrupt):
        pretrain(out, CNNConfig(), PretrainConfig(**TINY), progress=Bar)
    with pytest.raises(PretrainError) as e:
        pretrain(out, CNNConfig(), PretrainConfig(**{**TINY, "lr": 1e-3, "seed": 2}), progress=Bar)
    said = str(e.value)
    assert "other options (--lr: was 0.003, now 0.001; --seed: was 0, now 2)" in said and "--overwrite" in said
    with pytest.raises(PretrainError, match=r"other options \(held_out \(the held-out synthetic maps\): was 20, now 40"
                                            r"\)"):  # named, not "another patterncnn version?" (helper 107)
        pretrain(out, CNNConfig(), PretrainConfig(**{**TINY, "held_out": 40}), progress=Bar)
    rec = pretrain(out, CNNConfig(), PretrainConfig(**{**TINY, "lr": 1e-3, "seed": 2}), overwrite=True, progress=Bar)
    assert starts == [0, 0] and rec["lr"] == 1e-3 and out.is_file()  # started over: at map 0, not the partial's step
    assert not (tmp_path / "pre.pt.partial").exists()


def test_a_fit_with_init_starts_from_the_pretrained_weights(tmp_path, labelled_set):
    out = tmp_path / "pre.pt"
    pretrain(out, CNNConfig(), PretrainConfig(**TINY))
    data = load_labelled(labelled_set)
    idx = np.arange(len(data.y))
    tcfg = TrainConfig(init=str(out), lr=0.0, weight_decay=0.0)  # no step moves a weight: the init is what stays
    model, _, _ = fit(data, idx, None, CNNConfig(), tcfg, seed=0, epochs=1)
    pre = torch.load(out, weights_only=True)["state_dict"]
    convs = [k for k in pre if k.endswith(".weight") and pre[k].dim() == 4]
    assert convs and all(torch.equal(model.state_dict()[k], pre[k]) for k in convs)
    random_start, _, _ = fit(data, idx, None, CNNConfig(), dataclasses.replace(tcfg, init=None), seed=0, epochs=1)
    assert not torch.equal(random_start.state_dict()[convs[0]], pre[convs[0]])
    # a resumable part is named by the init's content, not its path: other weights at the same path, another name
    before = inputs(data, CNNConfig(), tcfg)
    renamed = tmp_path / "renamed.pt"
    renamed.write_bytes(out.read_bytes())
    assert inputs(data, CNNConfig(), dataclasses.replace(tcfg, init=str(renamed))) == before
    pretrain(out, CNNConfig(), PretrainConfig(**{**TINY, "seed": 1}), overwrite=True)
    assert inputs(data, CNNConfig(), tcfg) != before


def test_an_init_that_cannot_serve_is_refused_with_the_fix(tmp_path):
    with pytest.raises(TrainError, match="no such file; make one with `patterncnn pretrain"):
        load_init(tmp_path / "missing.pt", CNNConfig())
    junk = tmp_path / "junk.pt"
    junk.write_bytes(b"not a checkpoint")
    with pytest.raises(TrainError, match="junk.pt is not a pretraining checkpoint \\(from `patterncnn pretrain`\\)"):
        load_init(junk, CNNConfig())
    onnx = REPO / "models" / "patterncnn.onnx"  # torch's refusal of it runs over a dozen lines: left out
    with pytest.raises(TrainError, match="patterncnn.onnx is not a pretraining checkpoint") as e:
        load_init(onnx, CNNConfig())
    assert "\n" not in str(e.value) and "weights_only" not in str(e.value)
    with pytest.raises(TrainError) as e:  # the shipped classifier: the fix must not name its path as --out
        load_init(REPO / "models" / "patterncnn.pt", CNNConfig())
    assert "patterncnn.pt is a trained classifier, not a pretraining checkpoint" in str(e.value)
    assert "--out models/pretrained.pt" in str(e.value) and "--out models/patterncnn.pt" not in str(e.value)
    out = tmp_path / "pre.pt"
    pretrain(out, CNNConfig(), PretrainConfig(**TINY))
    with pytest.raises(TrainError, match="another CNN \\(--no-mass-channel: given now, not for the checkpoint\\)"):
        load_init(out, CNNConfig(mass_channel=False))  # named by the option that differs, as pretrain.md says
    with pytest.raises(TrainError, match="another CNN \\(--grid: was 16, now 32\\)"):
        load_init(out, CNNConfig(grid=32))
    ckpt = torch.load(out, weights_only=True)
    torch.save({k: v for k, v in ckpt.items() if k != "pretrained_on"}, tmp_path / "classifier.pt")
    with pytest.raises(TrainError, match="is a trained classifier, not a pretraining checkpoint"):
        load_init(tmp_path / "classifier.pt", CNNConfig())
    ckpt["state_dict"].pop(next(iter(ckpt["state_dict"])))
    torch.save(ckpt, tmp_path / "cut.pt")
    with pytest.raises(TrainError, match="its weights do not fit"):
        load_init(tmp_path / "cut.pt", CNNConfig())


def test_freeze_bn_keeps_the_pretrained_batchnorm_statistics(tmp_path, labelled_set):
    out = tmp_path / "pre.pt"
    pretrain(out, CNNConfig(), PretrainConfig(**TINY))
    data = load_labelled(labelled_set)
    idx = np.arange(len(data.y))
    pre = torch.load(out, weights_only=True)["state_dict"]
    stats = [k for k in pre if k.endswith(("running_mean", "running_var"))]
    affine = [k for k in pre if k.endswith(".bias") and k.replace(".bias", ".running_mean") in pre]
    tcfg = TrainConfig(init=str(out), freeze_bn=True)
    frozen, _, _ = fit(data, idx, None, CNNConfig(), tcfg, seed=0, epochs=2)
    assert stats and all(torch.equal(frozen.state_dict()[k], pre[k]) for k in stats)
    assert affine and any(not torch.equal(frozen.state_dict()[k], pre[k]) for k in affine)  # scales/shifts learn
    moving, _, _ = fit(data, idx, None, CNNConfig(), dataclasses.replace(tcfg, freeze_bn=False), seed=0, epochs=2)
    assert all(not torch.equal(moving.state_dict()[k], pre[k]) for k in stats)
    with pytest.raises(TrainError, match="give --init a pretrained CNN, or drop --freeze-bn"):
        fit(data, idx, None, CNNConfig(), TrainConfig(freeze_bn=True), seed=0, epochs=1)


def test_the_learning_rate_follows_the_start_unless_given():
    assert TrainConfig().lr == 3e-3 and TrainConfig(init="x.pt").lr == 3e-4
    assert TrainConfig(init="x.pt", lr=1e-3).lr == 1e-3


@pytest.mark.slow
def test_train_init_on_the_command_line(labelled_set, tmp_path, capsys):
    rc = main(["train", "--annotations", str(labelled_set), "--out", str(tmp_path / "m"), "--init",
               str(tmp_path / "missing.pt")])
    assert rc == 2 and "patterncnn pretrain --out" in capsys.readouterr().err
    assert not (tmp_path / "m" / "patterncnn.pt").exists()
    assert main(["train", "--annotations", str(labelled_set), "--out", str(tmp_path / "m"), "--freeze-bn"]) == 2
    assert "give --init a pretrained CNN (`patterncnn pretrain`), or drop --freeze-bn" in capsys.readouterr().err
    assert not (tmp_path / "m" / "patterncnn.pt").exists()
    pre = tmp_path / "pre.pt"
    assert main(["pretrain", "--out", str(pre), "--maps", "64", "--batch-size", "32", "--max-t", "32"]) == 0
    assert "pretrained on 64 synthetic maps" in capsys.readouterr().out
    assert main(["pretrain", "--out", str(pre), "--maps", "64"]) == 2  # an existing checkpoint needs --overwrite
    assert main(["train", "--annotations", str(labelled_set), "--out", str(tmp_path / "c"), "--init", str(pre),
                 "--compare"]) == 2
    assert "drop --compare, or --init" in capsys.readouterr().err
    with pytest.raises(SystemExit) as refused:  # argparse's refusal: exit 2, one line
        main(["pretrain", "--out", str(tmp_path / "x.pt"), "--lr", "0"])
    assert refused.value.code == 2
    assert "--lr: must be a number greater than 0" in capsys.readouterr().err
    rc = main(["train", "--annotations", str(labelled_set), "--out", str(tmp_path / "m"), "--init", str(pre),
               "--folds", "3", "--max-epochs", "2", "--no-leave-one-encoder-out", "--no-soft-labels"])
    assert rc == 0
    m = json.loads((tmp_path / "m" / "metrics.json").read_text())
    assert m["init"]["path"] == "pre.pt" and m["init"]["pretrained_on"]["synthetic_maps"] == 64
    assert m["train_config"]["init"] == "pre.pt"  # an absolute path is not published, its name and hash are
    assert m["train_config"]["lr"] == 3e-4  # fine-tuning from pretrained weights: a tenth of a random start's rate
    assert "starts from the weights of `pre.pt`" in (tmp_path / "m" / "README.md").read_text()


def test_max_t_is_bounded_and_a_damaged_partial_file_is_said_in_plain_words(tmp_path, caplog):
    # helper 107: --max-t 100000 was killed by the kernel without a word; a damaged partial file's warning passed on
    # torch's advice to load it with weights_only=False
    with pytest.raises(PretrainError, match="--max-t must be from 8 to 512"):
        PretrainConfig(**{**TINY, "max_t": 100_000})
    out = tmp_path / "pre.pt"
    (tmp_path / "pre.pt.partial").write_bytes(b"garbage")
    with caplog.at_level("WARNING"):
        pretrain(out, CNNConfig(), PretrainConfig(**TINY))
    assert "pre.pt.partial is damaged or not a stopped pretraining run (" in caplog.text and "weights_only" not in caplog.text and out.is_file()


def test_an_interrupted_pretraining_names_its_partial_file(tmp_path, monkeypatch, capsys):
    # helper 107: the note said the steps were saved under OUT, which does not exist until the run ends
    monkeypatch.setattr(pretrain_mod, "SAVE_EVERY", 1)
    monkeypatch.setattr("patterncnn.cli.pretrain.progress", lambda: stopping_bar([], lambda n: n == 3))
    out = tmp_path / "int.pt"
    assert main(["pretrain", "--out", str(out), "--maps", "256", "--batch-size", "32", "--max-t", "64"]) == 130
    assert (f"interrupted: finished steps (every 256) are saved under {out}.partial; run the same command again to "
            f"resume") in capsys.readouterr().err
