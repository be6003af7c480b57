"""The one check of the Python API's arguments: each public entry point passes its keywords through these.

A wrong value raises :class:`ArgumentError` (a ``ValueError``), a wrong type :class:`ArgumentTypeError`
(also a ``TypeError``); both are :class:`~patterncnn.core.errors.PatternCNNError`, and the message is one
line naming the keyword argument and what to pass (the command line's own checks name its flags).

Errors of a run called from Python name its keywords where the command line's name its flags:
:func:`python_errors` wraps each public function (``patterncnn.census(out=...)`` says "pass overwrite=True", where
``patterncnn census --out ...`` says "pass --overwrite"); the command line calls the functions unwrapped. So
messages are written with the flags: :func:`check` names the flag of a keyword the command line passes on as it
was given (``--max-length must be ...``, which a Python call reads as ``max_length must be ...``), and what a run
logs goes through :func:`spelled`, which spells it for the Python call it is in.

Usage::

    limit = args.whole("limit", limit, least=1, none=True)     # an int >= 1 or None
    backend = args.one_of("backend", backend, VETTED)          # one of the choices
    tasks = args.texts("tasks", tasks)                          # a str or a non-empty list of str
"""

from __future__ import annotations

import contextvars
import functools
import inspect
import operator
import os
import re
import sys
from pathlib import Path
from typing import Any, Callable, Iterable, Sequence

import numpy as np

from .errors import PatternCNNError
from .fileio import writer_scope

MIN_TOKENS = 4  # the shortest max_length an encoder runs at ([CLS] A [SEP] B [SEP] needs room)
SEED_MAX = 2**32 - 1  # numpy's generators take seeds 0 to 2**32 - 1 (the command line's --seed, too)


class ArgumentError(PatternCNNError, ValueError):
    """A Python call's keyword argument has a value it cannot take; the message names the keyword and the fix."""


class ArgumentTypeError(ArgumentError, TypeError):
    """A Python call's keyword argument has the wrong type; the message names the keyword and what to pass."""


def _shown(value: Any) -> str:
    """The start of ``value``'s repr on one line (a model's repr runs over many)."""
    return " ".join(repr(value).split())[:60]


def whole(name: str, value: Any, least: int = 0, most: int | None = None, none: bool = False) -> int | None:
    """``value`` as an int from ``least`` to ``most`` (None: no upper bound); None passes when ``none``."""
    if value is None and none:
        return None
    what = f"a whole number of at least {least}" if most is None else f"a whole number from {least} to {most}"
    what += " or None" if none else ""
    try:
        if isinstance(value, bool):
            raise TypeError
        number = operator.index(value)  # int and numpy integers; not float, str or bool
    except TypeError:
        raise ArgumentTypeError(f"{name} must be {what}, not {type(value).__name__} {_shown(value)}") from None
    if number < least or (most is not None and number > most):
        raise ArgumentError(f"{name} must be {what} (got {number})")
    return number


def flag(name: str, value: Any) -> bool:
    """``value`` as a bool (True or False, not a truthy string)."""
    if not isinstance(value, (bool, np.bool_)):
        raise ArgumentTypeError(f"{name} must be True or False, not {_shown(value)}")
    return bool(value)


def text(name: str, value: Any, none: bool = False) -> str | None:
    """``value`` as a non-empty str; None passes when ``none``."""
    if value is None and none:
        return None
    if not isinstance(value, str):
        raise ArgumentTypeError(f"{name} must be a str{' or None' if none else ''}, not {type(value).__name__} "
                                f"{_shown(value)}")
    if not value:
        raise ArgumentError(f"{name} must not be empty")
    return value


def model(name: str, value: Any) -> str:
    """An encoder given by name: a hub id, an embedded name or a folder. A model object in memory (a researcher's
    commonest case) is refused naming the way to pass it."""
    _no_model_object(name, value)
    return text(name, value)


def _no_model_object(name: str, value: Any) -> None:
    if hasattr(value, "config") and hasattr(value, "forward"):
        raise ArgumentTypeError(f"{name} must be a str (a hub id, an embedded encoder's name or a folder), not a "
                                f"{type(value).__name__} object: save it with its tokenizer "
                                f"(model.save_pretrained(FOLDER); tokenizer.save_pretrained(FOLDER)) and pass FOLDER")


def one_of(name: str, value: Any, choices: Sequence[str], none: bool = False) -> str | None:
    """``value`` as one of ``choices`` (strings); None passes when ``none``."""
    if value is None and none:
        return None
    if not isinstance(value, str):
        raise ArgumentTypeError(f"{name} must be one of {', '.join(choices)}" + (" or None" if none else "")
                                + f", not {type(value).__name__} {_shown(value)}")
    if value not in choices:
        raise ArgumentError(f"{name}={_shown(value)} is not offered; choose one of {', '.join(choices)}"
                            + (" (or None)" if none else ""))
    return value


def texts(name: str, value: Any) -> list[str]:
    """``value`` as a non-empty list of non-empty strings (one str is a list of one)."""
    if isinstance(value, str):
        return [text(name, value)]
    if isinstance(value, (bytes, dict)) or not isinstance(value, Iterable):  # any other iterable: a list, an array
        raise ArgumentTypeError(f"{name} must be a str or a list of str, not {type(value).__name__} {_shown(value)}")
    value = list(value)
    if not value:
        raise ArgumentError(f"{name} is empty; pass at least one, e.g. {name}=['rte']")
    for item in value:
        text(f"each of {name}", item)
    return [str(v) for v in value]


def path(name: str, value: Any, none: bool = False) -> str | os.PathLike | None:
    """``value`` as a path (a str or an os.PathLike such as pathlib.Path); None passes when ``none``."""
    if value is None and none:
        return None
    if isinstance(value, str) and not value:
        raise ArgumentError(f"{name} is empty; give a path")
    if not isinstance(value, (str, os.PathLike)):
        _no_model_object(name, value)  # a model object: refused naming how to pass it
        raise ArgumentTypeError(f"{name} must be a path (a str or pathlib.Path){' or None' if none else ''}, not "
                                f"{type(value).__name__} {_shown(value)}")
    return value


def progress(name: str, value: Any) -> Any:
    """``value`` as a run's progress bars: True (tqdm's), False or None (none), or a tqdm-like callable."""
    if not (value is None or isinstance(value, (bool, np.bool_)) or callable(value)):
        raise ArgumentTypeError(f"{name} must be True, False, None or a tqdm-like callable (e.g. tqdm.auto.tqdm), "
                                f"not {type(value).__name__} {_shown(value)}")
    return bool(value) if isinstance(value, np.bool_) else value


# The keyword arguments the public entry points share, each with its check: one meaning wherever it appears.
CHECKS = {
    "model": model, "model_a": model, "model_b": model, "task": text, "tasks": texts,
    "limit": lambda n, v: whole(n, v, least=1, none=True),
    "seed": lambda n, v: whole(n, v, most=SEED_MAX),
    "glue_dir": lambda n, v: path(n, v, none=True), "out": lambda n, v: path(n, v, none=True),
    "run_dir": path,
    "max_length": lambda n, v: whole(n, v, least=MIN_TOKENS), "batch_size": lambda n, v: whole(n, v, least=1),
    "threads": lambda n, v: whole(n, v, least=1), "bootstrap": lambda n, v: whole(n, v, least=1),
    "permutations": lambda n, v: whole(n, v, least=1),
    "overwrite": flag, "save_maps": flag, "layers": flag, "progress": progress,
}


# The keywords whose flag is the keyword in dashes and takes a value (--max-length): their checks name the flag, since
# the command line passes the value on to the same check (its own parse-time check may be the same, as --max-length's);
# python_errors spells the flag back as the keyword for a Python call. The rest name the keyword: the switches, whose
# flag is spelled keyword=True, and the keywords without a flag of their own name (tasks, model_a, run_dir, progress).
FLAGGED = frozenset({"model", "task", "limit", "seed", "glue_dir", "out", "max_length", "batch_size", "threads",
                     "bootstrap", "permutations"})


def check(**values: Any) -> None:
    """Check each keyword argument by its entry in :data:`CHECKS` (the first wrong one raises), naming its flag where
    it has one (:data:`FLAGGED`)."""
    for name, value in values.items():
        CHECKS[name](f"--{name.replace('_', '-')}" if name in FLAGGED else name, value)


_FLAG = re.compile(r"--([a-z][a-z0-9-]*)(?: ([^\s;,:()][^\s;,:)]*))?")
_NUMBER = re.compile(r"-?\d+(?:\.\d+)?")
_PLACEHOLDER = re.compile(r"[A-Z][A-Z0-9_]*")  # FILE, PATH: written bare, as the caller fills it in


def keyword_spelling(message: str, parameters: Iterable[str], aliases: dict[str, str] | None = None,
                     switches: Iterable[str] = (), values: dict[str, Any] | None = None,
                     negatable: Iterable[str] = ()) -> str:
    """``message`` with each command-line flag of a function's own keyword argument spelled as that keyword.

    ``--overwrite`` becomes ``overwrite=True`` (a switch), ``--out runs/x``
    becomes ``out='runs/x'`` (``--limit 20`` ``limit=20``, ``--out FILE`` ``out=FILE``), ``choose another --out``
    becomes ``choose another out`` and ``--device cuda`` ``device cuda`` (a word after a flag is taken for its value
    only when it is a path, a number or a PLACEHOLDER: the sentence's own words stay words); ``--task`` is ``tasks``
    where the function takes ``tasks``; ``--no-layers`` is ``layers=False`` where ``layers`` is in ``negatable`` (a
    keyword that is on by default); ``aliases`` maps a flag to a keyword of another name
    (``load_classifier``'s ``path`` for ``--classifier``). Flags the
    function has no keyword for, and whole commands in backquotes (`` `patterncnn finetune --task T` ``), are left
    as they are: they are what to run in a terminal. ``values``: the arguments of the call (keyword -> value); a flag
    followed by its own argument's text, spaces and all, as the call wrote it or as a path normalises it (``my
    runs/`` and ``./my runs`` print as ``my runs``), is spelled with it (``--out my runs`` ``out='my runs'``,
    ``--out DATA`` ``out='DATA'`` when ``out`` was ``"DATA"``), whatever the words look like; the spelled value is
    not read for flags again.
    """
    parameters, aliases, switches, negatable = set(parameters), aliases or {}, set(switches), set(negatable)
    flags = {name: flag for flag, name in aliases.items()}
    done = "\ue000"  # brackets a spelled value (a private-use character): the flag rewriting leaves it as it is

    def given(part: str) -> str:
        spellings = []
        for name, value in (values or {}).items():
            if name in switches or isinstance(value, bool) or not isinstance(value, (str, os.PathLike, int, float)):
                continue
            text = os.fspath(value) if isinstance(value, os.PathLike) else str(value)
            spelled = f"{name}={value}" if isinstance(value, (int, float)) else f"{name}={text!r}"
            flag = flags.get(name, name.replace("_", "-"))
            forms = {text, os.fspath(Path(text))} if isinstance(value, (str, os.PathLike)) and text else {text}
            spellings += [(f"--{flag} {form}", spelled) for form in forms if form]
        for written, spelled in sorted(spellings, key=lambda w: len(w[0]), reverse=True):  # a longer value first
            # the value ends where the sentence goes on: a space, a bracket, a quote or the end, after any stops
            # (. ? !) and closing square brackets (followed by a letter, they are the name's: runs/x.y, x?y)
            pattern = rf"{re.escape(written)}(?=[.?!\]]*(?:[\s;,:)'\"]|$))"
            part = done.join(re.sub(pattern, lambda m: done + spelled + done, piece) if i % 2 == 0 else piece
                             for i, piece in enumerate(part.split(done)))
        return part

    def spell(m: re.Match) -> str:
        flag, value = m.group(1), m.group(2)
        name = aliases.get(flag, flag.replace("-", "_"))
        if name not in parameters and f"{name}s" in parameters:
            name = f"{name}s"
        if name not in parameters and name.startswith("no_") and name[3:] in negatable:  # --no-layers
            return f"{name[3:]}=False" + (f" {value}" if value else "")
        if name not in parameters:
            return m.group(0)
        if name in switches:
            return f"{name}=True" + (f" {value}" if value else "")
        if value and (_NUMBER.fullmatch(value) or _PLACEHOLDER.fullmatch(value)):
            return f"{name}={value}"
        if value and "/" in value:  # a path
            return f"{name}={value!r}"
        return name + (f" {value}" if value else "")  # a word of the sentence ("another --out or"), or a choice

    def rewrite(part: str) -> str:
        if done in message:  # it could not be told from a bracket: spelled by the words alone
            return _FLAG.sub(spell, part)
        return "".join(piece if i % 2 else _FLAG.sub(spell, piece) for i, piece in enumerate(given(part).split(done)))

    parts = message.split("`")
    return "`".join(part if i % 2 else rewrite(part) for i, part in enumerate(parts))


# The spelling of the public function's Python call under way (python_errors), None on the command line.
_SPELLING: contextvars.ContextVar[Callable[[str], str] | None] = contextvars.ContextVar("spelling", default=None)


def spelled(message: str) -> str:
    """``message`` (written with the command line's flags) as its caller reads it: within a public function's Python
    call (:func:`python_errors`), with that function's keywords (:func:`keyword_spelling`); from the command line, as
    it is. For what a run says without raising, such as a logged warning (its errors are spelled as they leave the
    call)."""
    spell = _SPELLING.get()
    return message if spell is None else spell(message)


def python_errors(func: Callable, aliases: dict[str, str] | None = None) -> Callable:
    """``func`` as the public API gives it: its :class:`PatternCNNError` messages, and what it passes through
    :func:`spelled` while it runs, name its keyword arguments, not the command line's flags (:func:`keyword_spelling`);
    the error, its type and traceback are otherwise the same."""
    signature = inspect.signature(func)
    switches = [n for n, p in signature.parameters.items() if p.default is False]
    negatable = [n for n, p in signature.parameters.items() if p.default is True]

    @functools.wraps(func)
    def call(*args: Any, **kwargs: Any) -> Any:
        try:
            values = signature.bind_partial(*args, **kwargs).arguments
        except TypeError:  # not a call the function could have taken: spell by the words alone
            values = {}

        def spell(message: str) -> str:
            return keyword_spelling(message, signature.parameters, aliases, switches, values, negatable)

        token = _SPELLING.set(spell)
        try:
            with writer_scope(f"patterncnn.{func.__name__}() in {Path(sys.argv[0]).name or 'python'} (Python API)"):
                return func(*args, **kwargs)  # the folders it writes are locked until it returns
        except PatternCNNError as e:
            if e.args and isinstance(e.args[0], str):
                e.args = (spell(e.args[0]), *e.args[1:])
            raise
        finally:
            _SPELLING.reset(token)

    return call
