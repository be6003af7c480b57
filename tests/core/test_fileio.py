"""patterncnn.core.fileio: a command's several result files land together, or none of them does (staged_outputs, and
write_result through it); an output folder that cannot be written is refused before any work."""

import errno
import json
import os
import signal
import time
import types
from pathlib import Path

import numpy as np
import pytest

from patterncnn.core import fileio
from patterncnn.core.fileio import (
    PULLED,
    STAGED,
    STALE,
    OutputError,
    output_folder,
    staged_outputs,
    swap_into_place,
    write_bytes,
    write_json,
)
from patterncnn.core.work import write_result


def test_staged_outputs_land_together_in_the_order_given(tmp_path):
    out = tmp_path / "out"
    with staged_outputs(out, ("a.bin", "done.json")) as stage:
        assert stage.parent == out and stage.name.startswith(STAGED)
        write_bytes(stage / "a.bin", b"new")
        write_json(stage / "done.json", {"ok": True})
        assert not (out / "a.bin").exists() and not (out / "done.json").exists()  # nothing lands before the end
    assert (out / "a.bin").read_bytes() == b"new" and (out / "done.json").read_text().strip().endswith("}")
    assert sorted(os.listdir(out)) == ["a.bin", "done.json"]  # the staging folder is gone


@pytest.mark.parametrize("stop", [KeyboardInterrupt, RuntimeError])
def test_an_interrupted_block_leaves_the_folder_as_it_was(tmp_path, stop):
    out = tmp_path / "out"
    out.mkdir()
    (out / "a.bin").write_bytes(b"old")
    with pytest.raises(stop):
        with staged_outputs(out, ("a.bin", "done.json")) as stage:
            write_bytes(stage / "a.bin", b"new")
            raise stop()
    assert sorted(os.listdir(out)) == ["a.bin"] and (out / "a.bin").read_bytes() == b"old"


def test_a_result_over_a_folder_is_refused_and_a_symlink_is_written_through(tmp_path):
    out = tmp_path / "out"
    (out / "done.json").mkdir(parents=True)
    (out / "a.bin").write_bytes(b"old")
    with pytest.raises(OutputError, match="not a regular file"):  # found by the second review: a.bin had landed
        with staged_outputs(out, ("a.bin", "done.json")) as stage:
            write_bytes(stage / "a.bin", b"new")
            write_json(stage / "done.json", {})
    assert (out / "done.json").is_dir() and sorted(os.listdir(out)) == ["a.bin", "done.json"]
    assert (out / "a.bin").read_bytes() == b"old"
    (out / "done.json").rmdir()
    (out / "a.bin").unlink()

    target = tmp_path / "elsewhere.bin"
    target.write_bytes(b"old")
    (out / "link.bin").symlink_to(target)
    with staged_outputs(out, ("link.bin",)) as stage:
        write_bytes(stage / "link.bin", b"new")
    assert (out / "link.bin").is_symlink() and target.read_bytes() == b"new"


def test_a_stop_during_the_renames_leaves_no_old_marker_beside_new_files(tmp_path, monkeypatch):
    # found by the second review: the old marker stayed beside a new file, an output that looked finished
    out = tmp_path / "out"
    out.mkdir()
    for name in ("a.bin", "b.bin", "done.json"):
        (out / name).write_bytes(b"old")
    real, calls = os.replace, []

    def stopped_at_the_second(src, dst):
        calls.append(dst)
        if len(calls) == 2:
            raise KeyboardInterrupt
        real(src, dst)

    with pytest.raises(KeyboardInterrupt):
        with staged_outputs(out, ("a.bin", "b.bin", "done.json")) as stage:
            for name in ("a.bin", "b.bin", "done.json"):
                write_bytes(stage / name, b"new")
            monkeypatch.setattr(os, "replace", stopped_at_the_second)  # the renames into out, not the writes
    monkeypatch.setattr(os, "replace", real)
    assert {p.name: p.read_bytes() for p in out.iterdir()} == {"a.bin": b"new", "b.bin": b"old"}  # no stage left


@pytest.mark.parametrize("writes, said", [(("a.bin", "b.bin"), "did not write done.json"),
                                          (("b.bin", "done.json"), "did not write a.bin"),
                                          (("a.bin", "b.bin", "c.bin", "done.json"), "wrote c.bin, not named")])
def test_a_block_that_does_not_write_exactly_the_names_is_refused_before_any_rename(tmp_path, writes, said):
    # found by the third review: an unwritten marker left the old one beside new files; an unnamed file was dropped
    out = tmp_path / "out"
    out.mkdir()
    for name in ("a.bin", "b.bin", "done.json"):
        (out / name).write_bytes(b"old")
    with pytest.raises(RuntimeError, match=said):
        with staged_outputs(out, ("a.bin", "b.bin", "done.json")) as stage:
            for name in writes:
                write_bytes(stage / name, b"new")
    assert {p.name: p.read_bytes() for p in out.iterdir()} == {"a.bin": b"old", "b.bin": b"old", "done.json": b"old"}


def test_a_failed_rename_leaves_an_unmarked_mix(tmp_path, monkeypatch):
    # what the docstring promises for a failure (not only a stop) during the renames: no finished-looking folder
    out = tmp_path / "out"
    out.mkdir()
    for name in ("a.bin", "b.bin", "done.json"):
        (out / name).write_bytes(b"old")
    real = os.replace

    def failing_at_b(src, dst):
        if os.path.basename(dst) == "b.bin":
            raise OSError(errno.EIO, "Input/output error")
        real(src, dst)

    with pytest.raises(OSError, match="Input/output"):
        with staged_outputs(out, ("a.bin", "b.bin", "done.json")) as stage:
            for name in ("a.bin", "b.bin", "done.json"):
                write_bytes(stage / name, b"new")
            monkeypatch.setattr(os, "replace", failing_at_b)
    monkeypatch.setattr(os, "replace", real)
    assert {p.name: p.read_bytes() for p in out.iterdir()} == {"a.bin": b"new", "b.bin": b"old"}


def test_a_new_stage_sweeps_stages_left_for_a_day_and_keeps_younger_ones(tmp_path):
    # found by the third review: a SIGKILL left staging folders in the output folder forever; the review of stop 54:
    # the sweep must never take a user's own folder that merely starts like one (.pull-requests)
    out = tmp_path / "out"
    old = [f"{STAGED}abcd1234", f"{PULLED}x_9y8z7w"]
    kept = [f"{STAGED}young123", ".staged-old", ".pull-requests", f"{STAGED}notours", ".other-old"]
    for name in old + kept:
        (out / name).mkdir(parents=True)
        (out / name / "a.bin").write_bytes(b"left")
    day_ago = time.time() - STALE - 60
    for name in old + kept[1:]:
        os.utime(out / name, (day_ago, day_ago))
    with staged_outputs(out, ("done.json",)) as stage:
        assert stage.name.startswith(STAGED)
        write_json(stage / "done.json", {})
    assert sorted(os.listdir(out)) == sorted(kept + ["done.json"])


def test_a_folder_one_may_write_into_but_not_list_is_still_written(tmp_path, monkeypatch):
    # found by the review of stop 54: the sweep's listing failed after the work (a drop box, mode 0300)
    import patterncnn.core.fileio as fileio

    def unlistable(path):
        raise PermissionError(13, "Permission denied", str(path))

    monkeypatch.setattr(fileio.os, "scandir", unlistable)
    with staged_outputs(tmp_path / "out", ("done.json",)) as stage:
        write_json(stage / "done.json", {})
    assert (tmp_path / "out" / "done.json").is_file()


def test_write_result_lands_every_file_or_none_the_marker_last(tmp_path, monkeypatch):
    # found by the third review: write_result wrote the tables one by one, so a failure left new CSVs beside the old
    # JSON (census, drift, disable, link and special_tokens all write through it)
    out = tmp_path / "out"
    out.mkdir()
    for name in ("a.csv", "b.csv", "r.png", "r.json"):
        (out / name).write_text("old")

    def failing_rows():
        yield [1, 2]
        raise RuntimeError("while writing b.csv")

    with pytest.raises(RuntimeError, match="while writing b.csv"):
        write_result(out, "r.json", {"new": True}, tables={"a.csv": (["x", "y"], [[1, 2]]),
                                                          "b.csv": (["x", "y"], failing_rows())})
    assert {p.name: p.read_text() for p in out.iterdir()} == dict.fromkeys(("a.csv", "b.csv", "r.png", "r.json"), "old")
    real, landed = os.replace, []
    monkeypatch.setattr(os, "replace", lambda src, dst: real(src, dst) or landed.append(os.path.relpath(dst, out)))
    write_result(out, "r.json", {"new": True}, tables={"a.csv": (["x"], [[1]])}, figures={"r.png": b"png"},
                 files={"t.bin": b"bin"})
    landed = [p for p in landed if os.sep not in p]  # into out, not into the stage
    assert landed[-1] == "r.json" and sorted(landed) == ["a.csv", "r.json", "r.png", "t.bin"]
    assert (out / "a.csv").read_text() == "x\n1\n" and sorted(os.listdir(out)) == ["a.csv", "b.csv", "r.json", "r.png",
                                                                                    "t.bin"]


@pytest.mark.parametrize("option", ["--out", ""])
def test_an_existing_folder_this_user_cannot_write_into_is_refused_before_any_work(tmp_path, monkeypatch, option):
    # found by the third review: adapt's fits ran ~5 minutes before the stage's mkdtemp failed with a bare OSError
    out = tmp_path / "out"
    out.mkdir()
    real = os.access
    monkeypatch.setattr(os, "access", lambda p, mode, **kw: False if Path(p) == out else real(p, mode, **kw))  # root
    with pytest.raises(OutputError, match="cannot write into; make it writable") as e:
        output_folder(out, ("done.json",), overwrite=True, option=option)
    assert str(e.value).endswith("choose another --out" if option else "write elsewhere")
    statvfs = os.statvfs  # a read-only mount: chmod cannot help (the review of stop 54)
    monkeypatch.setattr(os, "statvfs", lambda p: types.SimpleNamespace(f_flag=os.ST_RDONLY) if Path(p) == out
                        else statvfs(p))
    with pytest.raises(OutputError, match=f"{out} is on a read-only file system; "):
        output_folder(out, ("done.json",), overwrite=True, option=option)
    monkeypatch.setattr(os, "access", real)
    assert output_folder(out, ("done.json",), overwrite=False, option=option) == out
    assert output_folder(tmp_path / "new", ("done.json",), overwrite=False) == tmp_path / "new"  # made later


def test_a_missing_output_under_a_folder_this_user_cannot_write_into_is_refused_before_any_work(tmp_path,
                                                                                               monkeypatch):
    # left by the review of stop 54: only an existing OUT was checked; a new one under a locked folder failed at the
    # end, after adapt's fits
    locked = tmp_path / "locked"
    locked.mkdir()
    real = os.access
    monkeypatch.setattr(os, "access", lambda p, mode, **kw: False if Path(p) == locked else real(p, mode, **kw))
    with pytest.raises(OutputError, match=f"^--out {locked / 'a' / 'b'} cannot be made: {locked} is a folder this "
                                          f"user cannot write into; make it writable"):
        output_folder(locked / "a" / "b", ("done.json",), overwrite=False)
    assert output_folder(tmp_path / "free" / "a", ("done.json",), overwrite=False) == tmp_path / "free" / "a"
    (tmp_path / "afile").write_text("x")  # a file above: refused as before, for what it is
    with pytest.raises(OutputError, match="a parent of it is a file, not a folder"):
        output_folder(tmp_path / "afile" / "a", ("done.json",), overwrite=False)


def _folder(path: Path, **files: str) -> Path:
    path.mkdir()
    for name, text in files.items():
        (path / name).write_text(text)
    return path


def _files(path: Path) -> dict[str, str]:
    return {p.name: p.read_text() for p in path.iterdir()}


@pytest.mark.parametrize("exchange", [True, False], ids=["atomic-exchange", "two-renames"])
def test_swap_into_place_puts_the_new_folder_there_and_hands_back_the_old(tmp_path, monkeypatch, exchange):
    if not exchange:
        monkeypatch.setattr(fileio, "_exchange", lambda a, b: False)
    new, target = _folder(tmp_path / "new", a="new"), _folder(tmp_path / "out", a="old", b="old")
    swap_into_place(new, target)
    assert _files(target) == {"a": "new"} and _files(new) == {"a": "old", "b": "old"}
    assert sorted(p.name for p in tmp_path.iterdir()) == ["new", "out"]  # no hidden folder left
    swap_into_place(_folder(tmp_path / "newer", a="newer"), tmp_path / "missing")  # nothing there: a rename
    assert _files(tmp_path / "missing") == {"a": "newer"} and not (tmp_path / "newer").exists()


@pytest.mark.parametrize("stop", [OSError(errno.EIO, "Input/output error"), KeyboardInterrupt()],
                         ids=["error", "interrupt-not-held"])
def test_two_renames_that_fail_between_them_are_undone(tmp_path, monkeypatch, stop):
    # where there is no atomic exchange: the target's contents go back, the new folder stays where it was; also for
    # a KeyboardInterrupt that no held signal raised (a SIGALRM handler's, say)
    monkeypatch.setattr(fileio, "_exchange", lambda a, b: False)
    new, target = _folder(tmp_path / "new", a="new"), _folder(tmp_path / "out", a="old")
    real = os.rename

    def failing_into_target(src, dst):
        if Path(dst) == target and Path(src) == new:
            raise stop
        real(src, dst)

    monkeypatch.setattr(os, "rename", failing_into_target)
    with pytest.raises(type(stop)):
        swap_into_place(new, target)
    monkeypatch.undo()
    assert _files(target) == {"a": "old"} and _files(new) == {"a": "new"}
    assert sorted(p.name for p in tmp_path.iterdir()) == ["new", "out"]


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM], ids=["ctrl-c", "sigterm"])
@pytest.mark.parametrize("after", [0, 1, 2], ids=["first-rename", "second-rename", "hand-back"])
def test_a_signal_during_two_renames_lands_after_them(tmp_path, monkeypatch, ctrl_c, signum, after):
    # a Ctrl-C once left the target missing (after the first rename), or gave a false "could not be replaced nor
    # put back" (after the second); now the signal acts once the swap is whole. SIGTERM: as the commands take it.
    from patterncnn.cli.common import sigterm_as_interrupt

    monkeypatch.setattr(fileio, "_exchange", lambda a, b: False)
    new, target = _folder(tmp_path / "new", a="new"), _folder(tmp_path / "out", a="old")
    real, calls = os.rename, []

    def signalled(src, dst):
        real(src, dst)
        calls.append(dst)
        if len(calls) == after + 1:
            os.kill(os.getpid(), signum)  # Python runs its handler at once, inside this call

    monkeypatch.setattr(os, "rename", signalled)
    with sigterm_as_interrupt(), pytest.raises(KeyboardInterrupt):
        swap_into_place(new, target)
    monkeypatch.undo()
    assert len(calls) == 3  # every rename ran before the interrupt
    assert _files(target) == {"a": "new"} and _files(new) == {"a": "old"}
    assert sorted(p.name for p in tmp_path.iterdir()) == ["new", "out"]
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler  # handlers are back


def test_a_block_ending_in_an_error_drops_the_held_signal(tmp_path, ctrl_c):
    with pytest.raises(OSError, match="the block's own error"):
        with fileio.interrupts_held():
            os.kill(os.getpid(), signal.SIGINT)
            raise OSError("the block's own error")


def test_a_holding_handler_left_installed_passes_the_signal_on(ctrl_c):
    # a signal that comes while the handlers are put back can leave the holding one installed: it must then act as
    # the handler it replaced, not hold the signal for ever (Ctrl-C did nothing for the rest of the session)
    with fileio.interrupts_held():
        holding = signal.getsignal(signal.SIGINT)
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler
    with pytest.raises(KeyboardInterrupt):
        holding(signal.SIGINT, None)


def test_an_unfinished_run_of_another_version_names_the_version_to_resume_it_with(tmp_path):
    # Helper 100's review: "run it with the earlier ones" where the difference was the version, which no option gives.
    from patterncnn.core.version import __version__
    from patterncnn.core.work import RunError, save_part, work_dir

    params = {"limit": 3, "version": "0.0.9"}
    save_part(work_dir(tmp_path, "rte", params) / "window-00000.npz", {"x": np.zeros(1)})
    with pytest.raises(RunError) as e:
        work_dir(tmp_path, "rte", {**params, "version": __version__})
    assert f"the patterncnn version: was 0.0.9, now {__version__}" in str(e.value)
    assert "run it as it was (with patterncnn 0.0.9) to resume it, or pass --overwrite" in str(e.value)
    now = {"limit": 3, "version": __version__}
    save_part(work_dir(tmp_path / "b", "rte", now) / "window-00000.npz", {"x": np.zeros(1)})
    with pytest.raises(RunError) as e:
        work_dir(tmp_path / "b", "rte", {**now, "limit": 4})
    assert "run it as it was to resume it" in str(e.value)  # made by this version: nothing to name


def test_an_unfinished_run_resumes_whatever_its_paths_spelling(tmp_path, monkeypatch):
    # Helper 104's review: a census started with --glue-dir ../glue and rerun with the absolute path of the same files
    # was refused, naming "--model (the encoder's weights or tokenizer)" as the difference.
    from patterncnn.core.work import RunError, run_key, save_part, work_dir

    (tmp_path / "glue" / "RTE").mkdir(parents=True)
    (tmp_path / "glue" / "RTE" / "dev.tsv").write_text("x")
    (tmp_path / "ft").mkdir()
    (tmp_path / "ft" / "config.json").write_text("{}")  # a model folder
    monkeypatch.chdir(tmp_path)

    def params(glue, model, limit=3):
        return {"source": f"{glue}/RTE/dev.tsv", "limit": limit, "encoder": {"model": model, "path": model,
                                                                             "sha256": "ab" * 32}}

    out = tmp_path / "out"
    work = work_dir(out, "rte", params("glue", "ft"), command="census")
    save_part(work / "window-00000.npz", {"x": np.zeros(1)})
    assert work_dir(out, "rte", params(str(tmp_path / "glue"), str(tmp_path / "ft") + "/"), command="census") == work
    assert (work / "window-00000.npz").is_file()
    with pytest.raises(RunError) as e:  # a real difference is still refused, and named alone
        work_dir(out, "rte", params(str(tmp_path / "glue"), str(tmp_path / "ft"), limit=4), command="census")
    assert "(--limit: was 3, now 4)" in str(e.value)
    (tmp_path / "copy").mkdir()  # another folder of the same weights is another encoder: refused
    (tmp_path / "copy" / "config.json").write_text("{}")
    with pytest.raises(RunError, match="--model"):
        work_dir(out, "rte", params("glue", "copy"), command="census")
    # a stamp written before runs were keyed by real paths (its key: the paths as typed) still resumes
    legacy = params("glue", "ft")
    stamp = json.loads((work / "run.json").read_text())
    (work / "run.json").write_text(json.dumps({**stamp, "key": run_key(legacy)}))
    assert work_dir(out, "rte", legacy, command="census") == work and (work / "window-00000.npz").is_file()
    stamp = json.loads((work / "run.json").read_text())  # and with the paths typed otherwise (helper 108)
    (work / "run.json").write_text(json.dumps({"key": run_key(legacy), "params": legacy, "command": "census"}))
    assert work_dir(out, "rte", params(str(tmp_path / "glue"), str(tmp_path / "ft")), command="census") == work
    # the same relative paths typed in another folder are other files: refused, naming them (helper 108: it named
    # nothing, "what else it records")
    other = tmp_path / "elsewhere"
    (other / "glue" / "RTE").mkdir(parents=True)
    (other / "glue" / "RTE" / "dev.tsv").write_text("x")
    (other / "ft").mkdir()
    (other / "ft" / "config.json").write_text("{}")
    monkeypatch.chdir(other)
    with pytest.raises(RunError) as e:
        work_dir(out, "rte", params("glue", "ft"), command="census")
    assert "--glue-dir (the GLUE file read)" in str(e.value) and "--model" in str(e.value)
    assert "what else it records" not in str(e.value)
    # an embedded encoder's name is not a folder's, even beside an output folder of that name (helper 110: `census
    # --model minilm --out minilm` could not be resumed from another folder)
    (other / "minilm").mkdir()
    embedded = {"source": str(other / "glue" / "RTE" / "dev.tsv"), "limit": 3,
                "encoder": {"model": "minilm", "path": str(tmp_path / "cache"), "sha256": "cd" * 32}}
    work = work_dir(other / "minilm", "rte", embedded, command="census")
    save_part(work / "window-00000.npz", {"x": np.zeros(1)})
    monkeypatch.chdir(tmp_path)
    assert work_dir(other / "minilm", "rte", embedded, command="census") == work
