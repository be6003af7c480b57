"""The errors patterncnn raises on purpose. Each message is one line that names the fix.

Every module's own error derives from :class:`PatternCNNError`, so the command line catches them once
(:func:`patterncnn.cli.main`) and a library user can catch them all with one ``except``.
"""

from __future__ import annotations

import os
import sys
import warnings


class PatternCNNError(Exception):
    """Base class: a step cannot go on as asked; the message says what to do instead."""


class ClassifierError(PatternCNNError, RuntimeError):
    """The classifier file is missing or unusable, or lacks what a step needs (its calibration); says how to fix it."""


class DataError(PatternCNNError, ValueError):
    """An input file is damaged or is not what it should be; the message names the file and the fix."""


class TruncationWarning(UserWarning):
    """Inputs longer than a run's ``max_length`` were cut to it (census, drift, special-tokens; the commands print it
    as a note)."""


def truncated_inputs(result: dict) -> int:
    """How many inputs of a census, drift or special-tokens result were cut at its ``max_length``, over its tasks (a
    task's ``truncated`` is null for windows saved before drift and special-tokens counted them)."""
    return sum(s.get("truncated") or 0 for s in result["tasks"].values())


def warn_truncated(result: dict, result_file: str) -> None:
    """The Python API's :class:`TruncationWarning` when inputs were cut (what the commands print as a note)."""
    if n := truncated_inputs(result):
        warnings.warn(f"{n} input(s) longer than max_length {result['max_length']} were truncated ({result_file}: "
                      f"each task's 'truncated'); a larger max_length keeps them whole", TruncationWarning,
                      stacklevel=caller_level())


def caller_level() -> int:
    """The ``stacklevel`` that points a warning at the first frame outside patterncnn (the user's line) from the
    function calling ``warnings.warn``, however many of patterncnn's wrappers lie between (stacklevel=3 pointed at
    one of them: python_errors' line; helper 102's review)."""
    package = os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep
    frame, level = sys._getframe(2), 2  # the caller of the function that calls warnings.warn (stacklevel 2), ...
    while frame is not None and frame.f_code.co_filename.startswith(package):
        frame, level = frame.f_back, level + 1
    return level
