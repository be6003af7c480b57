"""The classifier's Python API: load_classifier, classify (maps of any leading shape) and classify_attentions (a
Hugging Face model's outputs.attentions for a padded batch), against the census's own path on the same inputs."""

import numpy as np
import pytest
import torch
from synthetic import pattern_map

from patterncnn.classifier.onnx import OnnxClassifier, load_classifier
from patterncnn.core.errors import ClassifierError
from patterncnn.core.glue import Example
from patterncnn.core.labels import LABELS
from patterncnn.core.segments import separators
from patterncnn.encoders.load import load_encoder

PAIRS = [("The cat sat on the mat.", "A cat was sitting on a mat."), ("Short one.", "and a much longer second text.")]


def test_load_classifier_gives_the_shipped_one_or_a_given_one(tiny_classifier):
    shipped = load_classifier()
    assert isinstance(shipped, OnnxClassifier) and shipped.path.name == "patterncnn.onnx"
    assert shipped.providers == ["CPUExecutionProvider"] and shipped.device == "cpu"
    assert load_classifier(tiny_classifier[1]).path == tiny_classifier[1]
    assert load_classifier(shipped.path.parent).path == shipped.path  # the folder `train` writes, as --classifier
    with pytest.raises(ClassifierError, match="no classifier at"):
        load_classifier("nowhere.onnx")


def test_classify_keeps_the_leading_shape_and_matches_predict():
    clf = load_classifier()
    kinds = ["vertical", "diagonal", "heterogeneous", "vertical+diagonal", "diagonal", "vertical"]
    maps = np.stack([pattern_map(k, 14, 6, seed=i) for i, k in enumerate(kinds)]).reshape(2, 3, 14, 14)
    out = clf.classify(maps, seps=[6, 13])
    assert out.probs.shape == (2, 3, 5) and out.labels.shape == (2, 3)
    flat = clf.predict(list(maps.reshape(6, 14, 14)), [[6, 13]] * 6)
    np.testing.assert_allclose(out.probs.reshape(6, 5), flat, rtol=1e-6)
    assert out.labels.ravel().tolist() == [LABELS[k] for k in flat.argmax(1)]
    one = clf.classify(torch.as_tensor(maps[0, 1]))  # a tensor, one map: no leading shape
    assert one.probs.shape == (5,) and str(one.labels) == LABELS[int(one.probs.argmax())]
    frame = out.frame()
    assert list(frame.columns) == ["label", *LABELS] and len(frame) == 6
    assert one.frame()["label"].tolist() == [str(one.labels)]  # one map: one row (it raised, helper 102's review)
    # a list of torch tensors of one length, as one alone: bf16 or with grad (numpy could not read them)
    pair = [torch.as_tensor(maps[0, 0]).bfloat16(), torch.as_tensor(maps[0, 1]).bfloat16()]
    np.testing.assert_allclose(clf.classify(pair).probs, clf.classify(np.stack([p.float() for p in pair])).probs)
    graded = [torch.as_tensor(maps[0, k]).requires_grad_() for k in (0, 1)]
    np.testing.assert_allclose(clf.classify(graded).probs, clf.classify(maps[0, :2]).probs, rtol=1e-6)


def test_classify_takes_maps_of_several_lengths_and_seps_per_map():
    clf = load_classifier()
    maps = [pattern_map("diagonal", 9), pattern_map("block", 16, 7), pattern_map("vertical", 30)]
    seps = [None, [7, 15], [29]]
    out = clf.classify(maps, seps)
    np.testing.assert_allclose(out.probs, clf.predict(maps, seps), rtol=1e-6)
    assert out.probs[2, LABELS.index("block")] == 0.0  # single segment: the block rule
    with pytest.raises(ClassifierError, match="2 separator lists for 3 maps"):
        clf.classify(maps, [[1], [2]])


@pytest.mark.parametrize("bad, why", [(np.full((5, 5), np.nan), "NaN"), (np.ones((4, 5)), "not square"),
                                      (-np.eye(6), "negative")])
def test_classify_refuses_what_is_not_an_attention_map(bad, why):
    with pytest.raises(ClassifierError, match=why):
        load_classifier().classify(bad)


def test_head_patterns_print_as_a_summary_not_their_probabilities():
    # Found by walkthrough 7: print(heads) dumped the whole (B, L, H, 5) array.
    from patterncnn.classifier.attentions import HeadPatterns

    probs = np.zeros((2, 3, 4, 5))
    probs[..., 0] = 1
    probs[0, 0, 0] = [0, 0, 0, 0, 1]
    text = repr(HeadPatterns(probs))
    assert text == ("HeadPatterns(2 examples x 3 layers x 4 heads: vertical 23, diagonal 0, vertical+diagonal 0, "
                    "block 0, heterogeneous 1; .labels, .probs, .frame(), .plot())")
    assert repr(HeadPatterns(probs[:1, :1, :1])).startswith("HeadPatterns(1 example x 1 layer x 1 head: vertical 0,")


def test_head_patterns_html_fades_the_colour_not_the_letter():
    # Found by walkthrough 7: the cells' opacity faded their letters too. The letter is white or dark, whichever
    # contrasts more with the cell as shown (the second review: white on orange was 1.6:1).
    from patterncnn.classifier.attentions import HeadPatterns

    probs = np.full((1, 1, 4, 5), 0.0)
    probs[0, 0, 0, 0], probs[0, 0, 1, 0], probs[0, 0, 2, 1], probs[0, 0, 3, 4] = 1.0, 0.6, 1.0, 1.0
    html = HeadPatterns(probs)._repr_html_()
    assert "opacity" not in html
    assert "background:rgba(0,114,178,1.00);color:#fff" in html  # vertical (#0072B2) at 1.0: dark blue, white
    assert "background:rgba(0,114,178,0.68);color:#222" in html  # at 0.6, faded to a light blue: dark
    assert "background:rgba(230,159,0,1.00);color:#222" in html  # diagonal (#E69F00), orange: dark
    assert "background:rgba(153,153,153,1.00);color:#222" in html  # heterogeneous, grey: dark


def test_classify_warns_of_maps_whose_rows_do_not_sum_to_1_as_the_command_does():
    # Found by walkthrough 7: `patterncnn classify` warned, the Python API was silent.
    import warnings

    from patterncnn.classifier.attentions import MapWarning

    clf = load_classifier()
    good = np.zeros((12, 12), dtype=np.float32)
    good[:, 0] = 1
    with pytest.warns(MapWarning, match=r"1 of 2 map\(s\) warned, e.g. map 1: rows do not sum to 1 \(range 40\.\.40\); "
                                        r"is it a softmax map; they are classified as given"):
        labels = clf.classify([good, np.full((8, 8), 5.0)]).labels
    assert len(labels) == 2 and labels[0] == "vertical"  # both classified
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        clf.classify(good)  # a softmax map: no warning


@pytest.fixture(scope="module")
def tiny(tiny_bert):
    return load_encoder(str(tiny_bert), max_length=48, backend="torch")


def _census_path(enc, clf, texts):
    """What the census and `analyze` compute for one input: the encoder's own maps, cut to its length."""
    ea = next(enc.iter_attentions([Example("rte", "dev", 0, texts, None)]))
    L, H, t, _ = ea.maps.shape
    return clf.predict_same_length(ea.maps.reshape(L * H, t, t), [ea.seps] * (L * H)).reshape(L, H, 5), ea


def test_classify_attentions_of_a_padded_hf_batch_equals_the_census_path(tiny, tiny_classifier):
    clf = load_classifier(tiny_classifier[1])
    tok, model = tiny.tokenizer, tiny.model
    batch = tok([a for a, _ in PAIRS], [b for _, b in PAIRS], padding=True, return_tensors="pt")
    assert int(batch["attention_mask"].sum(1).min()) < batch["input_ids"].shape[1]  # one example is padded
    out = model(**batch, output_attentions=True)  # with grad, as in a notebook
    tokens = [tok.convert_ids_to_tokens(ids) for ids in batch["input_ids"]]
    heads = clf.classify_attentions(out.attentions, attention_mask=batch["attention_mask"], tokens=tokens)
    assert heads.probs.shape == (2, tiny.num_layers, tiny.num_heads, 5)
    for i, texts in enumerate(PAIRS):
        ref, ea = _census_path(tiny, clf, texts)
        np.testing.assert_allclose(heads.probs[i], ref, atol=1e-5)
        assert heads.tokens[i] == ea.tokens and heads.seps[i] == ea.seps == separators(ea.tokens)
    frame = heads.frame()
    assert len(frame) == 2 * tiny.num_layers * tiny.num_heads and frame.index.names == ["example", "layer", "head"]
    assert heads.shares().shape == (2, 5) and np.allclose(heads.shares().sum(axis=1), 1)
    # the layers stacked on dim 0 (L, B, ...), as torch.stack's default makes them: the mask's error says so
    with pytest.raises(ClassifierError, match=r"stack them on dim 1 \(torch.stack\(outputs.attentions, 1\)"):
        clf.classify_attentions(torch.stack(out.attentions), attention_mask=batch["attention_mask"], tokens=tokens)
    # a head-pruned model's layers of different head counts: said, naming the way (helper 102's review)
    pruned = [out.attentions[0][:, :1], *out.attentions[1:]]
    with pytest.raises(ClassifierError, match=r"different shapes .*classify each layer on its own"):
        clf.classify_attentions(pruned, attention_mask=batch["attention_mask"], tokens=tokens)
    assert heads.plot(1).axes and "example 1" in heads._repr_html_()


def test_a_text_holding_a_separator_stays_one_segment_with_the_special_tokens_mask(tiny, tiny_classifier):
    # Helper 95's review: the tokenizer reads "[SEP]" in a text as the separator token; only its special-tokens mask
    # tells the template's separators apart. The census path knows this (TokenIds); the API now does with the mask.
    clf = load_classifier(tiny_classifier[1])
    texts = ["One sentence [SEP] with a separator in it.", "Another, plain one."]
    batch = tiny.tokenizer(texts, padding=True, return_tensors="pt", return_special_tokens_mask=True)
    special = batch.pop("special_tokens_mask")
    with torch.inference_mode():
        att = tiny.model(**batch, output_attentions=True).attentions
    tokens = [tiny.tokenizer.convert_ids_to_tokens(ids) for ids in batch["input_ids"]]
    assert tokens[0].count("[SEP]") == 2  # the text's and the template's
    heads = clf.classify_attentions(att, attention_mask=batch["attention_mask"], tokens=tokens,
                                    special_tokens_mask=special)
    for i, text in enumerate(texts):
        ref, ea = _census_path(tiny, clf, (text,))
        assert heads.seps[i] == ea.seps and len(ea.seps) == 1  # one segment, as the census reads it
        np.testing.assert_allclose(heads.probs[i], ref, atol=1e-5)
    plain = clf.classify_attentions(att, attention_mask=batch["attention_mask"], tokens=tokens)
    assert len(plain.seps[0]) == 2 and plain.seps[1] == heads.seps[1]  # without the mask: read as a pair
    with pytest.raises(ClassifierError, match="special_tokens_mask of shape"):
        clf.classify_attentions(att, attention_mask=batch["attention_mask"], tokens=tokens,
                                special_tokens_mask=special[:, 1:])


def test_without_tokens_every_example_is_one_segment(tiny, tiny_classifier):
    clf = load_classifier(tiny_classifier[1])
    batch = tiny.tokenizer(*PAIRS[0], return_tensors="pt")
    with torch.inference_mode():
        att = tiny.model(**batch, output_attentions=True).attentions
    heads = clf.classify_attentions(att)  # no mask, no tokens
    assert heads.seps == [None] and heads.probs.shape[0] == 1
    stacked = torch.stack(att, 1).numpy()  # (1, L, H, T, T): an array works as well as the tuple
    np.testing.assert_allclose(clf.classify_attentions(stacked).probs, heads.probs, rtol=1e-6)


def test_classify_attentions_warns_once_per_batch_naming_example_layer_and_head(tiny, tiny_classifier):
    from patterncnn.classifier.attentions import MapWarning

    clf = load_classifier(tiny_classifier[1])
    batch = tiny.tokenizer([PAIRS[0][0]] * 2, [PAIRS[0][1]] * 2, return_tensors="pt")
    with torch.no_grad():
        att = [a.numpy().copy() for a in tiny.model(**batch, output_attentions=True).attentions]
    att[1][1, 0] *= 2  # example 1, layer 1, head 0: rows sum to 2
    with pytest.warns(MapWarning) as caught:
        clf.classify_attentions(att)
    n = len(att) * att[0].shape[1] * 2
    assert [str(w.message).split(": rows")[0] for w in caught] == [
        f"1 of {n} map(s) warned, e.g. example 1, layer 1, head 0"]


def test_mpnet_separators_are_found_from_its_tokens(tiny_mpnet, tiny_classifier):
    enc = load_encoder(str(tiny_mpnet), max_length=48, backend="torch")
    clf = load_classifier(tiny_classifier[1])
    batch = enc.tokenizer(*PAIRS[1], return_tensors="pt")
    with torch.inference_mode():
        att = enc.model(**batch, output_attentions=True).attentions
    tokens = enc.tokenizer.convert_ids_to_tokens(batch["input_ids"][0])
    heads = clf.classify_attentions(att, tokens=tokens)  # one example: a flat token list is accepted
    ref, ea = _census_path(enc, clf, PAIRS[1])
    assert heads.seps[0] == ea.seps and len(ea.seps) == 3 and ea.seps[1] == ea.seps[0] + 1  # </s></s> ... </s>
    np.testing.assert_allclose(heads.probs[0], ref, atol=1e-5)


def test_padding_is_cut_wherever_it_sits():
    clf = load_classifier()
    rng = np.random.default_rng(0)
    real = np.stack([pattern_map(k, 10, 4, seed=s) for s, k in enumerate(["vertical", "diagonal"] * 3)])  # (6, T, T)
    att = rng.uniform(size=(1, 2, 3, 13, 13)).astype(np.float32)  # padding positions hold garbage
    keep = np.array([0, 0, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 0])  # left and right padding
    idx = np.flatnonzero(keep)
    att[0][:, :, idx[:, None], idx] = real.reshape(2, 3, 10, 10)
    toks = ["[PAD]", "[PAD]", "[CLS]", "a", "b", "c", "[SEP]", "d", "e", "f", "g", "[SEP]", "[PAD]"]
    heads = clf.classify_attentions(att, attention_mask=keep[None], tokens=[toks])
    assert heads.tokens[0] == toks[2:12] and heads.seps[0] == [4, 9]
    np.testing.assert_allclose(heads.probs[0], clf.classify(real.reshape(2, 3, 10, 10), [4, 9]).probs, rtol=1e-6)


def test_attention_errors_say_how_to_fix_them():
    clf = load_classifier()
    with pytest.raises(ClassifierError, match="output_attentions=True"):
        clf.classify_attentions(None)
    with pytest.raises(ClassifierError, match="output_attentions=True"):
        clf.classify_attentions(())
    att = np.full((2, 1, 1, 5, 5), 0.2, dtype=np.float32)
    with pytest.raises(ClassifierError, match="does not match"):
        clf.classify_attentions(att, attention_mask=np.ones((2, 4)))
    with pytest.raises(ClassifierError, match="tokens for 1 examples"):
        clf.classify_attentions(att, tokens=[["a"] * 5])


@pytest.mark.parametrize("seps, why", [([999], "999 is outside the map"), ([-1], "-1 is outside the map"),
                                       ("3", "seps must be a list"), ([22.5], "integer token positions"),
                                       ([[1, 40]], "40 is outside the map"), ([[1], [2]], "2 separator lists")])
def test_classify_refuses_separators_check_map_refuses(seps, why):
    """The library path runs the one check of a map and its separators (check_map), as classify and serve do."""
    m = pattern_map("diagonal", 35)
    with pytest.raises(ClassifierError, match=why):
        load_classifier().classify(m, seps=seps)
    assert load_classifier().classify(m, seps=[[10, 34]]).probs.shape == (5,)  # one list per map: the one map's


def test_tokens_must_be_strings_and_a_missing_separator_warns():
    from patterncnn.classifier.attentions import SeparatorWarning
    from patterncnn.core.args import ArgumentTypeError

    clf = load_classifier()
    att = np.full((1, 1, 1, 6, 6), 1 / 6, dtype=np.float32)
    with pytest.raises(ArgumentTypeError, match="tokens must be strings.*convert_ids_to_tokens"):
        clf.classify_attentions(att, tokens=torch.tensor([[101, 7, 102, 8, 9, 102]]))  # input_ids, not tokens
    for one_example in ([101, 7, 102, 8, 9, 102], torch.tensor([101, 7, 102, 8, 9, 102])):  # a batch of one's ids
        with pytest.raises(ArgumentTypeError, match="tokens must be strings"):
            clf.classify_attentions(att, tokens=one_example)
    bert = ["[CLS]", "a", "[SEP]", "b", "c", "[SEP]"]
    with pytest.warns(SeparatorWarning, match=r"no separator token \(</s>\).*example\(s\) 0"):
        heads = clf.classify_attentions(att, tokens=[bert], sep_token="</s>")
    assert heads.seps == [[]]
    with pytest.raises(ArgumentTypeError, match="sep_token must be a str"):
        clf.classify_attentions(att, tokens=[bert], sep_token=102)
