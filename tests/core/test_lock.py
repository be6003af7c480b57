"""One writer at a time per output folder: a run holds the folder's lock (patterncnn.core.fileio.hold) for as long as
it runs; a second run there is refused at once, naming the first, and nothing of the first is touched."""

import contextlib
import errno
import os
import subprocess
import sys
import textwrap
import threading
from pathlib import Path

import pytest

from patterncnn.cli import drop_empty
from patterncnn.core import fileio
from patterncnn.core.args import python_errors
from patterncnn.core.fileio import LOCK, output_folder, writer_scope
from patterncnn.core.work import prepare_out

ENV = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path), "HF_HUB_OFFLINE": "1"}

# The first run: takes OUT as a census does, saves a finished part, says "held", waits for a line, then finishes.
FIRST = textwrap.dedent("""
    import sys
    from patterncnn.core.fileio import writer_scope
    from patterncnn.core.work import finish, prepare_out, save_part, work_dir, write_result
    import numpy as np
    out = sys.argv[1]
    with writer_scope("patterncnn census --task rte --out " + out):
        out = prepare_out(out, "census.json", False, "census", ["rte"])
        save_part(work_dir(out, "rte", {"limit": 8}, command="census") / "window-00000.npz", {"x": np.arange(3)})
        print("held", flush=True)
        sys.stdin.readline()
        write_result(out, "census.json", {"done": True})
        finish(out)
""")

# A run that takes FOLDER and writes nothing yet: says "held", waits for a line.
HOLD = textwrap.dedent("""
    import sys
    from patterncnn.core.fileio import output_folder, writer_scope
    with writer_scope("patterncnn sample --out " + sys.argv[1]):
        output_folder(sys.argv[1], ("store.json",), False)
        print("held", flush=True)
        sys.stdin.readline()
""")

# Another process trying to take FOLDER: prints "free", or the refusal.
TRY = textwrap.dedent("""
    import sys
    from patterncnn.core.fileio import FolderBusy, output_folder, writer_scope
    try:
        with writer_scope("probe"):
            output_folder(sys.argv[1], ("probe.json",), False)
        print("free")
    except FolderBusy as e:
        print(e)
""")


@contextlib.contextmanager
def held_elsewhere(folder: Path):
    """Another process holding ``folder`` as a run does (HOLD) until the block ends (then it is killed)."""
    first = subprocess.Popen([sys.executable, "-c", HOLD, str(folder)], env=ENV, stdin=subprocess.PIPE,
                             stdout=subprocess.PIPE, text=True)
    try:
        assert first.stdout.readline().strip() == "held"
        yield first
    finally:
        first.kill()
        first.wait()


def in_another_thread(fn) -> BaseException | None:
    """What ``fn()`` raises run in a thread of its own (a run of this process in another scope), or None."""
    raised = []

    def run():
        try:
            fn()
        except BaseException as e:  # noqa: BLE001 - handed back to the test
            raised.append(e)

    thread = threading.Thread(target=run)
    thread.start()
    thread.join(30)
    return raised[0] if raised else None


def taken(folder: Path) -> str:
    """What another process gets trying to take ``folder``: "free", or the refusal's message."""
    done = subprocess.run([sys.executable, "-c", TRY, str(folder)], env=ENV, capture_output=True, text=True,
                          timeout=60)
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


def contents(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def test_a_second_command_on_a_folder_being_written_is_refused_and_the_first_finishes(tiny_bert, glue_dir, tmp_path):
    out = tmp_path / "runs" / "x"
    first = subprocess.Popen([sys.executable, "-c", FIRST, str(out)], env=ENV, stdin=subprocess.PIPE,
                             stdout=subprocess.PIPE, text=True)
    try:
        assert first.stdout.readline().strip() == "held"
        before = contents(out)
        drift = [sys.executable, "-c", "import sys; from patterncnn.cli import main; sys.exit(main())", "drift",
                 str(tiny_bert), str(tiny_bert), "--task", "rte", "--limit", "4", "--glue-dir", str(glue_dir),
                 "--max-length", "32", "--out", str(out)]
        for extra in ([], ["--overwrite"]):  # --overwrite would have dropped the first run's work folder
            second = subprocess.run(drift + extra, env=ENV, capture_output=True, text=True, timeout=120)
            assert second.returncode == 2, second.stderr
            err = second.stderr
            assert err.count("\n") == 1 and f"--out {out} is being written by another patterncnn run" in err, err
            assert f"`patterncnn census --task rte --out {out}` (pid {first.pid}, started " in err, err
            assert f"wait for it to end, stop it (kill {first.pid}), or choose another --out" in err, err
            assert contents(out) == before  # nothing of the first run touched
        first.stdin.write("go\n")
        first.stdin.flush()
        assert first.wait(timeout=60) == 0
    finally:
        first.kill()
        first.wait()
    assert (out / "census.json").is_file() and not (out / ".work").exists()  # the first finished normally
    again = subprocess.run(drift, env=ENV, capture_output=True, text=True, timeout=120)
    assert again.returncode == 0, again.stderr
    assert (out / "drift.json").is_file() and (out / "census.json").is_file()
    assert taken(out) == "free"  # released when the command ended


def test_the_lock_is_reentrant_within_one_process_and_released_with_the_outermost_scope(tmp_path):
    out = tmp_path / "o"
    with writer_scope("patterncnn drift --out o"):
        output_folder(out, ("a.json",), False)
        prepare_out(out, "b.json", False, "drift")  # the same folder again: counted, not refused by itself
        with writer_scope("an inner call"):  # a call made by the command: joins its scope
            output_folder(out, ("c.json",), False)
        assert "`patterncnn drift --out o` (pid" in taken(out)  # still held: the outer scope has not ended
        (out / "a.json").write_text("{}")
    assert taken(out) == "free"
    assert sorted(os.listdir(out)) == ["a.json"]  # the lock file goes with the lock: the folder as the run left it


def test_another_thread_of_the_same_process_is_refused_not_counted_in(tmp_path):
    # the notebook case: a census running in a background thread, and another on the same folder; both went through
    out, held, release, seen = tmp_path / "o", threading.Event(), threading.Event(), []

    def first():
        with writer_scope("patterncnn.census() in a background thread"):
            output_folder(out, ("census.json",), False)
            held.set()
            release.wait(30)

    thread = threading.Thread(target=first)
    thread.start()
    try:
        assert held.wait(30)
        with pytest.raises(fileio.FolderBusy, match=r"is being written by another run in this process, "
                                                    r"`patterncnn.census\(\) in a background thread` \(started "):
            with writer_scope("patterncnn.census() in the notebook"):
                output_folder(out, ("census.json",), False)
                seen.append("taken")
    finally:
        release.set()
        thread.join(30)
    assert seen == []
    with writer_scope("after"):  # the first has ended: the folder is free again
        output_folder(out, ("census.json",), False)


def test_a_folder_inside_another_runs_output_folder_is_refused(tmp_path):
    # a census into OUT/sub while another run writes OUT wrote its six files there (exit 0)
    outer = tmp_path / "c"
    with held_elsewhere(outer):
        assert taken(outer / "sub").startswith(f"--out {outer / 'sub'} is inside {outer}, which is being written by "
                                               f"another patterncnn run, `patterncnn sample --out {outer}` (pid ")
        assert not (outer / "sub").exists()
    assert taken(outer / "sub") == "free"

    def other():
        with writer_scope("another thread"):
            output_folder(outer / "x", ("census.json",), False)

    with writer_scope("a census of two encoders"):  # a run's own folders nest: OUT and OUT/<tag>
        output_folder(outer, (), True)
        output_folder(outer / "minilm-53aa5117", ("census.json",), False)
        # the same in-process rule holds for another thread's run
        assert isinstance(in_another_thread(other), fileio.FolderBusy)


@pytest.mark.parametrize("stop", [RuntimeError, KeyboardInterrupt])
def test_the_lock_is_released_when_the_run_fails_or_is_interrupted(tmp_path, stop):
    out = tmp_path / "o"
    out.mkdir()
    (out / "kept.txt").write_text("x")
    with pytest.raises(stop):
        with writer_scope("patterncnn census"):
            output_folder(out, ("census.json",), False)
            assert taken(out).startswith(f"--out {out} is being written by another patterncnn run")
            raise stop
    assert taken(out) == "free"
    with writer_scope("patterncnn census"):  # and this process takes it again
        output_folder(out, ("census.json",), False)


def test_a_python_api_call_holds_the_folder_until_it_returns(tmp_path):
    out = tmp_path / "o"
    seen = []

    def run(out, overwrite=False):
        out = prepare_out(out, "r.json", overwrite, "drift")
        seen.append(taken(out))
        (out / "r.json").write_text("{}")

    api = python_errors(run)  # as patterncnn.drift and the other public functions are given
    api(out)
    assert seen[0].startswith(f"--out {out} is being written by another patterncnn run, `patterncnn.run() in ")
    assert taken(out) == "free"
    api(out, overwrite=True)  # the next call on the same folder
    assert len(seen) == 2 and seen[1] != "free" and taken(out) == "free"


def test_a_folder_the_run_made_is_removed_with_its_lock_when_left_empty(tmp_path):
    made = tmp_path / "new" / "runs"
    with writer_scope("patterncnn census"):
        output_folder(made / "x", ("census.json",), False)
        assert (made / "x" / LOCK).is_file()
    assert not (tmp_path / "new").exists()  # nothing written: nothing left, not the lock file, not the parents made
    with writer_scope("patterncnn census"):
        output_folder(made / "x", ("census.json",), False)
        (made / "notes.txt").write_text("kept")  # written beside it meanwhile: that parent stays, with it
    assert not (made / "x").exists() and (made / "notes.txt").read_text() == "kept"
    (made / "notes.txt").unlink()
    made.rmdir()
    (tmp_path / "new").rmdir()
    (made / "x").mkdir(parents=True)
    (made / "x" / LOCK).write_text("")  # the lock file a killed run left, all the folder holds
    drop_empty(tmp_path / "new")  # what the command line does with the folder it made, once refused
    assert not (tmp_path / "new").exists()


def test_a_folder_holding_only_another_runs_lock_is_not_removed(tmp_path):
    out = tmp_path / "new"
    with held_elsewhere(out):
        drop_empty(out)  # a second command refused in a folder it believed it made
        assert os.listdir(out) == [LOCK] and taken(out) != "free"


def test_no_flock_on_the_file_system_warns_and_writes_unlocked(tmp_path, monkeypatch, caplog):
    def unsupported(fd, op):
        raise OSError(errno.ENOLCK, "No locks available")

    monkeypatch.setattr(fileio.fcntl, "flock", unsupported)
    with writer_scope("patterncnn census"):
        assert output_folder(tmp_path / "o", ("census.json",), False) == tmp_path / "o"
    assert "not locked against another run writing into it at once: its file system has no flock" in caplog.text


def test_a_killed_runs_lock_file_is_no_lock_and_the_next_run_takes_it_over(tmp_path):
    out = tmp_path / "o"
    with held_elsewhere(out):
        pass  # then SIGKILLed: its lock goes with the process, its file stays
    assert os.listdir(out) == [LOCK]
    assert taken(out) == "free" and os.listdir(out) == []  # taken, then removed as the probe ended


def test_a_lock_file_this_user_cannot_write_still_locks(tmp_path, monkeypatch):
    out = tmp_path / "o"
    out.mkdir()
    (out / LOCK).write_text("")  # left read-only by another user's run: its record cannot be written, it still locks
    real_open = os.open

    def read_only(path, flags, *args, **kwargs):  # as a file of another user opens for this one (the tests run as root)
        if str(path).endswith(LOCK) and flags & (os.O_RDWR | os.O_WRONLY):
            raise PermissionError(errno.EACCES, "Permission denied", str(path))
        return real_open(path, flags, *args, **kwargs)

    monkeypatch.setattr(fileio.os, "open", read_only)
    with writer_scope("patterncnn census"):
        output_folder(out, ("census.json",), False)
        assert taken(out) == f"--out {out} is being written by another patterncnn run (its record cannot be read); " \
                             f"wait for it to end, stop it, or choose another --out"
    assert taken(out) == "free" and not (out / LOCK).exists()


def test_a_ctrl_c_while_the_locks_are_released_still_releases_every_one(tmp_path, monkeypatch):
    first, second = tmp_path / "a", tmp_path / "b"
    real_samestat, calls = os.path.samestat, []

    def interrupted_once(*args):  # the Ctrl-C lands in the middle of releasing the first lock
        calls.append(args)
        if len(calls) == 1:
            raise KeyboardInterrupt
        return real_samestat(*args)

    with pytest.raises(KeyboardInterrupt):
        with writer_scope("patterncnn census"):
            output_folder(first, ("census.json",), False)
            output_folder(second, ("census.json",), False)
            monkeypatch.setattr(fileio.os.path, "samestat", interrupted_once)
    monkeypatch.undo()
    assert taken(first) == "free" and taken(second) == "free"  # neither left locked until the process ends
    with writer_scope("patterncnn census"):  # and this process takes both again
        output_folder(first, ("census.json",), False)
        output_folder(second, ("census.json",), False)


# Another run arriving while a fine-tune swaps its model into OUT: on each "take" line it tries to take OUT (as a
# fine-tune with --overwrite does) and says "busy", or "took" and keeps it until its input ends.
ARRIVING = textwrap.dedent("""
    import sys
    from patterncnn.core.fileio import FolderBusy, output_folder, writer_scope
    for line in sys.stdin:
        with writer_scope("patterncnn finetune --out " + sys.argv[1]):
            try:
                output_folder(sys.argv[1], (), True)
            except FolderBusy:
                print("busy", flush=True)
                continue
            print("took", flush=True)
            sys.stdin.read()
""")


def _fine_tune_out(out: Path) -> Path:
    """OUT as a fine-tune with --overwrite leaves it before its swap: the old model, and the new one in .work."""
    (out / "config.json").write_text("old")
    model = out / ".work" / "sst2" / "model"
    model.mkdir(parents=True)
    (model / "config.json").write_text("new")
    return model


@pytest.mark.parametrize("exchange", [True, False], ids=["atomic-exchange", "two-renames"])
def test_a_run_arriving_while_a_fine_tune_swaps_its_model_in_loses_nothing(tmp_path, monkeypatch, exchange):
    # Before each rename of the swap another process tries to take OUT. With the atomic exchange OUT is never
    # missing, so it is refused every time and the model lands. Without it, it takes OUT between the two renames;
    # the swap can then neither finish nor be undone, and must keep both the old folder and the new model (it once
    # deleted both).
    from patterncnn.encoders.finetune import _replace

    out = tmp_path / "out"
    other = subprocess.Popen([sys.executable, "-c", ARRIVING, str(out)], env=ENV, stdin=subprocess.PIPE,
                             stdout=subprocess.PIPE, text=True)
    answers = []

    def arriving(fn):
        def call(*args, **kwargs):
            if "took" not in answers:
                other.stdin.write("take\n")
                other.stdin.flush()
                answers.append(other.stdout.readline().strip())
            return fn(*args, **kwargs)
        return call

    if not exchange:
        monkeypatch.setattr(fileio, "_exchange", lambda a, b: False)
    try:
        with writer_scope("patterncnn finetune --overwrite --out " + str(out)):
            output_folder(out, (), True)
            model = _fine_tune_out(out)
            (model / "model.safetensors").write_text("new weights")
            monkeypatch.setattr(fileio, "_exchange", arriving(fileio._exchange))
            monkeypatch.setattr(os, "rename", arriving(os.rename))
            if exchange:
                _replace(out, model)
            else:
                with pytest.raises(fileio.OutputError) as refused:
                    _replace(out, model)
            monkeypatch.undo()
    finally:
        other.stdin.close()
        other.wait(30)
    if exchange:
        assert set(answers) == {"busy"} and len(answers) == 2  # before the model's move aside, and the exchange
        assert contents(out) == {"config.json": b"new", "model.safetensors": b"new weights"}
        assert sorted(p.name for p in tmp_path.iterdir()) == ["out"]  # the old folder is gone, and nothing else
    else:
        assert answers == ["busy"] * 3 + ["took"]  # refused before the model's move, the exchange and OUT's move
        said = str(refused.value)
        kept_old = Path(said.split("what was there is kept in ")[1].split(";")[0])
        kept_new = Path(said.split("the fine-tuned model is in ")[1])
        assert {k: v for k, v in contents(kept_old).items() if k != LOCK} == {"config.json": b"old"}
        assert {k: v for k, v in contents(kept_new).items() if k != LOCK} == {"config.json": b"new",
                                                                             "model.safetensors": b"new weights"}


@pytest.mark.parametrize("exchange", [True, False], ids=["atomic-exchange", "two-renames"])
def test_a_ctrl_c_during_a_fine_tune_s_swap_lands_once_the_model_is_in_place(tmp_path, monkeypatch, ctrl_c, exchange):
    # it once left OUT missing, or the old folder hidden beside OUT, or a false "move it back by hand"
    import signal

    from patterncnn.encoders.finetune import _replace

    out = tmp_path / "out"
    if not exchange:
        monkeypatch.setattr(fileio, "_exchange", lambda a, b: False)
    step = fileio._exchange if exchange else os.rename

    def interrupted(*args):
        done = step(*args)
        os.kill(os.getpid(), signal.SIGINT)  # right after the model's move aside, the exchange, each rename
        return done

    with pytest.raises(KeyboardInterrupt):
        with writer_scope("patterncnn finetune --overwrite"):
            output_folder(out, (), True)
            model = _fine_tune_out(out)
            monkeypatch.setattr(fileio, "_exchange", interrupted) if exchange else \
                monkeypatch.setattr(os, "rename", interrupted)
            _replace(out, model)
    monkeypatch.undo()
    assert contents(out) == {"config.json": b"new"}  # the lock went with the run
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out"]  # the old folder removed, nothing hidden left


def test_a_fine_tune_into_a_symlinked_out_replaces_the_folder_it_points_to(tmp_path):
    # it once replaced the link by a folder, and left the old model, its checkpoints and a lock file at the target
    from patterncnn.encoders.finetune import _replace

    real, link = tmp_path / "disk" / "model", tmp_path / "out"
    real.mkdir(parents=True)
    link.symlink_to(real)
    with writer_scope("patterncnn finetune --overwrite"):
        output_folder(link, (), True)
        _replace(link, _fine_tune_out(link))
    assert link.is_symlink() and contents(real) == {"config.json": b"new"}
    assert sorted(p.name for p in real.parent.iterdir()) == ["model"]


def test_a_fine_tune_into_a_mount_point_is_refused_before_any_work(tmp_path, monkeypatch):
    # its model could never be renamed into place (EXDEV, EBUSY): refused before training, naming a folder inside
    from patterncnn.encoders import finetune

    out = tmp_path / "volume"
    out.mkdir()
    real = os.path.ismount
    monkeypatch.setattr(os.path, "ismount", lambda p: os.fspath(p) == str(out) or real(p))
    with writer_scope("patterncnn finetune"):
        with pytest.raises(fileio.OutputError, match=rf"--out {out} is a mount point: the fine-tuned model is put in "
                                                     rf"place by a rename, which cannot replace a mount point; give a "
                                                     rf"folder inside it, such as {out / 'model'}"):
            finetune._check_out(out, "sst2", overwrite=True)


@contextlib.contextmanager
def _unwritable(folder: Path):
    """``folder`` made one this user cannot write into: by its mode, or for root (whom modes do not stop) by the
    immutable attribute; skipped where neither holds."""
    folder.chmod(0o555)
    immutable = False
    try:
        if os.access(folder, os.W_OK):
            immutable = subprocess.run(["chattr", "+i", str(folder)], capture_output=True).returncode == 0
        if os.access(folder, os.W_OK):
            pytest.skip("this user can write into a folder of mode 555, and chattr +i is not available here")
        yield folder
    finally:
        if immutable:
            subprocess.run(["chattr", "-i", str(folder)], check=True)
        folder.chmod(0o755)


def test_a_fine_tune_into_a_folder_this_user_cannot_write_is_refused_before_any_work(tmp_path):
    # its model is renamed into place beside OUT, which would fail only after training
    # (an OUT not yet made there is refused by output_folder, as for any command)
    from patterncnn.encoders import finetune

    real, link = tmp_path / "shared" / "model", tmp_path / "out"
    real.mkdir(parents=True)
    link.symlink_to(real)
    for out in real, link:
        with _unwritable(real.parent), writer_scope("patterncnn finetune"):
            with pytest.raises(fileio.OutputError, match=rf"--out {out} is the folder {real}, and this user "
                                                         rf"cannot write into {real.parent}, where the fine-tuned "
                                                         rf"model is put in place by a rename; make it writable, or "
                                                         rf"choose another --out"):
                finetune._check_out(out, "sst2", overwrite=True)


@pytest.mark.parametrize("given", [["--api-key", "s3cret"], ["--api-key=s3cret"], ["--api-k", "s3cret"]])
def test_the_lock_records_a_command_without_its_credentials(tmp_path, monkeypatch, given):
    # another run's refusal prints the command holding the folder: it once printed the pull's Label Studio token
    import patterncnn.labelling.pull
    from patterncnn.cli import main

    records = []

    def pull(*args, **kwargs):
        records.append((tmp_path / "set" / LOCK).read_text())
        raise KeyboardInterrupt

    monkeypatch.setattr(patterncnn.labelling.pull, "pull", pull)
    assert main(["annotate", "pull", "--from-file", str(tmp_path / "e.json"), *given, "--out",
                 str(tmp_path / "set")]) == 130
    assert "s3cret" not in records[0] and "--api-k" in records[0] and "***" in records[0]
