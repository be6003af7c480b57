"""patterncnn: classify BERT-family self-attention maps into the five patterns of Kovaleva et al. (2019),
*Revealing the Dark Secrets of BERT*.

The Python API (each name's docstring has an example; the command line calls the same functions)::

    import patterncnn
    clf = patterncnn.load_classifier()                          # the shipped ONNX classifier
    clf.classify(maps).labels                                   # maps (..., T, T) -> pattern names
    pats = clf.classify_attentions(outputs.attentions, attention_mask=mask, tokens=tokens)   # a HF batch -> per head
    patterncnn.estimate_shares(pats, clf, encoder=enc)          # the batch's shares with 95% intervals
    res = patterncnn.census("minilm", tasks=["rte"], limit=200, glue_dir="glue_data")
    res.shares, res.heads, res.plot()                           # a DataFrame with intervals, per head, a figure
    patterncnn.drift(...), patterncnn.special_tokens(...), patterncnn.disable(...), patterncnn.link(...)
    patterncnn.write_report("runs/census")                      # one self-contained HTML file

The names are loaded on first use (PEP 562), so ``import patterncnn`` imports neither torch nor
onnxruntime. Layers, each importing only from those below it (the import-linter contract in
pyproject.toml)::

    cli                                 the command line
    serve, report                       the HTTP service; the HTML report of finished runs
    census, experiments                 pattern shares over GLUE; drift, special tokens, disabling heads, links
    training                            cross-validation, evaluation, validation, model card, export
    labelling, shares                   Label Studio round trip and labelled sets; share estimators
    encoders, classifier                Hugging Face encoders and their maps; the 8-layer CNN in ONNX
    core                                labels, segments, the map store, GLUE, files, scores

Run ``patterncnn --help`` for the commands.
"""

import importlib as _importlib
from typing import TYPE_CHECKING

from .core.labels import LABELS
from .core.version import __version__

if TYPE_CHECKING:  # what the lazy names are, for type checkers and editors
    from .census import CensusResult, census
    from .classifier.attentions import HeadPatterns, Patterns
    from .classifier.onnx import OnnxClassifier, load_classifier
    from .core.errors import PatternCNNError
    from .encoders.load import Encoder, load_encoder
    from .experiments.disable import disable
    from .experiments.drift import drift
    from .experiments.link import link
    from .experiments.result import ExperimentResult
    from .experiments.special_tokens import special_tokens
    from .report import write_report
    from .shares.batch import estimate_shares

# public name -> the module that defines it (imported when the name is first used)
_LAZY = {
    "load_classifier": "patterncnn.classifier.onnx",
    "OnnxClassifier": "patterncnn.classifier.onnx",
    "Patterns": "patterncnn.classifier.attentions",
    "HeadPatterns": "patterncnn.classifier.attentions",
    "load_encoder": "patterncnn.encoders.load",
    "Encoder": "patterncnn.encoders.load",
    "census": "patterncnn.census",
    "CensusResult": "patterncnn.census.result",
    "drift": "patterncnn.experiments.drift",
    "special_tokens": "patterncnn.experiments.special_tokens",
    "disable": "patterncnn.experiments.disable",
    "link": "patterncnn.experiments.link",
    "ExperimentResult": "patterncnn.experiments.result",
    "write_report": "patterncnn.report",
    "estimate_shares": "patterncnn.shares.batch",
    "PatternCNNError": "patterncnn.core.errors",
}

__all__ = [
    "__version__", "LABELS", "load_classifier", "OnnxClassifier", "Patterns", "HeadPatterns", "load_encoder", "Encoder",
    "census", "CensusResult", "drift", "special_tokens", "disable", "link", "ExperimentResult", "write_report",
    "estimate_shares", "PatternCNNError",
]


# the public functions, each given as core.args.python_errors wraps it (its errors name its keywords, not the flags
# of the command that calls it unwrapped), with the flags it takes under another name
_FUNCTIONS = {"load_classifier": {"classifier": "path"}, "load_encoder": {"model": "name"}, "drift": {},
              "special_tokens": {"token-class": "token_classes"}, "disable": {}, "link": {}, "write_report": {},
              "estimate_shares": {}}


def __getattr__(name: str) -> object:
    if name not in _LAZY:
        raise AttributeError(f"module 'patterncnn' has no attribute {name!r}")
    module = _importlib.import_module(_LAZY[name])
    # `census` is the callable subpackage itself (patterncnn/census/__init__.py, which wraps its call as below); the
    # rest are module attributes.
    value = module if name == "census" else getattr(module, name)
    if name in _FUNCTIONS:
        from .core.args import python_errors  # numpy: with the function's own module, not with the package

        value = python_errors(value, _FUNCTIONS[name])
        value.__module__, value.__qualname__ = __name__, name  # pickled by reference to this name, as given
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(__all__)  # the public names; subpackages and the rest are internal
