"""``FileLog``: the JSON-lines session log file, in the format of ``adapters/tokio``'s FileLog.

The record format (``{"seq": N, "type": T, "data": D}`` per line) is ``coxswain-log``'s, reached
through ``coxswain._native``: this module only does the file IO. The file is locked (``flock``,
the same lock the Rust FileLog takes, so a Rust and a Python writer exclude each other), every
append is written in full and made durable (``os.fdatasync``) before it returns, and a failed
append is cut back to where it started (never extending the file): the log then takes appends
again. One whose cut-back failed too (``indeterminate``) leaves the log refusing every append
until it is re-opened.

As the Rust FileLog does, it checks before every append (so nothing is written to a file that is
no longer the log's) and again before acknowledging it (and at every sync and close) that the
path still names the file it writes (same ``st_dev`` and ``st_ino``, still linked) and that the
file still ends as it left it:
a file removed, renamed or replaced (:class:`LogReplaced`), cut in place (``copytruncate``,
``: > file``: :class:`LogTruncated`), or appended to or overwritten at its end by a writer that
ignores the lock (:class:`LogTampered`) fails the append instead of acknowledging it. Not
detected: bytes overwritten in place before the last 32 the log wrote, and a change undone
before the next check.
"""

from __future__ import annotations

import fcntl
import os
import stat as _stat
from dataclasses import dataclass
from typing import Any, Mapping, Sequence

from . import _native
from ._errors import CoxswainError, LineTooLong
from ._types import DeliveryMemory, memory_capacity

__all__ = [
    "FileLog", "LogError", "LogReplaced", "LogTampered", "LogTruncated", "NotRegularFile",
    "ReadBack", "Resumed",
]

#: How many of the last bytes it wrote the log compares with the file's own.
_TAIL = 32

#: How much of the file one read takes; at most the line limit, so only the line a chunk ends
#: inside can pass it.
_CHUNK = min(1 << 20, _native.MAX_LINE_BYTES)


class LogError(CoxswainError):
    """Reading, writing or syncing the log file failed. From an append: the batch is not in the
    log. ``indeterminate``: a failed append could not be cut back (or the file was found shorter
    than the log, and a cut-back never extends a file), so the log may or may not hold it;
    ``undo`` is why the cut-back failed (a :class:`LogTruncated` for a shorter file).
    ``fenced``: another writer owns the session (a log of the embedder's that fences writers
    raises it so). An agent whose append fails ``indeterminate`` or ``fenced`` stops (the
    session layer's stop policy); after any other failure it goes on."""

    def __init__(
        self, message: str, *, indeterminate: bool = False, undo: BaseException | None = None,
        fenced: bool = False,
    ) -> None:
        super().__init__(message)
        self.indeterminate = indeterminate
        self.undo = undo
        self.fenced = fenced


class NotRegularFile(LogError):
    """The log's path names something that is not a regular file (a FIFO, a directory, a
    socket, a device): refused at open, before anything is read or written (a FIFO is never
    opened: that could block for ever). ``kind`` says what it is, in the Rust logs' words."""

    def __init__(self, path: str, kind: str) -> None:
        super().__init__(f"{path}: not a regular file ({kind})")
        self.path = path
        #: ``a FIFO``, ``a directory``, ``a socket``, ``a character device``, ``a block
        #: device`` or ``not a file``.
        self.kind = kind


def _kind(mode: int) -> str | None:
    """What a file of ``mode`` is, if not a regular file (``coxswain_log::NotRegularFile``)."""
    if _stat.S_ISREG(mode):
        return None
    if _stat.S_ISDIR(mode):
        return "a directory"
    if _stat.S_ISFIFO(mode):
        return "a FIFO"
    if _stat.S_ISSOCK(mode):
        return "a socket"
    if _stat.S_ISCHR(mode):
        return "a character device"
    if _stat.S_ISBLK(mode):
        return "a block device"
    return "not a file"


class LogReplaced(LogError):
    """The file at the log's path is no longer the one this log writes: it was removed, renamed
    or replaced. Nothing more is acknowledged."""

    def __init__(self, path: str) -> None:
        super().__init__(f"the log file {path} was removed or replaced")
        self.path = path


class LogTruncated(LogError):
    """The log's file is shorter than what this log wrote (cut in place: a ``logrotate`` with
    ``copytruncate``, a ``: > file``): records acknowledged before may be gone. Nothing more is
    acknowledged; from an append, the batch is not in the log."""

    def __init__(self, path: str, expected: int, found: int) -> None:
        super().__init__(
            f"the log file {path} was truncated: it holds {found} bytes where this log wrote "
            f"{expected}"
        )
        self.path = path
        #: The file's length as this log left it.
        self.expected = expected
        #: Its length now.
        self.found = found


class LogTampered(LogError):
    """Another writer wrote to the log's file, ignoring its lock: it is longer than what this log
    wrote (``found > expected``: appended to), or does not end in the bytes this log wrote last
    (``found == expected``: overwritten at its end). Nothing more is acknowledged; from an
    append, the batch is not in the log."""

    def __init__(self, path: str, expected: int, found: int) -> None:
        what = (
            f"its last bytes are not the ones this log wrote ({found} bytes)"
            if found == expected
            else f"it holds {found} bytes where this log wrote {expected}"
        )
        super().__init__(f"the log file {path} was written by another writer: {what}")
        self.path = path
        #: The file's length as this log left it.
        self.expected = expected
        #: Its length now.
        self.found = found


@dataclass(frozen=True, slots=True)
class ReadBack:
    """A log read back: its complete records (``{seq, type, data}``), the torn final record left
    out (``(line, bytes)``, S50) and whether the last record lacks its ``\\n``."""

    records: tuple[Mapping[str, Any], ...]
    complete_len: int
    torn: tuple[int, int] | None
    unterminated: bool
    next_seq: int


@dataclass(frozen=True, slots=True)
class Resumed:
    """What :meth:`FileLog.open` read back and did: how many complete records it read, the torn
    final record it dropped (``(line, bytes)``, S50), the machine the session layer restored
    from them (S46–S48: items parked, nothing wakes), how many closers it appended (S50) and
    the turn the log ended inside, if any."""

    records: int
    torn: tuple[int, int] | None
    machine: _native.Machine
    closers: int
    interrupted: int | None
    #: How many of the ``closers`` (the last) are redelivery splices (S59).
    redelivered: int = 0


def _sync(fd: int) -> None:
    if hasattr(os, "fdatasync"):
        os.fdatasync(fd)
    else:  # pragma: no cover - macOS
        os.fsync(fd)


class RecordLog:
    """What :class:`FileLog` and :class:`~coxswain.log.MemoryLog` share: the records they append
    are numbered on from the log's last (``next_seq``) and encoded by ``coxswain-log``."""

    _next_seq: int

    @property
    def next_seq(self) -> int:
        """The ``seq`` the next appended record gets."""
        return self._next_seq

    def encode(self, records: Sequence[Mapping[str, Any]], first_seq: int) -> bytes:
        """The lines of ``records`` from ``first_seq`` (raises :class:`~coxswain.EncodeError`)."""
        return _native.encode_records(first_seq, records)

    def append_encoded(self, data: bytes, count: int) -> None:
        """Appends ``count`` records already encoded (from :attr:`next_seq`)."""
        raise NotImplementedError

    def append(self, records: Sequence[Mapping[str, Any]]) -> list[int]:
        """Encodes and appends ``records`` (``{type, data}``); returns their ``seq``s."""
        first = self._next_seq
        self.append_encoded(self.encode(records, first), len(records))
        return list(range(first, first + len(records)))


class FileLog(RecordLog):
    """A session's log file, opened locked for appending (created if missing)."""

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = os.fspath(path)
        self._absolute = os.path.abspath(self.path)
        # Only a regular file is a log: what the path names is looked at before it is opened (a
        # FIFO is never opened, which could block), and the file opened is checked again.
        try:
            kind = _kind(os.stat(self.path).st_mode)
        except FileNotFoundError:
            kind = None  # created below
        except OSError as error:
            raise LogError(f"{self.path}: {error.strerror or error}") from error
        if kind is not None:
            raise NotRegularFile(self.path, kind)
        # O_APPEND: a write lands at the file's end, so a file cut meanwhile shows in its length.
        # O_NONBLOCK: a FIFO put there since the check does not block the open either.
        flags = os.O_RDWR | os.O_CREAT | os.O_APPEND | os.O_CLOEXEC | os.O_NONBLOCK
        try:
            fd = os.open(self.path, flags, 0o644)
        except OSError as error:
            raise LogError(f"{self.path}: {error.strerror or error}") from error
        try:
            kind = _kind(os.fstat(fd).st_mode)
            if kind is not None:
                raise NotRegularFile(self.path, kind)
            os.set_blocking(fd, True)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError as error:
                raise LogError(f"{self.path} is locked by another writer: {error}") from error
        except BaseException:
            os.close(fd)
            raise
        self._fd: int | None = fd
        stat = os.fstat(fd)
        self._id = (stat.st_dev, stat.st_ino)
        self._size = stat.st_size
        # The file's length when last read back, and (once its tail is repaired) the last bytes
        # this log left it with; ``None`` until then (only the path is checked).
        self._read_len = stat.st_size
        self._tail: bytes | None = None
        self._next_seq = 1
        #: Why the log takes no more appends once its file is released.
        self._shut = LogError(f"{self.path} is closed")
        directory = os.open(os.path.dirname(os.path.abspath(self.path)), os.O_RDONLY)
        try:
            os.fsync(directory)
        finally:
            os.close(directory)

    @classmethod
    def open(
        cls, path: str | os.PathLike[str], delivery_memory: DeliveryMemory,
        max_pending: int | None, hash_seed: int, redelivery: int = 0,
    ) -> tuple["FileLog", Resumed]:
        """Opens the log at ``path``, reads it back and resumes it through the session layer's
        plan (``coxswain_session::ResumePlan``: the machine restored with the host's delivery
        memory, S51, admission bound, S55, and hash seed; the closers of a turn it ended inside,
        then, with the redelivery allowance ``redelivery``, S59, the splices that re-insert what
        that turn claimed and no model call saw), and only once all that succeeded repairs it
        (drops a torn tail, ends an unterminated record, appends the closers, S50), as the Rust
        FileLog's ``open``. A log that is refused (:class:`~coxswain.CorruptLog`) is left as it
        was and released. An allowance that is not an ``int`` from 0 to 1000 raises
        :class:`~coxswain.InvalidRedelivery` before the path is even looked at. Blocking."""
        allowance = _native.check_redelivery(redelivery)
        log = cls(path)
        try:
            # One crossing: the bytes go to the session layer's plan, no record becomes a
            # Python object (`_native.resume_log`, `ResumePlan::from_bytes`).
            (machine, closers, interrupted, records, cut_to, torn, unterminated, next_seq,
             redelivered) = _native.resume_log(log._read_all(), memory_capacity(delivery_memory),
                                               max_pending, hash_seed, allowance)
            log._next_seq = next_seq
            changed = log._repair(cut_to, unterminated)
            if closers:
                log.append(closers)
            elif changed:
                log.sync()
        except BaseException:
            log.close()
            raise
        return log, Resumed(records, torn, machine, len(closers), interrupted, redelivered)

    def _file(self) -> int:
        if self._fd is None:
            shut = self._shut
            raise LogError(str(shut), indeterminate=shut.indeterminate, undo=shut.undo)
        return self._fd

    def _read_all(self) -> bytes:
        """Every byte of the file (changes nothing); the log's size as read. Read in chunks of
        at most the line limit (``MAX_LINE_BYTES``, the Rust logs' own): a line longer than
        that raises :class:`~coxswain.LineTooLong` as soon as the read passes the limit, having
        held no more of it than the limit and one chunk."""
        fd = self._file()
        limit = _native.MAX_LINE_BYTES
        chunks = []
        offset = 0
        # The length of the line being read, and how many lines were complete before it.
        current = lines = 0
        while True:
            chunk = os.pread(fd, _CHUNK, offset)
            if not chunk:
                break
            first = chunk.find(b"\n")
            # A chunk is no longer than the limit: only the line it ends inside (or continues,
            # without a `\n`) can pass it.
            if current + (len(chunk) if first < 0 else first) > limit:
                raise LineTooLong(self.path, lines + 1, limit)
            if first < 0:
                current += len(chunk)
            else:
                lines += chunk.count(b"\n")
                current = len(chunk) - chunk.rfind(b"\n") - 1
            chunks.append(chunk)
            offset += len(chunk)
        data = b"".join(chunks)
        self._size = len(data)
        self._read_len = len(data)
        self._tail = None
        return data

    def _repair(self, cut_to: int | None, unterminated: bool) -> bool:
        """Drops a torn final record (cuts the file to ``cut_to``) and ends an unterminated one
        with ``\\n`` (S50); returns whether the file changed (then sync before acknowledging
        anything)."""
        fd = self._file()
        self._check(fd, self._read_len, b"", named=True)
        changed = False
        if cut_to is not None:
            os.ftruncate(fd, cut_to)
            self._size = cut_to
            changed = True
        if unterminated:
            self._write_all(fd, b"\n")
            self._size += 1
            changed = True
        self._tail = os.pread(fd, min(self._size, _TAIL), self._size - min(self._size, _TAIL))
        return changed

    def append_encoded(self, data: bytes, count: int) -> None:
        """Appends ``count`` encoded records and makes them durable. Checks first that the path
        still names the log's file (:class:`LogReplaced`) and that it still ends as this log left
        it (:class:`LogTruncated`, :class:`LogTampered`): nothing is written then. After the
        sync it checks both again; a failure after the write began is cut back (never extending
        the file), and the log takes appends again unless the cut-back failed too."""
        if not data:
            return
        fd = self._file()
        start = self._size
        tail = self._tail if self._tail is not None else b""
        self._check(fd, start, tail, named=True)
        after = (tail + data)[-_TAIL:]
        try:
            self._write_all(fd, data)
            _sync(fd)
            self._check(fd, start + len(data), after, named=True)
        except (OSError, LogError) as error:
            self._cut_back(fd, start, tail, error)
        self._size = start + len(data)
        self._tail = after
        self._next_seq += count

    def _cut_back(self, fd: int, start: int, tail: bytes, error: OSError | LogError) -> None:
        """Cuts a failed append back to ``start`` (never extending the file: one found shorter
        is left as it is) and syncs the cut, then raises what the failure means."""
        try:
            found = os.fstat(fd).st_size
            if found < start:
                raise LogTruncated(self.path, start, found)
            os.ftruncate(fd, start)
            _sync(fd)
            self._check(fd, start, tail, named=False)
        except (OSError, LogError) as undo:
            if isinstance(error, LogReplaced):
                raise error from None
            self._fd = None
            os.close(fd)
            message = f"append failed ({error}) and cutting it back failed ({undo})"
            self._shut = LogError(
                f"{self.path} may or may not hold a failed append ({message}): re-open it",
                indeterminate=True,
                undo=undo,
            )
            raise LogError(message, indeterminate=True, undo=undo) from error
        if isinstance(error, LogError):
            raise error
        raise LogError(f"append failed: {error}") from error

    def _check(self, fd: int, size: int, tail: bytes, *, named: bool) -> None:
        """The file is ``size`` bytes long and ends in ``tail`` (:class:`LogTruncated`,
        :class:`LogTampered`); with ``named``, the path still names it (:class:`LogReplaced`)."""
        stat = os.fstat(fd)
        if named:
            try:
                there = os.stat(self._absolute)
            except FileNotFoundError:
                raise LogReplaced(self.path) from None
            if stat.st_nlink == 0 or (there.st_dev, there.st_ino) != self._id:
                raise LogReplaced(self.path)
        found = stat.st_size
        if found < size:
            raise LogTruncated(self.path, size, found)
        if found > size or (tail and os.pread(fd, len(tail), size - len(tail)) != tail):
            raise LogTampered(self.path, size, found)

    def sync(self) -> None:
        """Makes everything written durable, and checks the file is still the log's and ends
        as it left it (:class:`LogReplaced`, :class:`LogTruncated`, :class:`LogTampered`)."""
        fd = self._file()
        _sync(fd)
        self._check_end(fd)

    def _check_end(self, fd: int) -> None:
        if self._tail is None:  # not repaired yet: the log's end is not known
            return
        self._check(fd, self._size, self._tail, named=True)

    @staticmethod
    def _write_all(fd: int, data: bytes) -> None:
        view = memoryview(data)
        while view:
            written = os.write(fd, view)
            view = view[written:]

    def close(self) -> None:
        """Syncs and releases the file and its lock; raises as :meth:`sync` does (released all
        the same)."""
        if self._fd is not None:
            fd, self._fd = self._fd, None
            try:
                _sync(fd)
                self._check_end(fd)
            finally:
                os.close(fd)
