"""Atomic file writes and content hashes, shared by every module that writes outputs."""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import secrets
from pathlib import Path
from typing import IO, Any, Iterator


@contextlib.contextmanager
def atomic_open(path: str | os.PathLike, mode: str = "w", **kwargs: Any) -> Iterator[IO]:
    """Open a temporary file beside ``path``; rename it over ``path`` only if the block succeeds.

    A crash or exception inside the block leaves ``path`` untouched and no temp file behind.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = _create_temp(path)
    try:
        with os.fdopen(fd, mode, **kwargs) as f:
            yield f
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise


def _create_temp(path: Path) -> tuple[int, str]:
    """A new empty file beside ``path``, mode 0666 less the umask (as ``open`` would make it).

    ``tempfile.mkstemp`` would make it 0600, and the rename would carry that onto the output.
    """
    for _ in range(100):
        tmp = str(path.parent / f".{path.name}.{secrets.token_hex(6)}.tmp")
        try:
            return os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_CLOEXEC", 0), 0o666), tmp
        except FileExistsError:
            continue
    raise FileExistsError(f"could not create a temporary file beside {path}")


def write_json(path: str | os.PathLike, obj: Any) -> None:
    """Write ``obj`` as indented JSON, atomically."""
    with atomic_open(path, "w", encoding="utf-8") as f:
        json.dump(obj, f, indent=2, ensure_ascii=False)
        f.write("\n")


def write_text(path: str | os.PathLike, text: str) -> None:
    with atomic_open(path, "w", encoding="utf-8") as f:
        f.write(text)


def write_bytes(path: str | os.PathLike, data: bytes) -> None:
    with atomic_open(path, "wb") as f:
        f.write(data)


def sha256_file(path: str | os.PathLike, chunk: int = 1 << 20) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while block := f.read(chunk):
            h.update(block)
    return h.hexdigest()


def public_path(value) -> str | None:
    """A path fit for a file that may be shared or committed: an absolute path is reduced to its last part (a folder
    or file name); anything else (a hub id such as ``org/model``, a relative path, a short name) is kept as it is.
    The file's identity is its content hash, recorded beside it."""
    if value is None:
        return None
    text = str(value)
    return Path(text).name if os.path.isabs(text) else text


def public_fingerprint(fp: dict) -> dict:
    """An encoder fingerprint fit for a shared file: its ``model`` and weights ``path`` as :func:`public_path`."""
    return {**fp, **{k: public_path(fp[k]) for k in ("model", "path") if fp.get(k)}}


def public_source(source: str) -> str:
    """A data source fit for a shared file: ``RTE/dev.tsv`` for a GLUE file, a ``datasets:`` name as it is."""
    return source if source.startswith("datasets:") else "/".join(Path(source).parts[-2:])
