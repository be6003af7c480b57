"""The zip bomb of the hostile probe against `patterncnn serve`: refusal time, server RSS, /health meanwhile.

    python benchmarks/zip_bomb.py [--bombs 20] [--concurrency 4] [--members 3] [--side 16384]

Builds the probe's bomb (3 zero maps of 16384 × 16384 float32 in a 3.1 MB .npz, 3 GiB inflated;
building it takes ~20 s), starts the server on 127.0.0.1 (a subprocess, shipped classifier, no
encoder), then sends the bomb --bombs times, --concurrency at once, while another client polls
/health every 20 ms. Prints the refusal time per bomb, the growth of the server's RSS, and the
/health latency while the bombs were in flight. Targets (issue 14): refused in < 100 ms, RSS
growth < 50 MB, /health < 100 ms.
Traffic goes to the loopback address only.
"""

import argparse
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


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--bombs", type=int, default=20)
    p.add_argument("--concurrency", type=int, default=4)
    p.add_argument("--members", type=int, default=3)
    p.add_argument("--side", type=int, default=16384)
    a = p.parse_args()
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
