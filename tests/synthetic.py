"""Synthetic attention maps with a known pattern, for tests that need maps but no encoder."""

import numpy as np


def pattern_map(kind: str, t: int = 12, sep: int | None = None, seed: int = 0) -> np.ndarray:
    """A (t, t) row-stochastic map of the given pattern, with a little noise."""
    rng = np.random.default_rng(seed)
    a = rng.uniform(0.0, 0.02, size=(t, t))
    if kind in ("vertical", "vertical+diagonal"):
        a[:, 0] += 1.0
    if kind in ("diagonal", "vertical+diagonal"):
        a[np.arange(t), np.arange(t)] += 1.0
    if kind == "block":
        b = sep + 1
        a[:b, :b] += rng.uniform(0.2, 0.4, size=(b, b))
        a[b:, b:] += rng.uniform(0.2, 0.4, size=(t - b, t - b))
    if kind == "heterogeneous":
        a += rng.uniform(0, 1, size=(t, t)) ** 8
    return (a / a.sum(1, keepdims=True)).astype(np.float32)


def pattern_store(path, kinds, t: int = 12):
    """A map store with one map per kind; returns the store."""
    from patterncnn.maps import MapStore

    store = MapStore.create(path, info={"synthetic": True})
    sep = t // 2 - 1
    recs = []
    for i, kind in enumerate(kinds):
        tokens = (["[CLS]"] + [f"w{j}" for j in range(1, sep)] + ["[SEP]"] + [f"v{j}" for j in range(sep + 1, t - 1)]
                  + ["[SEP]"])
        meta = {"id": f"syn_{i:03d}_{kind}", "model": "synthetic", "task": "rte", "split": "dev", "example": i,
                "layer": i % 3, "head": i % 4, "T": t, "tokens": tokens, "seps": [sep, t - 1]}
        recs.append((meta, pattern_map(kind, t, sep, seed=i)))
    store.append(recs)
    return store
