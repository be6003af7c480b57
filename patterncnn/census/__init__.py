"""The census: how often each attention pattern occurs over GLUE dev sets, overall and per layer × head.

This subpackage is itself callable: ``patterncnn.census(...)`` runs :func:`census`. (``patterncnn.census``
is both the name of the API function and of this subpackage, and importing any ``patterncnn.census.*``
module binds the attribute ``patterncnn.census`` to the subpackage, so the subpackage is what answers
the call: its module class has a ``__call__``.) Modules: ``run`` (the census, resumable), ``windows``
(one window through encoder and CNN), ``thumbnails`` (example maps per head), ``result``
(:class:`CensusResult`), ``ray`` (the windows on a Ray cluster).
"""

from __future__ import annotations

import importlib
import inspect
import sys
import types
from pathlib import Path
from typing import TYPE_CHECKING, Callable, Sequence

from ..core import args
from ..core.errors import TruncationWarning, warn_truncated  # noqa: F401 - TruncationWarning: part of this API
from ..core.glue import dev_splits
from ..core.work import output_dir, progress_bars
from ..encoders.backends import DEFAULT_BACKEND, VETTED
from ..shares.calibrate import SCOPES
from ..shares.estimate import ESTIMATORS
from ..shares.precision import Precision

if TYPE_CHECKING:
    from ..classifier.onnx import OnnxClassifier
    from .result import CensusResult

__all__ = ["census", "CensusResult"]

MAIN_TASKS = ("sst2", "rte", "mrpc", "stsb", "qnli")  # the README's main job


def census(model: str = "minilm", tasks: str | Sequence[str] = MAIN_TASKS, limit: int | None = 1000,
           glue_dir: str | Path | None = None, out: str | Path | None = None, *,
           precision: str | float | None = None, seed: int = 0, classifier: str | Path | OnnxClassifier | None = None,
           estimator: str | None = None, calibration_scope: str | None = None, backend: str = DEFAULT_BACKEND,
           device: str = "auto", max_length: int = 128, batch_size: int = 16, threads: int = 2,
           overwrite: bool = False, save_maps: bool = False, progress: bool | Callable = False) -> CensusResult:
    """Pattern shares of one encoder over GLUE dev sets: what ``patterncnn census`` runs, as a Python call.

    Args:
        model: ``minilm`` (embedded), ``mpnet`` (the extra), a Hugging Face hub id or a local folder.
        tasks: GLUE task names (any spelling), or ``"all"``.
        limit: examples per task (a seeded sample, as in the paper: 1000); None: all. With ``precision``, the most.
        glue_dir: a ``glue_data`` folder; None: the Hugging Face dataset (needs internet).
        out: the census folder (resumable: call again with the same arguments after an interruption);
            None: a new temporary folder (``result.out``).
        precision: stop each task once the examples' part of its interval is within this many share points on
            every pattern (``1``), or within a fraction of the classifier's part (``"0.33x"``).
        classifier: an ONNX classifier (a path or :func:`load_classifier`'s result); None: the shipped one.
        estimator, calibration_scope: as ``census --estimator``/``--calibration-scope``; None: the validated best.
        backend: how the encoder runs (``onnx``, ``torch``, ``compile``: the backends ``census --backend`` offers).
        device: ``auto`` (CUDA when torch sees it), ``cpu`` or ``cuda``; the CUDA path is untested.
        progress: True for a progress bar (tqdm), or a tqdm-like factory.

    Raises:
        ArgumentError: an argument of the wrong type or value (``ValueError``; ``TypeError`` for a wrong type),
            e.g. an empty ``tasks`` or a backend the command line does not offer; the message names the keyword.

    Returns:
        :class:`CensusResult`: ``.shares`` (DataFrame), ``.heads``, ``.plot()``, ``.examples(layer, head)``,
        ``.to_json()``; it shows itself in Jupyter.

    Example::

        >>> res = patterncnn.census("minilm", tasks=["rte"], limit=50, glue_dir="../shared/glue")
        >>> res.shares.loc["rte"]["share"].round(2).to_dict()
        {'vertical': 0.55, 'diagonal': 0.28, 'vertical+diagonal': 0.07, 'block': 0.0, 'heterogeneous': 0.1}
    """
    # Loaded here, not when the package is: reading a finished result (census.results) needs no torch.
    from ..classifier.onnx import OnnxClassifier, load_classifier  # torch, onnxruntime: only to run a census
    from .result import CensusResult  # pandas, matplotlib: only for a result
    from .run import run_censuses  # the encoder's side: torch, transformers

    args.check(model=model, tasks=tasks, limit=limit, glue_dir=glue_dir, out=out, seed=seed, max_length=max_length,
               batch_size=batch_size, threads=threads, overwrite=overwrite, save_maps=save_maps, progress=progress)
    estimator = args.one_of("estimator", estimator, ESTIMATORS, none=True)
    calibration_scope = args.one_of("calibration_scope", calibration_scope, SCOPES, none=True)
    backend = args.one_of("backend", backend, VETTED)
    rule = None if precision is None else Precision.parse(precision, what="precision")
    if not isinstance(classifier, OnnxClassifier):
        args.path("classifier", classifier, none=True)  # a path, load_classifier's result or None
    clf = classifier if isinstance(classifier, OnnxClassifier) else load_classifier(classifier, device=device,
                                                                                     threads=threads)
    splits = dev_splits(tasks, glue_dir, limit, seed)
    out = output_dir(out, "census")
    ((_, folder, result),) = run_censuses(
        [model], splits, clf, out, limit, seed, max_length, backend=backend, threads=threads, device=device,
        batch_size=batch_size, progress=progress_bars(progress), save_maps=save_maps, overwrite=overwrite, estimator=estimator,
        scope=calibration_scope, precision=rule)
    warn_truncated(result, "census.json")  # what the command prints as a note
    return CensusResult(result, folder)


def __getattr__(name: str):
    if name == "CensusResult":  # loaded on first use, like patterncnn's own public names
        from .result import CensusResult  # pandas, matplotlib: on first use only

        return CensusResult
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


class _CallableModule(types.ModuleType):
    """The class of this subpackage: calling it runs :func:`census`."""

    def __call__(self, *args, **kwargs) -> CensusResult:
        return _census(*args, **kwargs)

    def __reduce__(self):
        """Pickled by reference, as the other public functions are (a process pool's task): the module itself,
        imported again by name (helper 102's review: it raised "cannot pickle '_CallableModule' object")."""
        return importlib.import_module, (self.__name__,)


_census = args.python_errors(census)  # its errors name census()'s keywords, not the command's flags


# What the call takes and does, as the function's own: ``inspect.signature(patterncnn.census)`` gives census()'s
# signature (inspect reads __signature__), and ``help(patterncnn.census)`` opens with its docstring and example.
__signature__ = inspect.signature(census)
_summary, _body = inspect.cleandoc(census.__doc__).split("\n", 1)
__doc__ = f"{_summary}\n\npatterncnn.census{__signature__}\n{_body}\n\nThe subpackage: {inspect.cleandoc(__doc__)}"
sys.modules[__name__].__class__ = _CallableModule
