"""Hostile .npy/.npz bodies and files, for benchmarks/zip_bomb.py and the hardening tests (pytest puts
benchmarks/ on its pythonpath: pyproject.toml)."""

import io
import zipfile

import numpy as np


def npy_header(shape: tuple, descr: str = "<f8") -> bytes:
    """An .npy file that is only a header: it declares ``shape`` and holds no data (193 bytes for 36 TiB)."""
    buf = io.BytesIO()
    np.lib.format.write_array_header_1_0(buf, {"descr": descr, "fortran_order": False, "shape": shape})
    return buf.getvalue()  # numpy writes the magic string with the header


def zip_of(members: dict[str, bytes]) -> bytes:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as zf:
        for name, data in members.items():
            zf.writestr(name, data)
    return buf.getvalue()


def zip_bomb(members: int = 3, side: int = 16384, dtype=np.float32) -> bytes:
    """A valid .npz of ``members`` zero maps (side × side), deflated at level 9.

    The defaults are the probe's bomb: 3.1 MB that inflate to 3 GiB (about 1000×).
    """
    buf = io.BytesIO()
    zero = bytes(16 << 20)
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED, compresslevel=9) as zf:
        for i in range(members):
            with zf.open(f"map{i}.npy", "w", force_zip64=True) as f:
                f.write(npy_header((side, side), np.lib.format.dtype_to_descr(np.dtype(dtype))))
                left = side * side * np.dtype(dtype).itemsize
                while left:
                    f.write(zero[: min(left, len(zero))])
                    left -= min(left, len(zero))
    return buf.getvalue()


def corrupt_deflate_npz(seed: int = 0) -> bytes:
    """A compressed .npz whose zip structure is intact but whose deflate stream is not."""
    buf = io.BytesIO()
    np.savez_compressed(buf, a=np.random.default_rng(seed).random((40, 40)))
    data = bytearray(buf.getvalue())
    start = data.index(b"a.npy") + len("a.npy") + 20  # inside the member's compressed data
    data[start : start + 20] = b"\xff" * 20
    return bytes(data)


def truncated(data: bytes, keep: float = 0.5) -> bytes:
    return data[: int(len(data) * keep)]


def unparsable_header_npy() -> bytes:
    """An .npy whose header is not a closed Python literal (numpy's parser raises TokenError)."""
    buf = io.BytesIO()
    np.save(buf, np.ones((3, 3)))
    data = bytearray(buf.getvalue())
    data[data.index(b"(3, 3)") + 5] = ord(" ")
    return bytes(data)


def declared_npz(members: int, side: int, dtype: str = "<f4") -> bytes:
    """An .npz whose zip headers declare ``members`` maps of side × side while each holds a 4 × 4 map.

    What a reader that trusts nothing but declared sizes sees of :func:`zip_bomb` (12 × 8192² declares
    3 GiB), built in milliseconds instead of a minute: refused on those sizes, or not refused at all.
    """
    small = io.BytesIO()
    np.save(small, np.zeros((4, 4), dtype=dtype))
    data = bytearray(zip_of({f"map{i}.npy": small.getvalue() for i in range(members)}))
    declared = (side * side * np.dtype(dtype).itemsize + 128).to_bytes(4, "little")
    for signature, offset in ((b"PK\x03\x04", 22), (b"PK\x01\x02", 24)):  # local headers, central directory
        at = data.find(signature)
        while at >= 0:
            data[at + offset : at + offset + 4] = declared
            at = data.find(signature, at + 4)
    return bytes(data)
