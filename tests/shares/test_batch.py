"""estimate_shares: a batch of one's own examples gets the census's shares and intervals."""

import numpy as np
import pytest
import torch

import patterncnn
from patterncnn.core.args import ArgumentError, ArgumentTypeError
from patterncnn.core.glue import get_task, load_split
from patterncnn.core.labels import LABELS
from patterncnn.shares.batch import EstimateWarning


def _batch_patterns(enc, clf, examples):
    """The examples as a user classifies them: one padded Hugging Face batch, classify_attentions."""
    tok = enc.tokenizer
    batch = tok([e.texts[0] for e in examples], [e.texts[1] for e in examples], padding=True, truncation=True,
                max_length=enc.max_length, return_tensors="pt")
    with torch.no_grad():
        out = enc.model(**batch, output_attentions=True)
    tokens = [tok.convert_ids_to_tokens(ids) for ids in batch["input_ids"]]
    return clf.classify_attentions(out.attentions, attention_mask=batch["attention_mask"], tokens=tokens)


def test_a_batch_of_a_census_examples_gets_the_census_shares_and_intervals(glue_dir, tmp_path):
    res = patterncnn.census("minilm", tasks="rte", limit=24, glue_dir=glue_dir, out=tmp_path / "c")
    task = res.data["tasks"]["rte"]
    enc, clf = patterncnn.load_encoder("minilm"), patterncnn.load_classifier()
    examples = load_split(get_task("rte"), "dev", glue_dir, limit=24, seed=0).examples
    patterns = _batch_patterns(enc, clf, examples)
    table = patterncnn.estimate_shares(patterns, clf, encoder=enc)
    assert table.attrs["estimator"]["name"] == res.data["estimator"]["name"] == "adjusted"
    assert table["count"].to_dict() == task["counts"]
    for name in LABELS:
        assert table.loc[name, "share"] == pytest.approx(task["shares"][name], abs=1e-9)
        assert [table.loc[name, "low"], table.loc[name, "high"]] == pytest.approx(task["ci95"][name], abs=1e-9)
    assert (table.attrs["examples"], table.attrs["single_segment"], table.attrs["warnings"]) == (24, 0, [])
    # an encoder patterncnn was not told of (an in-memory model): count, with the unseen family's band and warning
    with pytest.warns(EstimateWarning) as caught:  # a Python warning, pointing at the caller's line (helper 109)
        unknown = patterncnn.estimate_shares(patterns, clf)
    assert unknown.attrs["estimator"]["name"] == "count" and unknown.attrs["encoder"] == "unknown"
    assert "none the classifier was validated on" in unknown.attrs["warnings"][0] == str(caught[0].message)
    assert caught[0].filename == __file__
    assert unknown["count"].to_dict() == task["counts"]
    assert (unknown["share"] == unknown["count"] / unknown["count"].sum()).all()
    width, examples_width = unknown["high"] - unknown["low"], unknown["examples_high"] - unknown["examples_low"]
    assert (width >= examples_width - 1e-9).all() and (width > examples_width + 0.02).any()  # the band widens it
    with pytest.warns(EstimateWarning, match="the batch has only 3 examples"):
        few = patterncnn.estimate_shares(_batch_patterns(enc, clf, examples[:3]), clf, encoder=enc.tag)
    assert "the batch has only 3 examples" in few.attrs["warnings"][0]
    assert few.attrs["warnings"][0].endswith("classify a batch of at least 20 examples")


def test_estimate_shares_refuses_what_it_cannot_estimate_by_name():
    clf = patterncnn.load_classifier()
    maps = clf.classify(np.eye(8, dtype=np.float32))
    with pytest.raises(ArgumentTypeError, match="patterns must be what classify_attentions returns"):
        patterncnn.estimate_shares(maps, clf)
    heads = patterncnn.HeadPatterns(np.full((2, 1, 1, 5), 0.2, dtype=np.float32))
    with pytest.raises(ArgumentTypeError, match="classifier must be a loaded classifier"):
        patterncnn.estimate_shares(heads, "patterncnn.onnx")
    with pytest.raises(ArgumentTypeError, match="encoder must be an Encoder"):
        patterncnn.estimate_shares(heads, clf, encoder=3)
    with pytest.raises(ArgumentError, match="choose one of count, probs, adjusted"):
        patterncnn.estimate_shares(heads, clf, estimator="mean")
    with pytest.raises(ArgumentError, match="holds no example"):
        patterncnn.estimate_shares(patterncnn.HeadPatterns(np.zeros((0, 1, 1, 5), dtype=np.float32)), clf)
    with pytest.raises(ArgumentError, match=r"must be \(examples, layers, heads, 5\).*got shape \(2, 5\)"):
        patterncnn.estimate_shares(patterncnn.HeadPatterns(np.full((2, 5), 0.2, dtype=np.float32)), clf)
    with pytest.raises(ArgumentError, match="NaN"):
        patterncnn.estimate_shares(patterncnn.HeadPatterns(np.full((2, 1, 1, 5), np.nan, dtype=np.float32)), clf)
    # classified without tokens: said (helper 108: shares moved by up to 12.5 points from the census's, silently)
    with pytest.warns(EstimateWarning, match="without its tokens"):
        said = patterncnn.estimate_shares(heads, clf, encoder="minilm-53aa5117").attrs["warnings"]
    assert "without its tokens" in said[-1]
