"""Run `patterncnn` commands fast and measured: one process that has imported the CLI forks a child per command.

    with CliRunner() as run:
        result = run(["classify", "maps.npz", "--out", "-"], cwd=tmp_path)
        result.code, result.stderr, result.peak_rss, result.seconds

A command costs a fork, not a Python start with torch (about 3 s), so a fuzz run can afford hundreds.
Each child runs ``patterncnn.cli.main(argv)`` as the ``patterncnn`` script would, with its stdout and
stderr going to files (file descriptors too, so a library's C-level output is caught). The parent
reads the child's exit status and peak resident memory from ``wait4`` (what the command alone would
have used, the imported libraries included). The runner process never runs torch, onnxruntime or a
tokenizer itself, so no thread pool is forked half-initialised.

Run as a script, it is the runner: one JSON request per stdin line, one JSON answer per stdout line.
"""

from __future__ import annotations

import dataclasses
import json
import os
import resource
import signal
import subprocess
import sys
import time
from pathlib import Path

HARD_LIMIT = 12 << 30  # address space of a child: a runaway command fails instead of taking the shared machine


@dataclasses.dataclass
class Result:
    argv: list[str]
    code: int | None  # exit code; None: killed (see ``killed``)
    killed: str | None  # "timeout" or the signal's name
    stdout: str
    stderr: str
    peak_rss: int  # bytes
    seconds: float


class CliRunner:
    """A runner process (this file as a script), started on entering the block and stopped on leaving it."""

    def __init__(self, env: dict | None = None):
        self.env = {**os.environ, "HF_HUB_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false",
                    "PYTHONPATH": os.pathsep.join(sys.path), **(env or {})}

    def __enter__(self) -> "CliRunner":
        self.proc = subprocess.Popen([sys.executable, __file__], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     env=self.env, text=True, bufsize=1)
        ready = self.proc.stdout.readline()
        if ready.strip() != "ready":
            raise RuntimeError(f"the CLI runner did not start: {ready!r}")
        return self

    def __call__(self, argv: list[str], cwd: str | os.PathLike = ".", timeout: float = 120.0) -> Result:
        self.proc.stdin.write(json.dumps({"argv": argv, "cwd": str(cwd), "timeout": timeout}) + "\n")
        self.proc.stdin.flush()
        line = self.proc.stdout.readline()
        if not line:
            raise RuntimeError("the CLI runner died")
        return Result(**json.loads(line))

    def __exit__(self, *exc) -> None:
        self.proc.stdin.close()
        try:
            self.proc.wait(30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


def _child(argv: list[str], cwd: str, out: str, err: str) -> None:
    """In the forked child: run the command as the `patterncnn` script would, then leave without cleanup."""
    code = 1
    try:
        os.chdir(cwd)
        for fd, path in ((1, out), (2, err)):
            f = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
            os.dup2(f, fd)
            os.close(f)
        sys.stdin = open(os.devnull)
        sys.stdout = open(1, "w", closefd=False)
        sys.stderr = open(2, "w", closefd=False)
        resource.setrlimit(resource.RLIMIT_AS, (HARD_LIMIT, HARD_LIMIT))
        from patterncnn.cli import main

        try:
            code = main(argv)
        except SystemExit as e:  # argparse
            code = e.code if isinstance(e.code, int) else 1
        except BaseException:  # noqa: BLE001 - what the interpreter would print for an uncaught error
            import traceback

            traceback.print_exc()
            code = 1
        sys.stdout.flush()
        sys.stderr.flush()
    finally:
        os._exit(code if isinstance(code, int) else 1)


def _run(req: dict) -> dict:
    tmp = Path(req["cwd"])
    out, err = str(tmp / ".cli-runner.out"), str(tmp / ".cli-runner.err")
    t0 = time.monotonic()
    pid = os.fork()
    if pid == 0:
        _child(req["argv"], req["cwd"], out, err)
    killed, deadline = None, t0 + req["timeout"]
    while True:
        done, status, usage = os.wait4(pid, os.WNOHANG)
        if done:
            break
        if time.monotonic() > deadline:
            os.kill(pid, signal.SIGKILL)
            _, status, usage = os.wait4(pid, 0)
            killed = "timeout"
            break
        time.sleep(0.01)
    seconds = time.monotonic() - t0
    if os.WIFSIGNALED(status) and killed is None:
        killed = signal.Signals(os.WTERMSIG(status)).name
    texts = []
    for path in (out, err):
        with open(path, encoding="utf-8", errors="replace") as f:
            texts.append(f.read())
        os.unlink(path)
    return {"argv": req["argv"], "code": os.WEXITSTATUS(status) if os.WIFEXITED(status) else None, "killed": killed,
            "stdout": texts[0], "stderr": texts[1], "peak_rss": usage.ru_maxrss * 1024, "seconds": seconds}


def serve() -> None:
    # What every command may import, imported once here (no thread pool is started by importing).
    import numpy  # noqa: F401
    import onnxruntime  # noqa: F401
    import torch  # noqa: F401
    import transformers  # noqa: F401

    import patterncnn.census.run  # noqa: F401
    import patterncnn.classifier.onnx  # noqa: F401
    import patterncnn.cli  # noqa: F401
    import patterncnn.labelling.pull  # noqa: F401
    import patterncnn.training.validate  # noqa: F401

    print("ready", flush=True)
    for line in sys.stdin:
        print(json.dumps(_run(json.loads(line))), flush=True)


if __name__ == "__main__":
    serve()
