"""The uniform-heads attention function (transformers' attention interface) and the hooks of MPNet and DeBERTa, on tiny
random encoders.

The independent reference: a copy of the model whose disabled heads have their query projection (and, for MPNet,
their relative position bias; for DeBERTa, whose position queries share that projection, nothing else) set to zero.
Every score of such a head is 0, so eager attention gives it softmax(mask):
exactly 1/L on the real tokens, whatever the family. The mechanism must give the same maps and outputs. Families that
cannot be disabled correctly are refused with a DisableError, and the model's own attention comes back after a block.
"""

import copy

import pytest
import torch
from transformers import AutoModel, AutoTokenizer

from patterncnn.encoders.uniform_heads import ATTENTION, DisableError, UniformHeads, encoder_layers

PAIRS = [("a man is playing a guitar.", "someone plays music!"), ("short", "pair of texts, longer than that"),
         ("one", "two")]
FAMILIES = ["bert", "mpnet", "roberta", "distilbert", "deberta"]


def _encoder(folder, attn="eager"):
    model = AutoModel.from_pretrained(str(folder), attn_implementation=attn).eval()
    return model, AutoTokenizer.from_pretrained(str(folder))


@pytest.fixture(params=FAMILIES)
def encoder(request):
    return _encoder(request.getfixturevalue(f"tiny_{request.param}"))


def _run(model, tok, heads=None, pairs=PAIRS):
    """(attentions (B, L, H, T, T), last hidden state (B, T, D), attention mask (B, T))."""
    batch = tok([a for a, _ in pairs], [b for _, b in pairs], padding=True, return_tensors="pt")
    with torch.inference_mode():
        if heads is None:
            out = model(**batch, output_attentions=True)
        else:
            with UniformHeads(model, heads):
                out = model(**batch, output_attentions=True)
    return torch.stack(out.attentions, 1), out.last_hidden_state, batch["attention_mask"]


def _projection(layer, names) -> torch.nn.Linear:
    """The query or value projection of one layer, by its name in the family (test-side knowledge only)."""
    found = [m for n, m in layer.named_modules() if n.rsplit(".", 1)[-1] in names]
    assert len(found) == 1, names
    return found[0]


def _with_heads_zeroed(model, heads: dict[int, list[int]], names=("query", "q_lin", "q", "query_proj")):
    """A copy of ``model`` whose given heads' projection rows (query by default) are zero."""
    ref = copy.deepcopy(model)
    d = model.config.hidden_size // model.config.num_attention_heads
    with torch.no_grad():
        for layer, hs in heads.items():
            proj = _projection(encoder_layers(ref)[layer], names)
            for h in hs:
                proj.weight[h * d:(h + 1) * d] = 0
                proj.bias[h * d:(h + 1) * d] = 0
        if names[0] == "query" and model.config.model_type == "mpnet":  # its scores also get a per-head position bias
            for h in {h for hs in heads.values() for h in hs}:
                ref.encoder.relative_attention_bias.weight[:, h] = 0
    return ref


def _cases(family):
    every_layer = {"all layers, head 2": lambda n: {layer: [2] for layer in range(n)}}
    if family == "mpnet":  # the position bias is shared by all layers: the reference can zero a head only everywhere
        return every_layer
    return {**every_layer, "layer 1, heads 0 and 3": lambda n: {1: [0, 3]}}


@pytest.mark.parametrize("family", FAMILIES)
def test_maps_and_outputs_equal_a_model_whose_head_scores_are_all_equal(family, request):
    model, tok = _encoder(request.getfixturevalue(f"tiny_{family}"))
    base, base_out, _ = _run(model, tok)
    for case, make in _cases(family).items():
        heads = make(model.config.num_hidden_layers)
        ref, ref_out, _ = _run(_with_heads_zeroed(model, heads), tok)
        off, off_out, _ = _run(model, tok, heads)
        assert not torch.allclose(ref, base), case  # the reference does change those heads
        assert torch.allclose(off, ref, atol=1e-6), case
        assert torch.allclose(off_out, ref_out, atol=1e-5), case
        assert (off_out - base_out).abs().max() > 1e-6, case


def test_deberta_v1_packed_projection_against_its_zeroed_queries(tiny_deberta):
    """DeBERTa v1 packs query, key and value of each head into one in_proj (rows [3d*h, 3d*h + d) are head h's
    query); with content-to-position attention only, zero queries make every score 0, as for the other families."""
    import transformers

    tok = AutoTokenizer.from_pretrained(str(tiny_deberta))
    torch.manual_seed(0)
    model = transformers.DebertaModel(transformers.DebertaConfig(
        vocab_size=tok.vocab_size, hidden_size=32, num_hidden_layers=2, num_attention_heads=4, intermediate_size=37,
        max_position_embeddings=64, relative_attention=True, pos_att_type=["c2p"], max_relative_positions=-1)).eval()
    heads, d = {1: [0, 3]}, 8
    ref = copy.deepcopy(model)
    with torch.no_grad():
        att = encoder_layers(ref)[1].attention.self
        for h in heads[1]:
            att.in_proj.weight[3 * d * h:3 * d * h + d] = 0
            att.q_bias[d * h:d * (h + 1)] = 0
    base, _, mask = _run(model, tok)
    want, want_out, _ = _run(ref, tok)
    off, off_out, _ = _run(model, tok, heads)
    real = mask.bool()
    assert not torch.allclose(want, base) and torch.allclose(off, want, atol=1e-6)
    assert torch.allclose(off_out[real], want_out[real], atol=1e-5)


def test_not_head_mask_zeroing(encoder):
    # head_mask zeroes the head's output; a uniform head passes the mean of its value vectors instead.
    model, tok = encoder
    _, base_out, _ = _run(model, tok)
    _, zeroed_out, _ = _run(_with_heads_zeroed(model, {0: [1]}, names=("value", "v_lin", "v", "value_proj")), tok)
    _, off_out, _ = _run(model, tok, {0: [1]})
    assert (off_out - zeroed_out).abs().max() > 1e-6 and (off_out - base_out).abs().max() > 1e-6


@pytest.mark.parametrize("family", ["bert", "roberta"])
def test_without_padding_every_token_counts(family, request):
    # One input, no padding: transformers passes no mask at all, and the head is 1/T over all T tokens.
    model, tok = _encoder(request.getfixturevalue(f"tiny_{family}"))
    off, _, mask = _run(model, tok, {0: [3]}, pairs=PAIRS[:1])
    t = mask.shape[1]
    assert bool(mask.all()) and torch.allclose(off[0, 0, 3], torch.full((t, t), 1.0 / t))


def test_the_previous_attention_comes_back_even_after_an_error(tiny_bert):
    model, tok = _encoder(tiny_bert, attn="sdpa")
    batch = tok(["some text", "more"], padding=True, return_tensors="pt")
    with pytest.raises(ValueError, match="inside"), UniformHeads(model, {0: [1]}):
        assert model.config._attn_implementation == ATTENTION
        model(**batch).last_hidden_state.sum().backward()  # works with autograd too (no in-place edit of saved maps)
        with pytest.raises(DisableError, match="already disabled"), UniformHeads(model, {1: [0]}):
            pass
        raise ValueError("inside")
    assert model.config._attn_implementation == "sdpa"
    with UniformHeads(model, {1: [0]}):  # nothing left registered from the first block
        model(**batch)


def test_a_layer_that_does_not_reach_the_function_is_refused(tiny_bert):
    # A model switched to another implementation inside the block would run its heads undisabled: refused.
    model, tok = _encoder(tiny_bert)
    batch = tok(["some text"], return_tensors="pt")
    with UniformHeads(model, {1: [2]}):
        model.set_attn_implementation("eager")
        with pytest.raises(DisableError, match="without reaching transformers' attention interface"):
            model(**batch)
    model.set_attn_implementation(ATTENTION)  # and the function refuses to run outside a block
    with pytest.raises(DisableError, match="outside a UniformHeads block"):
        model(**batch)


def test_families_it_cannot_disable_are_refused_naming_the_fix():
    import transformers

    small = dict(vocab_size=40, hidden_size=32, num_hidden_layers=2, num_attention_heads=4, intermediate_size=37,
                 max_position_embeddings=64)
    convbert = transformers.ConvBertModel(transformers.ConvBertConfig(**small))  # its own attention modules
    with pytest.raises(DisableError, match="not through transformers' attention interface.*use a BERT"):
        UniformHeads(convbert, {0: [0]})
    albert = transformers.AlbertModel(transformers.AlbertConfig(**small, embedding_size=16))  # one shared layer
    with pytest.raises(DisableError, match="one module per layer"):
        UniformHeads(albert, {0: [0]})


def test_a_hooked_layer_whose_dropout_is_bypassed_is_refused(tiny_mpnet):
    # MPNet's and DeBERTa's heads are replaced at their self-attention's dropout: a layer that never reaches the hook
    # would leave its heads on, so it is refused as the interface's families are.
    model, tok = _encoder(tiny_mpnet)
    batch = tok(["some text"], return_tensors="pt")
    with UniformHeads(model, {1: [2]}):
        encoder_layers(model)[1].attention.attn.dropout = torch.nn.Dropout(0.0)  # a module the hook is not on
        with pytest.raises(DisableError, match="without reaching its self-attention's dropout"):
            model(**batch)


def test_deberta_reads_a_float_mask_as_boolean_as_deberta_does(tiny_deberta):
    model, tok = _encoder(tiny_deberta)
    batch = tok(["a man is playing", "one"], ["someone plays music!", "two"], padding=True, return_tensors="pt")
    batch["attention_mask"] = batch["attention_mask"].float()  # DeBERTa itself calls .bool() on it
    n = int(batch["attention_mask"][1].sum())
    with torch.inference_mode(), UniformHeads(model, {0: [1]}):
        rows = model(**batch, output_attentions=True).attentions[0][1, 1]
    assert torch.allclose(rows[:n, :n], torch.full((n, n), 1.0 / n)) and torch.all(rows[:n, n:] == 0)


def test_deberta_talking_heads_are_refused(tiny_deberta):
    import transformers

    tok = AutoTokenizer.from_pretrained(str(tiny_deberta))
    model = transformers.DebertaModel(transformers.DebertaConfig(
        vocab_size=tok.vocab_size, hidden_size=32, num_hidden_layers=2, num_attention_heads=4, intermediate_size=37,
        max_position_embeddings=64, talking_head=True)).eval()
    with pytest.raises(DisableError, match="mixes its heads after their attention"):
        UniformHeads(model, {0: [1]}).__enter__()
