"""Fuzzing every file the CLI reads (issue 31): on mutated input, a command ends in exit 0, or exit 2 with one error
line that names the fix; never a traceback, a timeout, a signal, or a peak resident memory of 2 GB.

The file kinds: a map store's ``store.json``, part ``.jsonl`` and part ``.npz``; a plain ``.npz`` and ``.npy``;
census results given to ``census --compare``; a labelled set's ``labels.csv``, ``votes.csv``,
``predictions.csv`` and ``maps/``; Label Studio exports (``annotate pull --from-file``); GLUE files
(``census --glue-dir``); and a census work folder (window files and the run's stamp, read when a
census resumes). Hypothesis draws each mutation: byte-level (truncate, flip, insert, delete,
duplicate, replace) or structured (a JSON value replaced by another type or an extreme, a key
dropped or added, a CSV cell, row or column changed, an array's dtype, shape or values changed, an
``.npy`` header that declares a huge array). Each case runs its command in a child forked from one
runner process (``tests/support/cli_runner.py``), which measures the child's peak resident memory.

``FUZZ_CASES`` cases per file kind (``PATTERNCNN_CLI_FUZZ_CASES``, default 16; a third of that for the
kinds whose command loads an encoder or renders); no shrinking, so the time is bounded; the totals (cases, exit codes, slowest case, peak memory) are printed at the end (``-s``).
"""

import copy
import csv
import gzip
import io
import json
import os
import shutil
import tempfile
import time
from collections import Counter
from pathlib import Path

import numpy as np
import pytest
from cli_runner import CliRunner
from hostile import corrupt_deflate_npz, npy_header, zip_of
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st
from repo import REPO
from synthetic import pattern_map

from patterncnn.core.labels import LABELS
from patterncnn.core.maps import MapStore, open_maps

pytestmark = pytest.mark.fuzz
FUZZ_CASES = int(os.environ.get("PATTERNCNN_CLI_FUZZ_CASES", 16))
MEMORY_BOUND = 2 << 30  # bytes of peak resident memory, the bound for any input under 16 MB
SET = REPO / "annotations" / "round6-block-candidates"  # a real labelled set: 80 maps, three annotators
CENSUS = REPO / "research" / "census" / "minilm" / "census.json"
stats: dict = {"cases": Counter(), "codes": Counter(), "seconds": 0.0, "slowest": (0.0, None), "peak": (0, None)}


# ---------------------------------------------------------------- the inputs every case starts from


def _store(root: Path) -> Path:
    store = MapStore.create(root, info={"model": {"model": "tiny"}})
    recs = []
    for i, kind in enumerate(LABELS):
        t = 10 + 3 * i
        sep = t // 2
        meta = {"id": f"tiny-0123abcd_rte_dev_{i:05d}_L00_H00", "model": "tiny", "task": "rte", "split": "dev",
                "example": i, "layer": 0, "head": 0, "T": t, "tokens": ["[CLS]"] + ["a"] * (t - 2) + ["[SEP]"],
                "seps": [sep, t - 1], "truncated": False, "texts": ["a b", "c d"]}
        recs.append((meta, pattern_map(kind, t, sep, seed=i)))
    store.append(recs)
    return root


def _census_work(root: Path, tiny_bert: Path, classifier: Path, glue: Path) -> list[str]:
    """An unfinished census in ``root`` (its two windows and stamp in .work/rte), as the CLI would resume it."""
    from patterncnn.census.run import classify_task, task_params
    from patterncnn.classifier.onnx import OnnxClassifier
    from patterncnn.core.fileio import sha256_file
    from patterncnn.core.glue import load_split
    from patterncnn.encoders.load import load_encoder

    enc = load_encoder(str(tiny_bert), max_length=128, backend="torch", threads=2)
    split = load_split("rte", "dev", glue, limit=70, seed=0)
    params = task_params(enc, split, 70, 0, sha256_file(classifier), 16)
    classify_task(enc, OnnxClassifier(classifier), split, root, params)
    return ["census", "--task", "rte", "--model", str(tiny_bert), "--limit", "70", "--glue-dir", str(glue),
            "--backend", "torch", "--classifier", str(classifier), "--out", "{ROOT}/census"]


def _export(path: Path) -> Path:
    """Four tasks of round 6's real export, without the images (what `pull` reads of a task is kept)."""
    raw = gzip.decompress((SET / "exports" / "42d9d7e1441e20dd.json.gz").read_bytes())
    tasks = json.loads(raw)[:4]
    for t in tasks:
        t["data"] = {k: v for k, v in t["data"].items() if k not in ("image", "map_npy")}
    path.write_text(json.dumps(tasks))
    return path


@pytest.fixture(scope="module")
def base(tmp_path_factory, tiny_bert, tiny_classifier, glue_dir):
    """The unmutated inputs, and the command that reads each kind (``{ROOT}``: the case's copy of ``root``)."""
    root = tmp_path_factory.mktemp("fuzz-base")
    clf = str(tiny_classifier[1])
    _store(root / "store")
    store = open_maps(root / "store")
    np.savez(root / "maps.npz", **{m["id"]: a for m, a in store})
    np.save(root / "maps.npy", np.stack([pattern_map(k, 12, 5, seed=i) for i, k in enumerate(LABELS)]))
    shutil.copyfile(CENSUS, root / "a.json")
    shutil.copyfile(CENSUS, root / "b.json")
    shutil.copytree(SET, root / "set", ignore=shutil.ignore_patterns("exports"))
    _export(root / "export.json")
    (root / "glue" / "RTE").mkdir(parents=True)
    shutil.copyfile(glue_dir / "RTE" / "dev.tsv", root / "glue" / "RTE" / "dev.tsv")
    census = _census_work(root / "census", tiny_bert, tiny_classifier[1], root / "glue")
    classify = ["classify", "--out", "-", "--classifier", clf]
    return root, {
        "store.json": ("store/store.json", [*classify, "{ROOT}/store"]),
        "part.jsonl": ("store/part-00000.jsonl", [*classify, "{ROOT}/store"]),
        "part.npz": ("store/part-00000.npz", [*classify, "{ROOT}/store"]),
        "sheets": ("store/part-00000.jsonl", ["annotate", "sheets", "{ROOT}/store", "--out", "{ROOT}/sheets"]),
        "plain.npz": ("maps.npz", [*classify, "{ROOT}/maps.npz"]),
        "plain.npy": ("maps.npy", [*classify, "{ROOT}/maps.npy"]),
        "census.json": ("a.json", ["census", "--compare", "{ROOT}/a.json", "{ROOT}/b.json"]),
        "labels.csv": ("set/labels.csv", ["annotate", "agreement", "{ROOT}/set"]),
        "votes.csv": ("set/votes.csv", ["annotate", "agreement", "{ROOT}/set", "--by-encoder"]),
        "predictions.csv": ("set/predictions.csv", ["annotate", "pull", "--from-file", "{ROOT}/export.json",
                                                    "--out", "{ROOT}/set", "--dry-run"]),
        "set maps": ("set/maps/part-00000.npz", ["validate", "--annotations", "{ROOT}/set", "--out", "{ROOT}/v"]),
        "export": ("export.json", ["annotate", "pull", "--from-file", "{ROOT}/export.json", "--maps",
                                   str(SET / "maps"), "--out", "{ROOT}/new-set"]),
        "glue tsv": ("glue/RTE/dev.tsv", ["census", "--task", "rte", "--model", str(tiny_bert), "--limit", "6",
                                          "--glue-dir", "{ROOT}/glue", "--backend", "torch", "--classifier", clf,
                                          "--out", "{ROOT}/c"]),
        "census window": ("census/.work/rte/window-00000.npz", census),
        "census stamp": ("census/.work/rte/run.json", census),
    }


@pytest.fixture(scope="module")
def runner():
    with CliRunner() as run:
        yield run
    n = sum(stats["cases"].values())
    if n:  # shown with -s, and in the captured output of a failure
        print(f"\nCLI fuzz: {n} cases over {len(stats['cases'])} file kinds, {stats['seconds']:.0f} s of commands; exit "
              f"codes {dict(stats['codes'])}; slowest {stats['slowest'][0]:.1f} s ({stats['slowest'][1]}); peak RSS "
              f"{stats['peak'][0] / 2**20:.0f} MB ({stats['peak'][1]})")


# ---------------------------------------------------------------- mutations

EXTREMES = [None, True, False, 0, -1, 7, 2**63, -(2**63), 1e308, -1e308, 0.5, float("nan"), float("inf"), "",
            "x" * 5000, "\ud800", "vertical", [], {}, [None], [1, "a"], {"id": None}, [[1.0]], [-5, 10**9]]


@st.composite
def byte_mutation(draw, data: bytes) -> bytes:
    n = len(data)
    op = draw(st.sampled_from(["truncate", "flip", "insert", "delete", "duplicate", "replace", "empty"]))
    i = draw(st.integers(0, max(n - 1, 0)))
    if op == "truncate":
        return data[:i]
    if op == "flip" and n:
        b = bytearray(data)
        b[i] ^= draw(st.integers(1, 255))
        return bytes(b)
    if op == "insert":
        return data[:i] + draw(st.binary(min_size=1, max_size=64)) + data[i:]
    if op == "delete":
        return data[:i] + data[draw(st.integers(i, min(n, i + 512))):]
    if op == "duplicate":
        j = draw(st.integers(i, min(n, i + 4096)))
        return data[:j] + data[i:j] + data[j:]
    if op == "replace":
        return draw(st.binary(max_size=256))
    return b""


def _paths(obj, prefix=(), depth=0) -> list[tuple]:
    out = [prefix]
    if depth < 6:
        items = list(obj.items())[:40] if isinstance(obj, dict) else list(enumerate(obj))[:40] \
            if isinstance(obj, list) else []
        for k, v in items:
            out += _paths(v, (*prefix, k), depth + 1)
    return out


@st.composite
def json_value_mutation(draw, obj):
    """A copy of ``obj`` with one value replaced, one key dropped, or one key added."""
    obj = copy.deepcopy(obj)
    path = draw(st.sampled_from(_paths(obj)))
    if not path:
        return draw(st.sampled_from(EXTREMES))
    parent = obj
    for k in path[:-1]:
        parent = parent[k]
    op = draw(st.sampled_from(["set", "set", "drop", "add"]))
    if op == "drop" and isinstance(parent, dict):
        del parent[path[-1]]
    elif op == "add" and isinstance(parent, dict):
        parent[draw(st.sampled_from(["id", "extra", "seps", "T", "tasks", "shares"]))] = draw(st.sampled_from(EXTREMES))
    else:
        parent[path[-1]] = draw(st.sampled_from(EXTREMES))
    return obj


@st.composite
def json_mutation(draw, data: bytes) -> bytes:
    if draw(st.integers(0, 9)) == 0:
        return draw(st.sampled_from([b"[" * 100_000, b'{"a": ' * 50_000, b"NaN", b"null", b"[]", b"{}"]))
    return json.dumps(draw(json_value_mutation(json.loads(data)))).encode()


@st.composite
def jsonl_mutation(draw, data: bytes) -> bytes:
    lines = data.decode().splitlines()
    k = draw(st.integers(0, len(lines) - 1))
    op = draw(st.sampled_from(["value", "value", "garbage", "blank", "repeat", "deep", "drop"]))
    if op == "value":
        lines[k] = json.dumps(draw(json_value_mutation(json.loads(lines[k]))))
    elif op == "garbage":
        lines[k] = draw(st.text(max_size=40))
    elif op == "blank":
        lines.insert(k, "")
    elif op == "repeat":
        lines.insert(k, lines[k])
    elif op == "deep":
        lines[k] = "[" * 100_000
    else:
        del lines[k]
    return ("\n".join(lines) + "\n").encode("utf-8", "surrogatepass")


CELLS = ["", "nope", "vertical", "True", "-1", "1e999", "x" * 200_000, "a\x00b", "0", '"', "\r"]


@st.composite
def csv_mutation(draw, data: bytes) -> bytes:
    rows = list(csv.reader(io.StringIO(data.decode("utf-8"))))
    op = draw(st.sampled_from(["cell", "cell", "cell", "short", "long", "drop column", "rename", "repeat", "nul"]))
    r = draw(st.integers(0, len(rows) - 1))
    c = draw(st.integers(0, len(rows[0]) - 1))
    if op == "cell" and c < len(rows[r]):
        rows[r][c] = draw(st.sampled_from(CELLS))
    elif op == "short":
        rows[r] = rows[r][: max(0, len(rows[r]) - draw(st.integers(1, 3)))]
    elif op == "long":
        rows[r] = rows[r] + ["extra"]
    elif op == "drop column":
        rows = [row[:c] + row[c + 1:] for row in rows]
    elif op == "rename":
        rows[0][c] = "renamed"
    elif op == "repeat":
        rows.insert(r + 1, rows[max(r, 1)] if len(rows) > 1 else rows[r])
    buf = io.StringIO()
    csv.writer(buf, lineterminator="\n").writerows(rows)
    text = buf.getvalue()
    if op == "nul":
        text = text[: len(text) // 2] + "\x00" + text[len(text) // 2:]
    return text.encode("utf-8")


def _arrays(data: bytes) -> dict:
    with np.load(io.BytesIO(data)) as z:
        return {k: z[k] for k in z.files}


@st.composite
def array_variant(draw, a: np.ndarray) -> np.ndarray | bytes:
    """``a`` replaced by an array of another dtype, shape or values, or by raw .npy bytes that lie."""
    t = min(a.shape[-1] if a.ndim else 3, 512)  # a flat member (a window's example maps) is not a map side
    # A member of text (the tokens a census window keeps) is varied through numbers of its shape.
    a = a if a.dtype.kind in "biufc" else np.zeros(a.shape)
    choices = [np.ones((3, 4)), np.zeros((0, 0)), np.full((5, 5), np.nan), np.full((5, 5), 1e39),
               np.full((4, 4), 3.4e38, dtype=np.float32), -np.abs(a), a.astype(np.int64), a.astype(bool),
               a.astype(np.complex64), np.array(["ab", "c"]), np.zeros((2, t, t)), np.float32(1.0), a.T.copy(),
               a.astype(np.float16), np.atleast_1d(a)[..., :1], np.zeros((t,)), a.astype(np.uint8) + 200]
    raw = [npy_header((2**21, 2**21)), npy_header((9000, 9000), "<f4"), npy_header((3, 3), "|O"),
           npy_header((4, 4)), b"\x93NUMPY\x01\x00{'descr': '<f8', 'fortran_order': Fal"]
    k = draw(st.integers(0, len(choices) + len(raw) - 1))
    return choices[k] if k < len(choices) else raw[k - len(choices)]


@st.composite
def npz_mutation(draw, data: bytes) -> bytes:
    arrays = _arrays(data)
    op = draw(st.sampled_from(["member", "member", "member", "drop", "add", "not npy", "corrupt"]))
    key = draw(st.sampled_from(sorted(arrays)))
    if op == "corrupt":
        return corrupt_deflate_npz(draw(st.integers(0, 9)))
    members = {}
    for k, a in arrays.items():
        buf = io.BytesIO()
        np.save(buf, a)
        members[f"{k}.npy"] = buf.getvalue()
    if op == "member":
        v = draw(array_variant(arrays[key]))
        if isinstance(v, np.ndarray) or np.isscalar(v):
            buf = io.BytesIO()
            np.save(buf, v)
            v = buf.getvalue()
        members[f"{key}.npy"] = v
    elif op == "drop":
        del members[f"{key}.npy"]
    elif op == "add":
        members["intruder.npy"] = members[f"{key}.npy"]
    else:
        members["notes.txt"] = b"hello"
    return zip_of(members)


@st.composite
def npy_mutation(draw, data: bytes) -> bytes:
    a = np.load(io.BytesIO(data))
    v = draw(array_variant(a) | st.sampled_from([a[:0], a[:, :5, :5], np.asfortranarray(a)]))
    if isinstance(v, bytes):
        return v
    buf = io.BytesIO()
    np.save(buf, v)
    return buf.getvalue()


@st.composite
def tsv_mutation(draw, data: bytes) -> bytes:
    lines = data.split(b"\n")
    k = draw(st.integers(0, len(lines) - 1))
    op = draw(st.sampled_from(["tab", "untab", "label", "long", "bytes", "header", "crlf", "only header"]))
    if op == "tab":
        lines[k] += b"\tx"
    elif op == "untab":
        lines[k] = lines[k].replace(b"\t", b" ", 1)
    elif op == "label":
        cells = lines[k].split(b"\t")
        cells[-1] = draw(st.sampled_from([b"", b"nan", b"entailment ", b"2", b"\xff"]))
        lines[k] = b"\t".join(cells)
    elif op == "long":
        lines[k] = lines[k].replace(b"\t", b"\t" + b"w" * 300_000 + b" ", 1)
    elif op == "bytes":
        lines[k] += b"\xff\xfe\x00"
    elif op == "header":
        lines[0] = lines[0].replace(b"sentence1", b"sentence0")
    elif op == "crlf":
        lines = [line + b"\r" for line in lines]
    else:
        lines = lines[:1]
    return b"\n".join(lines)


STRUCTURED = {".json": json_mutation, ".jsonl": jsonl_mutation, ".csv": csv_mutation, ".npz": npz_mutation,
              ".npy": npy_mutation, ".tsv": tsv_mutation}


# ---------------------------------------------------------------- the property


def check(result, name: str) -> None:
    """Exit 0, or exit 2 with one error line, last; no traceback, no timeout or signal; under the memory bound."""
    what = f"{name}: `patterncnn {' '.join(result.argv)}` -> exit {result.code} ({result.killed})\n{result.stderr[-3000:]}"
    stats["cases"][name] += 1
    stats["codes"][result.code] += 1
    stats["seconds"] += result.seconds
    stats["slowest"] = max(stats["slowest"], (result.seconds, name), key=lambda x: x[0])
    stats["peak"] = max(stats["peak"], (result.peak_rss, name), key=lambda x: x[0])
    assert result.killed is None, what
    assert "Traceback" not in result.stderr, what
    assert result.code in (0, 2), what
    assert result.peak_rss < MEMORY_BOUND, f"peak RSS {result.peak_rss >> 20} MB: {what}"
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    errors = [line for line in lines if ": error: " in line]
    if result.code == 2:
        assert len(errors) == 1 and lines[-1] == errors[0] and errors[0].startswith("patterncnn "), what
    if result.code == 0 and result.argv[0] == "classify":
        for line in result.stdout.splitlines():  # strictly valid JSON: no NaN, no Infinity
            json.loads(line, parse_constant=lambda c: pytest.fail(f"{c} in the output: {what}"))


# Commands that load an encoder, render, or score a labelled set take seconds, not a fraction of one: fewer cases.
HEAVY = {"sheets", "set maps", "glue tsv", "census window", "census stamp"}
KINDS = ["store.json", "part.jsonl", "part.npz", "sheets", "plain.npz", "plain.npy", "census.json", "labels.csv",
         "votes.csv", "predictions.csv", "set maps", "export", "glue tsv", "census window", "census stamp"]


@pytest.mark.parametrize("name", KINDS)
def test_fuzz_every_file_the_cli_reads(base, runner, name, tmp_path):
    root, kinds = base
    rel, argv = kinds[name]
    original = (root / rel).read_bytes()

    @given(data=st.data())
    @settings(max_examples=max(4, FUZZ_CASES // 3) if name in HEAVY else FUZZ_CASES, deadline=None, database=None,
              phases=[Phase.generate],
              suppress_health_check=list(HealthCheck))
    def fuzz(data):
        structured = STRUCTURED.get(Path(rel).suffix)
        mutate = data.draw(st.sampled_from([byte_mutation, structured] if structured else [byte_mutation]))
        mutated = data.draw(mutate(original))
        case = Path(tempfile.mkdtemp(dir=tmp_path))
        try:
            shutil.copytree(root, case, dirs_exist_ok=True, symlinks=True)
            (case / rel).write_bytes(mutated)
            check(runner([a.replace("{ROOT}", str(case)) for a in argv], cwd=case, timeout=120), name)
        finally:
            shutil.rmtree(case, ignore_errors=True)

    fuzz()


def test_the_unmutated_inputs_are_read(base, runner, tmp_path):
    # Each kind's command on its unmutated input runs to exit 0: the fuzzing starts from working inputs.
    root, kinds = base
    t0 = time.monotonic()
    for name, (_, argv) in kinds.items():
        case = Path(tempfile.mkdtemp(dir=tmp_path))
        shutil.copytree(root, case, dirs_exist_ok=True)
        r = runner([a.replace("{ROOT}", str(case)) for a in argv], cwd=case)
        assert r.code == 0 and "Traceback" not in r.stderr, (name, r.stderr[-2000:])
        if name == "census window":
            assert "damaged" not in r.stderr, r.stderr  # the unfinished census resumed, not recomputed
    print(f"\nunmutated inputs: {len(kinds)} commands in {time.monotonic() - t0:.1f} s")


