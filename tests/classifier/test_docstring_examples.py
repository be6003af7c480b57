"""The docstring examples of the classifier and encoder API run as written and print what they show.

Walkthrough 7 found them stale (another classifier's version, a head's label that had changed). The census's own
examples need the real GLUE dev sets (``../shared/glue``), which tests do not use; they are not run here.
"""

import doctest

import numpy as np
import pytest

import patterncnn
from patterncnn.classifier import onnx
from patterncnn.encoders import load


@pytest.fixture(scope="module")
def globs():
    enc = patterncnn.load_encoder("minilm")
    batch = enc.tokenizer(["The cat sat on the mat."], ["A cat was sitting on a mat."], return_tensors="pt")
    maps = enc.model(**batch, output_attentions=True).attentions
    maps_lhtt = np.stack([a[0].detach().numpy() for a in maps])  # one example's (L, H, T, T) maps
    return {"np": np, "patterncnn": patterncnn, "tok": enc.tokenizer, "model": enc.model,
            "clf": patterncnn.load_classifier(), "maps_lhtt": maps_lhtt}


@pytest.mark.parametrize("name", ["load_classifier", "OnnxClassifier.classify", "OnnxClassifier.classify_attentions"])
def test_classifier_examples(globs, name):
    _run(onnx, name, globs)


def test_load_encoder_example(globs):
    _run(load, "load_encoder", globs)


def _run(module, name, globs):
    obj = module
    for part in name.split("."):
        obj = getattr(obj, part)
    (test,) = doctest.DocTestFinder(recurse=False).find(obj, name, globs=dict(globs))
    assert test.examples, f"{name} has no example"
    runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    runner.run(test, out=lambda s: pytest.fail(s))
    assert runner.failures == 0
