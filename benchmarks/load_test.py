"""Load test of `patterncnn serve` on loopback: classify and analyze requests at a fixed concurrency.

    python benchmarks/load_test.py [--classify 2000] [--analyze 200] [--concurrency 32]

Starts the server itself on 127.0.0.1 (a subprocess, shipped classifier, embedded MiniLM), sends a
bounded number of requests, prints throughput, p50/p99 latency, errors and the machine's load
average (other work on the machine shows in the figures), and stops the server. Traffic goes to
the loopback address only.
"""

import argparse
import asyncio
import os
import socket
import subprocess
import sys
import time

import httpx
import numpy as np

TOKEN = "load-test"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_server(port: int, token: str, *extra: str) -> subprocess.Popen:
    """`patterncnn serve` on 127.0.0.1:port in a subprocess (shipped classifier), once /health answers."""
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "PATTERNCNN_API_TOKEN": token}
    server = subprocess.Popen([sys.executable, "-m", "patterncnn.cli", "serve", "--port", str(port), *extra], env=env,
                              stdout=subprocess.DEVNULL)
    for _ in range(600):
        try:
            if httpx.get(f"http://127.0.0.1:{port}/health", timeout=1).status_code == 200:
                return server
        except httpx.HTTPError:
            time.sleep(0.2)
    server.kill()
    raise SystemExit("server did not start")


async def run(url: str, n: int, concurrency: int, make) -> dict:
    sem = asyncio.Semaphore(concurrency)
    lat, errors = [], 0

    async with httpx.AsyncClient(base_url=url, timeout=120, headers={"Authorization": f"Bearer {TOKEN}"}) as c:
        async def one(i):
            nonlocal errors
            async with sem:
                t0 = time.perf_counter()
                try:
                    r = await make(c, i)
                    if r.status_code != 200:
                        errors += 1
                except httpx.HTTPError:
                    errors += 1
                lat.append(time.perf_counter() - t0)

        t0 = time.perf_counter()
        await asyncio.gather(*(one(i) for i in range(n)))
        wall = time.perf_counter() - t0
    lat_ms = np.array(lat) * 1000
    return {"n": n, "wall": wall, "rps": n / wall, "p50": float(np.percentile(lat_ms, 50)),
            "p99": float(np.percentile(lat_ms, 99)), "errors": errors}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--classify", type=int, default=2000)
    p.add_argument("--analyze", type=int, default=200)
    p.add_argument("--concurrency", type=int, default=32)
    p.add_argument("--maps-per-request", type=int, default=4)
    p.add_argument("--t", type=int, default=48, help="map size T in classify requests")
    a = p.parse_args()
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    load_before = os.getloadavg()
    server = start_server(port, TOKEN)
    try:
        rng = np.random.default_rng(0)
        maps = rng.random((a.maps_per_request, a.t, a.t), dtype=np.float32)
        body = {"maps": (maps / maps.sum(-1, keepdims=True)).round(5).tolist(),
                "seps": [[a.t // 2, a.t - 1]] * a.maps_per_request}
        sentences = ["The cat sat on the mat.", "A man is playing a guitar on stage tonight.",
                     "What came into force after the new constitution was herald?"]
        r1 = asyncio.run(run(url, a.classify, a.concurrency, lambda c, i: c.post("/v1/classify", json=body)))
        r2 = asyncio.run(run(url, a.analyze, a.concurrency, lambda c, i: c.post(
            "/v1/analyze", json={"text": sentences[i % 3], "text_pair": sentences[(i + 1) % 3]})))
        print(f"server: 127.0.0.1, 2 threads; concurrency {a.concurrency}; load average (1, 5, 15 min) before "
              f"{' '.join(f'{x:.2f}' for x in load_before)}, after {' '.join(f'{x:.2f}' for x in os.getloadavg())}, "
              f"on {os.cpu_count()} cores")
        for name, r, unit in (("classify", r1, f"{a.maps_per_request} maps of T={a.t} each"),
                              ("analyze", r2, "one sentence pair each")):
            print(f"{name:>8}: {r['n']} requests ({unit}) in {r['wall']:.1f} s = {r['rps']:.1f} req/s; "
                  f"p50 {r['p50']:.0f} ms, p99 {r['p99']:.0f} ms; errors {r['errors']}")
    finally:
        server.terminate()
        server.wait(20)


if __name__ == "__main__":
    main()
