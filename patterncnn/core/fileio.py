"""Atomic file writes, the one rule for an existing output, and content hashes: shared by every module that writes.

Usage::

    out = output_file(args.out, args.overwrite, stream=True)    # None: write to standard output ("-")
    out = output_folder(args.out, ("census.json",), args.overwrite)
    with atomic_open(out, "w") as f: ...                          # never replaces what is not a regular file
    with staged_outputs(out, ("model.pt", "done.json")) as stage: ...  # several files: all land, or none
    move_into_place(stage / "labels.csv", out / "labels.csv")     # one staged file onto its target
    swap_into_place(tmp_folder, out_folder)                       # a finished folder onto its target

The rule for ``--out`` (every command): a path that exists and is not a regular file (a folder
where a file is written, a FIFO, a device, a socket) is refused, never replaced; an existing
output (a file, or a folder holding the command's result) needs ``--overwrite``; ``-`` means
standard output where the command writes a stream.

One writer at a time per output folder: a run (a command, :func:`patterncnn.cli.main`; a call of the Python API,
:func:`patterncnn.core.args.python_errors`) is a :func:`writer_scope`, and every folder it takes through
:func:`output_folder` is locked (``flock`` on ``FOLDER/.patterncnn-lock``, which records the run's command, pid and
start) until the run ends, when the lock file goes (removed while still held: a run that opened it meanwhile takes
a new one; one a killed run left is taken over). A second run there is refused at once (:class:`FolderBusy`, naming
the first and the fix), before it reads or changes anything inside. No lock where the file system has no ``flock``
(a warning says so) or Python has no ``fcntl`` (Windows).
"""

from __future__ import annotations

import contextlib
import contextvars
import ctypes
import errno
import functools
import hashlib
import json
import logging
import os
import re
import secrets
import shutil
import signal
import socket
import stat
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import IO, Any, Iterable, Iterator

from .errors import DataError, PatternCNNError

try:
    import fcntl
except ImportError:  # Windows: output folders are not locked (hold)
    fcntl = None

log = logging.getLogger(__name__)

STDOUT = "-"


class OutputError(PatternCNNError, ValueError):
    """An output path that patterncnn will not write (not a regular file, or existing without --overwrite)."""


def _kind(mode: int) -> str:
    """What a stat mode is, in words (``a FIFO``)."""
    for test, name in ((stat.S_ISDIR, "a folder"), (stat.S_ISFIFO, "a FIFO"), (stat.S_ISCHR, "a character device"),
                       (stat.S_ISBLK, "a block device"), (stat.S_ISSOCK, "a socket")):
        if test(mode):
            return name
    return "not a regular file"


def _stat(path: Path) -> os.stat_result | None:
    """The stat of what ``path`` names (through symlinks), or None when nothing is there."""
    try:
        return os.stat(path)
    except FileNotFoundError:
        return None
    except NotADirectoryError:
        raise OutputError(f"{path}: a parent of it is a file, not a folder; choose another path") from None


def replaceable(path: str | os.PathLike) -> Path:
    """The real path a write to ``path`` replaces (symlinks followed); refuses what is not a regular file.

    Raises:
        OutputError: ``path`` exists and is a folder, FIFO, device or socket.
    """
    path = Path(path)
    real = Path(os.path.realpath(path)) if path.is_symlink() else path
    st = _stat(real)
    if st is not None and not stat.S_ISREG(st.st_mode):
        raise OutputError(f"{path} is {_kind(st.st_mode)}, not a regular file; patterncnn never replaces it: "
                          f"give the path of a file to write")
    return real


def output_file(path: str | os.PathLike, overwrite: bool, stream: bool = False, option: str = "--out",
                instead: str | None = None) -> Path | None:
    """Check a file output before any work: the rule of the module docstring.

    Args:
        stream: the command can write its output to standard output (``-``).
        option: the command-line option that names it, for the messages; "" when no option named it (a file the
            command derives, as ``report`` writes ``FOLDER/report.html``).
        instead: what else to do than ``--overwrite`` when it exists (default: choose another ``option``).

    Returns:
        The path to write, or None for standard output.
    """
    if str(path) == STDOUT:
        if stream:
            return None
        raise OutputError(f"{option} -: this command writes a file, not a stream; give a file path")
    p = Path(path)
    st = _stat(p)
    if st is None:
        return p
    if not stat.S_ISREG(st.st_mode):
        hint = " (or - for standard output)" if stream else ""
        raise OutputError(f"{option} {p} is {_kind(st.st_mode)}, not a regular file; patterncnn never replaces it: "
                          f"{instead or f'give the path of a file to write{hint}'}".lstrip())
    if not overwrite:
        raise OutputError(f"{option} {p} already exists; pass --overwrite to replace it, or "
                          f"{instead or f'choose another {option}'}".lstrip())
    return p


def output_folder(path: str | os.PathLike, results: Iterable[str], overwrite: bool, option: str = "--out",
                  instead: str | None = None) -> Path:
    """Check a folder output before any work: the rule of the module docstring.

    Args:
        results: the files (or folders) inside it that mark the command's finished output; any of
            them present needs ``overwrite``. Empty: the folder itself is the output.
        option: the command-line option that names it, for the messages; "" when no option names it (a folder the
            command derives from one, as ``adapt finish`` writes ``OUT/classifier``).
        instead: what else to do than ``--overwrite`` when it holds a result (default: choose another ``option``).

    Returns:
        The folder, locked for the current :func:`writer_scope` (:func:`hold`; made here for its lock file, and
        removed when the scope ends if left holding nothing else); not created outside a scope.

    Raises:
        OutputError: ``path`` is not a folder, is one this user cannot write into, or holds a result without
            ``overwrite``.
    """
    if str(path) == STDOUT:
        raise OutputError(f"{option} -: this command writes a folder, not a stream; give a folder path")
    p = Path(path)
    st = _stat(p)
    if st is None:
        _check_writable(p, option)  # the folder it will be made in
        hold(p, option, instead)
        return p
    if not stat.S_ISDIR(st.st_mode):
        what = "a file" if stat.S_ISREG(st.st_mode) else _kind(st.st_mode)
        raise OutputError(f"{option} {p} is {what}, not a folder; give the path of a folder to write into".lstrip())
    _check_writable(p, option)
    hold(p, option, instead)  # before its contents are judged: another run may be writing them
    results = tuple(results)
    found = [r for r in results if os.path.lexists(p / r)] if results else [p.name] * (not _made_for_lock(p))
    if found and not overwrite:
        held = f"already holds {found[0]}" if results else "already exists"
        raise OutputError(f"{option} {p} {held}; pass --overwrite to replace it, or "
                          f"{instead or f'choose another {option}'}".lstrip())
    for r in found if results else ():
        st = os.lstat(p / r)
        if not (stat.S_ISREG(st.st_mode) or stat.S_ISDIR(st.st_mode) or stat.S_ISLNK(st.st_mode)):
            raise OutputError(f"{p / r} is {_kind(st.st_mode)}, not a regular file; patterncnn never replaces it: "
                              f"remove it, or {instead or f'choose another {option}'}")
    return p


def _made_for_lock(p: Path) -> bool:
    """Whether ``p`` is a folder this process made to hold its lock (:func:`hold`), holding nothing else yet."""
    lock = _HELD.get(os.path.realpath(p))
    return lock is not None and lock.made is not None and os.listdir(p) == [LOCK]


def outermost_missing(path: str | os.PathLike) -> Path | None:
    """The outermost folder of ``path`` that does not exist yet (``path`` itself or one of its parents, absolute),
    else None: what making ``path`` makes, so that a run that leaves it empty can remove all of it."""
    if os.path.lexists(path):
        return None
    made = Path(path).absolute()
    while not os.path.lexists(made.parent) and made.parent != made:
        made = made.parent
    return made


def _check_writable(p: Path, option: str) -> None:
    """Refuse now, not when the results are written after minutes of work, a folder output this user cannot write:
    ``p`` itself when it exists, else the nearest folder above it that exists (where it will be made)."""
    instead = f"choose another {option}" if option else "write elsewhere"
    where = p if os.path.lexists(p) else next((a for a in p.absolute().parents if os.path.lexists(a)), None)
    if where is None or not where.is_dir() or os.access(where, os.W_OK | os.X_OK):  # a file above: _stat refused it
        return
    made = "" if where == p else f" (it would be made inside {where})"
    if hasattr(os, "statvfs") and os.statvfs(where).f_flag & os.ST_RDONLY:  # chmod cannot help
        raise OutputError(f"{option} {p} is on a read-only file system{made}; {instead}".lstrip())
    what = "is a folder" if where == p else f"cannot be made: {where} is a folder"
    raise OutputError(f"{option} {p} {what} this user cannot write into; make it writable (chmod u+wx, as its "
                      f"owner), or {instead}".lstrip())


@contextlib.contextmanager
def atomic_open(path: str | os.PathLike, mode: str = "w", **kwargs: Any) -> Iterator[IO]:
    """Open a temporary file beside ``path``; rename it over ``path`` only if the block succeeds.

    A crash or exception inside the block leaves ``path`` untouched and no temp file behind. A
    symlink is written through (its target is replaced); a folder, FIFO, device or socket at
    ``path`` is refused (:class:`OutputError`), never replaced.
    """
    path = replaceable(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = _create_temp(path)
    try:
        with os.fdopen(fd, mode, **kwargs) as f:
            yield f
            f.flush()
            os.fsync(f.fileno())
        replaceable(path)  # again: something may have appeared there while the block ran
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise


@contextlib.contextmanager
def staged_outputs(folder: str | os.PathLike, names: Iterable[str]) -> Iterator[Path]:
    """A fresh folder inside ``folder`` to write a command's several result files into; when the block succeeds, each
    of ``names`` is moved into ``folder`` (:func:`move_into_place`) in the order given, the file that marks the output
    finished last, and the staging folder goes. A crash, an exception or Ctrl-C while the block writes leaves
    ``folder`` as it was (a SIGKILL leaves the staging folder too, swept a day later by :func:`new_stage`).

    The block writes exactly ``names`` (file names, no folders): a named file it did not write, or a file it wrote
    that is not named, is a bug in the caller, refused (RuntimeError) before any rename. Every target is checked (a
    symlink is written through, a folder refused) before the first rename, and the old marker (the last of ``names``)
    is removed before it: a stop or a failure (a full disk, an I/O error) during the renames leaves a mix of old and
    new files without a marker, never a finished-looking mix (a rerun replaces it; with ``--overwrite`` where the
    command's :func:`output_folder` names more files than the marker).
    ``folder`` has one writer at a time: the run that took it through :func:`output_folder` holds its lock
    (:func:`hold`); written outside a :func:`writer_scope`, nothing locks it, and two runs renaming into it at once
    could interleave into a marked mix."""
    folder, names = Path(folder), list(names)
    stage = new_stage(folder, STAGED)
    try:
        yield stage
        written = set(os.listdir(stage))
        missing, unnamed = [n for n in names if n not in written], sorted(written - set(names))
        if missing or unnamed:
            wrong = [f"did not write {', '.join(missing)}"] * bool(missing) + [
                f"wrote {', '.join(unnamed)}, not named"] * bool(unnamed)
            raise RuntimeError(f"staged_outputs into {folder}: the block {' and '.join(wrong)}; a bug in the caller, "
                               f"nothing was moved: name exactly the files it writes, the marker last")
        targets = [replaceable(folder / name) for name in names]  # every one checked before the first rename
        if targets:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(targets[-1])
        for name in names:
            move_into_place(stage / name, folder / name)
    finally:
        shutil.rmtree(stage, ignore_errors=True)


# One writer at a time per output folder: an advisory lock (flock) on OUT/.patterncnn-lock, held by a run.
LOCK = ".patterncnn-lock"
_SCOPE: contextvars.ContextVar[_Scope | None] = contextvars.ContextVar("patterncnn_writer_scope", default=None)
_HELD: dict[str, _Lock] = {}  # this process's locks, by the folder's real path: one open file each, one scope each
_HELD_GUARD = threading.Lock()


class FolderBusy(OutputError):
    """An output folder another run is writing into (it holds the folder's lock); the message names that run."""


class _Lock:
    """A held folder: ``made`` is the outermost folder its taking made (:func:`outermost_missing`), else None."""

    def __init__(self, folder: Path, fd: int | None, made: Path | None, scope: _Scope | None = None):
        self.folder, self.fd, self.made, self.scope = folder, fd, made, scope


class _Scope:
    def __init__(self, command: str):
        self.command, self.started, self.held = command, time.time(), []


@contextlib.contextmanager
def writer_scope(command: str) -> Iterator[None]:
    """The span of one run (a command, a call of the Python API): every output folder it takes (:func:`hold`, which
    :func:`output_folder` calls) stays locked against other runs until the block ends, however it ends (a SIGKILL
    releases the lock with the process). Nested scopes join the outermost, whose ``command`` the lock records."""
    if _SCOPE.get() is not None:
        yield
        return
    scope = _Scope(command)
    token = _SCOPE.set(scope)
    try:
        yield
    finally:
        _SCOPE.reset(token)
        interrupted = None
        for key in reversed(scope.held):  # every one, even past a Ctrl-C: a lock left open would refuse the next run
            try:
                _release(key)
            except KeyboardInterrupt as e:
                interrupted = e
                # The lock's file is closed already (_release's finally) unless the interrupt came before the
                # key left _HELD; then this second call, a no-op otherwise, releases it.
                _release(key)
        if interrupted is not None:
            raise interrupted


def hold(folder: str | os.PathLike, option: str = "--out", instead: str | None = None) -> None:
    """Lock the output folder ``folder`` (made if need be) for the current :func:`writer_scope`: another run writing
    there refuses this one (:class:`FolderBusy`, naming it and the fix), and so does a run of this process in another
    scope (another thread). Re-entrant: a folder the scope holds is not locked again (flock locks belong to an open
    file, so a second open would refuse itself). Nothing
    is locked outside a scope, where ``folder`` is not a folder (:func:`output_folder` refuses it), where the file
    system has no flock or the lock file cannot be opened (a warning says so: nothing stops another run), or where
    Python has no ``fcntl`` (Windows)."""
    scope = _SCOPE.get()
    if scope is None or str(folder) == STDOUT:
        return
    p = Path(folder)
    st = _stat(p)
    if st is not None and not stat.S_ISDIR(st.st_mode):
        return
    _check_writable(p, option)  # where it will be made: refused in words, not as the OS's PermissionError
    key = os.path.realpath(p)
    if key in scope.held:
        return
    with _HELD_GUARD:
        _refuse_enclosing(p, key, scope, option, instead)
        if key in _HELD:  # held by another scope (this one's are returned above): another thread's run
            raise FolderBusy(_busy(p, None, option, instead, here=_HELD[key].scope))
        _HELD[key] = _acquire(p, scope, option, instead)
    scope.held.append(key)


def _refuse_enclosing(folder: Path, key: str, scope: _Scope, option: str, instead: str | None) -> None:
    """Refuse ``folder`` when a folder above it is another run's output folder (a run of this process in another
    scope, or one whose lock file is locked now): a census into ``OUT/sub`` while another run writes ``OUT``. A run's
    own folders nest freely (a census of two encoders holds ``OUT`` and ``OUT/<tag>``). Folders below ``folder``
    are not looked at (a tree may be large): a run writing ``OUT/sub`` does not stop one taking ``OUT``."""
    for parent in Path(key).parents:
        held = _HELD.get(str(parent))
        if held is not None:
            if held.scope is not scope:
                raise FolderBusy(_busy(folder, None, option, instead, here=held.scope, inside=parent))
            continue
        if fcntl is None:
            continue
        try:
            fd = os.open(parent / LOCK, os.O_RDONLY | os.O_CLOEXEC)
        except OSError:  # none there (the usual case), or unreadable: nothing to ask
            continue
        try:
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)  # a probe: free unless a run holds it
            fcntl.flock(fd, fcntl.LOCK_UN)
        except BlockingIOError:
            raise FolderBusy(_busy(folder, _read_record(fd), option, instead, inside=parent)) from None
        except OSError:
            pass
        finally:
            os.close(fd)


def _acquire(folder: Path, scope: _Scope, option: str, instead: str | None) -> _Lock:
    """Take ``folder``'s lock without waiting; the holder's record is written into the lock file."""
    made = outermost_missing(folder)
    folder.mkdir(parents=True, exist_ok=True)
    if fcntl is None:  # Windows: no flock; documented in the module docstring, not warned at every run
        return _Lock(folder, None, made, scope)
    path = folder / LOCK
    for _ in range(100):
        try:
            fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o666)
        except PermissionError:  # a read-only lock file locks as well; only its record cannot be written
            try:
                fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
            except OSError as e:
                return _unlocked(folder, made, scope, f"its lock file cannot be opened ({e.strerror})")
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            record = _read_record(fd)
            os.close(fd)
            raise FolderBusy(_busy(folder, record, option, instead)) from None
        except OSError as e:
            os.close(fd)
            if e.errno in (errno.ENOLCK, errno.EOPNOTSUPP, errno.ENOTSUP, errno.EINVAL):
                return _unlocked(folder, made, scope, f"its file system has no flock ({e.strerror})")
            raise
        with contextlib.suppress(FileNotFoundError):
            if os.path.samestat(os.fstat(fd), os.stat(path)):
                break
        os.close(fd)  # its run removed it (the folder's last file) while this one opened it: lock the new one
        folder.mkdir(parents=True, exist_ok=True)
    else:
        raise OutputError(f"{path}: its lock keeps being replaced; another program is removing it")
    record = json.dumps({"command": scope.command, "pid": os.getpid(), "host": socket.gethostname(),
                         "started": time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(scope.started))})
    with contextlib.suppress(OSError):  # one write of one line: a reader takes it only whole (_read_record)
        os.ftruncate(fd, 0)
        os.pwrite(fd, (record + "\n").encode(), 0)
    return _Lock(folder, fd, made, scope)


def _unlocked(folder: Path, made: Path | None, scope: _Scope, why: str) -> _Lock:
    log.warning("%s: not locked against another run writing into it at once: %s", folder, why)
    return _Lock(folder, None, made, scope)


def _read_record(fd: int) -> dict | None:
    """The record of the run holding a lock, read from its lock file: a whole line of JSON or nothing (tried for a
    moment while the holder writes it; a record of a run that has ended is the last holder's, not yet replaced)."""
    for _ in range(20):
        with contextlib.suppress(OSError, ValueError):
            text = os.pread(fd, 4096, 0).decode()
            if text.endswith("\n"):
                record = json.loads(text.splitlines()[0])
                if isinstance(record, dict) and not _ended(record):
                    return record
        time.sleep(0.02)
    return None


def _ended(record: dict) -> bool:
    """Whether a lock record names a process of this machine that is gone."""
    if record.get("host") != socket.gethostname() or not isinstance(record.get("pid"), int):
        return False
    try:
        os.kill(record["pid"], 0)
    except ProcessLookupError:
        return True
    except OSError:
        return False
    return False


def _busy(folder: Path, record: dict | None, option: str, instead: str | None, here: _Scope | None = None,
          inside: Path | None = None) -> str:
    """The refusal of ``folder``: held by the run of ``record`` (another process), or by ``here`` (a run of this
    process in another thread or call); ``inside``: the held folder above ``folder``, when it is not ``folder``."""
    if here is not None:
        who, stop = (f"another run in this process, `{here.command}` (started "
                     f"{time.strftime('%Y-%m-%d %H:%M:%S UTC', time.gmtime(here.started))})", "stop it")
    elif record is None:
        who, stop = "another patterncnn run (its record cannot be read)", "stop it"
    else:
        host = "" if record.get("host") == socket.gethostname() else f" on {record.get('host')}"
        who = (f"another patterncnn run, `{record.get('command')}` (pid {record.get('pid')}{host}, started "
               f"{record.get('started')})")
        stop = f"stop it (kill {record.get('pid')})" if not host else "stop it"
    where = f"is inside {inside}, which is being written by" if inside is not None else "is being written by"
    return (f"{option} {folder} {where} {who}; wait for it to end, {stop}, or "
            f"{instead or f'choose another {option}'}").lstrip()


def _release(key: str) -> None:
    """Release this process's lock on the folder ``key`` (a second call does nothing); its file is closed, and so
    the lock released, however the clean-up before ends."""
    with _HELD_GUARD:
        lock = _HELD.pop(key, None)
        if lock is None:
            return
        try:
            _leave(lock)
        finally:
            if lock.fd is not None:
                os.close(lock.fd)  # releases the lock


def _leave(lock: _Lock) -> None:
    """Remove what the lock added to its folder: the lock file, and the folders its taking made, when left empty."""
    path = lock.folder / LOCK
    with contextlib.suppress(OSError):  # removed while still held: a run that opened it meanwhile locks anew
        if lock.fd is not None and os.path.samestat(os.fstat(lock.fd), os.stat(path)):
            os.unlink(path)  # the folder is left as the run left it, without the lock
        elif lock.fd is None and os.listdir(lock.folder) == [LOCK]:
            os.unlink(path)
    if lock.made is not None:  # the folders this run made and left empty go, the deepest first
        for folder in (lock.folder.absolute(), *lock.folder.absolute().parents):
            try:
                os.rmdir(folder)
            except OSError:
                break
            if folder == lock.made:
                break


def drop_lock_file(folder: str | os.PathLike) -> None:
    """Remove ``folder``'s lock file when it is all the folder holds and no other run holds it (this process's own,
    or one taken here without waiting, as a killed run's): the lock leaves no folder behind. Safe against a run that
    opened it just before: a lock taken on a removed file is dropped and taken again on the path (:func:`hold`)."""
    path = Path(folder) / LOCK
    with contextlib.suppress(OSError):
        if os.listdir(folder) != [LOCK]:
            return
        if os.path.realpath(folder) in _HELD or fcntl is None:
            os.unlink(path)
            return
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            os.unlink(path)
        finally:
            os.close(fd)


STAGED, PULLED = ".patterncnn-staged-", ".patterncnn-pull-"  # staged_outputs', and annotate pull's labelled set's
STALE = 24 * 3600  # seconds: a staging folder left alone this long belongs to a run that was killed
_STAGE = re.compile(rf"({re.escape(STAGED)}|{re.escape(PULLED)})[a-z0-9_]{{8}}")  # as tempfile.mkdtemp names them


def new_stage(folder: Path, prefix: str) -> Path:
    """A fresh, empty staging folder ``folder/<prefix>…`` (``folder`` made if need be; ``prefix`` :data:`STAGED` or
    :data:`PULLED`). Staging folders there that nothing has touched for a day (:data:`STALE`) go first: a run killed
    outright (SIGKILL, a power cut) leaves its own behind. Only folders named as this function names them are
    swept, never a user's; a younger one stays, as another writer may be filling it (a stage lives for seconds or
    minutes); a folder that cannot be listed is not swept."""
    folder.mkdir(parents=True, exist_ok=True)
    now = time.time()
    with contextlib.suppress(OSError):  # best effort: a folder one may write into but not list is still written
        for entry in os.scandir(folder):
            with contextlib.suppress(OSError):
                if (_STAGE.fullmatch(entry.name) and entry.is_dir(follow_symlinks=False)
                        and now - entry.stat(follow_symlinks=False).st_mtime > STALE):
                    shutil.rmtree(entry.path, ignore_errors=True)
    return Path(tempfile.mkdtemp(prefix=prefix, dir=folder))


def move_into_place(src: str | os.PathLike, path: str | os.PathLike) -> None:
    """Move the finished file ``src`` onto ``path`` with one atomic rename: a symlink at ``path`` is written through
    (its target is replaced), a folder, FIFO, device or socket refused (:class:`OutputError`, :func:`replaceable`);
    a target on another file system (a symlink into one) gets a copy instead, itself atomic (:func:`atomic_open`)."""
    target = replaceable(path)
    try:
        os.replace(src, target)
    except OSError as e:
        if e.errno != errno.EXDEV:
            raise
        with open(src, "rb") as f, atomic_open(target, "wb") as g:
            shutil.copyfileobj(f, g)


def swap_into_place(new: str | os.PathLike, target: str | os.PathLike) -> None:
    """Put the finished folder ``new`` at ``target``; what was at ``target`` ends at ``new`` (the caller removes it),
    and nothing was there when ``new`` is gone. On Linux one atomic exchange (``renameat2`` with ``RENAME_EXCHANGE``):
    ``target`` is never missing, so a run starting meanwhile finds it and its lock (:func:`hold`) and is refused.
    Elsewhere two renames, by way of a hidden sibling of ``target``, undone if the second fails. A Ctrl-C (or a
    SIGTERM) lands after the renames (:func:`interrupts_held`): the swap is then done. A symlink at ``target`` is
    itself replaced (resolve it first to replace its target's folder).

    Raises:
        OSError: nothing moved (``new`` and ``target`` are as they were).
        OutputError: the two renames could neither finish nor be undone (a folder was made at ``target`` between
            them): ``new`` is left as it is, and the message says where ``target``'s contents are.
    """
    new, target = Path(new), Path(target)
    with interrupts_held():
        if not os.path.lexists(target):
            os.rename(new, target)  # fails on a non-empty folder made there meanwhile; an empty one is replaced
            return
        if _exchange(new, target):
            return
        old = target.with_name(f".{target.name}.{secrets.token_hex(4)}.old")
        try:
            os.rename(target, old)
            os.rename(new, target)
        except BaseException as e:  # an error, or an interrupt by another signal than those held
            if os.path.lexists(old) and os.path.lexists(new):  # the first rename happened, not the second: undone
                try:
                    os.rename(old, target)
                except OSError as undo:
                    raise OutputError(f"{target} could not be replaced ({e}), nor put back ({undo}): what was there "
                                      f"is kept in {old}; move it back by hand") from e
            elif os.path.lexists(old):  # both happened: the swap is whole, what was there is handed back
                with contextlib.suppress(OSError):
                    os.rename(old, new)
            raise
        try:
            os.rename(old, new)
        except OSError as e:  # the swap is done: what was there is only not where the caller removes it
            log.warning("%s was replaced; what was there is left in %s (%s): remove it", target, old, e.strerror)


@contextlib.contextmanager
def interrupts_held() -> Iterator[None]:
    """Hold back Ctrl-C and SIGTERM until the block ends, so that its few renames all happen or none does; the
    signal then acts as it would have (a KeyboardInterrupt, the command's SIGTERM handler, the default action). A
    block that ends by an exception drops the held signal: the run is ending anyway, with its own message. Only in
    the main thread, where Python runs signal handlers; a signal whose handler Python did not set is left alone. A
    signal that comes while the handlers are being put back acts at once (the holding handler passes it on), so
    none is lost and none stays held."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    held: list[tuple[int, Any]] = []
    before: dict[int, Any] = {}
    holding = True  # read by hold() when called: False once the block is over

    def hold(signum, frame):
        if holding:
            held.append((signum, frame))
        else:
            _deliver(before.get(signum, signal.SIG_DFL), signum, frame)

    try:
        for signum in (signal.SIGINT, signal.SIGTERM):
            if signal.getsignal(signum) is not None:
                before[signum] = signal.signal(signum, hold)
        yield
    finally:
        holding = False
        for signum, handler in before.items():
            signal.signal(signum, handler)
    if held:  # only when the block ended normally: delivered as it arrived
        _deliver(before[held[0][0]], *held[0])


def _deliver(handler: Any, signum: int, frame: Any) -> None:
    """Act on a signal as ``handler`` (what :func:`signal.signal` returned) would have."""
    if callable(handler):
        handler(signum, frame)
    elif handler == signal.SIG_DFL:
        signal.signal(signum, signal.SIG_DFL)
        os.kill(os.getpid(), signum)


_RENAME_EXCHANGE, _AT_FDCWD = 2, -100  # <linux/fs.h>, <fcntl.h>


def _exchange(a: Path, b: Path) -> bool:
    """Swap the paths ``a`` and ``b`` in one atomic step; False where the system or file system has no such step."""
    renameat2 = _renameat2()
    if renameat2 is None:
        return False
    if renameat2(_AT_FDCWD, os.fsencode(a), _AT_FDCWD, os.fsencode(b), _RENAME_EXCHANGE) == 0:
        return True
    err = ctypes.get_errno()
    if err in (errno.EINVAL, errno.ENOSYS, errno.EOPNOTSUPP, errno.ENOTSUP):  # a kernel or file system without it
        return False
    raise OSError(err, os.strerror(err), str(a), None, str(b))


@functools.cache
def _renameat2():
    """glibc's ``renameat2`` (2.28 and later), else None."""
    if not sys.platform.startswith("linux"):
        return None
    try:
        fn = ctypes.CDLL(None, use_errno=True).renameat2
    except (OSError, AttributeError):
        return None
    fn.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_int, ctypes.c_char_p, ctypes.c_uint]
    fn.restype = ctypes.c_int
    return fn


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


def parse_json(data: str | bytes, where: str, fix: str, error: type[Exception] = DataError) -> Any:
    """The JSON value of ``data`` (text or UTF-8 bytes), or ``error`` naming ``where`` and ``fix`` (never a traceback:
    nesting deeper than the interpreter's stack is refused like any other bad JSON)."""
    try:
        return json.loads(data)
    except (ValueError, RecursionError) as e:  # UnicodeDecodeError is a ValueError
        why = "nested too deeply" if isinstance(e, RecursionError) else str(e)[:120]
        raise error(f"{where} is not valid JSON ({why}); {fix}") from None


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


def weights_id(fp: dict) -> tuple | None:
    """What identifies an encoder fingerprint's weights: their SHA-256 (a local folder), else the hub id and
    commit; None when neither was recorded (nothing can be said about two such encoders)."""
    if fp.get("sha256"):
        return ("sha256", fp["sha256"])
    if fp.get("revision"):
        return ("hub", fp.get("model"), fp["revision"])
    return None


def public_source(source: str) -> str:
    """A data source fit for a shared file: ``RTE/dev.tsv`` for a GLUE file, a ``datasets:`` name as it is."""
    return source if source.startswith("datasets:") else "/".join(Path(source).parts[-2:])
