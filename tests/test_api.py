"""The public Python API: the names in patterncnn.__all__, loaded on first use (`import patterncnn` imports neither
torch, numpy nor onnxruntime), each documented with an example; the CLI handlers call the same functions; py.typed."""

import inspect
import subprocess
import sys

import pytest
from repo import REPO

import patterncnn

HEAVY = ("torch", "numpy", "onnxruntime", "transformers", "pandas", "matplotlib")
FUNCTIONS = ("load_classifier", "load_encoder", "census", "drift", "special_tokens", "disable", "link", "write_report")


def _fresh(code: str) -> str:
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    return done.stdout.strip()


def test_import_patterncnn_loads_nothing_heavy():
    loaded = _fresh(f"import sys, patterncnn; print([m for m in {HEAVY!r} if m in sys.modules])")
    assert loaded == "[]"
    after = _fresh(f"import sys, patterncnn; patterncnn.load_classifier; print([m for m in {HEAVY!r} "
                   f"if m in sys.modules])")
    assert "torch" in after  # the first use of a name loads what it needs


def test_every_public_name_resolves_and_is_documented_with_an_example():
    assert sorted(dir(patterncnn)) == sorted(set(dir(patterncnn)))
    assert set(patterncnn.__all__) <= set(dir(patterncnn))
    for name in patterncnn.__all__:
        obj = getattr(patterncnn, name)
        if name in ("__version__", "LABELS"):
            continue
        doc = inspect.getdoc(obj)
        assert doc, f"patterncnn.{name} has no docstring"
        if name in FUNCTIONS or name == "census":
            target = obj.census if name == "census" else obj
            assert "Example::" in inspect.getdoc(target) and "patterncnn." in inspect.getdoc(target), name
    with pytest.raises(AttributeError, match="no attribute 'nothing'"):
        patterncnn.nothing  # noqa: B018


def test_methods_of_the_api_have_examples_and_type_hints():
    from patterncnn.census.result import CensusResult
    from patterncnn.classifier.onnx import OnnxClassifier

    for method in (OnnxClassifier.classify, OnnxClassifier.classify_attentions, CensusResult.load,
                   CensusResult.examples):
        assert "Example::" in inspect.getdoc(method), method.__qualname__
    for fn in [getattr(patterncnn, n) for n in FUNCTIONS if n != "census"] + [patterncnn.census.census]:
        hints = inspect.get_annotations(fn)
        assert "return" in hints and len(hints) == len(inspect.signature(fn).parameters) + 1, fn.__name__


def test_the_cli_calls_the_public_functions():
    """Each handler of an API command calls the API function itself (or, for the census, run_censuses, which it
    calls): a name it imports and calls must be the public function unwrapped (a substring check passed for
    run_drift( as for drift(; helper 102's review)."""
    import ast
    import importlib

    from patterncnn.census.run import run_censuses

    calls = {"drift": patterncnn.drift, "special_tokens": patterncnn.special_tokens, "disable": patterncnn.disable,
             "link": patterncnn.link, "census": run_censuses, "report": patterncnn.write_report}
    for module, public in calls.items():
        target = getattr(public, "__wrapped__", public)
        tree = ast.parse((REPO / "patterncnn" / "cli" / f"{module}.py").read_text())
        imported = {a.asname or a.name: getattr(importlib.import_module(
            f"patterncnn.{n.module.lstrip('.')}" if n.level == 2 else f"patterncnn.cli.{n.module}"), a.name, None)
            for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) and n.module and n.level for a in n.names}
        called = {imported.get(c.func.id) for c in ast.walk(tree)
                  if isinstance(c, ast.Call) and isinstance(c.func, ast.Name)}
        assert target in called, module
    assert "run_censuses(" in inspect.getsource(patterncnn.census.census)
    common = (REPO / "patterncnn" / "cli" / "common.py").read_text()
    assert "load_classifier(" in common and "OnnxClassifier(" not in common


def test_the_package_ships_its_type_hints():
    assert (REPO / "patterncnn" / "py.typed").is_file()
    assert '"patterncnn" = ["py.typed"]' in (REPO / "pyproject.toml").read_text()
