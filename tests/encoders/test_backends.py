"""Encoder backends against HF fp32 eager on real MiniLM maps; the overlapped CNN against the serial path."""

import numpy as np
import pytest

from patterncnn.census.run import classify_window
from patterncnn.classifier.onnx import OnnxClassifier
from patterncnn.core.glue import load_split
from patterncnn.encoders.backends import BACKENDS, DEFAULT_BACKEND, VETTED, drift
from patterncnn.encoders.load import EncoderError, load_encoder

# The gate every vetted backend passes (docs/pages/commands/census.md, "Faster census").
MAX_SHARE_POINTS, MAX_MAP_MAD = 0.5, 1e-3


@pytest.fixture(scope="module")
def minilm_reference(glue_dir, tmp_path_factory):
    """Real MiniLM on 32 real QNLI and 32 real SST-2 examples: fp32 maps and the shipped classifier's labels."""
    clf = OnnxClassifier()
    splits = [load_split(t, "dev", glue_dir, limit=32, seed=0) for t in ("qnli", "sst2")]
    ref = census_maps(load_encoder("minilm", backend="torch"), clf, splits)
    return clf, splits, ref


def census_maps(enc, clf, splits):
    out = {}
    for split in splits:
        maps = []
        arrays = classify_window(enc, clf, split.examples, on_example=lambda ea: maps.append(ea.maps))
        out[split.task.name] = (maps, arrays["labels"])
    return out


def gate(ref, other) -> list[dict]:
    return [drift(ref[t][0], other[t][0], ref[t][1], other[t][1]) for t in ref]


@pytest.mark.parametrize("backend", [pytest.param(b, marks=pytest.mark.slow) if b == "compile" else b
                                     for b in VETTED if b != "torch"])  # compile: ~20 s of compiling
def test_vetted_backends_keep_the_census_of_fp32(backend, minilm_reference, tmp_path, monkeypatch):
    monkeypatch.setenv("PATTERNCNN_CACHE", str(tmp_path))  # a fresh ONNX export, checked against torch
    clf, splits, ref = minilm_reference
    for d in gate(ref, census_maps(load_encoder("minilm", backend=backend), clf, splits)):
        assert d["map_mad"] <= MAX_MAP_MAD and d["share_points"] <= MAX_SHARE_POINTS, d


def test_int8_fails_the_gate_and_is_not_offered(minilm_reference):
    """The gate discriminates: int8 dynamic quantization moves the maps by more than 1e-3."""
    clf, splits, ref = minilm_reference
    worst = max(d["map_mad"] for d in gate(ref, census_maps(load_encoder("minilm", backend="int8"), clf, splits)))
    assert worst > MAX_MAP_MAD
    assert "int8" not in VETTED and "int8" in BACKENDS and DEFAULT_BACKEND in VETTED


def test_onnx_backend_matches_torch_on_a_pair_model(tiny_bert, tiny_classifier, glue_dir, tmp_path, monkeypatch):
    monkeypatch.setenv("PATTERNCNN_CACHE", str(tmp_path))
    split = load_split("rte", "dev", glue_dir, limit=20, seed=3)  # pairs: token type ids are fed too
    ref = [ea.maps for ea in load_encoder(str(tiny_bert), max_length=48).iter_attentions(split.examples)]
    onnx = [ea.maps for ea in load_encoder(str(tiny_bert), max_length=48, backend="onnx")
            .iter_attentions(split.examples)]
    assert len(list(tmp_path.glob("onnx/*.onnx"))) == 1
    assert max(float(np.abs(a - b).max()) for a, b in zip(ref, onnx)) < 1e-5


def test_onnx_backend_feeds_what_the_tokenizer_gives(tiny_bert, glue_dir, tmp_path, monkeypatch):
    """A BERT model whose tokenizer gives no token type ids (E5: XLM-R's tokenizer on a BertModel) is exported and
    fed without them; an export cached for other inputs is made again, not fed the wrong tensors."""
    import json
    import shutil

    monkeypatch.setenv("PATTERNCNN_CACHE", str(tmp_path / "cache"))
    folder = tmp_path / "no-types"
    shutil.copytree(tiny_bert, folder)
    config = json.loads((folder / "tokenizer_config.json").read_text())
    (folder / "tokenizer_config.json").write_text(json.dumps({**config,
                                                              "model_input_names": ["input_ids", "attention_mask"]}))
    split = load_split("rte", "dev", glue_dir, limit=12, seed=3)
    typed = load_encoder(str(tiny_bert), max_length=48, backend="onnx")
    untyped = load_encoder(str(folder), max_length=48, backend="onnx")
    assert typed._uses_token_types and not untyped._uses_token_types
    typed_maps = [ea.maps for ea in typed.iter_attentions(split.examples)]
    (export,) = (tmp_path / "cache" / "onnx").glob("*.onnx")  # a graph of three inputs where the untyped one looks
    shutil.copy(export, export.with_name(export.name.replace(typed.tag, untyped.tag)))
    maps = [ea.maps for ea in untyped.iter_attentions(split.examples)]  # that graph is not fed: exported again
    ref = [ea.maps for ea in load_encoder(str(folder), max_length=48).iter_attentions(split.examples)]
    assert max(float(np.abs(a - b).max()) for a, b in zip(ref, maps)) < 1e-5
    assert max(float(np.abs(a - b).max()) for a, b in zip(typed_maps, maps)) > 1e-4  # segment B's type changed


def test_unknown_backend_names_the_choices(tiny_bert):
    from patterncnn.core.args import ArgumentError

    with pytest.raises(ArgumentError, match="backend='tpu' is not offered; choose one of torch"):
        load_encoder(str(tiny_bert), backend="tpu")


def test_overlapped_window_is_bit_identical_to_serial(tiny_bert, tiny_classifier, glue_dir):
    enc = load_encoder(str(tiny_bert), max_length=48)
    clf = OnnxClassifier(tiny_classifier[1])
    window = load_split("rte", "dev", glue_dir, limit=64, seed=4).examples
    seen = []
    serial = classify_window(enc, clf, window, batch_size=8, overlap=False)
    both = classify_window(enc, clf, window, batch_size=8, on_example=lambda ea: seen.append(ea.example.index))
    assert seen == list(serial["index"])  # the callback still sees every example, in the serial order
    for k in serial:
        assert np.array_equal(serial[k], both[k]), k


def test_an_encoder_error_in_the_thread_reaches_the_caller(tiny_bert, tiny_classifier, glue_dir):
    enc = load_encoder(str(tiny_bert), max_length=48)

    def broken(batch_ids):
        raise EncoderError("boom in the encoder thread")

    enc.attentions = broken
    with pytest.raises(EncoderError, match="boom"):
        classify_window(enc, OnnxClassifier(tiny_classifier[1]), load_split("rte", "dev", glue_dir, limit=5).examples)


def test_the_onnx_export_keeps_its_expected_warnings_to_itself(tiny_bert, tmp_path):
    # a new model's first onnx census printed the tracer's TracerWarning and torch.onnx's aten::index UserWarning
    import warnings

    from transformers import AutoModel

    from patterncnn.encoders.backends import export_encoder

    model = AutoModel.from_pretrained(str(tiny_bert), attn_implementation="eager").eval()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        export_encoder(model, tmp_path / "tiny.onnx", ("input_ids", "attention_mask", "token_type_ids"))
        warnings.warn("after the export", UserWarning)  # the filters apply to the export only
    shown = [str(w.message) for w in caught if not issubclass(w.category, DeprecationWarning)]  # hidden by default
    assert shown == ["after the export"]
    assert (tmp_path / "tiny.onnx").is_file()
