"""The zip bomb of the hostile probe against `patterncnn serve`: refusal time, server RSS, /health meanwhile.

    python benchmarks/zip_bomb.py [--bombs 20] [--concurrency 4] [--members 3] [--side 16384]

Builds the probe's bomb (3 zero maps of 16384 × 16384 float32 in a 3.1 MB .npz, 3 GiB inflated;
building it takes ~20 s), starts the server on 127.0.0.1 (a subprocess, shipped classifier, no
encoder), then sends the bomb --bombs times, --concurrency at once, while another client polls
/health every 20 ms. Prints the refusal time per bomb, the growth of the server's RSS, and the
/health latency while the bombs were in flight. Targets (issue 14): refused in < 100 ms, RSS
growth < 50 MB, /health < 100 ms.

    python benchmarks/zip_bomb.py --within f16npz [--concurrency 1]

--within sends, instead, a body within every limit whose maps decode to just under the default budget
(512 MiB as float32): f16npz (512 float16 maps of 512 x 512, compressed), f64npz (256 float64 maps) or
f16npy (511 float16 maps, a 256 MiB body), --concurrency at once, and prints the server's peak RSS (VmHWM, reset
before the requests) over its RSS before them.
Traffic goes to the loopback address only.
"""

import argparse
import io
import os
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import httpx
import numpy as np
import psutil
from hostile import zip_bomb
from load_test import free_port, start_server


def poll_health(url: str, stop: threading.Event, out: list) -> None:
    with httpx.Client(base_url=url, timeout=60) as c:
        while not stop.is_set():
            t0 = time.perf_counter()
            status = c.get("/health").status_code
            out.append((status, time.perf_counter() - t0))
            time.sleep(0.02)


def send_bombs(url: str, bomb: bytes, n: int, concurrency: int) -> list[tuple[int, float, str]]:
    """(status, seconds, detail) of each of n bomb requests, ``concurrency`` at a time."""
    headers = {"Authorization": "Bearer bench", "content-type": "application/octet-stream"}

    def one(_):
        with httpx.Client(base_url=url, timeout=120, headers=headers) as c:
            t = time.perf_counter()
            r = c.post("/v1/classify", content=bomb)
            return r.status_code, time.perf_counter() - t, r.json()["detail"]

    with ThreadPoolExecutor(concurrency) as pool:
        return list(pool.map(one, range(n)))


def within_budget(kind: str) -> bytes:
    """A body of uniform 512 x 512 maps (rows sum to 1) decoding to just under 512 MiB as float32."""
    dtype, n, fmt = {"f16npz": (np.float16, 512, "npz"), "f64npz": (np.float64, 256, "npz"),
                     "f16npy": (np.float16, 511, "npy")}[kind]
    maps = np.full((n, 512, 512), 1 / 512, dtype=dtype)
    buf = io.BytesIO()
    np.save(buf, maps) if fmt == "npy" else np.savez_compressed(buf, **{f"m{i}": m for i, m in enumerate(maps)})
    return buf.getvalue()


def vm_kb(pid: int, field: str) -> int:
    with open(f"/proc/{pid}/status") as f:
        return next(int(line.split()[1]) for line in f if line.startswith(field + ":"))


def peak_of(kind: str, concurrency: int) -> None:
    body = within_budget(kind)
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    server = start_server(port, "bench", "--no-encoder")
    headers = {"Authorization": "Bearer bench", "content-type": "application/octet-stream"}
    try:
        with httpx.Client(base_url=url, timeout=600, headers=headers) as c:
            warm = io.BytesIO()
            np.save(warm, np.eye(8, dtype=np.float32))
            c.post("/v1/classify", content=warm.getvalue())  # warm-up: worker threads, the model's first call
        base = vm_kb(server.pid, "VmRSS")
        with open(f"/proc/{server.pid}/clear_refs", "w") as f:
            f.write("5")  # VmHWM := VmRSS

        def one(_):
            with httpx.Client(base_url=url, timeout=600, headers=headers) as c:
                t = time.perf_counter()
                return c.post("/v1/classify", content=body).status_code, time.perf_counter() - t

        polled, stop = [base], threading.Event()

        def poll():  # VmRSS every 5 ms, beside VmHWM (whose reset is not honoured by every kernel)
            while not stop.is_set():
                polled.append(vm_kb(server.pid, "VmRSS"))
                time.sleep(0.005)

        poller = threading.Thread(target=poll)
        poller.start()
        with ThreadPoolExecutor(concurrency) as pool:
            results = list(pool.map(one, range(concurrency)))
        stop.set()
        poller.join()
        peak = vm_kb(server.pid, "VmHWM")
    finally:
        server.terminate()
        server.wait(20)
    print(f"{kind} x{concurrency} ({len(body) / 2**20:.1f} MiB body): status {[s for s, _ in results]}, "
          f"{max(t for _, t in results):.1f} s; server VmHWM {peak / 2**20:.2f} GiB, "
          f"+{(peak - base) / 2**20:.2f} GiB over {base / 2**20:.2f} GiB; "
          f"polled VmRSS max +{(max(polled) - base) / 2**20:.2f} GiB")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--bombs", type=int, default=20)
    p.add_argument("--concurrency", type=int, default=4)
    p.add_argument("--members", type=int, default=3)
    p.add_argument("--side", type=int, default=16384)
    p.add_argument("--within", choices=("f16npz", "f64npz", "f16npy"), help="a body within the limits instead")
    a = p.parse_args()
    if a.within:
        return peak_of(a.within, a.concurrency)
    t0 = time.perf_counter()
    bomb = zip_bomb(a.members, a.side)
    inflated = a.members * a.side * a.side * 4
    print(f"bomb: {len(bomb) / 1e6:.1f} MB .npz, {inflated / 2**30:.1f} GiB inflated "
          f"({inflated / len(bomb):.0f}x), built in {time.perf_counter() - t0:.0f} s")
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    load_before = os.getloadavg()
    server = start_server(port, "bench", "--no-encoder")
    try:
        rss = psutil.Process(server.pid)
        send_bombs(url, bomb, 2, 1)  # warm-up: worker threads and the allocator in place
        rss0 = rss.memory_info().rss
        health, stop = [], threading.Event()
        poller = threading.Thread(target=poll_health, args=(url, stop, health))
        poller.start()
        results = send_bombs(url, bomb, a.bombs, a.concurrency)
        stop.set()
        poller.join()
        growth = rss.memory_info().rss - rss0
    finally:
        server.terminate()
        server.wait(20)
    ms = np.array([t for _, t, _ in results]) * 1000
    hl = np.array([t for _, t in health]) * 1000
    print(f"load average (1, 5, 15 min) before {' '.join(f'{x:.2f}' for x in load_before)}, after "
          f"{' '.join(f'{x:.2f}' for x in os.getloadavg())}, on {os.cpu_count()} cores")
    print(f"refused: {a.bombs} bombs, {a.concurrency} at a time, status {sorted({s for s, _, _ in results})}: "
          f"{results[0][2]!r}")
    print(f"refusal time (client side, incl. the upload): median {np.median(ms):.0f} ms, max {ms.max():.0f} ms")
    print(f"server RSS growth over the bombs: {growth / 2**20:.1f} MB (from {rss0 / 2**20:.0f} MB)")
    print(f"/health meanwhile: {len(hl)} polls, all 200: {all(s == 200 for s, _ in health)}, "
          f"p50 {np.median(hl):.1f} ms, max {hl.max():.1f} ms")


if __name__ == "__main__":
    main()
