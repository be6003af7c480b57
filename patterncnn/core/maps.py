"""The on-disk format for sets of attention maps, and the checks every map must pass.

A **map store** is a folder::

    store.json              {"format": "patterncnn-maps", "version": 1, "created_by": ..., ...}
    part-00000.jsonl        one JSON object per map (metadata, see below), in array order
    part-00000.npz          compressed npz: one float32 array (T, T) per map, keyed by map id
    part-00001.jsonl/.npz   each append adds one part; a part counts only once its .npz exists

Each metadata line holds at least ``id``; maps from an encoder (``patterncnn sample``, ``census
--save-maps``) carry the fields of :func:`map_record`: ``model``, ``model_sha256``,
``model_revision``, ``task``, ``split``, ``example`` (index in the split), ``layer``, ``head``
(0-based), ``T``, ``tokens`` (T strings), ``seps`` (positions of the separator tokens, i.e.
segment ends), ``truncated`` and ``texts``. Every file is written to a temporary name and renamed
into place, so a crash never leaves a half-written part.

A **plain npz** file (``maps.npz``) whose every array is a square 2-D map keyed by its id is
the simplest exchange format, and a **plain npy** (``maps.npy``, (T, T) or (N, T, T), ids ``0``,
``1``, ...) the barest; :func:`open_maps` accepts both wherever a store is accepted.

Every file is read through :mod:`patterncnn.core.arrayfile` (limits checked before anything is
allocated) and checked as it enters: ``store.json`` must be a store header, each metadata line a
JSON object whose fields have their documented types (:data:`FIELDS`), every id unique and
present in its part's ``.npz``. A damaged store is refused with the file and line at fault; a part
file that is missing is damage, except a ``.jsonl`` past the last part (an append cut off before its
``.npz``), which does not count. :func:`require_maps` refuses a source that holds no maps.

Usage::

    store = MapStore.create("out/maps")
    store.append([(meta, arr), ...])
    for meta, arr in open_maps("out/maps"):     # or open_maps("maps.npz")
        ...
"""

from __future__ import annotations

import io
import json
import os
import re
from collections import OrderedDict
from pathlib import Path
from typing import Iterable, Iterator

import numpy as np

from .arrayfile import FILE_LIMITS, ArrayFileError, MapFormatError, NpyMaps, NpzMaps, square_problem
from .fileio import atomic_open, parse_json, public_path, write_bytes, write_json
from .glue import TASKS
from .version import __version__

FORMAT = "patterncnn-maps"
FORMAT_VERSION = 1
PART_BYTES = 256 << 20  # append() starts a new part past this many float32 bytes (readers refuse > 1 GiB)
OPEN_PARTS = 8  # parts whose .npz a store keeps open at once
# The documented fields of a metadata line (docs/pages/map-store.md) and the JSON types each may hold.
FIELDS: dict[str, tuple[str, ...]] = {
    "id": ("str",), "model": ("str",), "model_sha256": ("str", "null"), "model_revision": ("str", "null"),
    "task": ("str",), "split": ("str",), "example": ("int",), "layer": ("int",), "head": ("int",), "T": ("int",),
    "tokens": ("list[str]",), "seps": ("list[int]", "null"), "truncated": ("bool",), "texts": ("list[str]",),
    "sampling": ("str",),
}
_DIGEST = re.compile(r"-[0-9a-f]{8}$")  # an encoder tag ends with 8 hex digits of its weights' digest


def map_id(tag: str, task: str, split: str, example: int, layer: int, head: int) -> str:
    """The id of one map: ``minilm-53aa5117_rte_dev_00012_L03_H07`` (layer, head 0-based)."""
    return f"{tag}_{task}_{split}_{example:05d}_L{layer:02d}_H{head:02d}"


def tag_of(map_id_: str) -> str:
    """The encoder tag a map id starts with (an encoder tag holds no ``_``): ``minilm-53aa5117``."""
    return map_id_.split("_", 1)[0]


def encoder_family(map_id: str) -> str:
    """The base encoder of a map (or encoder tag): the unit that "per encoder" reports group by.

    A map id starts with its encoder tag (``minilm-53aa5117_…``, :func:`patterncnn.core.maps.tag_of`): the
    encoder's name, then 8 hex digits of its weights' digest. Fine-tunes are named ``<base>-<task>``
    (``minilm-sst2-0633eb25``), so the family is the name with the digest and a trailing GLUE task
    removed: ``minilm-53aa5117`` and ``minilm-sst2-0633eb25`` are ``minilm``, ``mpnet-78c0197b`` is
    ``mpnet``. A tag without a digest (or an id without a tag) is its own family.
    """
    name = _DIGEST.sub("", map_id.split("_", 1)[0])
    base, _, last = name.rpartition("-")
    return base if base and last.lower() in TASKS else name


def is_fine_tune(map_id: str) -> bool:
    """Whether a map (or encoder tag) is of a fine-tune, not its family's base encoder (:func:`encoder_family`)."""
    return _DIGEST.sub("", map_id.split("_", 1)[0]) != encoder_family(map_id)


def families(ids) -> np.ndarray:
    """(N,) the family of each map id."""
    return np.array([encoder_family(i) for i in ids], dtype=str)


def map_record(encoder, task: str, split: str, ea, layer: int, head: int) -> dict:
    """The metadata line of one map: the single definition of what a stored map records.

    Args:
        encoder: the :class:`patterncnn.encoders.load.Encoder` that produced it (tag, name, fingerprint).
        ea: the example's :class:`patterncnn.encoders.load.ExampleAttention`.
    """
    fp = encoder.fingerprint
    return {"id": map_id(encoder.tag, task, split, ea.example.index, layer, head), "model": public_path(encoder.name),
            "model_sha256": fp.get("sha256"), "model_revision": fp.get("revision"), "task": task, "split": split,
            "example": ea.example.index, "layer": layer, "head": head, "T": len(ea.tokens), "tokens": ea.tokens,
            "seps": ea.seps, "truncated": ea.truncated, "texts": list(ea.example.texts)}


def _is(value, kind: str) -> bool:
    """Whether a JSON value has one of the FIELDS kinds (a bool is not an int)."""
    if kind == "null":
        return value is None
    if kind == "bool":
        return isinstance(value, bool)
    if kind == "int":
        return isinstance(value, int) and not isinstance(value, bool) and value >= 0
    if kind == "str":
        return isinstance(value, str)
    item = kind[5:-1]  # list[...]
    return isinstance(value, list) and all(_is(v, item) for v in value)


def check_meta(meta) -> str | None:
    """What is wrong with one metadata line (an object with a string ``id``, documented fields of their type), or None."""
    if not isinstance(meta, dict):
        return f"a metadata line must be a JSON object, not {type(meta).__name__}"
    if "id" not in meta:
        return 'the line has no "id" (a non-empty string)'
    if not isinstance(meta["id"], str) or not meta["id"]:
        return f'"id" must be a non-empty string, not {meta["id"]!r:.40}'
    for field, kinds in FIELDS.items():
        if field in meta and not any(_is(meta[field], k) for k in kinds):
            return f'field "{field}" must be {" or ".join(kinds)} (non-negative for int), not {meta[field]!r:.40}'
    return None


def check_seps(seps, t: int) -> str | None:
    """What is wrong with a map's separator positions (a list of token positions 0 <= p < T, or None), or None."""
    if seps is None:
        return None
    if not isinstance(seps, (list, tuple)) or not all(isinstance(p, (int, np.integer)) and not isinstance(p, bool)
                                                       for p in seps):
        return "seps must be a list of integer token positions (or null)"
    outside = [int(p) for p in seps if not 0 <= p < t]
    if outside:
        return f"separator position {outside[0]} is outside the map (positions run from 0 to T - 1 = {t - 1})"
    return None


ROW_TOL = 1e-2  # how far a row of a map may sum from 1 (float16 maps, averaged or rescaled ones) before a warning


def check_map(a: np.ndarray, row_tol: float = ROW_TOL, max_t: int | None = None,
              seps=None) -> tuple[list[str], list[str]]:
    """Check one attention map: the one validation every map passes, from JSON, .npy, .npz or a store.

    Args:
        a: the map, (T, T).
        max_t: the largest T accepted (None: any).
        seps: the map's separator positions, if it has any: each must fall inside the map.

    Returns:
        (errors, warnings). Errors make the map unusable: not a real number type, not 2-D and
        square, empty, T over ``max_t``, separators outside the map, NaN/inf or negative values.
        The warning flags rows that do not sum to ~1 (the map is still usable: it may be a
        rescaled or averaged map).
    """
    a = np.asarray(a)
    if a.dtype.kind not in "fiu":
        return [f"dtype {a.dtype} is not a real number type; send float maps"], []
    if square_problem(a.shape):
        return [square_problem(a.shape)], []
    if a.size == 0:
        return ["map is empty (T = 0)"], []
    if max_t is not None and a.shape[0] > max_t:
        return [f"T={a.shape[0]} exceeds the limit T <= {max_t}"], []
    bad_seps = check_seps(seps, a.shape[0])
    if bad_seps:
        return [bad_seps], []
    if not np.isfinite(a).all():
        return ["map holds NaN or inf values"], []
    if (a < 0).any():
        return [f"map holds negative values (min {float(a.min()):.3g}); attention weights are >= 0"], []
    rows = a.sum(axis=1, dtype=np.float64)
    if np.abs(rows - 1.0).max() > row_tol:
        return [], [f"rows do not sum to 1 (range {rows.min():.3g}..{rows.max():.3g}); is it a softmax map?"]
    return [], []


def classifier_input(a: np.ndarray, max_t: int | None = None, seps=None) -> tuple[np.ndarray, list[str], list[str]]:
    """A map as the classifier reads it (float32), and :func:`check_map`'s verdict on that.

    The check runs on what the classifier gets: a float64 1e39 is inf in float32. Used by
    ``classify``, the service and the store's writer alike.

    Returns:
        (the float32 map (a view when it already was float32), errors, warnings).
    """
    a = np.asarray(a)
    if a.dtype.kind in "fiu":
        with np.errstate(over="ignore", invalid="ignore"):
            a = a.astype(np.float32, copy=False)
    errors, warnings = check_map(a, max_t=max_t, seps=seps)
    return a, errors, warnings


class MapSource:
    """What every set of maps offers: ``meta`` (one dict per map, with ``id``), ``get``, ``metadata``."""

    meta: list[dict]

    def __len__(self) -> int:
        return len(self.meta)

    @property
    def ids(self) -> list[str]:
        return [m["id"] for m in self.meta]

    def __iter__(self) -> Iterator[tuple[dict, np.ndarray]]:
        for m in self.meta:
            yield m, self.get(m["id"])

    def input_of(self, meta: dict) -> tuple[np.ndarray | None, list[str], list[str]]:
        """:func:`classifier_input` of the map ``meta`` describes, with its separators. A member whose header
        already declares no usable map (not square and 2-D, over the reader's T limit, not a number type) is not
        read and gets that as its error (the map is None); a file that cannot be read at all is still refused."""
        try:
            return classifier_input(self.get(meta["id"]), seps=meta.get("seps"))
        except ArrayFileError as e:
            if e.kind != "invalid":
                raise
            return None, [e.reason], []


class MapStore(MapSource):
    """A folder of maps plus their metadata (see the module docstring for the layout).

    Raises:
        MapFormatError: the folder is not a store, or a file of it is damaged (named, with the line).
    """

    def __init__(self, root: str | os.PathLike):
        self.root = Path(root)
        header = self.root / "store.json"
        if not header.is_file():
            inside = sorted(p.parent.name for p in self.root.glob("*/store.json") if p.is_file())
            if inside:  # a census's --save-maps root: one store per task
                raise MapFormatError(f"{self.root} is not a map store (no store.json), but it holds map stores "
                                     f"({', '.join(inside)}); pass one of them, e.g. "
                                     f"{self.root / inside[0]} (a census's --save-maps writes one per task, in "
                                     f"OUT/maps/<task>)")
            raise MapFormatError(
                f"{self.root} is not a map store (no store.json); create one with `patterncnn sample`, "
                f"or pass a plain .npz of square maps"
            )
        self.header = parse_json(header.read_bytes(), str(header), "restore it from the store's source",
                                 MapFormatError)
        if not isinstance(self.header, dict) or self.header.get("format") != FORMAT:
            raise MapFormatError(f'{header} is not a {FORMAT} header (a JSON object with "format": "{FORMAT}"); '
                                 f"restore it from the store's source")
        self.meta: list[dict] = []
        self._where: dict[str, tuple[Path, int]] = {}
        self._open: OrderedDict[Path, NpzMaps] = OrderedDict()
        self.uncommitted = self._check_parts()
        for part in self._parts():
            npz = NpzMaps(part, FILE_LIMITS)
            try:
                for no, m in _metadata_lines(part.with_suffix(".jsonl")):
                    where = f"{part.with_suffix('.jsonl')}:{no}"
                    if m["id"] in self._where:
                        raise MapFormatError(f"{where}: map id {m['id']!r} is already in the store (ids must be "
                                             f"unique); remove the repeated line")
                    if m["id"] not in npz:
                        raise MapFormatError(f"{where}: map {m['id']!r} is not in {part.name}; the part is "
                                             f"damaged: restore it, or remove both of its files")
                    self._where[m["id"]] = (part, len(self.meta))
                    self.meta.append(m)
            finally:
                npz.close()

    @classmethod
    def create(cls, root: str | os.PathLike, info: dict | None = None, exist_ok: bool = False,
               replace: bool = False) -> "MapStore":
        """Create an empty store; ``info`` (model, tasks, seed, ...) goes into store.json.

        Args:
            exist_ok: open the store already there instead (to append to it).
            replace: remove the store already there (its header and parts) first.
        """
        root = Path(root)
        if (root / "store.json").exists():
            if replace:
                for f in [root / "store.json", *root.glob("part-*.jsonl"), *root.glob("part-*.npz")]:
                    f.unlink()
            elif not exist_ok:
                raise FileExistsError(f"{root} already holds a map store; pass --overwrite, or choose another --out")
            else:
                return cls(root)
        write_json(root / "store.json", {"format": FORMAT, "version": FORMAT_VERSION,
                                         "created_by": f"patterncnn {__version__}", **(info or {})})
        return cls(root)

    def _check_parts(self) -> list[Path]:
        """The ``.jsonl`` files past the last part whose ``.npz`` is missing (an append that was cut off, or a lost
        ``.npz``: they do not count); a missing file that no crash leaves is refused as damage.

        An append writes the ``.jsonl``, then the ``.npz`` (which commits the part), and numbers the next part
        after the last committed one; so a part's ``.npz`` without its ``.jsonl``, or a ``.jsonl`` without its
        ``.npz`` before a committed part, is a lost file.
        """
        jsonl = {p.stem for p in self.root.glob("part-*.jsonl") if p.is_file()}
        npz = {p.stem for p in self.root.glob("part-*.npz") if p.is_file()}
        committed = sorted(jsonl & npz)
        no_jsonl = sorted(npz - jsonl)
        if no_jsonl:
            raise MapFormatError(f"{self.root / no_jsonl[0]}.jsonl is missing (its .npz is there): the part is "
                                 f"damaged; restore the .jsonl, or remove both of the part's files")
        no_npz = sorted(jsonl - npz)
        if no_npz and committed and no_npz[0] < committed[-1]:
            raise MapFormatError(f"{self.root / no_npz[0]}.npz is missing (a later part is there): the part is "
                                 f"damaged; restore the .npz, or remove both of the part's files")
        return [self.root / f"{stem}.jsonl" for stem in no_npz]

    def _parts(self) -> list[Path]:
        return sorted(p for p in self.root.glob("part-*.npz") if p.is_file() and p.with_suffix(".jsonl").is_file())

    def __contains__(self, map_id: str) -> bool:
        return map_id in self._where

    def get(self, map_id: str) -> np.ndarray:
        """The (T, T) array of one map, as stored (float32 when written by :meth:`append`)."""
        try:
            part, _ = self._where[map_id]
        except KeyError:
            raise KeyError(f"no map {map_id!r} in {self.root}") from None
        if part in self._open:
            self._open.move_to_end(part)
        else:
            self._open[part] = NpzMaps(part, FILE_LIMITS)
            while len(self._open) > OPEN_PARTS:  # a census store has many parts: bound the open files
                self._open.popitem(last=False)[1].close()
        return self._open[part].get(map_id)

    def metadata(self, map_id: str) -> dict:
        return self.meta[self._where[map_id][1]]

    def append(self, records: Iterable[tuple[dict, np.ndarray]]) -> int:
        """Add maps as new parts, atomically (one part per ``PART_BYTES`` of maps). Returns the number added.

        Raises:
            MapFormatError: a map id is repeated, a line breaks :data:`FIELDS`, or a map fails :func:`check_map`.
        """
        batch, size, added, seen = [], 0, 0, set()
        for meta, arr in records:
            problem = check_meta(meta)
            if problem:
                raise MapFormatError(f"map {meta.get('id') if isinstance(meta, dict) else meta!r}: {problem}")
            map_id = meta["id"]
            if map_id in self._where or map_id in seen:
                raise MapFormatError(f"map id {map_id!r} is already in {self.root}; ids must be unique")
            arr, errors, _ = classifier_input(arr, seps=meta.get("seps"))
            if errors:
                raise MapFormatError(f"map {map_id!r}: {errors[0]}")
            seen.add(map_id)
            if batch and size + arr.nbytes > PART_BYTES:
                added += self._write_part(batch)
                batch, size = [], 0
            batch.append((meta, arr))
            size += arr.nbytes
        return added + (self._write_part(batch) if batch else 0)

    def _write_part(self, records: list[tuple[dict, np.ndarray]]) -> int:
        parts = self._parts()
        n = int(parts[-1].stem.split("-")[1]) + 1 if parts else 0
        part = self.root / f"part-{n:05d}.npz"
        with atomic_open(part.with_suffix(".jsonl"), "w", encoding="utf-8") as f:
            for m, _ in records:
                f.write(json.dumps(m, ensure_ascii=False, allow_nan=False) + "\n")
        buf = io.BytesIO()
        np.savez_compressed(buf, **{m["id"]: a for m, a in records})
        write_bytes(part, buf.getvalue())  # the .npz lands last: it commits the part
        for m, _ in records:
            self._where[m["id"]] = (part, len(self.meta))
            self.meta.append(m)
        return len(records)


def _metadata_lines(path: Path) -> Iterator[tuple[int, dict]]:
    """(line number, metadata) of each non-blank line of a part's ``.jsonl``, each checked by :func:`check_meta`."""
    fix = "each line is one JSON object with a string \"id\": repair or remove that line"
    with open(path, "rb") as f:
        for no, raw in enumerate(f, start=1):
            if not raw.strip():
                continue
            m = parse_json(raw, f"{path}:{no}", fix, MapFormatError)
            problem = check_meta(m)
            if problem:
                raise MapFormatError(f"{path}:{no}: {problem}; {fix}")
            yield no, m


def require_maps(maps: MapSource) -> MapSource:
    """``maps`` when it holds a map; else a :class:`MapFormatError` that says why (a part whose ``.npz`` is missing)."""
    if len(maps):
        return maps
    lost = getattr(maps, "uncommitted", None)
    if lost:
        raise MapFormatError(f"{lost[0].with_suffix('.npz')} is missing (its .jsonl is there) and {maps.root} holds no "
                             f"other maps: the part is damaged; restore the .npz, or remove both of the part's files "
                             f"and write the maps again (`patterncnn sample`)")
    parts = maps._parts() if isinstance(maps, MapStore) else []
    arrays = 0
    for part in parts:
        npz = NpzMaps(part, FILE_LIMITS)
        arrays += len(npz.keys)
        npz.close()
    if arrays:  # the parts' .npz hold maps their .jsonl do not list: the index is lost, not the maps
        raise MapFormatError(f"the index of {maps.root} is empty (its .jsonl files list no maps) while its arrays "
                             f"hold {arrays} map(s): the store is damaged; restore the .jsonl files, or classify a "
                             f"part's arrays as a plain .npz (`patterncnn classify {parts[0]}`: by id, without "
                             f"their metadata and separators), or write the maps again (`patterncnn sample`)")
    raise MapFormatError(f"{maps.root} holds no maps; write maps into it (`patterncnn sample`), or pass a store, "
                         f".npz or .npy that holds some")


def _lists_something(index: Path) -> bool:
    """Whether a part's ``.jsonl`` index holds more than blank lines (an empty index is a damaged store's, whose
    parts are read alone to recover their maps)."""
    with index.open("rb") as f:
        while chunk := f.read(1 << 16):
            if chunk.strip():
                return True
    return False


class PlainNpz(MapSource):
    """A plain .npz (or .npy) of maps, read as a store with metadata ``{"id": key}`` (``"0"``, ``"1"``, ... for .npy),
    and ``"seps"`` where the .npz stores them (:data:`patterncnn.core.arrayfile.SEPS_KEY`)."""

    def __init__(self, path: str | os.PathLike):
        self.root = Path(path)
        self._npz = NpyMaps(self.root) if self.root.suffix == ".npy" else NpzMaps(self.root, FILE_LIMITS)
        seps = None if isinstance(self._npz, NpyMaps) else self._npz.seps()
        self.meta = [{"id": k} if seps is None or seps[i] is None else {"id": k, "seps": seps[i]}
                     for i, k in enumerate(self._npz.keys)]
        self._meta = {m["id"]: m for m in self.meta}
        if not self.meta and self.root.suffix == ".npy":
            raise MapFormatError(f"{self.root} holds no maps (an (N, T, T) array with N = 0); save one (T, T) map, "
                                 f"or N >= 1 of them as (N, T, T)")
        if not self.meta:
            raise MapFormatError(f"{self.root} holds no arrays; put one square 2-D map per key")
        if any(k.rpartition(".")[2] == "thumb_maps" for k in self._npz.keys):
            raise MapFormatError(f"{self.root} is a census's thumbnails.npz (per task, the example maps kept for the "
                                 f"report, flattened and scaled to 8 bits), not a file of maps; `patterncnn report` "
                                 f"shows them; to classify a census's maps, run it with --save-maps and pass "
                                 f"OUT/maps/<task>")
        index = self.root.with_suffix(".jsonl")
        if (self.root.suffix == ".npz" and (self.root.parent / "store.json").is_file() and index.is_file()
                and _lists_something(index)):  # a store's part: its separators are in its index, not in it
            raise MapFormatError(f"{self.root} is a part of the map store {self.root.parent}, whose index gives each "
                                 f"map its separators: pass the store's folder ({self.root.parent}). Read alone, its "
                                 f"maps have none, and labels change (on the shipped annotations/maps, 96 of 1,505 "
                                 f"changed and every block was lost); to read it alone anyway, copy it out of the "
                                 f"store's folder")

    def __contains__(self, map_id: str) -> bool:
        return map_id in self._npz

    def get(self, map_id: str) -> np.ndarray:
        return self._npz.get(map_id)

    def metadata(self, map_id: str) -> dict:
        return self._meta[map_id]


class MultiStore(MapSource):
    """Several map sources read as one. An id in several sources is read from the first.

    A map id names one (encoder weights, task, split, example, layer, head), so the same id in two
    stores (say, a store and a selection copied from it) is the same map.
    """

    def __init__(self, sources: list):
        self.sources = sources
        self.root = ", ".join(str(s.root) for s in sources)
        self._owner: dict[str, object] = {}
        self.meta = []
        for src in sources:
            for m in src.meta:
                if m["id"] not in self._owner:
                    self._owner[m["id"]] = src
                    self.meta.append(m)

    def __contains__(self, map_id: str) -> bool:
        return map_id in self._owner

    def get(self, map_id: str) -> np.ndarray:
        return self._owner[map_id].get(map_id)

    def metadata(self, map_id: str) -> dict:
        return self._owner[map_id].metadata(map_id)



def open_maps(path: str | os.PathLike) -> MapStore | PlainNpz:
    """Open a map store folder, or a plain ``.npz`` or ``.npy`` of square maps."""
    p = Path(path)
    if p.is_dir():
        return MapStore(p)
    if p.suffix in (".npz", ".npy") and p.is_file():
        return PlainNpz(p)
    if not p.exists():
        raise MapFormatError(f"{p} does not exist; pass a map store folder, or a .npz or .npy of square maps")
    raise MapFormatError(f"{p} is neither a map store folder nor a .npz or .npy file of maps")
