"""The example maps a census keeps per head and pattern: the surest ones, whichever window or batch held them,
with their tokens; checked against every map of the same census saved and classified again."""

import numpy as np
import pytest

from patterncnn.census.run import run_census
from patterncnn.census.thumbnails import PER_HEAD, Keeper, merge, quantize, read_thumbnails
from patterncnn.classifier.onnx import OnnxClassifier
from patterncnn.core.glue import load_split
from patterncnn.core.labels import LABELS
from patterncnn.core.maps import MapStore
from patterncnn.encoders.load import load_encoder


def _probs(p: float, k: int) -> np.ndarray:
    row = np.full(5, (1 - p) / 4)
    row[k] = p
    return row[None]  # one map


def test_keeper_keeps_the_surest_ties_to_the_lower_example_and_merges_like_one_pass():
    maps = np.ones((1, 1, 3, 3), dtype=np.float32)
    offers = [(7, 0.5), (3, 0.9), (9, 0.9), (1, 0.6), (4, 0.2), (2, 0.9)]  # (example, probability of vertical)
    one = Keeper(1, per_head=3)
    for i, p in offers:
        one.offer(i, _probs(p, 0), maps, [f"t{i}"] * 3, [1])
    kept = one.arrays()
    assert kept["thumb_index"].tolist() == [2, 3, 9]  # 0.9 thrice: the lower example indices first
    halves = [Keeper(1, per_head=3), Keeper(1, per_head=3)]
    for n, (i, p) in enumerate(offers):
        halves[n % 2].offer(i, _probs(p, 0), maps, [f"t{i}"] * 3, [1])
    merged = merge([h.arrays() for h in halves], per_head=3)
    for key in ("thumb_key", "thumb_prob", "thumb_index", "thumb_t", "thumb_maps"):
        np.testing.assert_array_equal(merged[key], kept[key])
    assert sorted(merged["text_index"].tolist()) == [2, 3, 9]


def test_quantize_scales_each_map_to_its_maximum():
    a = np.array([[0.1, 0.2], [0.0, 0.8]], dtype=np.float32)
    assert quantize(a).tolist() == [[32, 64], [0, 255]]
    assert quantize(np.zeros((2, 2))).max() == 0


@pytest.fixture()
def setup(tiny_bert, tiny_classifier, glue_dir):
    return load_encoder(str(tiny_bert), max_length=48), OnnxClassifier(tiny_classifier[1]), glue_dir


def test_census_keeps_the_surest_maps_of_each_head_and_pattern(setup, tmp_path):
    enc, clf, glue = setup
    split = load_split("rte", "dev", glue, limit=90, seed=1)  # two windows
    res = run_census(enc, clf, [split], tmp_path / "c", limit=90, seed=1, save_maps=True)
    kept = read_thumbnails(tmp_path / "c", enc.num_heads)
    assert kept and res["thumbnails"]["per_head_and_pattern"] == PER_HEAD
    store = MapStore(tmp_path / "c" / "maps" / "rte")
    metas = store.meta
    probs = clf.predict([store.get(m["id"]) for m in metas], [m["seps"] for m in metas])
    expect = {}
    for m, p in zip(metas, probs):
        k = int(p.argmax())
        expect.setdefault((m["layer"], m["head"], LABELS[k]), []).append((-float(p[k]), m["example"]))
    got = {}
    for r in kept:
        got.setdefault((r["layer"], r["head"], r["label"]), []).append(r["example"])
    assert set(got) == set(expect)  # every (head, pattern) that was given at least once, and no other
    for key, cands in expect.items():
        best = sorted(cands)[:PER_HEAD]
        assert got[key] == [ex for _, ex in best], key
    by_id = {(m["example"], m["layer"], m["head"]): m for m in metas}
    for r in kept[:20]:
        meta = by_id[(r["example"], r["layer"], r["head"])]
        assert r["tokens"] == meta["tokens"] and r["seps"] == meta["seps"] and r["map"].shape == (meta["T"],) * 2
        np.testing.assert_allclose(r["map"], quantize(store.get(meta["id"])) / 255.0)
    assert res["tasks"]["rte"]["examples"] == 90


@pytest.mark.parametrize("damage", ["size", "prob", "seps", "tokens"])
def test_damaged_example_maps_are_found_by_the_check(damage):
    """A window whose example maps are damaged fails the check (and is computed again), never crashes the merge."""
    from patterncnn.census.thumbnails import Keeper, problem

    keep = Keeper(num_maps=4)
    keep.offer(3, np.tile([[0.7, 0.1, 0.1, 0.05, 0.05]], (4, 1)), np.random.default_rng(0).random((2, 2, 5, 5)),
               ["a", "b", "c", "d", "e"], [2, 4])
    arrays = keep.arrays()
    assert problem(arrays, 4) is None
    n = len(arrays["thumb_t"])
    arrays = {**arrays, **{"size": {"thumb_t": np.full(n, 2**32)}, "prob": {"thumb_prob": np.array(["x"] * n)},
                           "seps": {"text_seps": np.array(["a,b"])}, "tokens": {"text_index": np.array([99])}}[damage]}
    assert problem(arrays, 4) is not None
