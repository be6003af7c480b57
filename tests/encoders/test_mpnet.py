"""A tiny random MPNet built in the test: tokens, separators, token types, truncation, and a census on real RTE rows."""

import json

import numpy as np
import pytest

from patterncnn.census.run import run_census
from patterncnn.classifier.onnx import OnnxClassifier
from patterncnn.core.glue import Example, load_split
from patterncnn.core.labels import LABELS
from patterncnn.core.segments import boundaries
from patterncnn.encoders.load import load_encoder


def ex(i, *texts):
    return Example("rte", "dev", i, texts, 0)


def test_pair_has_the_double_separator(tiny_mpnet):
    enc = load_encoder(str(tiny_mpnet), max_length=64)
    assert (enc.num_layers, enc.num_heads) == (2, 4) and not enc._uses_token_types  # MPNet has no token types
    out = {o.example.index: o for o in enc.iter_attentions([ex(0, "ab c.", "de"), ex(1, "ab c.")], batch_size=2)}
    pair, single = out[0], out[1]
    assert pair.tokens == ["<s>", "a", "##b", "c", ".", "</s>", "</s>", "d", "##e", "</s>"]
    assert pair.seps == [5, 6, 9] and boundaries(len(pair.tokens), pair.seps) == [7]
    assert single.seps == [len(single.tokens) - 1] and boundaries(len(single.tokens), single.seps) == []
    for o in out.values():
        t = len(o.tokens)
        assert o.maps.shape == (2, 4, t, t)
        np.testing.assert_allclose(o.maps.sum(-1), 1.0, atol=1e-5)


def test_truncated_pair_keeps_both_separators(tiny_mpnet):
    enc = load_encoder(str(tiny_mpnet), max_length=16)
    o = next(enc.iter_attentions([ex(0, "x" * 30, "y" * 30)]))
    assert o.truncated and len(o.tokens) == 16
    assert o.seps == [7, 8, 15] and o.tokens[9] == "y"  # <s> x*6 </s></s> y*6 </s>


def test_max_length_leaves_out_the_offset_positions(tiny_mpnet):
    # MPNet's positions start at padding_idx + 1: a table of 66 holds 64 tokens.
    assert load_encoder(str(tiny_mpnet), max_length=1000).max_length == 64


def test_token_types_follow_the_segments(tiny_bert):
    enc = load_encoder(str(tiny_bert), max_length=64)
    sep, cls = enc.tokenizer.sep_token_id, enc.tokenizer.cls_token_id
    types = enc._token_types([[cls, 9, sep, 9, 9, sep], [cls, 9, 9, sep]], width=7)
    assert types.tolist() == [[0, 0, 0, 1, 1, 1, 0], [0, 0, 0, 0, 0, 0, 0]]  # as BERT's tokenizer, padding 0
    ids = enc.tokenizer("ab c", "de")
    assert enc._token_types([ids["input_ids"]], len(ids["input_ids"]))[0].tolist() == ids["token_type_ids"]


def test_census_on_real_rte_rows(tiny_mpnet, tiny_classifier, glue_dir, tmp_path):
    enc = load_encoder(str(tiny_mpnet), max_length=64)
    clf = OnnxClassifier(tiny_classifier[1])
    splits = [load_split("rte", "dev", glue_dir, limit=3, seed=0), load_split("sst2", "dev", glue_dir, limit=3)]
    res = run_census(enc, clf, splits, tmp_path / "c", limit=3, seed=0, save_maps=True)
    for task in ("rte", "sst2"):
        s = res["tasks"][task]
        assert s["examples"] == 3 and s["maps"] == 3 * 2 * 4
        assert sum(s["shares"].values()) == pytest.approx(1.0)
    assert res["tasks"]["sst2"]["shares"]["block"] == 0.0  # single sentences never get block
    from patterncnn.core.maps import MapStore

    store = MapStore(tmp_path / "c" / "maps" / "rte")
    for meta in store.meta:
        a, b, end = meta["seps"]  # <s> A </s></s> B </s>, possibly truncated
        assert b == a + 1 and end == meta["T"] - 1 and meta["tokens"][a] == meta["tokens"][b] == "</s>"
    assert json.loads((tmp_path / "c" / "census.json").read_text())["encoder"]["sha256"]
    assert set(res["tasks"]["rte"]["shares"]) == set(LABELS)
