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
the simplest exchange format; :func:`open_maps` accepts it wherever a store is accepted.

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
from pathlib import Path
from typing import Iterable, Iterator

import numpy as np

from .arrayfile import MapFormatError, NpzMaps
from .fileio import atomic_open, public_path, write_bytes, write_json
from .glue import TASKS
from .version import __version__

FORMAT = "patterncnn-maps"
FORMAT_VERSION = 1
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


def check_map(a: np.ndarray, row_tol: float = 1e-2, max_t: int | None = None) -> tuple[list[str], list[str]]:
    """Check one attention map: the one validation every map passes, from JSON, .npy, .npz or a store.

    Args:
        a: the map, (T, T).
        max_t: the largest T accepted (None: any).

    Returns:
        (errors, warnings). Errors make the map unusable: not a real number type, not 2-D and
        square, empty, T over ``max_t``, NaN/inf or negative values. The warning flags rows that
        do not sum to ~1 (the map is still usable: it may be a rescaled or averaged map).
    """
    a = np.asarray(a)
    if a.dtype.kind not in "fiu":
        return [f"dtype {a.dtype} is not a real number type; send float maps"], []
    if a.ndim != 2 or a.shape[0] != a.shape[1]:
        return [f"shape {a.shape} is not a square 2-D map (T, T)"], []
    if a.size == 0:
        return ["map is empty (T = 0)"], []
    if max_t is not None and a.shape[0] > max_t:
        return [f"T={a.shape[0]} exceeds the limit T <= {max_t}"], []
    if not np.isfinite(a).all():
        return ["map holds NaN or inf values"], []
    if (a < 0).any():
        return [f"map holds negative values (min {float(a.min()):.3g}); attention weights are >= 0"], []
    rows = a.sum(axis=1, dtype=np.float64)
    if np.abs(rows - 1.0).max() > row_tol:
        return [], [f"rows do not sum to 1 (range {rows.min():.3g}..{rows.max():.3g}); is it a softmax map?"]
    return [], []


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


class MapStore(MapSource):
    """A folder of maps plus their metadata (see the module docstring for the layout)."""

    def __init__(self, root: str | os.PathLike):
        self.root = Path(root)
        header = self.root / "store.json"
        if not header.is_file():
            raise MapFormatError(
                f"{self.root} is not a map store (no store.json); create one with `patterncnn export`, "
                f"or pass a plain .npz of square maps"
            )
        self.header = json.loads(header.read_text(encoding="utf-8"))
        if self.header.get("format") != FORMAT:
            raise MapFormatError(f"{header} is not a {FORMAT} header")
        self.meta: list[dict] = []
        self._where: dict[str, tuple[Path, int]] = {}
        for part in self._parts():
            with open(part.with_suffix(".jsonl"), encoding="utf-8") as f:
                for line in f:
                    m = json.loads(line)
                    self._where[m["id"]] = (part, len(self.meta))
                    self.meta.append(m)
        self._open: dict[Path, NpzMaps] = {}

    @classmethod
    def create(cls, root: str | os.PathLike, info: dict | None = None, exist_ok: bool = False) -> "MapStore":
        """Create an empty store; ``info`` (model, tasks, seed, ...) goes into store.json."""
        root = Path(root)
        if (root / "store.json").exists():
            if not exist_ok:
                raise FileExistsError(f"{root} already holds a map store; choose another --out or remove it")
            return cls(root)
        write_json(root / "store.json", {"format": FORMAT, "version": FORMAT_VERSION,
                                         "created_by": f"patterncnn {__version__}", **(info or {})})
        return cls(root)

    def _parts(self) -> list[Path]:
        return sorted(p for p in self.root.glob("part-*.npz") if p.with_suffix(".jsonl").is_file())

    def __contains__(self, map_id: str) -> bool:
        return map_id in self._where

    def get(self, map_id: str) -> np.ndarray:
        """The (T, T) float32 array of one map."""
        try:
            part, _ = self._where[map_id]
        except KeyError:
            raise KeyError(f"no map {map_id!r} in {self.root}") from None
        if part not in self._open:
            self._open[part] = NpzMaps(part)
        return self._open[part].get(map_id)

    def metadata(self, map_id: str) -> dict:
        return self.meta[self._where[map_id][1]]


    def append(self, records: Iterable[tuple[dict, np.ndarray]]) -> int:
        """Add maps as one new part, atomically. Returns the number added.

        Raises:
            MapFormatError: a map id is repeated, or a map fails :func:`check_map`.
        """
        metas, arrays = [], {}
        for meta, arr in records:
            map_id = meta["id"]
            if map_id in self._where or map_id in arrays:
                raise MapFormatError(f"map id {map_id!r} is already in {self.root}; ids must be unique")
            errors, _ = check_map(arr)
            if errors:
                raise MapFormatError(f"map {map_id!r}: {errors[0]}")
            arrays[map_id] = np.asarray(arr, dtype=np.float32)
            metas.append(meta)
        if not metas:
            return 0
        parts = self._parts()
        n = int(parts[-1].stem.split("-")[1]) + 1 if parts else 0
        part = self.root / f"part-{n:05d}.npz"
        with atomic_open(part.with_suffix(".jsonl"), "w", encoding="utf-8") as f:
            for m in metas:
                f.write(json.dumps(m, ensure_ascii=False) + "\n")
        buf = io.BytesIO()
        np.savez_compressed(buf, **arrays)
        write_bytes(part, buf.getvalue())  # the .npz lands last: it commits the part
        for m in metas:
            self._where[m["id"]] = (part, len(self.meta))
            self.meta.append(m)
        return len(metas)


class PlainNpz(MapSource):
    """A plain .npz of maps keyed by id, read as a store with metadata ``{"id": key}``."""

    def __init__(self, path: str | os.PathLike):
        self.root = Path(path)
        self._npz = NpzMaps(self.root)
        self.meta = [{"id": k} for k in self._npz.keys]
        if not self.meta:
            raise MapFormatError(f"{self.root} holds no arrays; put one square 2-D map per key")

    def __contains__(self, map_id: str) -> bool:
        return map_id in self._npz

    def get(self, map_id: str) -> np.ndarray:
        return self._npz.get(map_id)

    def metadata(self, map_id: str) -> dict:
        return {"id": map_id}



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
    """Open a map store folder or a plain ``.npz`` of square maps."""
    p = Path(path)
    if p.is_dir():
        return MapStore(p)
    if p.suffix == ".npz" and p.is_file():
        return PlainNpz(p)
    if not p.exists():
        raise MapFormatError(f"{p} does not exist; pass a map store folder or a .npz of square maps")
    raise MapFormatError(f"{p} is neither a map store folder nor a .npz file")
