"""patterncnn: classify BERT-family self-attention maps into the five patterns of
Kovaleva et al. (2019), *Revealing the Dark Secrets of BERT*.

Layers, each importing only from those below it (checked by the import-linter contract in pyproject.toml)::

    cli, serve                          the command line and the HTTP service
    census, experiments                 pattern shares over GLUE; drift, special tokens, disabling heads, links
    training                            cross-validation, evaluation, validation, model card, export
    labelling, shares                   Label Studio round trip and labelled sets; share estimators
    encoders, classifier                Hugging Face encoders and their maps; the 8-layer CNN in ONNX
    core                                labels, segments, the map store, GLUE, files, scores

Run ``patterncnn --help`` for the commands.
"""

from .core.version import __version__

__all__ = ["__version__"]
