"""`patterncnn drift`: a model against itself is 1.0 everywhere, against another model below; cosines by hand."""

import json
import shutil

import numpy as np
import pytest

from patterncnn.experiments.drift import map_cosines, summarize, verdict


def test_map_cosines_by_hand():
    a = np.zeros((1, 2, 2, 2))
    b = np.zeros((1, 2, 2, 2))
    a[0, 0] = [[1, 0], [0, 1]]
    b[0, 0] = [[1, 0], [1, 0]]  # flattened: (1,0,0,1) . (1,0,1,0) = 1, norms sqrt2 * sqrt2
    a[0, 1] = [[0.5, 0.5], [0.5, 0.5]]
    b[0, 1] = [[0.5, 0.5], [0.5, 0.5]]
    assert map_cosines(a, b) == pytest.approx(np.array([[0.5, 1.0]]))


def test_summary_flags_the_last_two_layers():
    s = np.array([[0.9, 0.9], [0.95, 0.97], [0.5, 0.6], [0.4, 0.7]])
    res = summarize([{"sum": 2 * s, "sumsq": 2 * s**2, "n": np.array(2)}])
    assert res["examples"] == 2 and res["lowest_two_layers"] == [2, 3] and res["last_two_change_most"]
    assert np.allclose(res["std"], 0, atol=1e-6)
    res = summarize([{"sum": s[::-1], "sumsq": s[::-1] ** 2, "n": np.array(1)}])
    assert res["last_two_change_most"] is False and verdict(res) == "no"
    tiny = 1 - (1 - s) / 1000  # the same order, but no layer's mean moves by 0.001 of cosine: not asked
    res = summarize([{"sum": tiny, "sumsq": tiny**2, "n": np.array(1)}])
    assert res["lowest_two_layers"] == [2, 3] and res["last_two_change_most"] is None
    assert verdict(res).startswith("undecided: no layer changed by 0.001")


def test_drift_of_a_model_with_itself_is_one(tiny_bert, glue_dir, tmp_path, capsys, caplog):
    from patterncnn.cli import main

    out = tmp_path / "self"
    assert main(["drift", str(tiny_bert), str(tiny_bert), "--task", "rte", "--task", "sst2", "--glue-dir",
                 str(glue_dir), "--limit", "10", "--out", str(out)]) == 0
    res = json.loads((out / "drift.json").read_text())
    for task in ("rte", "sst2"):
        cos = np.array(res["tasks"][task]["cosine"])
        assert cos.shape == (3, 4) and np.allclose(cos, 1.0, atol=1e-6)
        assert res["tasks"][task]["examples"] == 10
    assert len((out / "drift.csv").read_text().splitlines()) == 1 + 2 * 12
    assert (out / "drift.png").stat().st_size > 1000 and not (out / ".work").exists()
    assert "/" not in res["model_a"]["path"]  # no absolute paths in a result meant to be committed
    printed = capsys.readouterr().out
    assert "; last two change most: undecided" in printed and "lowest layers" not in printed  # no layer changed
    assert any("have the same weights" in r.getMessage() for r in caplog.records)  # the CLI's log shows it
    assert res["tasks"]["rte"]["last_two_change_most"] is None


def test_the_same_weights_in_another_file_format_are_named_the_same(tiny_bert, tmp_path, caplog):
    """The warning compares the weights, not their files: a copy saved as pytorch_model.bin has another SHA-256."""
    import torch
    from transformers import BertModel

    from patterncnn.encoders.load import load_encoder
    from patterncnn.experiments.drift import _same_weights

    copy = shutil.copytree(tiny_bert, tmp_path / "bin")
    torch.save(BertModel.from_pretrained(tiny_bert).state_dict(), copy / "pytorch_model.bin")
    (copy / "model.safetensors").unlink()
    a, b = load_encoder(str(tiny_bert)), load_encoder(str(copy))
    assert a.fingerprint["sha256"] != b.fingerprint["sha256"]
    assert _same_weights(a, b)
    b.model.encoder.layer[0].attention.self.query.weight.data[0, 0] += 1e-3
    assert not _same_weights(a, b)


def test_drift_against_another_model_is_below_one(tiny_bert, tmp_path, glue_dir):
    import torch
    from transformers import BertModel

    from patterncnn.core.glue import load_split
    from patterncnn.encoders.load import load_encoder
    from patterncnn.experiments.drift import run_drift

    other = tmp_path / "other"
    model = BertModel.from_pretrained(str(tiny_bert))
    with torch.no_grad():
        model.encoder.layer[2].attention.self.query.weight.mul_(20.0)  # only the last layer's maps change
    model.save_pretrained(other)
    for f in tiny_bert.glob("*.txt"):
        (other / f.name).write_text(f.read_text())
    for f in tiny_bert.glob("*token*.json"):
        (other / f.name).write_text(f.read_text())
    a, b = load_encoder(str(tiny_bert), 64), load_encoder(str(other), 64)
    res = run_drift(a, b, [load_split("rte", "dev", glue_dir, limit=8)], tmp_path / "out")
    cos = np.array(res["tasks"]["rte"]["cosine"])
    assert np.allclose(cos[:2], 1.0, atol=1e-6) and (cos[2] < 1 - 1e-4).all()
    assert res["tasks"]["rte"]["lowest_two_layers"][-1] == 2


def test_drift_refuses_two_models_fed_other_inputs_from_the_same_tokens(tiny_bert, glue_dir, tmp_path, capsys):
    # From helper 91's review (NIT 8): drift compared the token strings only; a copy whose tokenizer config leaves out
    # token_type_ids gives the same tokens, its model sees type 0 for segment B, and drift reported a change.
    from patterncnn.cli import main

    copy = shutil.copytree(tiny_bert, tmp_path / "no-types")
    config = json.loads((copy / "tokenizer_config.json").read_text())
    config["model_input_names"] = ["input_ids", "attention_mask"]
    (copy / "tokenizer_config.json").write_text(json.dumps(config))
    out = tmp_path / "out"
    assert main(["drift", str(tiny_bert), str(copy), "--task", "rte", "--glue-dir", str(glue_dir), "--limit", "4",
                 "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert f"(token_type_ids given to {tiny_bert} only)" in err, err
    assert "feed example" in err and "the same tokenizer and its settings" in err and not (out / "drift.json").exists()


def test_drift_resumes_from_saved_windows(tiny_bert, glue_dir, tmp_path, monkeypatch):
    from patterncnn.core.glue import load_split
    from patterncnn.encoders.load import load_encoder
    from patterncnn.experiments import drift as drift_mod

    monkeypatch.setattr(drift_mod, "WINDOW", 4)
    enc = load_encoder(str(tiny_bert), 64)
    split = load_split("rte", "dev", glue_dir, limit=10)
    calls = []
    real = drift_mod.drift_window

    def failing(a, b, window, batch_size=16, on_example=None):
        calls.append(len(window))
        if len(calls) == 2:
            raise KeyboardInterrupt
        return real(a, b, window, batch_size)

    monkeypatch.setattr(drift_mod, "drift_window", failing)
    with pytest.raises(KeyboardInterrupt):
        drift_mod.run_drift(enc, enc, [split], tmp_path / "r")
    assert len(list((tmp_path / "r" / ".work" / "rte").glob("window-*.npz"))) == 1
    calls.clear()
    monkeypatch.setattr(drift_mod, "drift_window",
                        lambda a, b, w, bs=16, on_example=None: calls.append(1) or real(a, b, w, bs))
    res = drift_mod.run_drift(enc, enc, [split], tmp_path / "r")
    assert len(calls) == 2 and res["tasks"]["rte"]["examples"] == 10  # the first window was not recomputed


def test_an_unloadable_encoder_gets_a_fix_that_fits_drift(tiny_bert, glue_dir, tmp_path, capsys, monkeypatch):
    """drift takes its encoders as A and B: the message names the encoder and no --model option drift lacks."""
    from patterncnn.cli import main

    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    missing = tmp_path / "models-ft" / "nope"
    assert main(["drift", str(tiny_bert), str(missing), "--task", "rte", "--limit", "4", "--glue-dir", str(glue_dir),
                 "--out", str(tmp_path / "d")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and f"no folder '{missing}'" in err and "Fix: name an encoder as a hub id" in err
    assert "--model" not in err, err


def test_an_interrupted_drift_says_resume_only_when_a_window_was_saved(tiny_bert, glue_dir, tmp_path, capsys,
                                                                      monkeypatch):
    from patterncnn.cli import main
    from patterncnn.experiments import drift as drift_mod

    monkeypatch.setattr(drift_mod, "WINDOW", 4)
    real, calls = drift_mod.drift_window, []

    def interrupted_at(n):
        def window(a, b, w, batch_size=16, on_example=None):
            calls.append(1)
            if len(calls) == n:
                raise KeyboardInterrupt
            return real(a, b, w, batch_size)
        return window

    out = tmp_path / "d7"
    args = ["drift", str(tiny_bert), str(tiny_bert), "--task", "rte", "--limit", "10", "--glue-dir", str(glue_dir),
            "--max-length", "32", "--out", str(out)]
    monkeypatch.setattr(drift_mod, "drift_window", interrupted_at(1))  # before the first window finished
    assert main(args) == 130
    err = capsys.readouterr().err
    assert f"no windows had finished, so nothing is saved under {out}" in err and "to resume" not in err, err
    assert not out.exists()  # as it says: not even the run's stamp, nor the folder this command made
    made = tmp_path / "new" / "runs" / "d"  # with the parents it made; a folder that was there stays
    calls.clear()
    assert main([*args[:-1], str(made)]) == 130 and not (tmp_path / "new").exists()
    out.mkdir()
    calls.clear()
    assert main(args) == 130 and out.is_dir() and not any(out.iterdir())
    capsys.readouterr()
    calls.clear()
    monkeypatch.setattr(drift_mod, "drift_window", interrupted_at(2))  # one window saved
    assert main(args) == 130
    assert f"finished windows are saved under {out}; run the same command again to resume" in capsys.readouterr().err
    # with --overwrite the same command drops them and starts over: the note says to rerun without it (helper 104)
    calls.clear()
    assert main([*args, "--overwrite"]) == 130
    assert (f"finished windows are saved under {out}; run the same command again without --overwrite to resume "
            f"(with it, the run starts over)") in capsys.readouterr().err
    calls.clear()
    monkeypatch.setattr(drift_mod, "drift_window", interrupted_at(99))  # as advised: the saved window is read back
    assert main(args) == 0 and len(calls) == 2  # windows of 4 of 10 examples: the first read back, two computed


class Bar:
    """A tqdm stand-in that records its updates; ``stop_at``: raise KeyboardInterrupt at that many examples."""

    made: list = []
    stop_at: int | None = None

    def __init__(self, total, **_):
        self.total, self.updates = total, []
        Bar.made.append(self)

    def update(self, n=1):
        self.updates.append(n)
        if Bar.stop_at is not None and sum(self.updates) >= Bar.stop_at:
            raise KeyboardInterrupt

    def close(self):
        self.closed = True


@pytest.mark.parametrize("experiment", ["drift", "special_tokens"])
def test_the_progress_bar_ticks_each_example_and_a_resumed_window_at_once(experiment, tiny_bert, glue_dir,
                                                                            tmp_path, monkeypatch):
    """A window's examples tick the bar as they are computed (not all at once when the window ends); a window read
    back from an interrupted run ticks it by its size; the bar ends at the number of examples."""
    import importlib

    from patterncnn.core.glue import load_split
    from patterncnn.encoders.load import load_encoder
    from patterncnn.experiments.special_tokens import TokenClasses

    mod = importlib.import_module(f"patterncnn.experiments.{experiment}")
    monkeypatch.setattr(mod, "WINDOW", 4)
    enc = load_encoder(str(tiny_bert), 64)
    split = load_split("rte", "dev", glue_dir, limit=10)

    def run(out):
        if experiment == "drift":
            return mod.run_drift(enc, enc, [split], out, progress=Bar)
        return mod.run_special_tokens(enc, [split], TokenClasses.for_tokenizer(enc.tokenizer), out, progress=Bar)

    monkeypatch.setattr(Bar, "made", [])
    run(tmp_path / "fresh")
    assert Bar.made[-1].updates == [1] * 10
    monkeypatch.setattr(Bar, "stop_at", 6)  # interrupted in the second window: the first one is saved
    with pytest.raises(KeyboardInterrupt):
        run(tmp_path / "resumed")
    assert Bar.made[-1].updates == [1] * 6
    assert Bar.made[-1].closed  # before the interruption's message: not redrawn after it
    monkeypatch.setattr(Bar, "stop_at", None)
    run(tmp_path / "resumed")
    assert Bar.made[-1].updates == [4] + [1] * 6


def test_another_commands_unfinished_run_is_refused_naming_it(tiny_bert, tiny_classifier, glue_dir, tmp_path, capsys,
                                                              monkeypatch):
    """An interrupted drift's saved windows are never dropped by a census (or special-tokens) into the same folder,
    --overwrite or not: the refusal names the drift and how to resume it. Once the drift has finished, both results
    live side by side, and the census's --overwrite replaces the census only."""
    from patterncnn.cli import main
    from patterncnn.experiments import drift as drift_mod

    monkeypatch.setattr(drift_mod, "WINDOW", 4)
    real = drift_mod.drift_window
    calls = []

    def interrupted(a, b, w, batch_size=16, on_example=None):
        calls.append(1)
        if len(calls) == 2:
            raise KeyboardInterrupt
        return real(a, b, w, batch_size)

    out = tmp_path / "shared"
    drift = ["drift", str(tiny_bert), str(tiny_bert), "--task", "rte", "--limit", "10", "--glue-dir", str(glue_dir),
             "--max-length", "32", "--out", str(out)]
    monkeypatch.setattr(drift_mod, "drift_window", interrupted)
    assert main(drift) == 130
    saved = out / ".work" / "rte" / "window-00000.npz"
    assert saved.is_file()
    capsys.readouterr()
    census = ["census", "--task", "rte", "--model", str(tiny_bert), "--limit", "3", "--glue-dir", str(glue_dir),
              "--classifier", str(tiny_classifier[1]), "--out", str(out)]
    for args in (census, census + ["--overwrite"],
                 ["special-tokens", "--model", str(tiny_bert), "--task", "rte", "--limit", "3", "--glue-dir",
                  str(glue_dir), "--out", str(out), "--overwrite"]):
        assert main(args) == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and f"{out} holds an unfinished `patterncnn drift` run of rte" in err, err
        assert "run that drift command again to resume it, or give this" in err and "another --out" in err, err
        assert saved.is_file()
    assert main(["report", str(out)]) == 2  # names the drift, not a census to resume
    assert "holds an unfinished `patterncnn drift` run, not a census" in capsys.readouterr().err
    monkeypatch.setattr(drift_mod, "drift_window", real)
    assert main(drift) == 0  # resumed
    assert main(census) == 0 and main(census + ["--overwrite"]) == 0
    assert (out / "drift.json").is_file() and (out / "census.json").is_file() and not (out / ".work").exists()


def test_a_run_stopped_before_its_first_window_leaves_nothing_for_another_command(tiny_bert, glue_dir, tmp_path,
                                                                                  caplog):
    """The stamp of another command's run that saved nothing is replaced, with a note naming that command."""
    import logging

    from patterncnn.core.work import work_dir

    out = tmp_path / "o"
    work_dir(out, "rte", {"task": "rte", "limit": 200}, command="drift")
    with caplog.at_level(logging.INFO):
        work_dir(out, "rte", {"task": "rte", "limit": 3}, command="census")
    assert any("unfinished `patterncnn drift` run of rte stopped before its first part" in r.getMessage()
               for r in caplog.records)
    assert json.loads((out / ".work" / "rte" / "run.json").read_text())["command"] == "census"


def test_a_run_stamped_before_stamps_named_their_command_is_named_when_resumed(tmp_path):
    """An unfinished run from an earlier version (a stamp without "command") resumes as before, and its stamp then
    names the command, so another command's --overwrite can no longer drop its parts."""
    from patterncnn.core.work import RunError, refuse_other_runs, run_key, work_dir

    out, params = tmp_path / "o", {"task": "rte", "limit": 200}
    work = out / ".work" / "rte"
    work.mkdir(parents=True)
    (work / "run.json").write_text(json.dumps({"key": run_key(params), "params": params}))  # the old stamp
    (work / "window-00000.npz").write_bytes(b"a finished part")
    assert work_dir(out, "rte", params, command="drift") == work  # resumes: same arguments
    assert json.loads((work / "run.json").read_text())["command"] == "drift"
    with pytest.raises(RunError, match="holds an unfinished `patterncnn drift` run of rte"):
        refuse_other_runs(out, "census")
    assert (work / "window-00000.npz").exists()


def test_a_rerun_leaving_out_a_task_with_finished_parts_is_refused_before_anything_is_dropped(tmp_path):
    """drift, special-tokens and disable check their output folder as the census does (patterncnn.core.work): a
    rerun whose tasks leave out one with finished parts is refused; one that stopped before its first part, or
    --overwrite, is not."""
    from patterncnn.core.work import RunError, prepare_out, work_dir

    out = tmp_path / "o"
    for task in ("sst2", "rte", "mrpc"):
        work_dir(out, task, {"task": task}, command="drift")
    (out / ".work" / "sst2" / "window-00000.npz").write_bytes(b"a finished part")  # rte and mrpc: a stamp alone
    with pytest.raises(RunError, match=r"unfinished drift run of sst2, which this run leaves out; run it with those "
                                       r"tasks too \(--task: rte, sst2\)"):
        prepare_out(out, "drift.json", False, "drift", ["rte"])
    assert (out / ".work" / "sst2" / "window-00000.npz").exists()
    prepare_out(out, "drift.json", False, "drift", ["sst2", "rte"])  # mrpc has nothing to keep
    prepare_out(out, "drift.json", True, "drift", ["rte"])
    assert not (out / ".work").exists()


def test_overwrite_of_a_run_with_other_arguments_is_logged_in_its_callers_spelling(tmp_path, caplog):
    """The note that --overwrite starts another run over names the flag on the command line and overwrite=True in a
    Python call (core.args.spelled)."""
    import logging

    from patterncnn.core.args import python_errors
    from patterncnn.core.work import work_dir

    out = tmp_path / "o"
    work_dir(out, "rte", {"task": "rte", "limit": 200}, command="drift")
    (out / ".work" / "rte" / "window-00000.npz").write_bytes(b"a finished part")

    def drift(limit: int = 3, overwrite: bool = False):  # a public function's signature, as python_errors wraps it
        return work_dir(out, "rte", {"task": "rte", "limit": limit}, overwrite=overwrite, command="drift")

    with caplog.at_level(logging.INFO):
        drift(limit=3, overwrite=True)  # as the command line calls it
    assert "--overwrite starts the unfinished run of rte with other arguments (--limit" in caplog.text
    (out / ".work" / "rte" / "window-00000.npz").write_bytes(b"a finished part")
    caplog.clear()
    with caplog.at_level(logging.INFO):
        python_errors(drift)(limit=4, overwrite=True)
    assert "overwrite=True starts the unfinished run of rte with other arguments (limit" in caplog.text, caplog.text


def test_drift_and_special_tokens_count_the_inputs_they_cut(tiny_bert, glue_dir, tmp_path, capsys):
    # Both cut long inputs at --max-length without a word, where census, sample and analyze count them (helper 95)
    import warnings

    from patterncnn.cli import main
    from patterncnn.core.errors import TruncationWarning
    from patterncnn.core.glue import load_split
    from patterncnn.encoders.load import load_encoder

    enc = load_encoder(str(tiny_bert), max_length=48)  # a length that cuts some of these inputs, not all
    cut = sum(enc.tokenize(ex.texts)[1] for ex in load_split("sst2", "dev", glue_dir, limit=12, seed=0).examples)
    assert 0 < cut < 12, cut
    common = ["--task", "sst2", "--limit", "12", "--glue-dir", str(glue_dir), "--max-length", "48"]
    warnings.simplefilter("error", TruncationWarning)  # the commands print the note, and do not warn it too
    assert main(["drift", str(tiny_bert), str(tiny_bert), *common, "--out", str(tmp_path / "d")]) == 0
    assert f"note: {cut} input(s) longer than --max-length 48 were truncated" in capsys.readouterr().out
    assert json.loads((tmp_path / "d" / "drift.json").read_text())["tasks"]["sst2"]["truncated"] == cut
    assert main(["special-tokens", "--model", str(tiny_bert), *common, "--out", str(tmp_path / "s")]) == 0
    assert f"note: {cut} input(s) longer than --max-length 48 were truncated" in capsys.readouterr().out
    assert json.loads((tmp_path / "s" / "special_tokens.json").read_text())["tasks"]["sst2"]["truncated"] == cut


def test_the_python_api_of_drift_and_special_tokens_warns_of_cut_inputs(tiny_bert, glue_dir, tmp_path):
    # The commands printed a note; patterncnn.drift(...) and special_tokens(...) said nothing (helper 98's review)
    import patterncnn
    from patterncnn.census import TruncationWarning

    with pytest.warns(TruncationWarning, match=r"input\(s\) longer than max_length 48 were truncated \(drift.json"):
        patterncnn.drift(str(tiny_bert), str(tiny_bert), "sst2", 12, glue_dir, tmp_path / "d", max_length=48)
    with pytest.warns(TruncationWarning, match=r"were truncated \(special_tokens.json"):
        patterncnn.special_tokens(str(tiny_bert), ["sst2"], 12, glue_dir, tmp_path / "s", max_length=48)
