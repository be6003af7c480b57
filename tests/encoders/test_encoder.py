"""Attention extraction on a tiny random BERT built in the test, and on the embedded MiniLM."""

import numpy as np
import pytest

import patterncnn
from patterncnn.core.glue import Example
from patterncnn.core.segments import segment_ids
from patterncnn.encoders.load import EncoderError, load_encoder


def ex(i, *texts):
    return Example("rte", "dev", i, texts, 0)


def test_shapes_rows_and_tokens(tiny_bert):
    enc = load_encoder(str(tiny_bert), max_length=64)
    assert (enc.num_layers, enc.num_heads) == (3, 4)  # from the config, not hard-coded
    out = list(enc.iter_attentions([ex(0, "a cat sat.", "it did."), ex(1, "hello world")], batch_size=2))
    assert sorted(o.example.index for o in out) == [0, 1]
    for o in out:
        t = len(o.tokens)
        assert o.maps.shape == (3, 4, t, t) and o.maps.dtype == np.float32
        np.testing.assert_allclose(o.maps.sum(-1), 1.0, atol=1e-5)
        assert o.tokens[0] == "[CLS]" and o.tokens[-1] == "[SEP]"
        assert all(o.tokens[s] == "[SEP]" for s in o.seps)
    pair = next(o for o in out if o.example.index == 0)
    assert len(pair.seps) == 2  # [CLS] A [SEP] B [SEP]


def test_padding_is_cropped_away(tiny_bert):
    # The same example alone and in a batch with a much longer one must give the same maps.
    enc = load_encoder(str(tiny_bert), max_length=64)
    short = ex(0, "ab", "cd")
    alone = next(enc.iter_attentions([short])).maps
    batched = {o.example.index: o for o in enc.iter_attentions(
        [short, ex(1, "a much longer sentence here", "and another one")], batch_size=2)}
    assert batched[0].maps.shape == alone.shape
    np.testing.assert_allclose(batched[0].maps, alone, atol=1e-5)
    assert batched[1].maps.shape[-1] > alone.shape[-1]


def test_truncation_is_counted(tiny_bert):
    enc = load_encoder(str(tiny_bert), max_length=16)
    out = list(enc.iter_attentions([ex(0, "x" * 40, "y" * 40), ex(1, "ok")]))
    long = next(o for o in out if o.example.index == 0)
    assert long.truncated and long.maps.shape[-1] == 16 and long.tokens[-1] == "[SEP]"
    assert enc.truncations == 1


def test_streams_many_examples_in_bucketed_batches(tiny_bert):
    enc = load_encoder(str(tiny_bert), max_length=64)
    gen = (ex(i, "w" * (i % 17 + 1)) for i in range(50))  # a generator: never materialised by the caller
    seen = [o.example.index for o in enc.iter_attentions(gen, batch_size=4, window=16)]
    assert sorted(seen) == list(range(50))


def test_max_length_capped_by_model(tiny_bert, caplog):
    with caplog.at_level("WARNING"):
        enc = load_encoder(str(tiny_bert), max_length=10_000)
    assert enc.max_length == 64
    assert f"--max-length 10000 is over {tiny_bert}'s limit; using 64" in caplog.text  # as the command line has it
    caplog.clear()
    with caplog.at_level("WARNING"):
        assert patterncnn.load_encoder(str(tiny_bert), max_length=10_000).max_length == 64
    assert "max_length=10000 is over" in caplog.text and "--max-length" not in caplog.text  # a Python call's keyword
    assert enc.weights_note is None  # weights used as published (a converted E5 says what was done: test_e5s1.py)


def test_a_missing_local_folder_is_named_as_such(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    for name in (str(tmp_path / "no-such-model"), "./no-such-model"):
        with pytest.raises(EncoderError, match=r"no folder .* does not exist\. Fix: name an encoder as a hub id"):
            load_encoder(name)
    # "org/name" may be a hub id even when a folder "org" exists here: the hub is asked first, then both are named
    (tmp_path / "intfloat").mkdir()
    with pytest.raises(EncoderError, match=r"cannot load 'intfloat/no-such-e5' as a Hugging Face encoder .*No folder "
                                           r".*intfloat/no-such-e5 exists either\. HF_HUB_OFFLINE is set"):
        load_encoder("intfloat/no-such-e5")


def test_a_folder_without_config_json_is_named_as_such(tmp_path, monkeypatch):
    # Hugging Face said "Should have a model_type key in its config.json", and HF_HUB_OFFLINE was blamed
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    (tmp_path / "notes.txt").write_text("not a model")
    with pytest.raises(EncoderError, match=r"^the folder '.*' has no config\.json, so it is not a Hugging Face model "
                                           r"folder\. Fix: name an encoder as a hub id") as e:
        load_encoder(str(tmp_path))
    assert "HF_HUB_OFFLINE" not in str(e.value) and "model_type" not in str(e.value)
    (tmp_path / "ft" / ".work" / "rte").mkdir(parents=True)  # what an interrupted `patterncnn finetune` leaves
    with pytest.raises(EncoderError, match=r"unfinished `patterncnn finetune` run: run that command again"):
        load_encoder(str(tmp_path / "ft"))


def test_not_an_encoder(tmp_path):
    from transformers import GPT2Config

    GPT2Config(n_layer=1, n_head=2, n_embd=8, architectures=["GPT2LMHeadModel"]).save_pretrained(tmp_path / "gpt")
    with pytest.raises(EncoderError, match="not a bidirectional encoder"):
        load_encoder(str(tmp_path / "gpt"))


def test_a_decoder_only_model_is_refused_though_its_config_does_not_say_decoder(tmp_path):
    # a bare GPT2Model (no LM head in its architectures, is_decoder False) ran: causal maps, read as 100 % vertical
    from transformers import GPT2Config

    GPT2Config(n_layer=1, n_head=2, n_embd=8, architectures=["GPT2Model"]).save_pretrained(tmp_path / "gpt")
    with pytest.raises(EncoderError, match=r"is not a bidirectional encoder: a decoder-only model \(its model type "
                                           r"gpt2 is a causal language model: each token attends only to those "
                                           r"before it\)"):
        load_encoder(str(tmp_path / "gpt"))


def test_a_decoder_of_a_model_type_not_known_as_one_is_refused_by_its_causal_maps(tiny_bert, tmp_path, monkeypatch):
    # Mistral 4 (transformers 5.24) is a decoder that MODEL_FOR_CAUSAL_LM_MAPPING_NAMES does not list: it loaded and
    # its census ran on causal maps. The load probe sees them: here a GPT-2 whose model type is taken as unknown.
    import shutil

    from transformers import AutoTokenizer, GPT2Config, GPT2Model

    from patterncnn.encoders import load

    shutil.copytree(tiny_bert, tmp_path / "gpt", ignore=shutil.ignore_patterns("*.safetensors", "config.json"))
    vocab = len(AutoTokenizer.from_pretrained(tiny_bert))
    GPT2Model(GPT2Config(n_layer=2, n_head=2, n_embd=8, vocab_size=vocab, architectures=["GPT2Model"])).save_pretrained(
        tmp_path / "gpt")
    monkeypatch.setattr(load, "_decoder_only", lambda model_type: False)
    with pytest.raises(EncoderError, match=r"\(gpt2\) is not a bidirectional encoder: its attention is causal, each "
                                           r"token attends only to those before it, in every layer and head"):
        load_encoder(str(tmp_path / "gpt"))


def test_a_model_folder_without_its_tokenizer_is_refused(tiny_bert, tmp_path):
    # its weights and config without the tokenizer files: transformers made a 5-token tokenizer, every word [UNK]
    import shutil

    bare = tmp_path / "bare"
    bare.mkdir()
    for name in ("config.json", "model.safetensors"):
        shutil.copy(tiny_bert / name, bare / name)
    with pytest.raises(EncoderError, match=r"knows \d+ tokens where the model embeds \d+: its folder lacks its own "
                                           r"tokenizer files"):
        load_encoder(str(bare))
    assert load_encoder(str(tiny_bert)).num_layers == 3  # with them, it loads


def test_a_sentence_transformers_folder_names_its_model_subfolder(tiny_bert, tmp_path):
    import json
    import shutil

    st = tmp_path / "st"
    shutil.copytree(tiny_bert, st / "0_Transformer")
    (st / "modules.json").write_text(json.dumps([
        {"idx": 0, "name": "0", "path": "0_Transformer", "type": "sentence_transformers.models.Transformer"},
        {"idx": 1, "name": "1", "path": "1_Pooling", "type": "sentence_transformers.models.Pooling"}]))
    with pytest.raises(EncoderError, match=r"is a sentence-transformers model whose Hugging Face model is in its "
                                           r"subfolder 0_Transformer: pass '.*/st/0_Transformer'"):
        load_encoder(str(st))
    assert load_encoder(str(st / "0_Transformer")).num_layers == 3


def test_embedded_minilm():
    enc = load_encoder("minilm")
    assert (enc.num_layers, enc.num_heads) == (6, 12)
    assert enc.fingerprint["sha256"] and enc.tag.startswith("minilm-")
    o = next(enc.iter_attentions([ex(0, "The cat sat on the mat.", "A cat was sitting.")]))
    assert o.tokens[:3] == ["[CLS]", "the", "cat"]
    assert o.maps.shape[:2] == (6, 12)
    np.testing.assert_allclose(o.maps.sum(-1), 1.0, atol=1e-5)


def test_an_input_is_tokenized_once_and_a_long_text_cut_first(tiny_bert):
    # Found by the probe: a 15 MB word was tokenized whole (35 s), then again with truncation.
    from patterncnn.encoders.load import CHARS_PER_TOKEN

    enc = load_encoder(str(tiny_bert), max_length=16)
    seen = []
    real = enc.tokenizer

    class Counting:  # the tokenizer, each call's text lengths seen
        def __call__(self, *texts, **kw):
            seen.append([len(t) for t in texts])
            return real(*texts, **kw)

        def __getattr__(self, name):
            return getattr(real, name)

    enc.tokenizer = Counting()
    ids, cut = enc.tokenize(("a" * 1_000_000,))
    assert seen == [[CHARS_PER_TOKEN * 16]] and cut and len(ids) <= 16
    seen.clear()
    assert enc.tokenize(("ab", "cd")) == (real("ab", "cd")["input_ids"], False)
    assert len(seen) == 1
    seen.clear()
    ids, cut = enc.tokenize(("a " * 40, "b " * 40))  # over max_length in tokens, not in characters
    assert cut and ids == real("a " * 40, "b " * 40, truncation=True, max_length=16)["input_ids"] and len(seen) == 1


def test_a_fine_tune_loads_quietly_and_missing_encoder_weights_are_said(tiny_bert, tmp_path, capfd, caplog):
    import shutil

    from safetensors.torch import load_file, save_file
    from transformers import BertForSequenceClassification
    from transformers.utils import logging as hf_logging

    ft = tmp_path / "ft"  # a sequence classifier: its task head is not part of the encoder
    BertForSequenceClassification.from_pretrained(str(tiny_bert), num_labels=2).save_pretrained(ft)
    for f in [*tiny_bert.glob("*.txt"), *tiny_bert.glob("*token*.json")]:
        shutil.copy(f, ft)
    level, bars = hf_logging.get_verbosity(), hf_logging.is_progress_bar_enabled()
    capfd.readouterr()
    caplog.clear()
    with caplog.at_level("WARNING"):
        load_encoder(str(ft), max_length=64)
    err = capfd.readouterr().err
    assert "LOAD REPORT" not in err and "Loading weights" not in err and not caplog.records  # expected: quiet
    assert (hf_logging.get_verbosity(), hf_logging.is_progress_bar_enabled()) == (level, bars)  # given back
    state = load_file(ft / "model.safetensors")
    save_file({k: v for k, v in state.items() if ".layer.1.attention.self.query" not in k}, ft / "model.safetensors")
    caplog.clear()
    with caplog.at_level("WARNING"):
        load_encoder(str(ft), max_length=64)
    assert any("start random" in r.getMessage() and "layer.1.attention.self.query" in r.getMessage()
               for r in caplog.records)


def _tiny_family(tiny_bert, folder, config_class, **kw):
    """A 2-layer random model of another family with tiny_bert's tokenizer (its vocabulary sized to it)."""
    from transformers import AutoModel, AutoTokenizer

    tok = AutoTokenizer.from_pretrained(tiny_bert)
    base = dict(vocab_size=len(tok), hidden_size=32, num_hidden_layers=2, num_attention_heads=4, intermediate_size=64,
                max_position_embeddings=128)
    config = config_class(**{k: v for k, v in {**base, **kw}.items() if v is not None})  # None: a key left out
    AutoModel.from_config(config).save_pretrained(folder)
    tok.save_pretrained(folder)
    return str(folder)


@pytest.mark.parametrize("family, kw, refusal", [
    # transformers' SqueezeBERT returns its raw scores as attentions: the census said 100 % vertical, special-tokens
    # gave negative shares
    ("SqueezeBertConfig", dict(embedding_size=32, q_groups=1, k_groups=1, v_groups=1, post_attention_groups=1,
                               intermediate_groups=1, output_groups=1),
     r"\(squeezebert\) returns attention maps that are not softmax weights over the real tokens \(layer \d, head \d: "
     r"(map holds negative values|rows do not sum to 1)"),
    # ConvBERT's head_ratio halves the attention heads its config names: the census failed in a reshape
    ("ConvBertConfig", dict(head_ratio=2, embedding_size=32),
     r"\(convbert\) returns 2 attention maps of shape \(2, 2, (\d+), \1\) where its config's 2 layers of 4 heads"),
    # Longformer's maps are windows, (B, H, T, window): onnxruntime failed in a Reshape
    ("LongformerConfig", dict(attention_window=[8, 8], pad_token_id=0),
     r"\(longformer\) returns 2 attention maps of shape .* its attention is pooled, windowed, sparse"),
    # MRA returns no maps at all: the census failed stacking None
    ("MraConfig", dict(max_position_embeddings=514), r"\(mra\) returns no attention maps"),
])
def test_a_model_whose_attentions_are_not_full_softmax_maps_is_refused_on_loading(tiny_bert, tmp_path, family, kw,
                                                                                   refusal):
    import transformers

    folder = _tiny_family(tiny_bert, tmp_path / family, getattr(transformers, family), **kw)
    with pytest.raises(EncoderError, match=refusal):
        load_encoder(folder)


def test_a_model_without_attention_heads_is_refused_and_a_bert_of_the_same_shape_loads(tiny_bert, tmp_path):
    from transformers import BertConfig, FNetConfig

    fnet = _tiny_family(tiny_bert, tmp_path / "fnet", FNetConfig, num_attention_heads=None)  # a Fourier transform
    with pytest.raises(EncoderError, match=r"\(fnet\) has no attention heads .* it draws no attention maps"):
        load_encoder(fnet)
    bert = load_encoder(_tiny_family(tiny_bert, tmp_path / "bert", BertConfig))  # the probe passes a true encoder
    assert (bert.num_layers, bert.num_heads) == (2, 4)


def test_a_model_whose_maps_weigh_padding_is_refused_as_that(tiny_bert, tmp_path, monkeypatch):
    from transformers import BertConfig
    from transformers.models.bert import modeling_bert

    folder = _tiny_family(tiny_bert, tmp_path / "bert", BertConfig)
    eager = modeling_bert.eager_attention_forward  # a softmax over every token of the batch, padding included
    monkeypatch.setattr(modeling_bert, "eager_attention_forward",
                        lambda module, q, k, v, attention_mask, **kw: eager(module, q, k, v, None, **kw))
    with pytest.raises(EncoderError, match=r"\(bert\) returns attention maps of a padded input that give weight to "
                                           r"its padding tokens, which patterncnn cuts away \(layer 1, head 1: rows"):
        load_encoder(folder)


def test_a_layout_model_loads_with_a_warning_that_it_gets_no_layout(tiny_bert, tmp_path, caplog):
    from transformers import LayoutLMConfig

    enc = load_encoder(_tiny_family(tiny_bert, tmp_path / "layoutlm", LayoutLMConfig))
    assert enc.num_heads == 4
    assert "its model reads bbox beside the text; patterncnn gives only the text, so those inputs are left out" in \
        caplog.text


def test_reformer_is_refused_as_what_it_is(tmp_path):
    # Its local attention's one chunk holds every token of the short probe: it loaded, then the census crashed
    from transformers import ReformerConfig

    ReformerConfig(vocab_size=50, hidden_size=32, num_attention_heads=4, attention_head_size=8, feed_forward_size=64,
                   attn_layers=["local", "local"], axial_pos_embds_dim=[16, 16], axial_pos_shape=[16, 32],
                   max_position_embeddings=512, is_decoder=False).save_pretrained(tmp_path / "reformer")
    with pytest.raises(EncoderError, match=r"\(reformer\) attends within chunks of tokens \(local attention\) or hash "
                                           r"buckets"):
        load_encoder(str(tmp_path / "reformer"))


def test_a_model_onnx_cannot_export_is_refused_naming_the_torch_backend(tiny_bert, glue_dir, tmp_path, monkeypatch):
    # TAPAS's scatter_reduce has no ONNX form: the census, onnx by default, ended in "internal error ... a bug"
    from transformers import TapasConfig

    from patterncnn.core.glue import load_split

    monkeypatch.setenv("PATTERNCNN_CACHE", str(tmp_path / "cache"))
    folder = _tiny_family(tiny_bert, tmp_path / "tapas", TapasConfig)
    examples = load_split("rte", "dev", glue_dir, limit=2, seed=3).examples
    with pytest.raises(EncoderError, match=r"tapas-\w+ cannot be exported to ONNX \(.+\); run it with --backend torch"):
        list(load_encoder(folder, max_length=48, backend="onnx").iter_attentions(examples))
    assert not [p for p in (tmp_path / "cache").rglob("*") if p.is_file()]  # nothing half-written is left
    assert len(list(load_encoder(folder, max_length=48).iter_attentions(examples))) == 2  # torch runs it


def test_xlnet_is_refused_as_what_it_is(tmp_path):
    from transformers import XLNetConfig

    XLNetConfig(vocab_size=50, d_model=16, n_layer=1, n_head=2, d_inner=32).save_pretrained(tmp_path / "xlnet")
    with pytest.raises(EncoderError, match=r"XLNet is a permutation language model, whose special tokens come last "
                                           r"and padding first, not a BERT-style masked encoder"):
        load_encoder(str(tmp_path / "xlnet"))


@pytest.mark.parametrize("fixture", ["tiny_bert", "tiny_mpnet"])
def test_a_separator_s_string_in_the_text_ends_no_segment(fixture, request):
    # The tokenizer reads a literal "[SEP]" ("</s>") as the separator token; every separator id ended a segment, so a
    # sentence holding one became a pair, and a BERT model got token type 1 after it where its tokenizer gives 0
    # (helper 95's review). Only the separators the tokenizer's template put in end a segment now.
    import torch

    enc = load_encoder(str(request.getfixturevalue(fixture)), max_length=64)
    sep = enc.tokenizer.sep_token
    for texts in [(f"the cat {sep} sat on the mat",), (f"the cat {sep} sat", "a dog ran")]:
        plain = enc.tokenize(tuple(t.replace(f" {sep}", "") for t in texts))[0]
        ids, cut = enc.tokenize(texts)
        assert ids.count(enc.tokenizer.sep_token_id) == plain.count(enc.tokenizer.sep_token_id) + 1  # as HF reads it
        ea = enc.attend(Example("x", "-", 0, texts, None), ids, cut)
        assert len(ea.seps) == len(enc._seps(plain)), (texts, ea.seps)  # the template's alone
        hf = enc.tokenizer(*texts, return_tensors="pt")
        assert hf["input_ids"][0].tolist() == ids
        if "token_type_ids" in enc.inputs([ids]):  # the types the tokenizer gives, and so the model's own maps
            assert enc.inputs([ids])["token_type_ids"][0].tolist() == hf["token_type_ids"][0].tolist()
            with torch.no_grad():
                own = torch.stack(enc.model(**hf, output_attentions=True).attentions)[:, 0].numpy()
            assert np.abs(ea.maps - own).max() < 1e-5


def test_a_pair_whose_second_text_is_empty_gets_the_tokenizer_s_token_types(tiny_bert):
    # A second text of whitespace gives [CLS] A [SEP] [SEP] ("" gives one sentence, as the tokenizer reads it): one
    # segment (the separators are one run), but BERT's tokenizer gives the last [SEP] type 1, where the types made
    # from the segments gave 0 (stop 62's notes). The model is fed the tokenizer's own.
    import torch

    enc = load_encoder(str(tiny_bert), max_length=64)
    texts = ("the cat sat on the mat", " ")
    ids, cut = enc.tokenize(texts)
    hf = enc.tokenizer(*texts, return_tensors="pt")
    assert hf["token_type_ids"][0].tolist()[-1] == 1 and segment_ids(len(ids), enc._seps(ids))[-1] == 0
    assert enc.inputs([ids])["token_type_ids"][0].tolist() == hf["token_type_ids"][0].tolist()
    ea = enc.attend(Example("x", "-", 0, texts, None), ids, cut)
    with torch.no_grad():
        own = torch.stack(enc.model(**hf, output_attentions=True).attentions)[:, 0].numpy()
    assert np.abs(ea.maps - own).max() < 1e-5


def test_a_max_length_without_room_for_a_pair_is_refused(tiny_bert, tiny_mpnet):
    # At 4, a BERT pair lost B ([CLS] the [SEP] [SEP]) and an MPNet pair both sentences (helper 95's review).
    with pytest.raises(EncoderError, match="needs at least 5; pass a larger --max-length"):
        load_encoder(str(tiny_bert), max_length=4)
    with pytest.raises(EncoderError, match="needs at least 6"):
        load_encoder(str(tiny_mpnet), max_length=5)
    enc = load_encoder(str(tiny_mpnet), max_length=6)
    ids, _ = enc.tokenize(("the cat sat", "a dog ran"))
    assert len(enc._seps(ids)) == 3 and len(ids) == 6


def test_a_tokenizer_whose_pair_has_no_separator_between_is_warned_of(tiny_bert, monkeypatch, caplog):
    # Segments are found from separators: a pair template without one between the sentences made every pair one
    # segment without a word (helper 95's review; no real checkpoint known, so the tokenizer is changed on loading).
    from tokenizers.processors import TemplateProcessing
    from transformers import AutoTokenizer

    real = AutoTokenizer.from_pretrained

    def no_middle(*a, **kw):
        tok = real(*a, **kw)
        tok.backend_tokenizer.post_processor = TemplateProcessing(
            single="[CLS] $A [SEP]", pair="[CLS] $A $B:1 [SEP]:1",
            special_tokens=[("[CLS]", tok.cls_token_id), ("[SEP]", tok.sep_token_id)])
        return tok

    with caplog.at_level("WARNING"):
        load_encoder(str(tiny_bert), max_length=64)
    assert "puts no separator" not in caplog.text
    monkeypatch.setattr(AutoTokenizer, "from_pretrained", no_middle)
    with caplog.at_level("WARNING"):
        load_encoder(str(tiny_bert), max_length=64)
    assert "puts no separator '[SEP]' between the two sentences of a pair" in caplog.text, caplog.text


def test_the_tokenizer_is_part_of_an_encoder_s_fingerprint(tiny_bert, tmp_path):
    # The weights alone identified an encoder: a census run with one tokenizer was resumed, and its maps named, under
    # another (helper 95's review: MiniLM's weights with do_lower_case false made half the words [UNK]).
    import json
    import shutil

    folder = shutil.copytree(tiny_bert, tmp_path / "cased")
    config = json.loads((folder / "tokenizer_config.json").read_text())
    lower = config.get("do_lower_case", True)
    (folder / "tokenizer_config.json").write_text(json.dumps({**config, "do_lower_case": not lower}))
    same, other = load_encoder(str(tiny_bert)), load_encoder(str(folder))
    assert same.fingerprint["sha256"] == other.fingerprint["sha256"]
    assert same.fingerprint["tokenizer"] == load_encoder(str(tiny_bert)).fingerprint["tokenizer"]
    assert same.fingerprint["tokenizer"] != other.fingerprint["tokenizer"]


def test_an_embedded_encoder_s_weights_with_another_tokenizer_are_warned_of(tmp_path, caplog):
    import json
    import shutil

    from patterncnn.encoders.embedded import embedded_folder

    folder = shutil.copytree(embedded_folder("minilm"), tmp_path / "m")
    with caplog.at_level("WARNING"):
        assert load_encoder(str(folder)).tag.startswith("minilm-")  # the same files: the encoder itself, quietly
    assert "its tokenizer is not" not in caplog.text
    config = json.loads((folder / "tokenizer_config.json").read_text())
    (folder / "tokenizer_config.json").write_text(json.dumps({**config, "do_lower_case": False}))
    with caplog.at_level("WARNING"):
        load_encoder(str(folder))
    assert "its weights are minilm's" in caplog.text and "its tokenizer is not minilm's" in caplog.text


def test_a_damaged_weights_file_is_named_with_its_fix(tiny_bert, tmp_path):
    # helper 106: a cut model.safetensors (an interrupted copy) was "internal error ... this is a bug"
    import shutil

    import torch

    cut = tmp_path / "cut"
    shutil.copytree(tiny_bert, cut)
    weights = cut / "model.safetensors"
    weights.write_bytes(weights.read_bytes()[:3000])
    with pytest.raises(EncoderError, match=r"the weights file of .* is damaged \(SafetensorError: .*copy or download "
                                           r"the model again"):
        load_encoder(str(cut))
    weights.unlink()  # the same weights as a pytorch_model.bin, cut short
    whole = tmp_path / "whole.bin"
    torch.save({"x": torch.zeros(1000)}, whole)
    (cut / "pytorch_model.bin").write_bytes(whole.read_bytes()[:500])
    with pytest.raises(EncoderError, match="is damaged"):
        load_encoder(str(cut))
    # intact, but pickling a Python object beside its tensors: not damage (helper 108)
    import argparse

    torch.save({"x": torch.zeros(2), "args": argparse.Namespace(a=1)}, cut / "pytorch_model.bin")
    with pytest.raises(EncoderError, match="holds Python objects beside its tensors .*, or it is damaged") as e:
        load_encoder(str(cut))
    assert "weights_only=False" in str(e.value) and "save_file" in str(e.value)  # a fix that works (helper 110)


def test_a_folder_named_like_an_embedded_encoder_is_refused_as_ambiguous(tiny_bert, tmp_path, monkeypatch):
    # helper 106: a downloaded multilingual-e5-small folder was silently replaced by the embedded 4-bit conversion
    import shutil

    shutil.copytree(tiny_bert, tmp_path / "multilingual-e5-small")
    monkeypatch.chdir(tmp_path)
    with pytest.raises(EncoderError, match=r"'multilingual-e5-small' is both a model folder here and a name of "
                                           r"the embedded encoder 'e5'; pass ./multilingual-e5-small for the folder"):
        load_encoder("multilingual-e5-small")
    assert load_encoder("./multilingual-e5-small").num_layers == 3  # the folder, by its path
    # a short name is the embedded encoder whatever folders are here (helper 108: `census --model minilm --out minilm`
    # was refused), and a folder that holds no model is no ambiguity
    (tmp_path / "minilm").mkdir()
    shutil.copytree(tiny_bert, tmp_path / "minilm" / "inner")
    (tmp_path / "all-minilm-l6-v2").mkdir()
    assert load_encoder("minilm").tag == load_encoder("all-minilm-l6-v2").tag == "minilm-53aa5117"


def test_a_model_that_needs_its_own_code_is_refused_without_asking(tiny_bert, tmp_path):
    # helper 106: transformers asked "Do you wish to run the custom code? [y/N]" on the terminal, then the error blamed
    # HF_HUB_OFFLINE
    import json
    import shutil

    custom = tmp_path / "custom"
    shutil.copytree(tiny_bert, custom)
    config = json.loads((custom / "config.json").read_text())
    config.update(model_type="mybert", auto_map={"AutoConfig": "configuration_mybert.MyBertConfig",
                                                 "AutoModel": "modeling_mybert.MyBertModel"})
    (custom / "config.json").write_text(json.dumps(config))
    with pytest.raises(EncoderError, match="needs its own Python code to load .*which patterncnn does not run"):
        load_encoder(str(custom))


def test_a_hub_model_is_recorded_with_its_commit(tiny_bert, tmp_path, monkeypatch):
    # helper 106: transformers 5 sets no config._commit_hash, so every hub id was recorded without a revision, and two
    # repos of one last name shared a tag (map ids) and an ONNX export
    import hashlib

    cache = tmp_path / "hub"
    monkeypatch.setenv("HF_HUB_CACHE", str(cache))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setattr("huggingface_hub.constants.HF_HUB_CACHE", str(cache))
    monkeypatch.setattr("huggingface_hub.constants.HF_HUB_OFFLINE", True)

    def put(repo: str, commit: str) -> None:  # a model as `from_pretrained` leaves it in the cache
        base = cache / f"models--{repo.replace('/', '--')}"
        (base / "refs").mkdir(parents=True)
        (base / "blobs").mkdir()
        (base / "refs" / "main").write_text(commit)
        snapshot = base / "snapshots" / commit
        snapshot.mkdir(parents=True)
        for f in tiny_bert.iterdir():
            data = f.read_bytes()
            (base / "blobs" / hashlib.sha256(data).hexdigest()).write_bytes(data)
            (snapshot / f.name).symlink_to(f"../../blobs/{hashlib.sha256(data).hexdigest()}")

    put("org1/tiny-bert", "1" * 40)
    put("org2/tiny-bert", "2" * 40)
    a, b = load_encoder("org1/tiny-bert", backend="torch"), load_encoder("org2/tiny-bert", backend="torch")
    assert (a.fingerprint["revision"], b.fingerprint["revision"]) == ("1" * 40, "2" * 40)
    assert (a.tag, b.tag) == ("tiny-bert-11111111", "tiny-bert-22222222")


def test_xlm_s_masked_lm_checkpoint_loads_and_its_causal_one_is_refused(tmp_path):
    # helper 106: XLMWithLMHeadModel, what XLM's and FlauBERT's masked-LM checkpoints declare, was refused by its
    # "LMHeadModel" suffix as "not a bidirectional encoder"
    import torch
    from transformers import AutoTokenizer, XLMConfig, XLMWithLMHeadModel

    from patterncnn.encoders.load import resolve_model

    tok = AutoTokenizer.from_pretrained(resolve_model("minilm"))
    for causal in (False, True):
        torch.manual_seed(0)
        folder = tmp_path / f"xlm-causal-{causal}"
        XLMWithLMHeadModel(XLMConfig(vocab_size=tok.vocab_size, emb_dim=32, n_layers=2, n_heads=4, causal=causal,
                                     max_position_embeddings=130, pad_index=tok.pad_token_id)).save_pretrained(folder)
        tok.save_pretrained(folder)
        if causal:
            with pytest.raises(EncoderError, match="is not a bidirectional encoder"):
                load_encoder(str(folder), max_length=64)
        else:
            enc = load_encoder(str(folder), max_length=64)
            assert (enc.num_layers, enc.num_heads) == (2, 4)


@pytest.mark.parametrize("family", ["Data2VecText", "Roberta", "Bert"])
def test_max_length_is_capped_where_the_position_table_ends(family, tmp_path):
    # helper 106: data2vec-text, roberta-prelayernorm, xlm-roberta-xl and X-MOD number positions from padding_idx + 1
    # like RoBERTa but were not on a list of model types: capped 2 too high, the first input that long crashed
    import transformers
    from transformers import AutoTokenizer

    from patterncnn.encoders.load import resolve_model

    tok = AutoTokenizer.from_pretrained(resolve_model("minilm"))
    config = getattr(transformers, f"{family}Config")(vocab_size=tok.vocab_size, hidden_size=32, num_hidden_layers=1,
                                                      num_attention_heads=4, intermediate_size=64,
                                                      max_position_embeddings=34, pad_token_id=tok.pad_token_id)
    getattr(transformers, f"{family}Model")(config).save_pretrained(tmp_path / family)
    tok.save_pretrained(tmp_path / family)
    enc = load_encoder(str(tmp_path / family), max_length=64)
    assert enc.max_length == (34 if family == "Bert" else 34 - (tok.pad_token_id + 1))  # ids from padding_idx + 1
    out = next(enc.iter_attentions([ex(0, "word " * 200)]))  # as long as the cap allows: runs
    assert out.maps.shape[-1] == enc.max_length


def test_a_hub_out_of_reach_is_named_with_the_ways_round_it(monkeypatch):
    # helper 106: without HF_HUB_OFFLINE the advice proposed a hub id (needs internet) after the hub failed
    import transformers

    def unreachable(*a, **k):
        raise OSError("We couldn't connect to 'https://huggingface.co' to load the files, and couldn't find them in "
                      "the cached files.\nCheck your internet connection")

    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    monkeypatch.setattr(transformers.AutoConfig, "from_pretrained", unreachable)
    with pytest.raises(EncoderError) as e:
        load_encoder("someorg/some-model")
    said = str(e.value)
    assert "We couldn't connect" in said and "hf download someorg/some-model --local-dir FOLDER" in said
    assert "HF_HUB_OFFLINE=1" in said and "needs internet" not in said
