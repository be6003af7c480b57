"""Shared fixtures: a tiny randomly initialised BERT, MPNet, RoBERTa, DistilBERT and DeBERTa-v2 (built here, offline)
and the real GLUE files."""

import os

# Tests never touch a hub: set before transformers/datasets are imported.
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")

import string
from pathlib import Path

import pytest
from repo import FIXTURES, REPO  # tests/support is on pytest's pythonpath (pyproject.toml)


@pytest.fixture(scope="session")
def shared_glue() -> Path:
    """The full real GLUE files (../shared/glue beside the repo, or $PATTERNCNN_TEST_GLUE).

    Only the tests that check whole files (row and label counts) need them; they are skipped, with
    this reason, from a clone that has no such folder beside it.
    """
    path = Path(os.environ.get("PATTERNCNN_TEST_GLUE", REPO.parent / "shared" / "glue"))
    if not (path / "RTE" / "dev.tsv").is_file():
        pytest.skip(f"the full GLUE files are not at {path} (set PATTERNCNN_TEST_GLUE to a glue_data folder); "
                    f"the excerpts in tests/fixtures/glue cover every other test")
    return path


@pytest.fixture
def ctrl_c():
    """SIGINT raising KeyboardInterrupt, as under a terminal, for a test that sends it: a job started in the
    background by a shell (as CI may be) begins with SIGINT ignored, and Python then keeps it ignored."""
    import signal

    before = signal.signal(signal.SIGINT, signal.default_int_handler)
    yield
    signal.signal(signal.SIGINT, before)


@pytest.fixture(scope="session")
def glue_dir() -> Path:
    """Excerpts of the real GLUE files (first rows, tests/fixtures/glue/SOURCES.md): always there."""
    return FIXTURES / "glue"


_CHARS = string.ascii_lowercase + string.digits + string.punctuation


def _write_tiny(path: Path, family: str, specials: list[str], layers: int, heads: int, max_pos: int, **config) -> Path:
    """Write a tiny random ``{family}Model`` + character-level WordPiece ``{family}Tokenizer`` to ``path``."""
    import torch
    import transformers

    path.mkdir(parents=True, exist_ok=True)
    vocab = [*specials, *_CHARS, *("##" + c for c in _CHARS)]
    tok = getattr(transformers, f"{family}Tokenizer")(vocab={w: i for i, w in enumerate(vocab)}, do_lower_case=True)
    torch.manual_seed(0)
    cfg = getattr(transformers, f"{family}Config")(
        vocab_size=len(vocab), hidden_size=32, num_hidden_layers=layers, num_attention_heads=heads,
        intermediate_size=37, max_position_embeddings=max_pos, architectures=[f"{family}Model"], **config)
    getattr(transformers, f"{family}Model")(cfg).save_pretrained(path)
    tok.save_pretrained(path)
    return path


def build_tiny_bert(path: Path, layers: int = 3, heads: int = 4, max_pos: int = 64) -> Path:
    """A tiny random BertModel; pairs read ``[CLS] A [SEP] B [SEP]``."""
    return _write_tiny(path, "Bert", ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"], layers, heads, max_pos)


def build_tiny_mpnet(path: Path, layers: int = 2, heads: int = 4, max_pos: int = 66) -> Path:
    """A tiny random MPNetModel; pairs read ``<s> A </s></s> B </s>``, as all-mpnet-base-v2's."""
    return _write_tiny(path, "MPNet", ["<s>", "<pad>", "</s>", "[UNK]", "<mask>"], layers, heads, max_pos,
                       pad_token_id=1, bos_token_id=0, eos_token_id=2)


def build_tiny_distilbert(path: Path, layers: int = 2, heads: int = 4, max_pos: int = 64) -> Path:
    """A tiny random DistilBertModel (its own layer and head layout, no token types); BERT's WordPiece layout."""
    return _write_tiny(path, "DistilBert", ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"], layers, heads, max_pos,
                       hidden_dim=37)


def build_tiny_roberta(path: Path, layers: int = 2, heads: int = 4, max_pos: int = 66) -> Path:
    """A tiny random RobertaModel + character-level byte-BPE ``RobertaTokenizer``; pairs read ``<s> A </s></s> B </s>``."""
    import torch
    import transformers

    path.mkdir(parents=True, exist_ok=True)
    vocab = ["<s>", "<pad>", "</s>", "<unk>", "<mask>", "\u0120", *_CHARS]  # \u0120: byte-level BPE's space
    tok = transformers.RobertaTokenizer(vocab={w: i for i, w in enumerate(vocab)}, merges=[])
    torch.manual_seed(0)
    cfg = transformers.RobertaConfig(
        vocab_size=len(vocab), hidden_size=32, num_hidden_layers=layers, num_attention_heads=heads,
        intermediate_size=37, max_position_embeddings=max_pos, type_vocab_size=1, pad_token_id=1, bos_token_id=0,
        eos_token_id=2, architectures=["RobertaModel"])
    transformers.RobertaModel(cfg).save_pretrained(path)
    tok.save_pretrained(path)
    return path


def build_tiny_deberta(path: Path, layers: int = 2, heads: int = 4, max_pos: int = 64) -> Path:
    """A tiny random DebertaV2Model shaped as DeBERTa-v3 (relative attention, c2p and p2c, the query and key
    projections shared with the positions, no token types), with BERT's WordPiece layout and tokenizer."""
    import torch
    import transformers

    path.mkdir(parents=True, exist_ok=True)
    vocab = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", *_CHARS, *("##" + c for c in _CHARS)]
    tok = transformers.BertTokenizer(vocab={w: i for i, w in enumerate(vocab)}, do_lower_case=True)
    torch.manual_seed(0)
    cfg = transformers.DebertaV2Config(
        vocab_size=len(vocab), hidden_size=32, num_hidden_layers=layers, num_attention_heads=heads,
        intermediate_size=37, max_position_embeddings=max_pos, relative_attention=True, pos_att_type=["p2c", "c2p"],
        share_att_key=True, position_buckets=16, max_relative_positions=-1, type_vocab_size=0,
        position_biased_input=False, norm_rel_ebd="layer_norm", architectures=["DebertaV2Model"])
    transformers.DebertaV2Model(cfg).save_pretrained(path)
    tok.save_pretrained(path)
    return path


@pytest.fixture(scope="session")
def tiny_bert(tmp_path_factory) -> Path:
    return build_tiny_bert(tmp_path_factory.mktemp("tiny-bert"))


@pytest.fixture(scope="session")
def tiny_mpnet(tmp_path_factory) -> Path:
    return build_tiny_mpnet(tmp_path_factory.mktemp("tiny-mpnet"))


@pytest.fixture(scope="session")
def tiny_distilbert(tmp_path_factory) -> Path:
    return build_tiny_distilbert(tmp_path_factory.mktemp("tiny-distilbert"))


@pytest.fixture(scope="session")
def tiny_roberta(tmp_path_factory) -> Path:
    return build_tiny_roberta(tmp_path_factory.mktemp("tiny-roberta"))


@pytest.fixture(scope="session")
def tiny_deberta(tmp_path_factory) -> Path:
    return build_tiny_deberta(tmp_path_factory.mktemp("tiny-deberta"))


@pytest.fixture(scope="session")
def label_studio(tmp_path_factory):
    """A real Label Studio 1.23 server on a free loopback port, for the whole session."""
    from labelstudio_server import LabelStudioServer

    try:
        server = LabelStudioServer(tmp_path_factory.mktemp("label-studio")).start()
    except RuntimeError as e:
        pytest.fail(str(e))
    yield server
    server.stop()


@pytest.fixture(scope="session")
def labelled_set(tmp_path_factory):
    """A small labelled set in the `annotate pull` layout: synthetic maps of known pattern, 12 per class."""
    from synthetic import pattern_map, write_labelled_set

    from patterncnn.core.labels import LABELS

    root = tmp_path_factory.mktemp("labelled")
    recs, rows = [], []
    for k, kind in enumerate(LABELS):
        for i in range(12):
            t = 12 + (i * 5) % 30
            sep = t // 2 - 1
            meta = {"id": f"m_{kind}_{i:02d}", "task": "rte", "split": "dev", "example": 100 * k + i // 2,
                    "layer": i % 3, "head": i % 4, "T": t, "seps": [sep, t - 1]}
            recs.append((meta, pattern_map(kind, t, sep, seed=100 * k + i)))
            rows.append({"map_id": meta["id"], "label": kind, "uncertain": str(i == 0)})
    return write_labelled_set(root, recs, rows)


@pytest.fixture(scope="session")
def tiny_classifier(labelled_set, tmp_path_factory):
    """(torch model, ONNX path) of a small CNN trained briefly on the synthetic labelled set."""
    from patterncnn.classifier.model import CNNConfig
    from patterncnn.classifier.onnx import export_onnx
    from patterncnn.labelling.sets import load_labelled
    from patterncnn.training.fit import TrainConfig, fit_final

    data = load_labelled(labelled_set)
    model = fit_final(data, CNNConfig(grid=16, widths=(4, 4, 8, 8, 8, 8, 16, 16)), TrainConfig(batch_size=8), epochs=15)
    path = tmp_path_factory.mktemp("clf") / "tiny.onnx"
    export_onnx(model, path, {"data_hash": data.data_hash})
    return model, path


def pytest_collection_modifyitems(items):
    """Every test that uses the real Label Studio server is marked ``labelstudio`` (deselect: -m "not labelstudio")."""
    for item in items:
        if "label_studio" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.labelstudio)
