"""`patterncnn finetune` on the tiny BERT: Trainer runs, metrics are GLUE's, the folder loads as --model."""

import json
import os
from pathlib import Path

import numpy as np
import pytest

from patterncnn.cli import main
from patterncnn.core.glue import get_task
from patterncnn.core.maps import encoder_family, is_fine_tune
from patterncnn.encoders.finetune import MANIFEST, glue_metrics
from patterncnn.encoders.load import load_encoder


@pytest.mark.parametrize("task,keys", [("rte", {"accuracy"}), ("stsb", {"pearson", "spearman"})])
def test_finetune_cli(tiny_bert, glue_dir, tmp_path, task, keys, capsys):
    out = tmp_path / f"ft-{task}"
    rc = main(["finetune", "--task", task, "--model", str(tiny_bert), "--glue-dir", str(glue_dir),
               "--out", str(out), "--max-train-examples", "24", "--max-dev-examples", "16", "--epochs", "1",
               "--batch-size", "8", "--max-length", "32"])
    assert rc == 0, capsys.readouterr().err
    manifest = json.loads((out / MANIFEST).read_text())
    assert set(manifest["dev"]) == keys
    assert manifest["train"]["examples"] == 24 and manifest["dev_data"]["examples"] == 16
    assert manifest["settings"]["batch_size"] == 8 and manifest["base_model"]["sha256"]
    enc = load_encoder(str(out))  # the fine-tuned folder is a valid --model
    assert enc.num_layers == 3
    # named after its base and task whatever its folder is called ("ft-rte"), so it counts in its base's family
    base = load_encoder(str(tiny_bert))
    assert enc.tag == f"{base.tag.rsplit('-', 1)[0]}-{task}-{enc.fingerprint['sha256'][:8]}"
    assert encoder_family(enc.tag) == encoder_family(base.tag) and is_fine_tune(enc.tag)
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")]  # no work folder left
    assert main(["finetune", "--task", task, "--model", str(tiny_bert), "--glue-dir", str(glue_dir),
                 "--out", str(out)]) == 2


def test_glue_metrics():
    f1 = glue_metrics(get_task("mrpc"), np.array([1, 1, 0, 0]), np.array([1, 0, 0, 0]))
    assert f1 == {"accuracy": 0.75, "f1": pytest.approx(2 / 3)}
    mcc = glue_metrics(get_task("cola"), np.array([1, 0, 1, 0]), np.array([1, 0, 1, 0]))
    assert mcc["mcc"] == pytest.approx(1.0)
    corr = glue_metrics(get_task("stsb"), np.array([0.0, 1.0, 2.0]), np.array([0.0, 2.0, 4.0]))
    assert corr["pearson"] == pytest.approx(1.0) and corr["spearman"] == pytest.approx(1.0)


def _weights(folder):
    from safetensors.numpy import load_file

    return load_file(str(folder / "model.safetensors"))


def tiny_finetune(tiny_bert, glue_dir, epochs: int = 2, task: str | None = "rte") -> list[str]:
    """The arguments of a tiny fine-tune: 24 train examples in batches of 8, three steps an epoch (with SAVE_STEPS 2,
    two epochs save checkpoints at steps 2, 4 and 6); ``task`` None leaves --task out."""
    return ["finetune", *(["--task", task] if task else []), "--model", str(tiny_bert), "--glue-dir", str(glue_dir),
            "--max-train-examples", "24", "--max-dev-examples", "16", "--epochs", str(epochs), "--batch-size", "8",
            "--max-length", "32"]


def _stop_after_saving(monkeypatch, when=lambda state: True):
    """Ctrl-C right after the Trainer saves a checkpoint at a step ``when(state)`` picks; returns the undo."""
    import transformers

    save = transformers.Trainer._save_checkpoint

    def save_then_stop(self, *a, **k):
        save(self, *a, **k)
        if when(self.state):
            raise KeyboardInterrupt

    monkeypatch.setattr(transformers.Trainer, "_save_checkpoint", save_then_stop)
    return lambda: monkeypatch.setattr(transformers.Trainer, "_save_checkpoint", save)


def test_an_interrupted_finetune_resumes_to_the_same_model(tiny_bert, glue_dir, tmp_path, monkeypatch, capsys):
    from patterncnn.encoders import finetune as ft

    monkeypatch.setattr(ft, "SAVE_STEPS", 2)  # 6 steps, checkpoints at 2, 4, 6
    args = tiny_finetune(tiny_bert, glue_dir)
    whole, parted = tmp_path / "whole", tmp_path / "parted"
    assert main([*args, "--out", str(whole)]) == 0
    undo = _stop_after_saving(monkeypatch)  # Ctrl-C right after the first checkpoint
    capsys.readouterr()
    assert main([*args, "--out", str(parted)]) == 130
    err = capsys.readouterr().err
    assert f"saved under {parted}; run the same command again to resume" in err, err
    assert [p.name for p in parted.iterdir()] == [".work"]  # no model yet under the name --model takes
    undo()
    assert main([*tiny_finetune(tiny_bert, glue_dir, epochs=3), "--out", str(parted)]) == 2  # other arguments: refused
    assert "--epochs: was 2.0, now 3.0" in capsys.readouterr().err
    assert main([*args, "--out", str(parted)]) == 0
    a, b = (json.loads((f / MANIFEST).read_text()) for f in (whole, parted))
    assert b["train"]["resumed_at_step"] == 2 and "resumed_at_step" not in a["train"]
    assert b["dev"] == a["dev"]  # on a CPU the resumed run is the same run
    assert b["train"]["loss"] == pytest.approx(a["train"]["loss"], rel=1e-6)
    wa, wb = _weights(whole), _weights(parted)
    assert wa.keys() == wb.keys() and all(np.array_equal(wa[k], wb[k]) for k in wa)
    assert not (parted / ".work").exists() and not [p for p in tmp_path.iterdir() if p.name.startswith(".")]


def test_a_ctrl_c_while_the_model_is_put_in_place_says_it_is_there(tiny_bert, glue_dir, tmp_path, monkeypatch,
                                                                      capsys, ctrl_c):
    # held until the model was in place, it was then reported as "nothing is saved ... starts from the beginning"
    import signal

    from patterncnn.core import fileio

    out = tmp_path / "out"
    assert main([*tiny_finetune(tiny_bert, glue_dir, epochs=1), "--out", str(out)]) == 0  # an old model
    exchange = fileio._exchange

    def interrupted(a, b):
        done = exchange(a, b)
        os.kill(os.getpid(), signal.SIGINT)
        return done

    monkeypatch.setattr(fileio, "_exchange", interrupted)
    capsys.readouterr()
    assert main([*tiny_finetune(tiny_bert, glue_dir), "--out", str(out), "--overwrite"]) == 130
    err = capsys.readouterr().err
    assert f"interrupted: the fine-tuned model was already in place: saved to {out} (use it as --model {out})" in err
    assert json.loads((out / MANIFEST).read_text())["settings"]["epochs"] == 2  # the new one
    assert not (out / ".work").exists() and sorted(p.name for p in tmp_path.iterdir()) == ["out"]


def test_the_library_call_takes_an_out_whose_parents_it_will_make(tmp_path):
    # outside a run's scope the folder is not made before the work: the check of its parent must not refuse it
    from patterncnn.encoders.finetune import _check_out

    out = tmp_path / "a" / "b" / "model"
    assert _check_out(out, "rte", overwrite=False) == out and not (tmp_path / "a").exists()


def test_a_finetune_interrupted_before_its_first_checkpoint_leaves_nothing(tiny_bert, glue_dir, tmp_path, monkeypatch,
                                                                         capsys):
    # it said "nothing is saved" but left OUT/.work/<task>/run.json (walkthrough 59)
    import transformers

    def interrupted(self, *args, **kwargs):
        raise KeyboardInterrupt

    args = tiny_finetune(tiny_bert, glue_dir)
    old = tmp_path / "old"
    assert main([*tiny_finetune(tiny_bert, glue_dir, epochs=1), "--out", str(old)]) == 0
    before = sorted(p.name for p in old.iterdir())
    monkeypatch.setattr(transformers.Trainer, "train", interrupted)
    capsys.readouterr()
    for out, extra in ((tmp_path / "new", []), (old, ["--overwrite"])):
        assert main([*args, "--out", str(out), *extra]) == 130
        err = capsys.readouterr().err
        assert f"nothing is saved under {out}; the same command starts from the beginning" in err, err
    assert not (tmp_path / "new").exists()  # the folder it made goes
    assert sorted(p.name for p in old.iterdir()) == before  # the old model is left as it was, without a .work


def test_an_interrupted_overwrite_resumes_with_the_same_command(tiny_bert, glue_dir, tmp_path, monkeypatch, capsys):
    from patterncnn.encoders import finetune as ft

    monkeypatch.setattr(ft, "SAVE_STEPS", 2)  # 6 steps, checkpoints at 2, 4, 6
    args = tiny_finetune(tiny_bert, glue_dir)
    whole, out = tmp_path / "whole", tmp_path / "out"
    assert main([*args, "--out", str(whole)]) == 0
    assert main([*tiny_finetune(tiny_bert, glue_dir, epochs=1), "--out", str(out)]) == 0  # the old model
    old = _weights(out)
    again = [*args, "--out", str(out), "--overwrite"]
    undo = _stop_after_saving(monkeypatch)
    capsys.readouterr()
    assert main(again) == 130
    err = capsys.readouterr().err
    assert f"saved under {out}; run the same command again to resume" in err, err
    assert json.loads((out / MANIFEST).read_text())["settings"]["epochs"] == 1  # the old model is still there
    assert all(np.array_equal(old[k], v) for k, v in _weights(out).items())
    undo()
    assert main(again) == 0, capsys.readouterr().err
    a, b = (json.loads((f / MANIFEST).read_text()) for f in (whole, out))
    assert b["train"]["resumed_at_step"] == 2 and b["dev"] == a["dev"]
    wa, wb = _weights(whole), _weights(out)
    assert wa.keys() == wb.keys() and all(np.array_equal(wa[k], wb[k]) for k in wa)
    assert not (out / ".work").exists() and not [p for p in tmp_path.iterdir() if p.name.startswith(".")]


def test_a_model_that_cannot_be_moved_into_out_is_kept_and_the_same_command_finishes(tiny_bert, glue_dir, tmp_path,
                                                                                   monkeypatch, capsys):
    import errno

    from patterncnn.core import fileio
    from patterncnn.encoders import finetune as ft

    monkeypatch.setattr(ft, "SAVE_STEPS", 2)
    out = tmp_path / "out"
    assert main([*tiny_finetune(tiny_bert, glue_dir, epochs=1), "--out", str(out)]) == 0  # the old model
    old = _weights(out)
    again = [*tiny_finetune(tiny_bert, glue_dir), "--out", str(out), "--overwrite"]

    def failing(a, b):
        raise OSError(errno.EIO, "Input/output error")

    monkeypatch.setattr(fileio, "_exchange", failing)  # the swap fails (on Linux; elsewhere its first rename)
    rename = os.rename
    monkeypatch.setattr(fileio.os, "rename", lambda a, b: failing(a, b) if Path(b) == out else rename(a, b))
    capsys.readouterr()
    assert main(again) == 2
    err = capsys.readouterr().err
    model = out / ".work" / "rte" / "model"
    assert f"could not be moved to {out} ([Errno 5] Input/output error); it is kept in {model}: run the same " \
           f"command again to finish" in err, err
    assert (model / "model.safetensors").is_file() and not (model / fileio.LOCK).exists()
    assert all(np.array_equal(old[k], v) for k, v in _weights(out).items())  # the old model is still there
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")]  # nothing left beside out
    monkeypatch.undo()
    monkeypatch.setattr(ft, "SAVE_STEPS", 2)
    assert main(again) == 0, capsys.readouterr().err
    assert json.loads((out / MANIFEST).read_text())["train"]["resumed_at_step"] == 6  # only scored and saved
    assert not (out / ".work").exists()


def test_an_unfinished_finetune_of_another_task_is_kept(tiny_bert, glue_dir, tmp_path, monkeypatch, capsys, caplog):
    from patterncnn.encoders import finetune as ft

    monkeypatch.setattr(ft, "SAVE_STEPS", 2)
    out = tmp_path / "ft"
    args = [*tiny_finetune(tiny_bert, glue_dir, epochs=1, task=None), "--out", str(out)]
    (out / ".work" / "stsb").mkdir(parents=True)  # an stsb run stopped before its first checkpoint: nothing to keep
    (out / ".work" / "stsb" / "run.json").write_text('{"key": "0", "params": {}}')
    undo = _stop_after_saving(monkeypatch)
    assert main([*args, "--task", "rte"]) == 130  # interrupted after its checkpoint at step 2
    undo()
    assert sorted(p.name for p in (out / ".work").iterdir()) == ["rte"]
    assert "dropping the unfinished fine-tune of stsb" in caplog.text and "saved no checkpoint" in caplog.text
    capsys.readouterr()
    assert main([*args, "--task", "stsb"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and f"{out} holds an unfinished fine-tune of rte;" in err and "--overwrite" in err, err
    assert ft.last_checkpoint(out / ".work" / "rte").name == "checkpoint-2"  # untouched
    caplog.clear()
    assert main([*args, "--task", "stsb", "--overwrite"]) == 0  # starts over: the rte run goes
    assert "dropping the unfinished fine-tune of rte" in caplog.text and "discarded, as overwrite was given" in caplog.text
    assert json.loads((out / MANIFEST).read_text())["task"] == "stsb" and not (out / ".work").exists()


def test_overwrite_starts_over_only_an_unfinished_run_of_other_arguments(tmp_path):
    from patterncnn.core.work import RunError, work_dir

    rte = work_dir(tmp_path, "rte", {"task": "rte", "epochs": 2.0})
    (rte / "checkpoint-2").mkdir()
    assert work_dir(tmp_path, "rte", {"task": "rte", "epochs": 2.0}, overwrite=True) == rte
    assert (rte / "checkpoint-2").is_dir()  # the same arguments: resumed, with --overwrite too
    with pytest.raises(RunError, match="--epochs: was 2.0, now 3.0"):
        work_dir(tmp_path, "rte", {"task": "rte", "epochs": 3.0})
    assert work_dir(tmp_path, "rte", {"task": "rte", "epochs": 3.0}, overwrite=True) == rte
    assert [p.name for p in rte.iterdir()] == ["run.json"]  # other arguments: --overwrite starts over
    assert work_dir(tmp_path, "rte", {"task": "rte", "epochs": 3.0}) == rte


def test_train_loss_of_a_finetune_resumed_from_its_last_checkpoint(tiny_bert, glue_dir, tmp_path, monkeypatch,
                                                                   capsys):
    from patterncnn.encoders import finetune as ft

    monkeypatch.setattr(ft, "SAVE_STEPS", 2)  # 1 epoch: 3 steps, checkpoints at 2 and 3
    args = tiny_finetune(tiny_bert, glue_dir, epochs=1)
    whole, parted = tmp_path / "whole", tmp_path / "parted"
    assert main([*args, "--out", str(whole)]) == 0
    undo = _stop_after_saving(monkeypatch, lambda state: state.global_step == state.max_steps)
    assert main([*args, "--out", str(parted)]) == 130  # stopped after the final checkpoint, before scoring
    undo()
    capsys.readouterr()
    assert main([*args, "--out", str(parted)]) == 0
    a, b = (json.loads((f / MANIFEST).read_text()) for f in (whole, parted))
    assert b["train"]["resumed_at_step"] == 3 and b["dev"] == a["dev"]
    assert b["train"]["loss"] == pytest.approx(a["train"]["loss"], rel=1e-6)
    said = capsys.readouterr().out  # the terminal says so, with the loss over all steps (the Trainer's own is 0 here)
    assert "resumed from its checkpoint at step 3" in said and f"mean training loss {b['train']['loss']:.4f}" in said


def test_finetune_refuses_nothing_to_train(tiny_bert, glue_dir, tmp_path, capsys):
    base = ["finetune", "--task", "rte", "--model", str(tiny_bert), "--glue-dir", str(glue_dir),
            "--out", str(tmp_path / "ft")]
    for option, value in (("--epochs", "0"), ("--epochs", "-1"), ("--max-train-examples", "0"),
                          ("--max-dev-examples", "0"), ("--batch-size", "0"), ("--learning-rate", "0")):
        with pytest.raises(SystemExit) as stop:
            main([*base, option, value])
        assert stop.value.code == 2
        err = capsys.readouterr().err
        assert f"argument {option}:" in err and "--limit" not in err, err
    assert not (tmp_path / "ft").exists()


def test_a_fine_tune_of_a_fine_tune_is_named_after_the_first_base_and_the_last_task(tmp_path, caplog):
    from patterncnn.encoders.load import _fine_tune_name

    first, second = tmp_path / "ft1", tmp_path / "anything"
    for folder, task, base in ((first, "sst2", {"model": "minilm", "path": str(tmp_path / "gone")}),
                               (second, "mrpc", {"model": str(first), "path": str(first)})):
        folder.mkdir()
        (folder / MANIFEST).write_text(json.dumps({"task": task, "base_model": base}))
    assert _fine_tune_name(str(second), str(second)) == "minilm-mrpc"
    assert encoder_family("minilm-mrpc-1a2b3c4d") == "minilm"
    (second / MANIFEST).write_text(json.dumps({"task": "../x", "base_model": {"model": 3}}))  # edited by hand
    assert _fine_tune_name(str(second), str(second)) == "anything"
    assert "names no base model or GLUE task; " in caplog.text


@pytest.mark.parametrize("field,value", [("epochs", 0), ("learning_rate", -1e-5), ("batch_size", 0)])
def test_the_library_call_refuses_what_cannot_fine_tune_before_any_work(field, value, tmp_path):
    import dataclasses

    from patterncnn.encoders.finetune import FinetuneConfig, finetune

    cfg = dataclasses.replace(FinetuneConfig(), **{field: value})
    with pytest.raises(ValueError, match=f"cannot fine-tune with {field} {value}"):
        finetune("minilm", "rte", None, tmp_path / "out", cfg)
    assert not (tmp_path / "out").exists()


def test_a_fine_tune_of_converted_weights_keeps_saying_so_when_its_base_moves(tiny_bert, glue_dir, tmp_path, capsys):
    # helper 106: the note was found only through the base folder's path recorded at fine-tune time
    import shutil

    from patterncnn.encoders.e5s1 import SOURCE_RECORD

    base = tmp_path / "converted"
    shutil.copytree(tiny_bert, base)
    (base / SOURCE_RECORD).write_text(json.dumps({"note": "weights dequantised from 4-bit (a test)"}))
    out = tmp_path / "ft"
    assert main(["finetune", "--task", "rte", "--model", str(base), "--glue-dir", str(glue_dir), "--out", str(out),
                 "--max-train-examples", "8", "--max-dev-examples", "8", "--epochs", "1", "--batch-size", "8",
                 "--max-length", "32"]) == 0, capsys.readouterr().err
    assert json.loads((out / MANIFEST).read_text())["base_weights"] == "weights dequantised from 4-bit (a test)"
    shutil.rmtree(base)  # moved to another machine or cache
    assert load_encoder(str(out)).weights_note == "fine-tuned from weights dequantised from 4-bit (a test)"
