"""patterncnn.core.fileio.staged_outputs: a command's several result files land together, or none of them does."""

import os

import pytest

from patterncnn.core.fileio import OutputError, staged_outputs, write_bytes, write_json


def test_staged_outputs_land_together_in_the_order_given(tmp_path):
    out = tmp_path / "out"
    with staged_outputs(out, ("a.bin", "done.json")) as stage:
        assert stage.parent == out and stage.name.startswith(".staged-")
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
    assert not (out / "done.json").exists() and (out / "a.bin").read_bytes() == b"new"
