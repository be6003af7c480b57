"""The CLI against hostile input (issue 14): one line on stderr and a non-zero exit, never a traceback."""

import json
import os
import signal
import socket
import subprocess
import sys
import time

import numpy as np
import pytest
from hostile import corrupt_deflate_npz, declared_npz, npy_header, truncated, zip_of
from labelstudio_server import free_port
from live import wait_healthy
from synthetic import pattern_map

from patterncnn.cli import build_parser, main
from patterncnn.core.fileio import write_text
from patterncnn.core.labels import LABELS

UNWRITABLE = "/sys/patterncnn-test"  # refused by the kernel even to root (tests may run as root)


def one_line_error(capsys, phrase: str) -> str:
    err = capsys.readouterr().err
    assert "Traceback" not in err and len(err.strip().splitlines()) == 1, err
    assert phrase in err, err
    return err


def npz_bytes(**arrays) -> bytes:
    import io

    buf = io.BytesIO()
    np.savez(buf, **arrays)
    return buf.getvalue()


@pytest.mark.parametrize("data,phrase", [
    (b"not a zip at all", "not a readable .npz"),
    (truncated(npz_bytes(a=pattern_map("diagonal", 30))), "not a readable .npz"),
    (corrupt_deflate_npz(), "unreadable"),
    (zip_of({"a.npy": npy_header((8, 8))}), "truncated"),
    (zip_of({"notes.txt": b"hi"}), "not an .npy array"),
])
def test_classify_bad_npz_is_one_line(tiny_classifier, tmp_path, capsys, data, phrase):
    (tmp_path / "m.npz").write_bytes(data)
    rc = main(["classify", str(tmp_path / "m.npz"), "--out", str(tmp_path / "p.jsonl"),
               "--classifier", str(tiny_classifier[1])])
    assert rc == 2
    one_line_error(capsys, phrase)
    assert not (tmp_path / "p.jsonl").exists()


def test_a_member_declaring_32_tib_gets_its_error_line_unread_and_the_rest_are_classified(tiny_classifier, tmp_path):
    import io

    good = io.BytesIO()
    np.save(good, pattern_map("diagonal", 12))
    (tmp_path / "m.npz").write_bytes(zip_of({"a.npy": npy_header((2**21, 2**21)), "b.npy": good.getvalue()}))
    assert main(["classify", str(tmp_path / "m.npz"), "--out", str(tmp_path / "p.jsonl"),
                 "--classifier", str(tiny_classifier[1])]) == 0
    a, b = map(json.loads, (tmp_path / "p.jsonl").read_text().splitlines())
    assert a == {"id": "a", "error": "shape (2097152, 2097152) is over the limit T <= 8192"}
    assert b["id"] == "b" and b["label"] in LABELS


def test_unwritable_out_is_one_line(tiny_classifier, tiny_bert, tmp_path, capsys):
    np.savez(tmp_path / "m.npz", a=pattern_map("diagonal", 12))
    clf = ["--classifier", str(tiny_classifier[1])]
    assert main(["classify", str(tmp_path / "m.npz"), "--out", f"{UNWRITABLE}/p.jsonl", *clf]) == 2
    one_line_error(capsys, "permission denied; choose a path you may write to")
    assert main(["analyze", "a cat sat.", "--model", str(tiny_bert), "--out", f"{UNWRITABLE}/grid.png", *clf]) == 2
    one_line_error(capsys, "permission denied")


def test_unwritable_out_census_and_sample(tiny_classifier, tiny_bert, shared_glue, capsys):
    args = ["--task", "rte", "--model", str(tiny_bert), "--glue-dir", str(shared_glue)]
    assert main(["census", *args, "--limit", "2", "--classifier", str(tiny_classifier[1]),
                 "--out", UNWRITABLE]) == 2
    one_line_error(capsys, "permission denied")
    assert main(["sample", *args, "--per-task", "2", "--out", UNWRITABLE]) == 2
    one_line_error(capsys, "permission denied")


def test_glue_dir_that_is_a_file(tiny_classifier, capsys):
    assert main(["census", "--task", "rte", "--glue-dir", "/etc/hostname", "--classifier",
                 str(tiny_classifier[1])]) == 2
    one_line_error(capsys, "is a file, not a folder")


@pytest.mark.parametrize("argv,phrase", [
    (["serve", "--workers", "0"], "--workers: must be a whole number of at least 1"),
    (["serve", "--threads", "0"], "--threads: must be a whole number of at least 1"),
    (["serve", "--port", "99999"], "--port: must be a port number from 1 to 65535"),
    (["serve", "--port", "http"], "--port: must be a port number"),
    (["serve", "--max-body-mb", "-1"], "--max-body-mb: must be a whole number of at least 1"),
    (["serve", "--max-t", "0"], "--max-t: must be a whole number"),
    (["classify", "m.npz", "--out", "x", "--threads", "-2"], "--threads: must be a whole number"),
    (["link", "--seed", "-1"], "--seed: must be a whole number from 0 to 4294967295"),
    (["validate", "--seed", "4294967296"], "--seed: must be a whole number from 0 to 4294967295"),
    (["annotate", "sheets", "s", "--out", "x", "--shuffle", "-2"], "--shuffle: must be a whole number from 0 to"),
    (["annotate", "sheets", "s", "--out", "x", "--per-sheet", "0"], "--per-sheet: must be a whole number of at least 1"),
])
def test_arguments_are_checked_at_parse_time(capsys, argv, phrase):
    with pytest.raises(SystemExit) as exit_:
        build_parser().parse_args(argv)
    assert exit_.value.code == 2
    err = capsys.readouterr().err
    assert phrase in err and "Traceback" not in err


def test_non_loopback_serve_needs_a_token(capsys, monkeypatch):
    monkeypatch.delenv("PATTERNCNN_API_TOKEN", raising=False)
    assert main(["serve", "--host", "0.0.0.0"]) == 2
    one_line_error(capsys, "without an API token")


def every_parser(parser, name="patterncnn"):
    """(command, its parser) for the top parser and each command and action below it."""
    import argparse

    yield name, parser
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for sub, p in action.choices.items():
                yield from every_parser(p, f"{name} {sub}")


def test_census_help_shows_a_plain_percent(capsys):
    with pytest.raises(SystemExit):
        main(["census", "--help"])
    out = capsys.readouterr().out
    assert "95%" in out and "95%%" not in out


def test_no_help_shows_a_doubled_percent():
    # argparse %-formats help strings but not descriptions: validate's description showed "95%%"
    shown = {name: p.format_help() for name, p in every_parser(build_parser())}
    assert len(shown) > 16 and "patterncnn annotate push" in shown
    assert [name for name, text in shown.items() if "%%" in text or "%(" in text] == []
    assert "95%" in shown["patterncnn validate"]


def test_outputs_respect_the_umask(tmp_path):
    old = os.umask(0o022)
    try:
        write_text(tmp_path / "a.txt", "x")
        os.umask(0o077)
        write_text(tmp_path / "b.txt", "x")
    finally:
        os.umask(old)
    assert (tmp_path / "a.txt").stat().st_mode & 0o777 == 0o644
    assert (tmp_path / "b.txt").stat().st_mode & 0o777 == 0o600


def test_serve_process_stops_on_sigterm_with_a_stalled_client(tiny_classifier):
    port = free_port()
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "PYTHONPATH": os.pathsep.join(sys.path)}
    proc = subprocess.Popen([sys.executable, "-m", "patterncnn.cli", "serve", "--no-encoder", "--port", str(port),
                             "--classifier", str(tiny_classifier[1])], env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE)
    try:
        wait_healthy(f"http://127.0.0.1:{port}", proc)
        with socket.create_connection(("127.0.0.1", port)) as stalled:  # half a body, then nothing
            stalled.sendall(b"POST /v1/classify HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                            b"Content-Length: 100\r\n\r\n{")
            time.sleep(0.5)
            t0 = time.monotonic()
            proc.send_signal(signal.SIGTERM)
            proc.wait(30)
            assert time.monotonic() - t0 < 8  # the stalled request ends at once; uvicorn alone waited for it
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert b"Traceback" not in proc.stderr.read()


# ---------------------------------------------------------------- issue 31: hostile input, round two


def classify_args(tiny_classifier, maps, out) -> list[str]:
    return ["classify", str(maps), "--out", str(out), "--classifier", str(tiny_classifier[1])]


def test_npz_declaring_three_gib_is_refused_before_inflating(tiny_classifier, tmp_path, capsys):
    # The probe's 3 MB .npz of 12 zero maps of 8192²: each member within the per-map limit, 3 GiB together.
    (tmp_path / "m.npz").write_bytes(declared_npz(12, 8192))
    assert main(classify_args(tiny_classifier, tmp_path / "m.npz", tmp_path / "p.jsonl")) == 2
    one_line_error(capsys, "declares 3221227008 bytes uncompressed, over the limit of 1073741824")
    assert not (tmp_path / "p.jsonl").exists()


def test_zero_maps_under_the_limit_are_read_one_at_a_time(tiny_classifier, tmp_path, capsys, monkeypatch):
    import patterncnn.classifier.classify as classify

    monkeypatch.setattr(classify, "BATCH_BYTES", 3 * 64 * 64 * 4)  # the same bound, in maps of 64²: 3 per batch
    import patterncnn.core.maps as maps_module  # what classify reads each map through (MapSource.input_of)

    calls, real = [], maps_module.classifier_input
    monkeypatch.setattr(maps_module, "classifier_input", lambda a, **kw: (calls.append(a.shape), real(a, **kw))[1])
    np.savez_compressed(tmp_path / "m.npz", **{f"z{i}": np.zeros((64, 64)) for i in range(7)})
    assert main(classify_args(tiny_classifier, tmp_path / "m.npz", tmp_path / "p.jsonl")) == 0
    assert len(calls) == 7 and "7 flagged (rows not summing to 1)" in capsys.readouterr().out


@pytest.mark.parametrize("make,phrase", [
    (lambda p: os.mkfifo(p), "is a FIFO, not a regular file"),
    (lambda p: os.symlink("/dev/null", p), "is a character device, not a regular file"),
    (lambda p: p.mkdir(), "is a folder, not a regular file"),
])
def test_out_that_is_not_a_regular_file_is_never_replaced(tiny_classifier, tmp_path, capsys, make, phrase):
    np.savez(tmp_path / "m.npz", a=pattern_map("diagonal", 12))
    out = tmp_path / "out"
    make(out)
    before = os.lstat(out)
    for extra in ([], ["--overwrite"]):
        assert main(classify_args(tiny_classifier, tmp_path / "m.npz", out) + extra) == 2
        one_line_error(capsys, phrase)
    after = os.lstat(out)
    assert (after.st_mode, after.st_ino) == (before.st_mode, before.st_ino)
    assert os.stat("/dev/null").st_mode & 0o170000 == 0o020000  # still a character device


def test_atomic_writes_refuse_what_is_not_a_regular_file(tmp_path):
    from patterncnn.core.fileio import OutputError, write_json

    os.mkfifo(tmp_path / "fifo")
    with pytest.raises(OutputError, match="is a FIFO"):
        write_json(tmp_path / "fifo", {})
    (tmp_path / "real.json").write_text("old")
    os.symlink(tmp_path / "real.json", tmp_path / "link.json")
    write_json(tmp_path / "link.json", {"new": 1})  # a symlink is written through: the link stays a link
    assert (tmp_path / "link.json").is_symlink() and json.loads((tmp_path / "real.json").read_text()) == {"new": 1}


def test_folder_outputs_refuse_a_fifo(tiny_classifier, tmp_path, capsys):
    os.mkfifo(tmp_path / "fifo")
    assert main(["validate", "--out", str(tmp_path / "fifo")]) == 2
    one_line_error(capsys, "is a FIFO, not a folder")


@pytest.fixture()
def existing_outputs(tmp_path, tiny_classifier, labelled_set, tiny_bert, glue_dir):
    """(command line, what it finds in --out) for every command that writes, with that output already there."""
    clf = ["--classifier", str(tiny_classifier[1])]
    np.savez(tmp_path / "m.npz", a=pattern_map("diagonal", 12))
    for name in ("p.jsonl", "grid.png", "agreement.json"):
        (tmp_path / name).write_text("old")
    for folder, marker in (("sheets", "index.json"), ("val", "validation.json"), ("link", "link.json"),
                           ("sample", "store.json"), ("model", "patterncnn.onnx"), ("ft", "x"),
                           ("census", "census.json")):
        (tmp_path / folder).mkdir()
        (tmp_path / folder / marker).write_text("old")
    (tmp_path / "set").mkdir()
    (tmp_path / "set" / "votes.csv").write_text("map_id,annotator,label,ls_annotation_id\nm,a,vertical,1\n")
    glue = ["--glue-dir", str(glue_dir)]
    return {
        "classify": (["classify", str(tmp_path / "m.npz"), "--out", str(tmp_path / "p.jsonl"), *clf], "p.jsonl already exists"),
        "analyze": (["analyze", "a cat", "--model", str(tiny_bert), "--out", str(tmp_path / "grid.png"), *clf],
                    "grid.png already exists"),
        "agreement": (["annotate", "agreement", str(tmp_path / "set"), "--out", str(tmp_path / "agreement.json")],
                      "agreement.json already exists"),
        "sheets": (["annotate", "sheets", str(tmp_path / "m.npz"), "--out", str(tmp_path / "sheets")],
                   "already holds index.json"),
        "validate": (["validate", "--out", str(tmp_path / "val")], "already holds validation.json"),
        "link": (["link", "--task", "rte", "--census", "c", "--disable", "d", "--out", str(tmp_path / "link")],
                 "already holds link.json"),
        "sample": (["sample", "--task", "rte", "--model", str(tiny_bert), *glue, "--out", str(tmp_path / "sample")],
                   "already holds store.json"),
        "train": (["train", "--annotations", str(labelled_set), "--out", str(tmp_path / "model")],
                  "already holds patterncnn.onnx"),
        "finetune": (["finetune", "--task", "rte", "--model", str(tiny_bert), *glue, "--out", str(tmp_path / "ft")],
                     "ft already exists"),
        "census": (["census", "--task", "rte", "--model", str(tiny_bert), *glue, *clf, "--limit", "2", "--out",
                    str(tmp_path / "census")], "already holds census.json"),
    }


def test_every_command_treats_an_existing_out_the_same_way(existing_outputs, tmp_path, capsys):
    for name, (argv, found) in existing_outputs.items():
        before = {p: p.read_bytes() for p in tmp_path.rglob("*") if p.is_file()}
        assert main(argv) == 2, name
        err = one_line_error(capsys, found)
        assert "pass --overwrite to replace it, or choose another --out" in err, (name, err)
        assert {p: p.read_bytes() for p in tmp_path.rglob("*") if p.is_file()} == before, name  # nothing touched
    argv, _ = existing_outputs["classify"]
    assert main(argv + ["--overwrite"]) == 0
    assert json.loads((tmp_path / "p.jsonl").read_text().splitlines()[0])["id"] == "a"


def test_classify_streams_to_stdout_with_a_dash(tiny_classifier, tmp_path, capsys):
    np.savez(tmp_path / "m.npz", a=pattern_map("diagonal", 12), b=pattern_map("vertical", 9))
    assert main(classify_args(tiny_classifier, tmp_path / "m.npz", "-")) == 0
    out, err = capsys.readouterr()
    assert [json.loads(line)["id"] for line in out.splitlines()] == ["a", "b"]
    assert "classified 2 map(s) -> -" in err


def strict_json_lines(text: str) -> list[dict]:
    return [json.loads(line, parse_constant=lambda c: pytest.fail(f"{c} in the output")) for line in text.splitlines()]


def test_classify_never_writes_nan(tiny_classifier, tmp_path, capsys):
    # Found by the probe: maps of 1e39 (float64) and 3.4e38 (float32) came out as NaN probabilities and a label.
    big32 = np.zeros((3, 3), dtype=np.float32)
    big32[0] = 3.4e38
    np.savez(tmp_path / "m.npz", huge64=np.full((4, 4), 1e39), huge32=big32, good=pattern_map("diagonal", 10))
    assert main(classify_args(tiny_classifier, tmp_path / "m.npz", tmp_path / "p.jsonl")) == 0
    recs = {r["id"]: r for r in strict_json_lines((tmp_path / "p.jsonl").read_text())}
    assert "NaN or inf" in recs["huge64"]["error"] and "too large for the classifier" in recs["huge32"]["error"]
    assert recs["good"]["label"] in LABELS
    capsys.readouterr()
    np.savez(tmp_path / "bad.npz", huge64=np.full((4, 4), 1e39))  # nothing classifiable: refused, one line
    assert main(classify_args(tiny_classifier, tmp_path / "bad.npz", tmp_path / "q.jsonl")) == 2
    one_line_error(capsys, "none of the 1 map(s) could be classified (map 'huge64': map holds NaN or inf")


def test_classify_reads_a_plain_npy(tiny_classifier, tmp_path, capsys):
    np.save(tmp_path / "m.npy", np.stack([pattern_map("diagonal", 10), pattern_map("vertical", 10)]))
    assert main(classify_args(tiny_classifier, tmp_path / "m.npy", tmp_path / "p.jsonl")) == 0
    assert "note: 2 map(s) carry no separator positions" in capsys.readouterr().err  # read without segments: said
    assert [r["id"] for r in strict_json_lines((tmp_path / "p.jsonl").read_text())] == ["0", "1"]


def test_classify_reads_separators_from_a_plain_npz(tiny_classifier, tmp_path, capsys):
    from patterncnn.core.maps import MapStore

    maps = [pattern_map("block", 12, 5), pattern_map("diagonal", 10)]
    seps = [[5, 11], [9]]
    MapStore.create(tmp_path / "store").append([({"id": k, "T": len(m), "seps": s}, m)
                                                 for k, m, s in zip("ab", maps, seps)])
    assert main(classify_args(tiny_classifier, tmp_path / "store", tmp_path / "s.jsonl")) == 0
    np.savez(tmp_path / "m.npz", a=maps[0], b=maps[1], __seps__=np.array([[5, 11], [9, -1]]))
    assert main(classify_args(tiny_classifier, tmp_path / "m.npz", tmp_path / "p.jsonl")) == 0
    assert "carry no separator" not in capsys.readouterr().err
    want = strict_json_lines((tmp_path / "s.jsonl").read_text())
    assert strict_json_lines((tmp_path / "p.jsonl").read_text()) == want  # as the store with its separators
    # both equal the classifier given the separators, and not without them (a command that dropped every map's
    # separators passed the lines above: helper 100's review)
    from patterncnn.classifier.onnx import OnnxClassifier
    from patterncnn.core.labels import LABELS

    clf = OnnxClassifier(tiny_classifier[1])
    got = np.array([[line["probs"][n] for n in LABELS] for line in want])
    np.testing.assert_allclose(got, clf.predict(maps, seps), atol=1e-6)
    assert np.abs(got - clf.predict(maps, [None, None])).max() > 1e-3
    # a store's own part, read alone, has no separators: refused, naming the store
    part = tmp_path / "store" / "part-00000.npz"
    assert main(classify_args(tiny_classifier, part, tmp_path / "q.jsonl")) == 2
    assert f"is a part of the map store {tmp_path / 'store'}" in capsys.readouterr().err


def test_text_that_is_not_utf8_is_one_line(capsys):
    bad = b"\xff\xfe abc".decode("utf-8", "surrogateescape")  # what Python makes of such an argv
    with pytest.raises(SystemExit) as exit_:
        main(["analyze", bad])
    assert exit_.value.code == 2
    one_line_error(capsys, "argument text: the argument b'\\xff\\xfe abc' is not valid UTF-8 text")


@pytest.mark.parametrize("texts,phrase", [
    ([""], "the sentence is empty"), (["   "], "the sentence is empty"), (["Hi", "  "], "the second is empty"),
    (["a", "b", "c"], "(got 3)"), (["a cat", "--out", "grid.jpg"], "give a file name ending in .png")])
def test_analyze_refuses_a_blank_sentence_as_the_service_does(texts, phrase, capsys):
    assert main(["analyze", *texts]) == 2  # before any model loads
    one_line_error(capsys, phrase)


def test_argument_errors_are_one_line(capsys):
    with pytest.raises(SystemExit) as exit_:
        main(["classify", "m.npz"])  # argparse: --out is required
    assert exit_.value.code == 2
    one_line_error(capsys, "the following arguments are required: --out; see patterncnn classify --help")


def test_an_unexpected_error_is_one_line_and_exit_70(monkeypatch, capsys):
    import patterncnn.cli.classify as classify

    def broken(args):
        raise TypeError("boom")

    monkeypatch.setattr(classify, "run", broken)  # a bug, as the service's CatchAll test makes one
    assert main(["classify", "m.npz", "--out", "x"]) == 70
    err = one_line_error(capsys, "internal error: TypeError: boom at test_cli_hostile.py")
    assert "this is a bug: run again with -v for the traceback" in err


def test_ctrl_c_while_a_c_extension_loads_is_an_interruption_not_a_bug(monkeypatch, capsys):
    """Ctrl-C landing while onnxruntime's C extension was imported came back as pybind11's "ImportError:
    initialization failed" (its cause the KeyboardInterrupt), and was called a bug, exit 70 (helper 104's review)."""
    import patterncnn.cli.classify as classify

    def importing(args):
        try:
            raise KeyboardInterrupt
        except KeyboardInterrupt as e:
            raise ImportError("initialization failed") from e  # as pybind11's module init raises it

    monkeypatch.setattr(classify, "run", importing)
    assert main(["classify", "m.npz", "--out", "x"]) == 130
    err = capsys.readouterr().err
    assert err == "patterncnn classify: interrupted\n" and "bug" not in err


def store_with(tmp_path, mutate) -> str:
    from patterncnn.core.maps import MapStore

    root = tmp_path / "store"
    MapStore.create(root).append([({"id": "a", "seps": [3, 9]}, pattern_map("diagonal", 10)),
                                  ({"id": "b"}, pattern_map("vertical", 8))])
    mutate(root)
    return str(root)


def _write(name: str, text: str):
    return lambda root: (root / name).write_text(text)


@pytest.mark.parametrize("mutate,phrase", [
    (_write("store.json", "[1, 2]"), "store.json is not a patterncnn-maps header"),
    (_write("part-00000.jsonl", '{"id": "a"}\n{"x": 1}\n'), 'part-00000.jsonl:2: the line has no "id"'),
    (_write("part-00000.jsonl", '{"id": "a"}\n[1]\n'), "part-00000.jsonl:2: a metadata line must be a JSON object"),
    (_write("part-00000.jsonl", '{"id": "a"}\n{"id": "zz"}\n'), "part-00000.jsonl:2: map 'zz' is not in part-00000.npz"),
    (_write("part-00000.jsonl", '{"id": "a"}\n{"id": 5}\n'), 'part-00000.jsonl:2: "id" must be a non-empty string'),
    (_write("part-00000.jsonl", '{"id": "a"}\n{"id": "a"}\n'), "part-00000.jsonl:2: map id 'a' is already in"),
    (_write("part-00000.jsonl", '{"id": "a", "seps": "x"}\n{"id": "b"}\n'), 'field "seps" must be list[int] or null'),
    (_write("part-00000.jsonl", "[" * 100_000 + "\n"), "part-00000.jsonl:1 is not valid JSON (nested too deeply)"),
])
def test_a_damaged_store_is_one_line_naming_file_and_line(tiny_classifier, tmp_path, capsys, mutate, phrase):
    assert main(classify_args(tiny_classifier, store_with(tmp_path, mutate), tmp_path / "p.jsonl")) == 2
    one_line_error(capsys, phrase)


def test_blank_lines_in_a_store_are_skipped(tiny_classifier, tmp_path):
    store = store_with(tmp_path, lambda root: (root / "part-00000.jsonl").open("a").write("\n\n"))
    assert main(classify_args(tiny_classifier, store, tmp_path / "p.jsonl")) == 0


def test_separators_outside_a_stored_map_are_an_error_line(tiny_classifier, tmp_path):
    store = store_with(tmp_path, _write("part-00000.jsonl", '{"id": "a", "seps": [3, 50]}\n{"id": "b"}\n'))
    assert main(classify_args(tiny_classifier, store, tmp_path / "p.jsonl")) == 0
    recs = {r["id"]: r for r in strict_json_lines((tmp_path / "p.jsonl").read_text())}
    assert "separator position 50 is outside the map" in recs["a"]["error"] and "label" in recs["b"]


def test_serve_on_a_taken_port_is_one_line_and_announces_nothing(tiny_classifier):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        env = {**os.environ, "HF_HUB_OFFLINE": "1", "PYTHONPATH": os.pathsep.join(sys.path)}
        run = subprocess.run([sys.executable, "-m", "patterncnn.cli", "serve", "--no-encoder", "--port", str(port),
                              "--classifier", str(tiny_classifier[1])], env=env, capture_output=True, text=True,
                             timeout=120)
    assert run.returncode == 2 and run.stdout == "", run.stdout
    assert run.stderr.strip().splitlines() == [f"patterncnn serve: error: cannot serve on 127.0.0.1:{port}: Address "
                                               f"already in use; choose another --port (or --host), or stop what "
                                               f"serves there"]


@pytest.mark.parametrize("token,phrase", [
    (b"\xff\xfe".decode("utf-8", "surrogateescape"), "is not valid UTF-8 text"),
    (" padded", "leading/trailing spaces"),
    ("tab\tinside", "control characters"),
])
def test_serve_refuses_a_token_no_header_can_carry(monkeypatch, capsys, token, phrase):
    monkeypatch.setenv("PATTERNCNN_API_TOKEN", token)
    assert main(["serve", "--no-encoder", "--port", "1"]) == 2
    one_line_error(capsys, phrase)


def test_an_unwritable_cache_names_patterncnn_cache(glue_dir, tmp_path, monkeypatch, capsys):
    # helper 106: an unwritable encoders' cache said "choose a path you may write to (e.g. --out)"; --out was fine
    monkeypatch.setenv("PATTERNCNN_CACHE", UNWRITABLE)
    assert main(["census", "--model", "mpnet", "--task", "rte", "--limit", "2", "--glue-dir", str(glue_dir),
                 "--out", str(tmp_path / "c")]) == 2
    one_line_error(capsys, f"patterncnn keeps its assembled encoders and ONNX exports in {UNWRITABLE}: set "
                           f"PATTERNCNN_CACHE to a folder you may write to")
