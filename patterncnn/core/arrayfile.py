"""Bounded reading of ``.npy`` and ``.npz``: declared shapes and sizes are checked before anything is allocated.

``np.load`` trusts a file's header. A 193-byte ``.npy`` that declares a 36 TiB array is allocated
before any check can run, and a 3 MB ``.npz`` whose members inflate to 3 GiB is decompressed in
full. Here every ``.npy`` header is read first, and refused if it declares no square 2-D map (for
maps: an array that is no map is named as such, not as too large), a map side passes ``max_t``, a
map has more than ``max_t²`` elements, or the running total of decoded bytes passes ``max_bytes``. An
``.npz`` is refused on its members' declared sizes before any of them is opened, and each member
is then inflated only up to the size its header declares (one byte more, to reach the CRC check).
Nothing is ever unpickled. What a map must hold (square, finite, non-negative) is checked after
reading, by :func:`patterncnn.core.maps.check_map`.

This is the one reader of arrays: the service's bodies (:mod:`patterncnn.serve.decode`), the CLI's
map files (:mod:`patterncnn.core.maps`: stores, plain ``.npz`` and ``.npy``) and the resumable
runs' parts (:mod:`patterncnn.core.work`) all go through it, with limits checked before allocation:
a map side (``max_t``), a count (``max_maps``) and a file's or body's decoded bytes (``max_bytes``,
on the sizes declared before anything is inflated). Files are read one map at a time, so what the
CLI holds is bounded by one map (``FILE_LIMITS``: at most 8192 × 8192) plus the batch it
classifies (:mod:`patterncnn.classifier.classify`).

Usage::

    maps = read_npy(body, ReadLimits(max_t=512, max_maps=1024, max_bytes=512 << 20))  # (T, T) or (N, T, T)
    keys, maps, seps = read_npz(body, limits)    # seps: from a SEPS_KEY member, else None
    npz = NpzMaps("maps.npz", FILE_LIMITS)      # lazy: one member per get()
    arr = npz.get(npz.keys[0])                  # (T, T) array, as stored
    npy = NpyMaps("maps.npy")                   # (T, T) or (N, T, T) file, keys "0", "1", ...
    arrays = read_arrays("part.npz", PART_LIMITS)   # every member of a small .npz of any shapes
"""

from __future__ import annotations

import contextlib
import dataclasses
import io
import math
import os
import tokenize
import zipfile
import zlib
from typing import IO

import numpy as np

from .errors import PatternCNNError

NPY_MAGIC = b"\x93NUMPY"
ZIP_MAGIC = b"PK"
_HEADER_ALLOWANCE = 64 * 1024  # bytes a member's .npy header may add to its data (numpy caps headers at 10 kB)


@dataclasses.dataclass(frozen=True)
class ReadLimits:
    """What one body or file may declare.

    Attributes:
        max_t: the largest map side; a map also has at most ``max_t**2`` elements.
        max_maps: the most maps in one body or file (None: any number).
        max_bytes: the most decoded bytes in one body or file, all maps together (None: no total).
        text: also accept arrays of unicode strings (the tokens a census keeps beside its example maps).
        maps: every array is a map (T, T) or a stack of maps (N, T, T): a map shape that is not square and
            2-D is refused as such (kind ``"invalid"``), before the limits on its size. False: arrays of
            any shape (a run's parts).
        min_itemsize: each element counts at least this many bytes against ``max_bytes`` (4: the float32
            the classifier gets, whatever the stored dtype).
    """

    max_t: int = 8192
    max_maps: int | None = None
    max_bytes: int | None = None
    text: bool = False
    maps: bool = True
    min_itemsize: int = 1


# Files given to the CLI: maps up to 8192 × 8192 (256 MB in float32), read one at a time; a file (a store's part,
# a plain .npz or .npy) declares at most 1 GiB decoded (a store's writer splits parts at 256 MiB).
FILE_LIMITS = ReadLimits(max_bytes=1 << 30)
# The parts of a resumable run (census windows, experiment parts): arrays of any shape, 1 GiB at most per part.
PART_LIMITS = ReadLimits(max_t=2**31, max_bytes=1 << 30, text=True, maps=False)


def square_problem(shape: tuple) -> str | None:
    """What keeps an array of ``shape`` from being one attention map (2-D and square), or None."""
    shape = tuple(int(d) for d in shape)
    if len(shape) != 2 or shape[0] != shape[1]:
        return f"shape {shape} is not a square 2-D map (T, T)"
    return None


class MapFormatError(PatternCNNError, ValueError):
    """A file or folder is not a readable set of maps; the message says what is wrong."""


class ArrayFileError(MapFormatError):
    """A body or file that cannot be read within the limits; the message names the fix.

    Attributes:
        kind: ``"unreadable"`` (not a valid .npy/.npz), ``"invalid"`` (readable, but not maps) or
            ``"too_large"`` (over ``max_maps`` or ``max_bytes``).
        reason: what is wrong with the array itself, without the file's name (the message when not given):
            what ``classify`` writes in the error line of one map it cannot read.
    """

    def __init__(self, message: str, kind: str = "unreadable", reason: str | None = None):
        super().__init__(message)
        self.kind = kind
        self.reason = reason or message


class _Budget:
    """The limits of one body or file, and the decoded bytes taken from them so far."""

    def __init__(self, limits: ReadLimits):
        self.limits, self.used = limits, 0

    def take(self, shape: tuple, dtype: np.dtype, what: str, stacked: bool) -> int:
        """Check one declared array before it is read; return its size in bytes.

        Args:
            stacked: the first axis counts maps ((N, T, T) in one .npy); otherwise the array is one map.
        """
        lim = self.limits
        if dtype.hasobject or dtype.itemsize > 16 and not (lim.text and dtype.kind == "U"):
            raise ArrayFileError(f"{what} has dtype {dtype}; send float maps (np.save/np.savez, no pickles)", "invalid",
                                 f"dtype {dtype} is not a real number type; send float maps")
        if any(d < 0 for d in shape):
            raise ArrayFileError(f"{what} declares the impossible shape {tuple(shape)}; save it with np.save")
        count, per_map = (shape[0], shape[1:]) if stacked else (1, shape)
        if lim.max_maps is not None and count > lim.max_maps:
            raise ArrayFileError(f"{count} maps in one request; the limit is {lim.max_maps}: split the batch",
                                 "too_large")
        not_square = square_problem(per_map) if lim.maps else None
        if not_square:  # before the size limits, which are about T × T maps
            raise ArrayFileError(f"{what}: {not_square}" + (" (each of its maps)" if stacked else ""), "invalid",
                                 not_square)
        if any(d > lim.max_t for d in per_map) or math.prod(per_map) > lim.max_t ** 2:
            reason = f"shape {tuple(shape)} is over the limit T <= {lim.max_t}"
            raise ArrayFileError(f"{what} declares shape {tuple(shape)}, over the limit T <= {lim.max_t}; send maps "
                                 f"of at most {lim.max_t} × {lim.max_t}", "invalid", reason)
        nbytes = math.prod(shape) * dtype.itemsize
        self.used += math.prod(shape) * max(dtype.itemsize, lim.min_itemsize)
        if lim.max_bytes is not None and self.used > lim.max_bytes:
            raise ArrayFileError(f"the maps decode to more than {lim.max_bytes} bytes; split the batch", "too_large")
        return nbytes


def _read_header(fp: IO[bytes], what: str) -> tuple[tuple, bool, np.dtype]:
    """(shape, fortran_order, dtype) from an .npy header; the stream is left at the array's first byte."""
    version = np.lib.format.read_magic(fp)
    if version == (1, 0):
        return np.lib.format.read_array_header_1_0(fp)
    if version == (2, 0):
        return np.lib.format.read_array_header_2_0(fp)
    raise ArrayFileError(f"{what}: .npy format version {version} is not supported; save it with np.save")


def _read_array(fp: IO[bytes], what: str, budget: _Budget, stacked: bool, room: int | None = None) -> np.ndarray:
    """One checked, writable array from an .npy stream: never more bytes than its checked header declares.

    Args:
        room: the most data bytes the stream can hold (a zip member's declared size); a header that
            declares more is refused before anything is allocated.
    """
    shape, fortran, dtype = _read_header(fp, what)
    nbytes = budget.take(shape, dtype, what, stacked)
    if room is not None and nbytes > room:
        raise ArrayFileError(f"{what} is truncated: its header declares {nbytes} bytes, it holds {room}; save it "
                             f"with np.save")
    buf = bytearray(nbytes)
    got = fp.readinto(buf)
    if got == nbytes:  # one byte more; for a zip member, this reaches the end of the stream, where its CRC is checked
        got += len(fp.read(1))
    _check_size(what, got, nbytes)
    return np.frombuffer(buf, dtype=dtype).reshape(shape, order="F" if fortran else "C")


def _check_size(what: str, held: int, nbytes: int) -> None:
    """Refuse an array whose data is not the ``nbytes`` its header declares (``held``: what there is)."""
    if held < nbytes:
        raise ArrayFileError(f"{what} is truncated: {held} of the {nbytes} bytes its header declares")
    if held > nbytes:
        raise ArrayFileError(f"{what} holds more data than its header declares; save it with np.save")


class BufferReader(io.RawIOBase):
    """A seekable binary stream over bytes or a bytearray that does not copy it (``io.BytesIO`` copies a bytearray;
    a request body of 256 MiB would be held twice)."""

    def __init__(self, data: bytes | bytearray):
        super().__init__()
        self._view, self._pos = memoryview(data), 0

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def readinto(self, b) -> int:
        self._checkClosed()
        n = max(0, min(len(b), len(self._view) - self._pos))
        b[:n] = self._view[self._pos:self._pos + n]
        self._pos += n
        return n

    def seek(self, offset: int, whence: int = io.SEEK_SET) -> int:
        self._checkClosed()
        if whence not in (io.SEEK_SET, io.SEEK_CUR, io.SEEK_END):
            raise ValueError(f"invalid whence ({whence}, should be 0, 1 or 2)")
        if whence == io.SEEK_SET and offset < 0:
            raise ValueError(f"negative seek value {offset}")
        base = (0, self._pos, len(self._view))[whence]
        self._pos = max(0, base + offset)  # as io.BytesIO: before the start is the start
        return self._pos

    def tell(self) -> int:
        self._checkClosed()
        return self._pos

    def close(self) -> None:
        if not self.closed:
            with contextlib.suppress(BufferError):  # a slice still held elsewhere: released with it
                self._view.release()  # the buffer may be resized again (a bytearray under a view cannot)
        super().close()


# What a corrupt .npy header (numpy parses it as a Python literal) or zip stream can raise.
_DECODE_ERRORS = (ValueError, TypeError, SyntaxError, tokenize.TokenError, EOFError, OSError, zlib.error,
                  zipfile.BadZipFile, RuntimeError, NotImplementedError)


def read_npy(data: bytes | bytearray, limits: ReadLimits, name: str = "the .npy") -> list[np.ndarray]:
    """The maps of one ``.npy`` body: one (T, T) array, or the N maps of an (N, T, T) array.

    They are views of ``data`` when it is a bytearray (the service's bodies, :func:`patterncnn.serve.decode.read_body`):
    a body is held once, not beside a decoded copy. Immutable bytes are copied, so the maps are always writable."""
    fp = BufferReader(data)
    try:
        shape, fortran, dtype = _read_header(fp, name)
        if len(shape) not in (2, 3):
            raise ArrayFileError(f"{name}: .npy array has shape {shape}; send (T, T) or (N, T, T)", "invalid")
        nbytes = _Budget(limits).take(shape, dtype, name, stacked=len(shape) == 3)
        _check_size(name, len(data) - fp.tell(), nbytes)
        arr = np.frombuffer(data, dtype=dtype, count=math.prod(shape), offset=fp.tell())
    except ArrayFileError:
        raise
    except _DECODE_ERRORS as e:
        raise ArrayFileError(f"{name}: unreadable .npy ({e}); send arrays saved with np.save") from None
    # a view when it can be: held once, and aligned (np.save pads the header to 64 bytes; a hand-made one may not)
    view = isinstance(data, bytearray) and arr.flags.aligned
    arr = (arr if view else arr.copy()).reshape(shape, order="F" if fortran else "C")
    return [arr] if arr.ndim == 2 else list(arr)


def read_npz(data: bytes, limits: ReadLimits) -> tuple[list[str], list[np.ndarray], list | None]:
    """The (keys, maps, separator positions or None) of one ``.npz`` request body, every member checked against
    ``limits`` (:meth:`NpzMaps.seps`)."""
    # Refuse a central directory with too many entries before zipfile builds an object for each (one more: SEPS_KEY).
    if limits.max_maps is not None and data.count(b"PK\x01\x02") > limits.max_maps + 1:
        raise ArrayFileError(f"more than {limits.max_maps} maps in one request; the limit is {limits.max_maps}: split "
                             f"the batch", "too_large")
    npz = NpzMaps(BufferReader(data), limits, name="the request body")
    return npz.keys, [npz.get(k) for k in npz.keys], npz.seps()


# The member of an .npz of maps that holds their separator positions instead of a map: an (N, S) integer array, one
# row per map in the order of the maps' members (np.savez's keyword order), -1 where a map has fewer than S.
SEPS_KEY = "__seps__"


def map_members(infos) -> list:
    """The members of an .npz (zip infos) that hold maps: all but :data:`SEPS_KEY`."""
    return [i for i in infos if i.filename != f"{SEPS_KEY}.npy"]


class NpzMaps:
    """The members of an ``.npz`` (file path or binary stream), read one at a time within ``limits``.

    Raises:
        ArrayFileError: on opening, for a file that is not a zip, holds a member that is not an
            ``.npy``, or declares more maps or bytes than the limits allow; on :meth:`get`, for a
            member over the limits, truncated or corrupt.
    """

    def __init__(self, source: str | os.PathLike | IO[bytes], limits: ReadLimits = FILE_LIMITS,
                 name: str | None = None):
        self.name = name or str(source)
        self.limits = limits
        try:
            self._zip = zipfile.ZipFile(source)
            infos = self._zip.infolist()
        except _DECODE_ERRORS as e:
            raise ArrayFileError(f"unreadable .npz: {self.name} is not a readable .npz file ({e}); save maps with "
                                 f"np.savez") from None
        odd = [i.filename for i in infos if not i.filename.endswith(".npy")]
        if odd:
            raise ArrayFileError(f"{self.name} holds {odd[0]!r}, which is not an .npy array; save maps with np.savez, "
                                 f"one array per key", "invalid")
        maps = map_members(infos)
        if limits.max_maps is not None and len(maps) > limits.max_maps:
            raise ArrayFileError(f"{len(maps)} maps in one request; the limit is {limits.max_maps}: split the batch",
                                 "too_large")
        declared = sum(i.file_size for i in infos)
        if limits.max_bytes is not None and declared > limits.max_bytes + _HEADER_ALLOWANCE * len(infos):
            raise ArrayFileError(f"{self.name} declares {declared} bytes uncompressed, over the limit of "
                                 f"{limits.max_bytes}; split the batch", "too_large")
        self._members = {i.filename[:-4]: i for i in infos}
        self.keys = [i.filename[:-4] for i in maps]

    def __contains__(self, key: str) -> bool:
        return key in self._members

    def close(self) -> None:
        self._zip.close()

    def get(self, key: str) -> np.ndarray:
        """The array stored under ``key`` (as stored: any dtype but object, any shape within the limits).

        The file's total was checked on opening, on its members' declared sizes; each member is read
        within its own declared size, so reading a map again costs nothing against the limits.
        """
        what = f"map {key!r} of {self.name}"
        info = self._members[key]
        try:
            with self._zip.open(info) as fp:
                return _read_array(fp, what, _Budget(self.limits), stacked=False, room=info.file_size)
        except ArrayFileError:
            raise
        except _DECODE_ERRORS as e:
            raise ArrayFileError(f"{what} is unreadable ({e}); save maps with np.savez") from None


    def seps(self) -> list[list[int] | None] | None:
        """The maps' separator positions in :data:`SEPS_KEY` (one list per map of :attr:`keys`, in order; None for a
        row of -1 only), or None when the file has no such member.

        Raises:
            ArrayFileError: the member is not an (N, S) integer array with one row per map.
        """
        if SEPS_KEY not in self._members:
            return None
        info, what = self._members[SEPS_KEY], f"{SEPS_KEY!r} of {self.name}"
        fix = (f"save the separators as np.savez(..., {SEPS_KEY}=np.array(rows)): an (N, S) integer array, one row per "
               f"map ({len(self.keys)}) in the maps' order, -1 where a map has fewer than S")
        try:
            with self._zip.open(info) as fp:
                # one row per map: as many rows as maps, which may be more than a map's side
                limits = dataclasses.replace(self.limits, maps=False, max_t=max(self.limits.max_t, len(self.keys)))
                a = _read_array(fp, what, _Budget(limits), stacked=False, room=info.file_size)
        except ArrayFileError:
            raise
        except _DECODE_ERRORS as e:
            raise ArrayFileError(f"{what} is unreadable ({e}); {fix}") from None
        if a.dtype.kind not in "iu" or a.ndim != 2 or len(a) != len(self.keys):
            raise ArrayFileError(f"{what} is a {a.dtype} array of shape {a.shape}; {fix}", "invalid")
        rows = [[int(x) for x in row] for row in a]
        for key, row in zip(self.keys, rows):
            given = [x for x in row if x != -1]
            if any(x < 0 for x in given) or row[:len(given)] != given:
                raise ArrayFileError(f"{what} gives map {key!r} the separators {row}: positions are 0 or more, and -1 "
                                     f"only pads a row after them; {fix}", "invalid")
        return [[x for x in row if x != -1] or None for row in rows]  # a row of -1 only: none given


class NpyMaps:
    """The maps of an ``.npy`` file, (T, T) or (N, T, T), keyed ``"0"``, ``"1"``, ...: read one at a time.

    The header is checked against ``limits`` on opening (map side, count, the file's decoded bytes)
    and the file must hold every byte it declares; :meth:`get` then reads only the bytes of one map.
    """

    def __init__(self, path: str | os.PathLike, limits: ReadLimits = FILE_LIMITS):
        self.name = str(path)
        try:
            with open(path, "rb") as f:
                shape, fortran, dtype = _read_header(f, self.name)
                self._offset = f.tell()
                size = os.fstat(f.fileno()).st_size
        except ArrayFileError:
            raise
        except _DECODE_ERRORS as e:
            raise ArrayFileError(f"{self.name}: unreadable .npy ({e}); save maps with np.save") from None
        if len(shape) not in (2, 3):
            raise ArrayFileError(f"{self.name}: .npy array has shape {shape}; save (T, T) or (N, T, T) maps",
                                 "invalid")
        if fortran and len(shape) == 3:
            raise ArrayFileError(f"{self.name} is stored in Fortran order, so its maps are not contiguous; save it "
                                 f"with np.save(path, np.ascontiguousarray(maps))", "invalid")
        nbytes = _Budget(limits).take(shape, dtype, self.name, stacked=len(shape) == 3)
        if size - self._offset != nbytes:
            raise ArrayFileError(f"{self.name} holds {size - self._offset} data bytes where its header declares "
                                 f"{nbytes}: truncated or padded; save it again with np.save")
        self._path, self._dtype, self._fortran = path, dtype, fortran
        self._map_shape = tuple(shape[-2:])
        self.keys = [str(i) for i in range(shape[0])] if len(shape) == 3 else ["0"]
        self._map_bytes = math.prod(self._map_shape) * dtype.itemsize

    def __contains__(self, key: str) -> bool:
        return key in self.keys

    def get(self, key: str) -> np.ndarray:
        """Map ``key`` (its index as a string), as stored."""
        i = int(key)
        with open(self._path, "rb") as f:
            f.seek(self._offset + i * self._map_bytes)
            buf = bytearray(self._map_bytes)
            if f.readinto(buf) != self._map_bytes:
                raise ArrayFileError(f"{self.name} is truncated at map {i}; save it again with np.save")
        return np.frombuffer(buf, dtype=self._dtype).reshape(self._map_shape, order="F" if self._fortran else "C")


def read_arrays(source: str | os.PathLike | IO[bytes], limits: ReadLimits = PART_LIMITS,
                name: str | None = None) -> dict[str, np.ndarray]:
    """Every member of a small ``.npz`` (a resumable run's part), each checked against ``limits`` before it is read."""
    npz = NpzMaps(source, limits, name)
    try:
        return {k: npz.get(k) for k in npz.keys}
    finally:
        npz.close()
