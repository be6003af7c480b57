"""The hostile probe of issue 31, replayed: every case's answer, time and memory, with the service's latency beside.

    python benchmarks/hostile_probe.py [--skip-cli] [--skip-server] [--polls-ms 50]

Server: starts `patterncnn serve` on 127.0.0.1 (a subprocess: shipped classifier, embedded MiniLM,
a non-ASCII API token sent as Bearer), polls ``/health`` and ``/v1/classify`` (4 maps of T = 48)
from two threads the whole time, and sends each hostile case while they run: the 15 MB single-word
text, two 8 MB texts at once, a 250 MB JSON body (one, then four at once), the 3 MB .npz of 12
zero maps of 8192², ``map`` with ``maps``, separators past the map, a map of 1e39. Prints each
case's status, answer and time, the pollers' p50/p99/max before and during the cases, and the
server's peak RSS (``VmHWM``). Then a taken port, a token that is not UTF-8, and SIGTERM during a
request. CLI: each case as its own `patterncnn` process, with its exit code, first stderr line, wall
time and peak RSS (``wait4``). Targets (issue 31): every case refused (4xx, or exit 2 with one line)
in < 1 s; ``/v1/classify`` p99 < 100 ms beside them; peak RSS of the server and the CLI < 2 GB.
Traffic goes to the loopback address only.
"""

import argparse
import io
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import httpx
import numpy as np
from hostile import zip_bomb
from load_test import free_port

TOKEN = "bench-ключ"  # not ASCII: sent as Bearer, as the probe did
AUTH = {"Authorization": b"Bearer " + TOKEN.encode()}
REPO = Path(__file__).resolve().parent.parent


def raw_request(port: int, path: str, headers: dict, body: bytes = b"", chunk: int = 1 << 16,
                declared: int | None = None) -> tuple[int, str, float]:
    """(status, detail, seconds to the answer) of one request sent over a raw socket.

    The body is streamed in chunks until the server answers (a refusal on Content-Length comes before the
    body) or the body is sent; ``declared`` sends that Content-Length whatever ``body`` holds.
    """
    head = f"POST {path} HTTP/1.1\r\nHost: x\r\nContent-Length: {declared if declared is not None else len(body)}\r\n"
    head = head.encode() + b"".join(k.encode() + b": " + (v if isinstance(v, bytes) else v.encode()) + b"\r\n"
                                    for k, v in headers.items()) + b"\r\n"
    t0 = time.perf_counter()
    with socket.create_connection(("127.0.0.1", port)) as s:
        s.sendall(head)
        s.setblocking(False)
        sent, reply = 0, b""
        while True:
            try:
                got = s.recv(65536)
                if not got:
                    break
                reply += got
                if b"\r\n\r\n" in reply and len(reply.split(b"\r\n\r\n", 1)[1]) >= _length(reply):
                    break
            except BlockingIOError:
                if sent < len(body):
                    try:
                        sent += s.send(body[sent : sent + chunk])
                    except (BlockingIOError, BrokenPipeError, ConnectionResetError):
                        time.sleep(0.001)
                else:
                    time.sleep(0.001)
            except ConnectionResetError:
                break
        seconds = time.perf_counter() - t0
    status = int(reply.split(b" ", 2)[1]) if reply.startswith(b"HTTP/") else 0
    detail = reply.split(b"\r\n\r\n", 1)[1].decode(errors="replace") if b"\r\n\r\n" in reply else ""
    try:
        detail = json.loads(detail)["detail"]
    except (ValueError, KeyError, TypeError):
        pass
    return status, str(detail), seconds


def _length(reply: bytes) -> int:
    for line in reply.split(b"\r\n\r\n", 1)[0].split(b"\r\n")[1:]:
        k, _, v = line.partition(b":")
        if k.strip().lower() == b"content-length":
            return int(v)
    return 0


class Poller(threading.Thread):
    """Sends one request again and again; keeps (time, status, latency)."""

    def __init__(self, url: str, make, every: float):
        super().__init__(daemon=True)
        self.url, self.make, self.every, self.stop, self.out = url, make, every, threading.Event(), []

    def run(self):
        with httpx.Client(base_url=self.url, timeout=60, headers=AUTH) as c:
            while not self.stop.is_set():
                t0 = time.perf_counter()
                status = self.make(c).status_code
                self.out.append((time.time(), status, time.perf_counter() - t0))
                time.sleep(self.every)

    def figures(self, start: float, end: float) -> str:
        ms = np.array([lat for t, _, lat in self.out if start <= t <= end]) * 1000
        bad = sum(s != 200 for t, s, _ in self.out if start <= t <= end)
        if not len(ms):
            return "no requests"
        return (f"{len(ms)} requests, p50 {np.percentile(ms, 50):.0f} ms, p99 {np.percentile(ms, 99):.0f} ms, "
                f"max {ms.max():.0f} ms, not 200: {bad}")


def start_server(port: int, *extra: str) -> subprocess.Popen:
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "PATTERNCNN_API_TOKEN": TOKEN}
    proc = subprocess.Popen([sys.executable, "-m", "patterncnn.cli", "serve", "--port", str(port), *extra], env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    for _ in range(900):
        try:
            if httpx.get(f"http://127.0.0.1:{port}/health", timeout=1).status_code == 200:
                return proc
        except httpx.HTTPError:
            time.sleep(0.2)
    proc.kill()
    raise SystemExit(f"server did not start: {proc.stderr.read()[-2000:]}")


def peak_rss(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) * 1024
    return 0


def npz_bytes(**arrays) -> bytes:
    buf = io.BytesIO()
    np.savez(buf, **arrays)
    return buf.getvalue()


def row(name: str, status, detail: str, seconds: float, rss: int | None = None) -> None:
    mem = f"{rss / 2**20:7.0f} MB" if rss is not None else " " * 10
    print(f"  {name:<44} {str(status):>5} {seconds * 1000:8.0f} ms {mem}  {detail[:110]}")


def server_cases(bomb: bytes, polls_ms: float) -> None:
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    load0 = os.getloadavg()
    server = start_server(port)
    rss_start = peak_rss(server.pid)
    rng = np.random.default_rng(0)
    maps = rng.random((4, 48, 48), dtype=np.float32)
    legit = {"maps": (maps / maps.sum(-1, keepdims=True)).round(5).tolist(), "seps": [[23, 47]] * 4}
    health = Poller(url, lambda c: c.get("/health"), polls_ms / 1000)
    classify = Poller(url, lambda c: c.post("/v1/classify", json=legit), polls_ms / 1000)
    try:
        health.start()
        classify.start()
        time.sleep(8)
        t_cases = time.time()
        json_h = {**AUTH, "Content-Type": "application/json"}
        word = b'{"text": "' + b"a" * (15 << 20) + b'"}'
        cases = [("/v1/analyze: one 15 MB word", lambda: raw_request(port, "/v1/analyze", json_h, word))]

        def at_once(n, fn):
            out = [None] * n
            threads = [threading.Thread(target=lambda i=i: out.__setitem__(i, fn())) for i in range(n)]
            for t in threads:
                t.start()
            for t in threads:
                t.join()
            return max(out, key=lambda r: r[2])

        eight = b'{"text": "' + b"b" * (8 << 20) + b'"}'
        cases += [("/v1/analyze: two 8 MB texts at once (slower)", lambda: at_once(2, lambda: raw_request(
            port, "/v1/analyze", json_h, eight)))]
        big = b" " * (250 << 20)
        cases += [("/v1/classify: 250 MB JSON body", lambda: raw_request(port, "/v1/classify", json_h, big)),
                  ("/v1/classify: four 250 MB JSON bodies at once", lambda: at_once(4, lambda: raw_request(
                      port, "/v1/classify", json_h, big)))]
        bin_h = {**AUTH, "Content-Type": "application/octet-stream"}
        cases += [("/v1/classify: 3 MB npz, 12 x 8192^2 zeros", lambda: raw_request(port, "/v1/classify", bin_h, bomb))]
        m = np.full((8, 8), 1 / 8).tolist()
        for name, body in (("map and maps together", {"map": m, "maps": [m]}),
                           ("separators past the map", {"maps": [m], "seps": [[3, 40]]}),
                           ("a map of 1e39", {"map": np.full((4, 4), 1e39).tolist()})):
            cases.append((f"/v1/classify: {name}", lambda body=body: raw_request(
                port, "/v1/classify", json_h, json.dumps(body).encode())))
        print(f"\nserver (127.0.0.1:{port}, MiniLM, shipped classifier, 2 workers); RSS at start "
              f"{rss_start / 2**20:.0f} MB; load average before {' '.join(f'{x:.2f}' for x in load0)}")
        print(f"  {'case':<44} {'HTTP':>5} {'answer':>11} {'':>10}  detail")
        for name, fn in cases:
            status, detail, seconds = fn()
            row(name, status, detail, seconds)
        t_end = time.time()
        time.sleep(2)
        print(f"  /health       before the cases: {health.figures(0, t_cases)}")
        print(f"  /health       during the cases: {health.figures(t_cases, t_end)}")
        print(f"  /v1/classify  before the cases: {classify.figures(0, t_cases)}")
        print(f"  /v1/classify  during the cases: {classify.figures(t_cases, t_end)}")
        print(f"  server peak RSS (VmHWM) over the run: {peak_rss(server.pid) / 2**20:.0f} MB; load average after "
              f"{' '.join(f'{x:.2f}' for x in os.getloadavg())}")
        health.stop.set()
        classify.stop.set()
        health.join()
        classify.join()

        t0 = time.perf_counter()  # a second server on the same port
        taken = subprocess.run([sys.executable, "-m", "patterncnn.cli", "serve", "--no-encoder", "--port", str(port)],
                               capture_output=True, text=True, env={**os.environ, "PATTERNCNN_API_TOKEN": TOKEN})
        row("serve on the taken port", f"exit {taken.returncode}",
            f"{len(taken.stderr.splitlines())} line(s), stdout {taken.stdout!r}: {taken.stderr.strip()}",
            time.perf_counter() - t0)
        t0 = time.perf_counter()
        bad = subprocess.run([sys.executable, "-m", "patterncnn.cli", "serve", "--no-encoder", "--port",
                              str(free_port())], capture_output=True, text=True,
                             env={**os.environb, b"PATTERNCNN_API_TOKEN": b"\xff\xfe"} if os.supports_bytes_environ
                             else None)
        row("serve with a token that is not UTF-8", f"exit {bad.returncode}", bad.stderr.strip(),
            time.perf_counter() - t0)
        # SIGTERM while a request runs: a batch of 1024 maps of 128² (64 MB) takes a few seconds.
        batch = rng.random((1024, 128, 128), dtype=np.float32)
        answer = {}
        body = io.BytesIO()
        np.save(body, batch)
        req = threading.Thread(target=lambda: answer.update(r=raw_request(port, "/v1/classify", bin_h,
                                                                          body.getvalue())))
        req.start()
        time.sleep(1.5)
        t0 = time.perf_counter()
        server.send_signal(signal.SIGTERM)
        server.wait(60)
        stopped = time.perf_counter() - t0
        req.join(60)
        log = server.stderr.read()
        status, detail, _ = answer.get("r", (0, "no answer", 0))
        row("SIGTERM during a request", status, f"exit after {stopped:.2f} s; {detail}; log: "
            f"{len(log.strip().splitlines())} line(s), traceback: {'Traceback' in log}", stopped)
    finally:
        if server.poll() is None:
            server.kill()
            server.wait()


def cli(argv: list[str], cwd: Path, env: dict | None = None) -> tuple[int, str, float, int]:
    """(exit code, stderr, seconds, peak RSS in bytes) of one `patterncnn` process."""
    t0 = time.perf_counter()
    proc = subprocess.Popen([sys.executable, "-m", "patterncnn.cli", *argv], cwd=cwd, stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, env={**os.environ, "HF_HUB_OFFLINE": "1", **(env or {})})
    err = proc.stderr.read().decode(errors="replace")
    _, status, usage = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    return proc.returncode, err, time.perf_counter() - t0, usage.ru_maxrss * 1024


def cli_cases(bomb: bytes) -> None:
    work = Path(tempfile.mkdtemp(prefix="hostile-probe-"))
    (work / "bomb.npz").write_bytes(bomb)
    (work / "small-bomb.npz").write_bytes(zip_bomb(3, 8192))  # 768 MiB of zeros: under the limit, so classified
    big32 = np.zeros((3, 3), dtype=np.float32)
    big32[0] = 3.4e38
    (work / "huge.npz").write_bytes(npz_bytes(huge64=np.full((4, 4), 1e39), huge32=big32,
                                              good=np.full((6, 6), 1 / 6)))
    (work / "existing.jsonl").write_text("old\n")
    os.mkfifo(work / "fifo")
    for name, text in (("list", "[1, 2]"), ("no-id", None), ("int-id", None)):
        store = work / f"store-{name}"
        store.mkdir()
        (store / "store.json").write_text(text or '{"format": "patterncnn-maps", "version": 1}')
        np.savez(store / "part-00000.npz", a=np.full((4, 4), 0.25))
        (store / "part-00000.jsonl").write_text({"no-id": '{"x": 1}\n', "int-id": '{"id": 5}\n'}.get(name, '{"id": "a"}\n'))
    census = REPO / "research" / "census" / "minilm" / "census.json"
    damaged = json.loads(census.read_text())
    del damaged["tasks"]["sst2"]["shares"]
    (work / "damaged-census.json").write_text(json.dumps(damaged))
    cases = [
        ("classify: 3 MB npz, 12 x 8192^2 zeros", ["classify", "bomb.npz", "--out", "p.jsonl"]),
        ("classify: 3 x 8192^2 zeros (768 MiB, accepted)", ["classify", "small-bomb.npz", "--out", "q.jsonl"]),
        ("classify --out a FIFO", ["classify", "huge.npz", "--out", "fifo"]),
        ("classify --out an existing file", ["classify", "huge.npz", "--out", "existing.jsonl"]),
        ("classify: maps of 1e39 and 3.4e38", ["classify", "huge.npz", "--out", "-"]),
        ("classify: store.json that is a list", ["classify", "store-list", "--out", "-"]),
        ("classify: a jsonl line without id", ["classify", "store-no-id", "--out", "-"]),
        ("classify: an integer id", ["classify", "store-int-id", "--out", "-"]),
        ("census --compare: a damaged census.json", ["census", "--compare", "damaged-census.json", str(census)]),
    ]
    print(f"\nCLI (each case one `patterncnn` process; load average {' '.join(f'{x:.2f}' for x in os.getloadavg())})")
    print(f"  {'case':<44} {'exit':>5} {'time':>11} {'peak RSS':>10}  first line of stderr")
    for name, argv in cases:
        code, err, seconds, rss = cli(argv, work)
        row(name, code, (err.strip().splitlines() or [""])[-1], seconds, rss)
    code, err, seconds, rss = cli(["analyze", os.fsdecode(b"\xff\xfe abc")], work)
    row("analyze: an argument that is not UTF-8", code, err.strip(), seconds, rss)
    code, err, seconds, rss = cli(["--version"], work)
    row("(for scale: patterncnn --version)", code, "", seconds, rss)
    # Census resume with a damaged window: an unfinished census of 130 RTE examples, its first window truncated.
    glue = os.environ.get("GLUE_DIR", str(REPO.parent / "shared" / "glue"))
    args = ["census", "--task", "rte", "--limit", "130", "--glue-dir", glue, "--out", "resume"]
    proc = subprocess.Popen([sys.executable, "-m", "patterncnn.cli", *args], cwd=work, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL, env={**os.environ, "HF_HUB_OFFLINE": "1"})
    windows = work / "resume" / ".work" / "rte"
    while proc.poll() is None and len(list(windows.glob("window-*.npz"))) < 2:
        time.sleep(0.2)
    proc.send_signal(signal.SIGTERM)
    proc.wait()
    first = windows / "window-00000.npz"
    if first.exists():
        first.write_bytes(first.read_bytes()[:300])
        code, err, seconds, rss = cli(args, work)
        warned = [line for line in err.replace("\r", "\n").splitlines() if "damaged" in line]
        row("census resume, first window truncated", code, warned[0] if warned else "(no warning)", seconds, rss)
    else:
        print("  census resume: the census finished before it could be cut; not measured")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--skip-cli", action="store_true")
    p.add_argument("--skip-server", action="store_true")
    p.add_argument("--polls-ms", type=float, default=50, help="pause between two polls of each poller")
    a = p.parse_args()
    t0 = time.perf_counter()
    bomb = zip_bomb(12, 8192)
    print(f"the probe's npz: {len(bomb) / 1e6:.1f} MB, 12 zero maps of 8192 x 8192 float32 (3 GiB inflated), built "
          f"in {time.perf_counter() - t0:.0f} s; {os.cpu_count()} cores")
    if not a.skip_server:
        server_cases(bomb, a.polls_ms)
    if not a.skip_cli:
        cli_cases(bomb)


if __name__ == "__main__":
    main()
