"""The labelled set: the folder ``annotate pull`` merges into and ``train`` reads (e.g. ``annotations/``).

Layout::

    labels.csv          one row per labelled map (LABEL_COLUMNS): the resolved label (empty for an unresolved tie),
                        how it was resolved, the guide version(s) behind it, the pre-annotation and the Label Studio
                        task of the map's first origin, ... joined to the map metadata
    votes.csv           one row per annotation (ANNOTATION_COLUMNS): every annotator's label of every map, with
                        the server it came from and the guide version it was made under
                        (older sets call it annotations.csv: read alike, renamed at the next pull)
    predictions.csv     one row per pre-annotation (PREDICTION_COLUMNS): server, source (push / ml-backend /
                        other), model version, label, score
    maps/               a map store (patterncnn.core.maps) holding exactly the labelled maps
    exports/            every Label Studio export pulled, as it came, gzipped, named by its content identity
    pulls.jsonl         one line per pull: when, from where, which export, what was added, updated, dropped
    pull-report.json    the report of the latest pull that changed the set

An *origin* is one Label Studio task: (server, project, task id). The server is the URL pulled from
(or ``--server NAME``); rows of sets pulled before servers were recorded have an empty server, one
earlier origin. Votes and predictions keep their origin in their own rows, so labels of one map from
two servers sit side by side; ``labels.csv`` keeps the map's first origin (its task and pre-annotation).

Rows have keys (:func:`row_key`): labels the map id, annotations Label Studio's annotation UUID,
predictions server + task + map id + prediction id + model version. A pull merges by key: new rows
are added, changed rows updated, rows the export does not hold are kept (:func:`merge_rows`).
Reading checks every row (:func:`read_tables`: its columns, a known label, a unique key), so a
damaged table is refused naming the file and line, not half-read.

Usage::

    tables = read_tables("annotations")                     # what is there (empty tables if nothing)
    write_labelled_set("annotations", tables, maps, export=(name, raw), report=report)   # staged, atomic
    data = load_labelled("annotations")                     # for training
"""

from __future__ import annotations

import csv
import dataclasses
import gzip
import hashlib
import io
import json
import shutil
from collections import Counter
from pathlib import Path
from typing import Iterable, Sequence

import numpy as np

from ..core.errors import DataError
from ..core.fileio import (
    PULLED,
    interrupts_held,
    move_into_place,
    new_stage,
    public_path,
    replaceable,
    swap_into_place,
    write_bytes,
    write_json,
    write_text,
)
from ..core.labels import LABELS, label_index
from ..core.maps import MapStore
from .labelstudio import AnnotateError

# New columns go at the end, so that older sets' columns keep their places.
LABEL_COLUMNS = ("map_id", "label", "uncertain", "annotator", "pre_label", "pre_score", "pre_model", "lead_time",
                 "n_annotations", "disagreement", "labels_seen", "model", "task", "split", "example", "layer", "head",
                 "T", "ls_task_id", "ls_annotation_id", "annotated_at", "pre_source", "n_annotators", "resolution",
                 "resolution_p", "tie", "n_uncertain", "guide", "server", "ls_project", "origins")
ANNOTATION_COLUMNS = ("map_id", "annotator", "annotator_id", "label", "uncertain", "skipped", "lead_time",
                      "created_at", "updated_at", "ls_project", "ls_task_id", "ls_annotation_id", "ls_unique_id",
                      "export", "guide", "server", "ls_parent_prediction_id")
PREDICTION_COLUMNS = ("map_id", "source", "backend", "model_version", "label", "score", "created_at", "ls_project",
                      "ls_task_id", "ls_prediction_id", "export", "server")
TABLES = {"labels": ("labels.csv", LABEL_COLUMNS), "annotations": ("votes.csv", ANNOTATION_COLUMNS),
          "predictions": ("predictions.csv", PREDICTION_COLUMNS)}
LEGACY = {"annotations": "annotations.csv"}  # the votes' earlier file name: read if votes.csv is absent, then replaced
# The columns each table must have (older sets may lack the others), and those that hold a label.
REQUIRED = {"labels": ("map_id", "label"), "annotations": ("map_id", "annotator", "label", "ls_annotation_id"),
            "predictions": ("map_id", "source", "model_version", "label", "ls_prediction_id")}
# The annotation guide's version of a vote whose task did not record one: tasks were pushed without it before guide
# 1.1, so every such vote was made under 1.0 (annotations/README.md).
GUIDE_BEFORE_VERSIONS = "1.0"
# Cells that rows of older sets lack, as those rows are read: the earlier origin (no server) and guide 1.0.
DEFAULTS = {"annotations": {"guide": GUIDE_BEFORE_VERSIONS, "server": ""}, "predictions": {"server": ""}}
UNRESOLVED = "unresolved"  # labels.csv's resolution of a tie left open: the label is empty, the map not trained on


def text(value) -> str:
    """A cell as the CSV stores it, so rows read back compare equal to rows built in memory."""
    if value is None:
        return ""
    if isinstance(value, (dict, list)):
        return json.dumps(value, sort_keys=True)
    return str(value)


def row_key(table: str, row: dict) -> str:
    """The key a row is merged by (see the module docstring).

    Label Studio's integer ids count from 1 on every server, so a key built from them holds the row's
    server and task too; rows without a server (the earlier origin of older sets) keep the keys they had.
    """
    if table == "labels":
        return row["map_id"]
    server = row.get("server") or ""
    origin = f"{server}#{row.get('ls_task_id', '')}#" if server else ""
    if table == "annotations":  # the annotation's UUID is unique across servers
        return row.get("ls_unique_id") or f"{origin}{row['map_id']}#{row['ls_annotation_id']}"
    if row.get("source") == "push":  # push is idempotent by map id: one pushed prediction per task and model
        return f"{origin}{row['map_id']}#push#{row['model_version']}"
    return f"{origin}{row['map_id']}#{row['ls_prediction_id']}#{row['model_version']}"


@dataclasses.dataclass
class Tables:
    """The three tables of a labelled set, each {key: row} with every cell a string."""

    labels: dict[str, dict] = dataclasses.field(default_factory=dict)
    annotations: dict[str, dict] = dataclasses.field(default_factory=dict)
    predictions: dict[str, dict] = dataclasses.field(default_factory=dict)

    @classmethod
    def of(cls, **rows: Iterable[dict]) -> "Tables":
        """Tables from row lists, cells normalised with :func:`text`."""
        normal = {name: [{k: text(v) for k, v in r.items()} for r in rs] for name, rs in rows.items()}
        # keyed after normalising, so a row's key in memory is the key it reads back with (None is "")
        return cls(**{name: {row_key(name, r): r for r in rs} for name, rs in normal.items()})


def set_folder(root: str | Path) -> Path:
    """``root`` as a labelled set's folder; a file given in its place (``annotations/labels.csv``) is refused.

    Raises:
        DataError: ``root`` is a file; the message names the folder to pass instead.
    """
    root = Path(root)
    if root.exists() and not root.is_dir():
        holder = root.parent if any((root.parent / f).is_file() for f, _ in TABLES.values()) else None
        raise DataError(f"{root} is a file, not a labelled set: pass the labelled set's folder, the one that holds "
                        f"votes.csv and labels.csv" + (f" ({holder})" if holder else ""))
    return root


def read_tables(root: str | Path) -> Tables:
    """The tables of the labelled set in ``root`` (empty where a file is missing, e.g. an older set).

    Raises:
        DataError: ``root`` is a file, not a folder (:func:`set_folder`).
        DataError: a table is damaged: a required column missing, a row with too many or too few
            cells, a resolved label that is not one of the five, an annotation id that is not a
            number, a repeated key; the message names the file and line.
    """
    root = set_folder(root)
    tables = Tables()
    for name, (filename, _) in TABLES.items():
        path = root / filename
        if not path.is_file() and name in LEGACY:
            path = root / LEGACY[name]
        if path.is_file():
            setattr(tables, name, _read_table(name, path))
    return tables


def _read_table(name: str, path: Path) -> dict[str, dict]:
    fix = "repair it, or pull the labelled set again"
    defaults = DEFAULTS.get(name, {})
    rows: dict[str, dict] = {}
    try:
        with open(path, encoding="utf-8", newline="") as f:
            reader = csv.DictReader(f)
            missing = [c for c in REQUIRED[name] if c not in (reader.fieldnames or ())]
            if missing:
                raise DataError(f"{path} has no column {missing[0]!r}; {fix}")
            for r in reader:
                where = f"{path}:{reader.line_num}"
                if None in r or None in r.values():
                    raise DataError(f"{where}: the row does not have one cell per column; {fix}")
                tie = r["label"] == "" and r.get("resolution") == UNRESOLVED  # a tie left open has no label
                if name == "labels" and r["label"] not in LABELS and not tie:  # a vote outside the five is no vote
                    raise DataError(f"{where}: label {r['label'][:40]!r} is not one of {', '.join(LABELS)}; {fix}")
                if not r["map_id"] or name == "annotations" and not (r["ls_annotation_id"] or "0").isdigit():
                    raise DataError(f"{where}: the row has no map_id or Label Studio annotation id; {fix}")
                r = {**defaults, **{k: v for k, v in r.items() if v or k not in defaults}}  # an empty defaulted cell
                key = row_key(name, r)
                if key in rows:
                    raise DataError(f"{where}: the row repeats {key!r}; {fix}")
                rows[key] = r
    except (csv.Error, UnicodeDecodeError) as e:  # NUL bytes, a field over csv's size limit, not UTF-8
        raise DataError(f"{path} is not a readable CSV table ({str(e)[:100]}); {fix}") from None
    return rows


def labelled_ids(root: str | Path) -> set[str]:
    """The maps a labelled set holds a label for (its ``labels.csv``; an unresolved tie has none)."""
    path = set_folder(root) / TABLES["labels"][0]
    if not path.is_file():
        return set()
    return {r["map_id"] for r in _read_table("labels", path).values() if r.get("label")}


def merge_rows(old: dict[str, dict], new: dict[str, dict], replace: bool = False,
               version: str | None = None, provenance: tuple[str, ...] = ("export",)) -> tuple[dict[str, dict], dict]:
    """Merge keyed rows: add new keys, update changed rows, keep (or, with ``replace``, drop) the rest.

    Args:
        version: a column of ISO times (e.g. ``updated_at``); a row older than the one there does not
            replace it (pulling an older export again changes nothing).
        provenance: columns that say where a row was seen first (the export that brought it): a row that
            differs from the one there only in them is the same row, kept as it was.

    Returns:
        (merged rows, changes {"added": [keys], "updated": [keys], "kept": n, "dropped": [keys]}).
    """
    merged = {} if replace else dict(old)
    added, updated = [], []
    for key, row in new.items():
        before = old.get(key)
        if before is None:
            added.append(key)
        elif version and row.get(version, "") < before.get(version, ""):
            row = before
        elif any(before.get(c, "") != v for c, v in row.items() if c not in provenance):
            updated.append(key)
        else:
            row = before
        merged[key] = row
    gone = sorted(set(old) - set(new))
    return merged, {"added": sorted(added), "updated": sorted(updated), "kept": 0 if replace else len(gone),
                    "dropped": gone if replace else []}


def label_counts(rows: Iterable[dict]) -> dict[str, int]:
    c = Counter(r["label"] for r in rows)
    return {name: c.get(name, 0) for name in LABELS}


def _csv(rows: Iterable[dict], columns: tuple[str, ...], order) -> str:
    buf = io.StringIO()
    w = csv.DictWriter(buf, fieldnames=list(columns), lineterminator="\n", extrasaction="ignore")
    w.writeheader()
    w.writerows(sorted(rows, key=order))
    return buf.getvalue()


RELATIVE_TIME = "_ago"  # Label Studio's "created_ago" ("5 minutes"): changes with the clock, not the content


def _content(value):
    """A JSON value without relative times, its lists of records (tasks, annotations, predictions) in id order."""
    if isinstance(value, dict):
        return {k: _content(v) for k, v in value.items() if not k.endswith(RELATIVE_TIME)}
    if isinstance(value, list):
        items = [_content(v) for v in value]
        if items and all(isinstance(v, dict) and isinstance(v.get("id"), int) for v in items):
            items.sort(key=lambda v: v["id"])
        return items
    return value


def export_identity(export: list[dict]) -> str:
    """The identity of an export from its content: tasks, annotations and predictions with their ids,
    data and timestamps, in id order, without relative times. Two exports of an unchanged project,
    minutes apart, have the same identity (their bytes differ in ``created_ago``)."""
    canonical = json.dumps(_content(export), sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(canonical.encode("utf-8")).hexdigest()[:16]


def export_name(export: list[dict], raw: bytes | None = None, out=None) -> str:
    """Where an export is kept in the set: ``exports/<its identity>.json.gz``.

    Sets written before exports had a content identity named them by the hash of their bytes; when ``out``
    already holds this export under that name (``raw``: the bytes as they came), that name is kept.
    """
    if raw is not None and out is not None:
        earlier = f"exports/{hashlib.sha256(raw).hexdigest()[:16]}.json.gz"
        if (Path(out) / earlier).is_file():
            return earlier
    return f"exports/{export_identity(export)}.json.gz"


def write_labelled_set(out, tables: Tables, maps=None, export: tuple[str, bytes] | None = None,
                       report: dict | None = None, log_entry: dict | None = None) -> None:
    """Write a labelled set into ``out``, staged: a failure leaves ``out`` as it was.

    Everything is built in a staging folder inside ``out`` first (the tables, the export, the maps
    store with exactly the labelled maps), then moved into place file by file with atomic renames
    (:func:`patterncnn.core.fileio.move_into_place`: a symlinked file is written through):
    the maps first when the set grows, ``labels.csv`` first when it shrinks, so ``labels.csv`` never
    names a map that ``maps/`` lacks. Files that a pull does not write (a datasheet, older exports) stay.

    Args:
        maps: a map source holding every labelled map (e.g. the old ``maps/`` plus the pushed stores);
            None: the set's own ``maps/`` holds them all (refused when it has none), and only tables are written.
        export: (name from :func:`export_name`, the export bytes as they came); stored gzipped.
        log_entry: appended to ``pulls.jsonl``.
    """
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    ids = sorted(tables.labels)
    old_ids = _stored_ids(out)
    check_maps(out, ids, maps)
    stage = new_stage(out, PULLED)
    try:
        write_maps = maps is not None and old_ids != set(ids)
        if write_maps:
            store = MapStore.create(stage / "maps", info={"labelled_set": True, "source": public_path(maps.root)})
            store.append((maps.metadata(m), maps.get(m)) for m in ids)
        staged = _stage_files(out, stage, tables, export, report, log_entry)
        for filename in staged:  # refuse a FIFO or device in the set before anything is moved
            replaceable(out / filename)
        grows = old_ids is None or old_ids <= set(ids)
        with interrupts_held():  # a Ctrl-C lands once every file is in place: labels.csv never names a lost vote
            if write_maps and grows:
                _swap_maps(out, stage)
            for filename in sorted(staged, key=lambda f: f != "labels.csv" or grows):  # labels.csv first if shrinking
                if _same_bytes(stage / filename, out / filename):
                    continue  # an unchanged file is left as it is (its time stamp too)
                (out / filename).parent.mkdir(parents=True, exist_ok=True)
                move_into_place(stage / filename, out / filename)
            if write_maps and not grows:
                _swap_maps(out, stage)
            for filename in LEGACY.values():  # its rows are in the new file now
                (out / filename).unlink(missing_ok=True)
    finally:
        shutil.rmtree(stage, ignore_errors=True)


def _same_bytes(a: Path, b: Path) -> bool:
    return b.is_file() and a.stat().st_size == b.stat().st_size and a.read_bytes() == b.read_bytes()


def _stored_ids(out: Path) -> set[str] | None:
    return set(MapStore(out / "maps").ids) if (out / "maps" / "store.json").is_file() else None


def check_maps(out, ids: Iterable[str], maps) -> None:
    """Raise unless every labelled map is in ``maps`` (or, when None, in the set's own ``out/maps``)."""
    old_ids = _stored_ids(Path(out))
    if maps is None and old_ids is None:
        raise AnnotateError(f"{Path(out) / 'maps'} does not exist, and a labelled set keeps its maps (train reads "
                            f"them): pass the map store(s) the project was pushed from with --maps")
    missing = [m for m in ids if m not in maps] if maps is not None else sorted(set(ids) - (old_ids or set(ids)))
    if missing:
        raise AnnotateError(f"{len(missing)} labelled map(s) are not in the given map store(s) (nor in "
                            f"{Path(out) / 'maps'}), e.g. {missing[0]}: pass every store the project was pushed "
                            f"from with --maps")


def _stage_files(out: Path, stage: Path, tables: Tables, export, report, log_entry) -> list[str]:
    """Write the set's files (all but maps/) into ``stage``; returns their names relative to it, in move order."""
    staged = []
    if export is not None and not (out / export[0]).exists():
        write_bytes(stage / export[0], gzip.compress(export[1], mtime=0))
        staged.append(export[0])
    for name, (filename, columns) in TABLES.items():
        rows = getattr(tables, name).values()
        write_text(stage / filename, _csv(rows, columns, lambda r: (r["map_id"], r.get("created_at", ""),
                                                                      r.get("ls_annotation_id", ""))))
        staged.append(filename)
    if report is not None:
        write_json(stage / "pull-report.json", report)
        staged.append("pull-report.json")
    if log_entry is not None:
        log = out / "pulls.jsonl"
        before = log.read_text(encoding="utf-8") if log.is_file() else ""
        write_text(stage / "pulls.jsonl", before + json.dumps(log_entry, sort_keys=True) + "\n")
        staged.append("pulls.jsonl")
    return staged


def _swap_maps(out: Path, stage: Path) -> None:
    swap_into_place(stage / "maps", out / "maps")  # the old maps, if any, go with the stage


@dataclasses.dataclass
class Labelled:
    ids: list[str]
    maps: list[np.ndarray]
    seps: list[list[int] | None]
    y: np.ndarray  # (N,) label indices
    groups: np.ndarray  # (N,) input-example keys
    uncertain: np.ndarray  # (N,) bool
    data_hash: str
    meta: list[dict]
    unresolved: list[str] = dataclasses.field(default_factory=list)  # maps left out: their annotators tied
    guides: list[str] = dataclasses.field(default_factory=list)  # (N,) the guide version(s) behind each label


def tie_fix(most_annotators: int | None = None, project: str = "P") -> str:
    """What to do about ties left open: one more annotator per task than the most that tied (when known), then pull
    again; or settle them by Dawid-Skene."""
    n = most_annotators + 1 if most_annotators else "N"
    return (f"get one more annotator per task (`patterncnn annotate annotators --project {project} --per-task {n}`"
            + ("" if most_annotators else ", N one more than the annotators who tied") + ") and pull again, or pull "
            "with --resolve majority-dawid-skene")


def check_labelled_set(annotations: str | Path, option: str = "--annotations") -> Path:
    """The folder of a labelled set, refused in one line naming the fix unless it holds ``labels.csv`` and ``maps/``
    (what :func:`load_labelled` reads; cheap, for a command to check before it does any work). ``option``: the
    command's option that named it."""
    root = set_folder(annotations)
    table = root / "labels.csv"
    if not table.is_file():
        raise FileNotFoundError(f"{table} not found: {option} must be a folder written by "
                                f"`patterncnn annotate pull` (labels.csv + maps/)")
    if not (root / "maps").exists():
        raise FileNotFoundError(f"{root} has labels.csv but no maps/: pull it again with `patterncnn annotate pull "
                                f"--maps STORE` (the map store(s) the project was pushed from)")
    return root


def load_labelled(annotations: str | Path | Sequence[str | Path]) -> Labelled:
    """Read ``labels.csv`` and the labelled maps (``maps/``) written by ``patterncnn annotate pull``.

    A map whose annotators tied and whose tie was left open (resolution ``unresolved``, no label) is not
    trained on: it is listed in ``unresolved``. Several sets (a list of folders) are read one after the other
    and joined: each keeps the labels its own pulls resolved, and a map may be in only one of them.
    """
    if not isinstance(annotations, (str, Path)):
        return join_labelled([load_labelled(a) for a in annotations], [str(a) for a in annotations])
    root = check_labelled_set(annotations)
    table = root / "labels.csv"
    store = MapStore(root / "maps")
    rows = list(_read_table("labels", table).values())
    if not rows:
        raise ValueError(f"{table} holds no labelled maps")
    missing = [r["map_id"] for r in rows if r["map_id"] not in store]
    if missing:
        raise DataError(f"{table} labels {len(missing)} map(s) that {root / 'maps'} does not hold, e.g. "
                        f"{missing[0]!r}; restore maps/, or pull the labelled set again")
    unresolved = sorted(r["map_id"] for r in rows if not r.get("label"))
    all_rows, rows = rows, [r for r in rows if r.get("label")]
    if not rows:
        most = max((int(r["n_annotators"]) for r in all_rows if not r.get("label") and r.get("n_annotators")),
                   default=None)
        raise ValueError(f"{table}: all {len(unresolved)} map(s) are unresolved ties; {tie_fix(most)}")
    h = hashlib.sha256()
    ids, maps, seps, y, groups, unc, metas, guides = [], [], [], [], [], [], [], []
    for r in sorted(rows, key=lambda r: r["map_id"]):
        meta = store.metadata(r["map_id"])
        arr, errors, _ = store.input_of(meta)  # the one check of a map
        if errors:
            raise DataError(f"{root / 'maps'}: map {r['map_id']!r}: {errors[0]}; restore maps/, or pull the labelled "
                            f"set again")
        h.update(r["map_id"].encode() + r["label"].encode() + arr.tobytes())
        ids.append(r["map_id"])
        maps.append(arr)
        seps.append(meta.get("seps"))
        y.append(label_index(r["label"]))
        # The same input example seen through different encoders is one group.
        groups.append(f"{meta.get('task')}/{meta.get('split')}/{meta.get('example')}")
        unc.append(r.get("uncertain") == "True")
        metas.append(meta)
        guides.append(r.get("guide") or GUIDE_BEFORE_VERSIONS)
    return Labelled(ids, maps, seps, np.array(y), np.array(groups), np.array(unc), h.hexdigest(), metas, unresolved,
                    guides)


def join_labelled(parts: list[Labelled], names: list[str]) -> Labelled:
    """Several labelled sets as one, in order; ``data_hash`` hashes the parts' hashes (one set: its own)."""
    if len(parts) == 1:
        return parts[0]
    seen: dict[str, str] = {}
    for part, name in zip(parts, names):
        for i in part.ids:
            if i in seen:
                raise AnnotateError(f"map {i} is labelled in both {seen[i]} and {name}: a map may be in one of the "
                                    f"labelled sets given to train; leave one of them out")
            seen[i] = name
    joined = {f.name: (sum((getattr(p, f.name) for p in parts), []) if isinstance(getattr(parts[0], f.name), list)
                       else np.concatenate([getattr(p, f.name) for p in parts]))
              for f in dataclasses.fields(Labelled) if f.name != "data_hash"}
    digest = hashlib.sha256("+".join(p.data_hash for p in parts).encode()).hexdigest()
    return Labelled(**joined, data_hash=digest)
