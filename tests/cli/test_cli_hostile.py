"""The CLI against hostile input (issue 14): one line on stderr and a non-zero exit, never a traceback."""

import os
import signal
import socket
import subprocess
import sys
import time

import httpx
import numpy as np
import pytest
from hostile import corrupt_deflate_npz, npy_header, truncated, zip_of
from labelstudio_server import free_port
from synthetic import pattern_map

from patterncnn.cli import build_parser, main
from patterncnn.core.fileio import write_text

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
    (zip_of({"a.npy": npy_header((2**21, 2**21))}), "over the limit T <= 8192"),  # declares 32 TiB
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


def test_census_help_shows_a_plain_percent(capsys):
    with pytest.raises(SystemExit):
        main(["census", "--help"])
    out = capsys.readouterr().out
    assert "95%" in out and "95%%" not in out


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
        for _ in range(300):
            try:
                if httpx.get(f"http://127.0.0.1:{port}/health", timeout=1).status_code == 200:
                    break
            except httpx.HTTPError:
                time.sleep(0.1)
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
