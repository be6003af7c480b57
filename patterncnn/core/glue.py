"""GLUE tasks: name -> text fields and label; dev/train splits from a GLUE folder or `datasets`.

Usage::

    from patterncnn.core.glue import get_task, load_split
    split = load_split("SST-2", "dev", glue_dir="glue_data", limit=1000, seed=0)
    for ex in split.examples:
        ex.texts   # ("it 's a charming ...",)  or (sentence_a, sentence_b)

A GLUE folder has the standard ``glue_data`` layout written by GLUE's ``download_glue_data.py``
(``SST-2/dev.tsv``, ``MNLI/dev_matched.tsv``, ...). The files are read with quoting off, as GLUE
itself does: quotes are part of the text. Rows with the wrong number of columns (QQP has some)
are skipped and counted. When no folder is given, the split comes from the Hugging Face dataset
``nyu-mll/glue``; when that fails too, :class:`GlueDataError` says how to get the data.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import logging
import math
import os
import re
from pathlib import Path

import numpy as np

from .errors import PatternCNNError

log = logging.getLogger(__name__)

HF_DATASET = "nyu-mll/glue"


class GlueDataError(PatternCNNError, RuntimeError):
    """A GLUE split could not be found or read; the message says how to fix it."""


@dataclasses.dataclass(frozen=True)
class GlueTask:
    """One GLUE task and how to read it.

    Attributes:
        name: canonical name (``sst2``, ``mnli-mm``, ...).
        folder: folder in ``glue_data``.
        files: split name -> file name in ``folder``.
        text_columns: header names of the text column(s) in the TSV (1 or 2).
        label_column: header name of the label column.
        label_names: the TSV's label strings in label-index order; None for numeric labels.
        hf_config / hf_splits / hf_text_fields: the same task in ``nyu-mll/glue``.
        metric: the GLUE metric family (``accuracy``, ``f1``, ``mcc``, ``corr``).
        num_labels: classes, or 1 for regression (STS-B).
        positional: for headerless files (CoLA), column index by name.
    """

    name: str
    folder: str
    files: dict[str, str]
    text_columns: tuple[str, ...]
    label_column: str
    label_names: tuple[str, ...] | None
    hf_config: str
    hf_splits: dict[str, str]
    hf_text_fields: tuple[str, ...]
    metric: str
    num_labels: int
    positional: dict[str, int] | None = None

    @property
    def is_pair(self) -> bool:
        return len(self.text_columns) == 2

    @property
    def is_regression(self) -> bool:
        return self.num_labels == 1


_TRAIN_DEV = {"dev": "dev.tsv", "train": "train.tsv"}
_HF_TRAIN_DEV = {"dev": "validation", "train": "train"}
_NLI3 = ("entailment", "neutral", "contradiction")
_NLI2 = ("entailment", "not_entailment")

TASKS: dict[str, GlueTask] = {
    t.name: t
    for t in [
        GlueTask("cola", "CoLA", _TRAIN_DEV, ("sentence",), "label", ("0", "1"), "cola", _HF_TRAIN_DEV,
                 ("sentence",), "mcc", 2, positional={"source": 0, "label": 1, "mark": 2, "sentence": 3}),
        GlueTask("sst2", "SST-2", _TRAIN_DEV, ("sentence",), "label", ("0", "1"), "sst2", _HF_TRAIN_DEV,
                 ("sentence",), "accuracy", 2),
        GlueTask("mrpc", "MRPC", _TRAIN_DEV, ("#1 String", "#2 String"), "Quality", ("0", "1"), "mrpc",
                 _HF_TRAIN_DEV, ("sentence1", "sentence2"), "f1", 2),
        GlueTask("stsb", "STS-B", _TRAIN_DEV, ("sentence1", "sentence2"), "score", None, "stsb", _HF_TRAIN_DEV,
                 ("sentence1", "sentence2"), "corr", 1),
        GlueTask("qqp", "QQP", _TRAIN_DEV, ("question1", "question2"), "is_duplicate", ("0", "1"), "qqp",
                 _HF_TRAIN_DEV, ("question1", "question2"), "f1", 2),
        GlueTask("mnli", "MNLI", {"dev": "dev_matched.tsv", "train": "train.tsv"}, ("sentence1", "sentence2"),
                 "gold_label", _NLI3, "mnli", {"dev": "validation_matched", "train": "train"},
                 ("premise", "hypothesis"), "accuracy", 3),
        GlueTask("mnli-mm", "MNLI", {"dev": "dev_mismatched.tsv", "train": "train.tsv"}, ("sentence1", "sentence2"),
                 "gold_label", _NLI3, "mnli", {"dev": "validation_mismatched", "train": "train"},
                 ("premise", "hypothesis"), "accuracy", 3),
        GlueTask("qnli", "QNLI", _TRAIN_DEV, ("question", "sentence"), "label", _NLI2, "qnli", _HF_TRAIN_DEV,
                 ("question", "sentence"), "accuracy", 2),
        GlueTask("rte", "RTE", _TRAIN_DEV, ("sentence1", "sentence2"), "label", _NLI2, "rte", _HF_TRAIN_DEV,
                 ("sentence1", "sentence2"), "accuracy", 2),
        GlueTask("wnli", "WNLI", _TRAIN_DEV, ("sentence1", "sentence2"), "label", ("0", "1"), "wnli",
                 _HF_TRAIN_DEV, ("sentence1", "sentence2"), "accuracy", 2),
    ]
}

# Spellings people use, after lower-casing and dropping '-', '_' and spaces.
_ALIASES = {
    "cola": "cola", "sst2": "sst2", "sst": "sst2", "mrpc": "mrpc", "stsb": "stsb", "sts": "stsb",
    "qqp": "qqp", "mnli": "mnli", "mnlim": "mnli", "mnlimatched": "mnli", "mnlimm": "mnli-mm",
    "mnlimismatched": "mnli-mm", "qnli": "qnli", "rte": "rte", "wnli": "wnli",
}


def expand_tasks(specs: list[str]) -> list[str]:
    """Canonical task names from command-line specs, in order, without repeats; ``all`` means every task
    (MNLI once, matched).

    Raises:
        GlueDataError: for an unknown name, listing the valid ones.
    """
    names = [n for spec in specs for n in ([n for n in TASKS if n != "mnli-mm"] if spec.lower() == "all"
                                           else [get_task(spec).name])]
    return list(dict.fromkeys(names))


def get_task(name: str) -> GlueTask:
    """Look a task up by any common spelling (``SST-2``, ``sst2``, ``STS-B``, ``MNLI-mm``...).

    Raises:
        GlueDataError: for an unknown name, listing the valid ones.
    """
    key = re.sub(r"[\s_\-]", "", name.strip().lower())
    if key not in _ALIASES:
        raise GlueDataError(f"unknown GLUE task {name!r}; valid tasks are: {', '.join(TASKS)}")
    return TASKS[_ALIASES[key]]


@dataclasses.dataclass(frozen=True)
class Example:
    """One GLUE example: its position in the split, its text(s) and its gold label."""

    task: str
    split: str
    index: int
    texts: tuple[str, ...]
    label: float | int | None


@dataclasses.dataclass
class GlueSplit:
    task: GlueTask
    split: str
    examples: list[Example]
    source: str  # file path, or "datasets:nyu-mll/glue/<config>/<split>"
    total: int  # examples in the split before sampling
    skipped: int = 0  # malformed rows skipped while parsing
    content: str | None = None  # examples_digest of the whole split, before sampling (load_split)

    def digest(self) -> str:
        """What a resumable run's windows are keyed by beside ``source`` (a path), so that a file changed in place is
        not resumed as the old one: the whole split's :func:`examples_digest` (so that another ``--limit`` is named
        as that alone), else that of the examples held."""
        return self.content or examples_digest(self.examples)


def examples_digest(examples: list[Example]) -> str:
    """SHA-256 (16 hex digits) of examples' indices, texts and labels."""
    h = hashlib.sha256()
    for e in examples:
        h.update(json.dumps([e.index, e.texts, e.label], default=str).encode())
    return h.hexdigest()[:16]


def read_tsv(task: GlueTask, path: Path, split: str) -> tuple[list[Example], int]:
    """Parse one GLUE TSV file. Returns (examples, number of malformed rows skipped)."""
    try:
        raw = path.read_text(encoding="utf-8-sig")  # utf-8-sig drops MRPC's BOM
    except UnicodeDecodeError as e:
        raise GlueDataError(f"{path} is not UTF-8 text ({e}); re-download it with GLUE's download script") from None
    lines = raw.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    if not lines:
        raise GlueDataError(f"{path} is empty; re-download the {task.folder} data")
    if task.positional is not None:
        col = task.positional
        ncols = len(col)
        body = lines
        first_line_no = 1
    else:
        header = lines[0].rstrip("\r").split("\t")
        col = {name: i for i, name in enumerate(header)}
        missing = [c for c in (*task.text_columns, task.label_column) if c not in col]
        if missing:
            raise GlueDataError(
                f"{path} does not look like GLUE {task.folder}: header lacks {missing} (header: {header}); "
                f"check that --glue-dir points at a glue_data folder"
            )
        ncols = len(header)
        body = lines[1:]
        first_line_no = 2
    examples: list[Example] = []
    skipped = 0
    for line_no, line in enumerate(body, start=first_line_no):
        fields = line.rstrip("\r").split("\t")
        if len(fields) != ncols:
            skipped += 1
            log.debug("%s:%d: %d columns, expected %d; skipped", path, line_no, len(fields), ncols)
            continue
        label_raw = fields[col[task.label_column]]
        if task.is_regression:
            label: float | int | None = _score(label_raw)
            if label is None:
                skipped += 1
                log.debug("%s:%d: score %r is not a number; skipped", path, line_no, label_raw[:40])
                continue
        elif task.label_names is not None and label_raw in task.label_names:
            label = task.label_names.index(label_raw)
        else:
            skipped += 1
            log.debug("%s:%d: unknown label %r; skipped", path, line_no, label_raw)
            continue
        texts = tuple(fields[col[c]] for c in task.text_columns)
        if not all(t.strip() for t in texts):  # an input of [CLS] [SEP]: its maps say nothing of attention patterns
            skipped += 1
            log.debug("%s:%d: an empty text; skipped", path, line_no)
            continue
        examples.append(Example(task.name, split, len(examples), texts, label))
    if not examples:
        raise GlueDataError(f"{path} holds no readable {task.folder} rows; re-download it")
    if skipped:
        log.warning("%s: skipped %d malformed row(s) of %d (a wrong number of columns, an unknown label or an "
                    "empty text)", path, skipped, len(body))
    return examples, skipped


def _score(text: str) -> float | None:
    """A regression label (STS-B's score), or None when it is not a finite number."""
    try:
        value = float(text)
    except ValueError:
        return None
    return value if math.isfinite(value) else None


def _load_hf(task: GlueTask, split: str) -> tuple[list[Example], str]:
    hf_split = task.hf_splits[split]
    try:
        import datasets  # imported here: it is slow and only this path needs it
    except ImportError as e:  # pragma: no cover - datasets is a declared dependency
        raise GlueDataError(_no_data_message(task, split, f"`datasets` is not installed ({e})")) from None
    try:
        ds = datasets.load_dataset(HF_DATASET, task.hf_config, split=hf_split)
    except Exception as e:  # noqa: BLE001 - any failure here means: no data; the message says how to get it
        raise GlueDataError(_no_data_message(task, split, f"{type(e).__name__}: {e}")) from None
    examples, empty = [], 0
    for i, row in enumerate(ds):
        label = row["label"]
        label = float(label) if task.is_regression else int(label)
        texts = tuple(row[f] for f in task.hf_text_fields)
        if not all(isinstance(t, str) and t.strip() for t in texts):  # as read_tsv: an empty text is skipped
            empty += 1
            continue
        examples.append(Example(task.name, split, i, texts, label))
    if empty:
        log.warning("%s %s: skipped %d row(s) with an empty text", HF_DATASET, task.hf_config, empty)
    return examples, f"datasets:{HF_DATASET}/{task.hf_config}/{hf_split}"


def _no_data_message(task: GlueTask, split: str, reason: str) -> str:
    return (
        f"cannot load GLUE {task.name} ({split}): no GLUE folder was given (--glue-dir or GLUE_DIR) and "
        f"the Hugging Face dataset {HF_DATASET} could not be loaded: {reason}. Fix: download GLUE with "
        f"GLUE's download_glue_data.py (or `datasets.load_dataset('{HF_DATASET}', '{task.hf_config}')` on a "
        f"machine with internet) and pass --glue-dir PATH/TO/glue_data, or set GLUE_DIR."
    )


def _holding(root: Path, rel: Path) -> list[Path]:
    """The folders directly inside ``root`` that hold ``rel`` (unreadable ones are skipped)."""
    found = []
    try:
        for sub in sorted(root.iterdir()):
            try:
                if (sub / rel).is_file():
                    found.append(sub)
            except OSError:
                continue
    except OSError:
        return []
    return found


def glue_folder(glue_dir: str | Path | None) -> str | Path | None:
    """The GLUE folder to read: ``glue_dir``, else ``$GLUE_DIR`` (for the commands and the Python API alike; an
    empty one is unset), else None (``datasets``)."""
    return glue_dir or os.environ.get("GLUE_DIR") or None


def load_split(
    task: str | GlueTask,
    split: str = "dev",
    glue_dir: str | Path | None = None,
    limit: int | None = None,
    seed: int = 0,
) -> GlueSplit:
    """Load a task's dev or train split, optionally sampled down to ``limit`` examples.

    Args:
        task: a task name in any common spelling, or a :class:`GlueTask`.
        split: ``dev`` or ``train``.
        glue_dir: a ``glue_data`` folder; None: ``$GLUE_DIR`` when set (for the commands and the Python API
            alike), else ``datasets``.
        limit: take at most this many examples, sampled without replacement using ``seed``
            and kept in file order. None takes all.
        seed: the sampling seed; the same (split, limit, seed) always gives the same sample.

    Raises:
        GlueDataError: unknown task or split, missing folder or file, unreadable data, bad limit.
    """
    t = task if isinstance(task, GlueTask) else get_task(task)
    if split not in t.files:
        raise GlueDataError(f"unknown split {split!r} for {t.name}; valid splits are: {', '.join(t.files)}")
    if limit is not None and limit < 1:
        raise GlueDataError(f"--limit must be at least 1 (got {limit}); leave it out to take the whole split")
    skipped = 0
    glue_dir = glue_folder(glue_dir)
    if glue_dir is not None:
        root = Path(glue_dir).expanduser()
        if not root.is_dir():
            what = "is a file, not a folder" if root.exists() else "does not exist"
            raise GlueDataError(
                f"GLUE folder {root} {what}; pass --glue-dir PATH/TO/glue_data (the folder that holds "
                f"{t.folder}/) or set GLUE_DIR"
            )
        path = root / t.folder / t.files[split]
        if path.exists() and not path.is_file():
            what = "a folder" if path.is_dir() else "a FIFO, device or socket"
            raise GlueDataError(f"{path} is not a regular file (it is {what}); put GLUE's {t.folder} "
                                f"{t.files[split]} there (download_glue_data.py), or leave out --glue-dir to use "
                                f"`datasets` ({HF_DATASET})")
        if not path.is_file():
            if (root / t.files[split]).is_file():  # the task's own folder was given
                fix = (f"pass --glue-dir {root.parent}" if root.name == t.folder else
                       f"name it {t.folder} and pass --glue-dir with its parent")
                raise GlueDataError(f"{path} not found: {root} is a task folder ({t.files[split]} is directly in it); "
                                    f"{fix} (the folder that holds {t.folder}/)")
            inside = _holding(root, Path(t.folder) / t.files[split])
            if inside:  # the parent of a glue_data folder was given
                raise GlueDataError(f"{path} not found, but {inside[0] / t.folder / t.files[split]} exists: pass "
                                    f"--glue-dir {inside[0]} (the folder that holds {t.folder}/)")
            kin = [o.name for o in TASKS.values() if o.folder == t.folder and o.name != t.name
                   and split in o.files and (root / o.folder / o.files[split]).is_file()]
            raise GlueDataError(
                f"{path} not found: the GLUE folder {root} has no {t.folder}/{t.files[split]}"
                + (f" (it has {t.folder}/{TASKS[kin[0]].files[split]}, which --task {kin[0]} reads)" if kin else "")
                + f". Download the {t.folder} data into it with GLUE's download_glue_data.py, or leave out "
                f"--glue-dir to use `datasets` ({HF_DATASET})"
            )
        examples, skipped = read_tsv(t, path, split)
        source = str(path)
    else:
        examples, source = _load_hf(t, split)
    total, content = len(examples), examples_digest(examples)
    if limit is not None and limit < total:
        rng = np.random.default_rng(seed)
        keep = np.sort(rng.choice(total, size=limit, replace=False))
        examples = [examples[i] for i in keep]
    return GlueSplit(t, split, examples, source, total, skipped, content)


def dev_splits(tasks: str | list[str], glue_dir: str | Path | None = None, limit: int | None = None,
               seed: int = 0) -> list[GlueSplit]:
    """The dev split of each task (names in any spelling, or ``all``), sampled down to ``limit`` as
    :func:`load_split` does: what the census and the experiments read."""
    specs = [tasks] if isinstance(tasks, str) else list(tasks)
    names = expand_tasks(specs)
    glue_dir = glue_folder(glue_dir)
    root = Path(glue_dir).expanduser() if glue_dir is not None else None
    if root is not None and root.is_dir() and any(isinstance(s, str) and s.lower() == "all" for s in specs):
        has = [n for n in names if (root / TASKS[n].folder / TASKS[n].files["dev"]).is_file()]
        lacks = [f"{TASKS[n].folder}/{TASKS[n].files['dev']}" for n in names if n not in has]
        if has and lacks:  # a folder of some tasks; none at all is a wrong folder, which load_split explains
            raise GlueDataError(f"--task all covers {', '.join(names)}, and the GLUE folder {root} has no "
                                f"{', '.join(lacks)}: give the tasks it has (--task: {', '.join(has)}), or download "
                                f"the others into it with GLUE's download_glue_data.py")
    return [load_split(t, "dev", glue_dir, limit=limit, seed=seed) for t in names]
