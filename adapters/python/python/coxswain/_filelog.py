"""``FileLog``: the JSON-lines session log file, in the format of ``adapters/tokio``'s FileLog.

The record format (``{"seq": N, "type": T, "data": D}`` per line) is ``coxswain-log``'s, reached
through ``coxswain._native``: this module only does the file IO. The file is locked (``flock``,
the same lock the Rust FileLog takes, so a Rust and a Python writer exclude each other), every
append is written in full and made durable (``os.fdatasync``) before it returns, and a failed
append is cut back to where it started.
"""

from __future__ import annotations

import fcntl
import os
from dataclasses import dataclass
from typing import Any, Mapping, Sequence

from . import _native
from ._errors import CoxswainError

__all__ = ["FileLog", "LogError", "ReadBack"]


class LogError(CoxswainError):
    """Reading, writing or syncing the log file failed. ``indeterminate``: a failed append could
    not be cut back, so the log may or may not hold it."""

    def __init__(self, message: str, *, indeterminate: bool = False) -> None:
        super().__init__(message)
        self.indeterminate = indeterminate


@dataclass(frozen=True, slots=True)
class ReadBack:
    """A log read back: its complete records (``{seq, type, data}``), the torn final record left
    out (``(line, bytes)``, S50) and whether the last record lacks its ``\\n``."""

    records: tuple[Mapping[str, Any], ...]
    complete_len: int
    torn: tuple[int, int] | None
    unterminated: bool
    next_seq: int


def _sync(fd: int) -> None:
    if hasattr(os, "fdatasync"):
        os.fdatasync(fd)
    else:  # pragma: no cover - macOS
        os.fsync(fd)


class FileLog:
    """A session's log file, opened locked for appending (created if missing)."""

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = os.fspath(path)
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as error:
            os.close(fd)
            raise LogError(f"{self.path} is locked by another writer: {error}") from error
        self._fd: int | None = fd
        self._size = os.fstat(fd).st_size
        self._next_seq = 1
        directory = os.open(os.path.dirname(os.path.abspath(self.path)), os.O_RDONLY)
        try:
            os.fsync(directory)
        finally:
            os.close(directory)

    @property
    def next_seq(self) -> int:
        """The ``seq`` the next appended record gets."""
        return self._next_seq

    def _file(self) -> int:
        if self._fd is None:
            raise LogError(f"{self.path} is closed")
        return self._fd

    def read_back(self) -> ReadBack:
        """Reads every record (changes nothing). Raises :class:`~coxswain.CorruptLog` naming the
        line of anything that is not a record, except a torn final line."""
        fd = self._file()
        chunks = []
        offset = 0
        while True:
            chunk = os.pread(fd, 1 << 20, offset)
            if not chunk:
                break
            chunks.append(chunk)
            offset += len(chunk)
        data = b"".join(chunks)
        self._size = len(data)
        records, complete_len, torn, unterminated, next_seq = _native.parse_log(data)
        self._next_seq = next_seq
        return ReadBack(tuple(records), complete_len, torn, unterminated, next_seq)

    def repair_tail(self, read: ReadBack) -> bool:
        """Drops a torn final record and ends an unterminated one with ``\\n`` (S50); returns
        whether the file changed (then sync before acknowledging anything)."""
        fd = self._file()
        changed = False
        if read.torn is not None:
            os.ftruncate(fd, read.complete_len)
            self._size = read.complete_len
            changed = True
        if read.unterminated:
            self._write_all(fd, b"\n", self._size)
            self._size += 1
            changed = True
        return changed

    def encode(self, records: Sequence[Mapping[str, Any]], first_seq: int) -> bytes:
        """The lines of ``records`` from ``first_seq`` (raises :class:`~coxswain.EncodeError`)."""
        return _native.encode_records(first_seq, records)

    def append_encoded(self, data: bytes, count: int) -> None:
        """Appends ``count`` encoded records and makes them durable; cut back on failure."""
        if not data:
            return
        fd = self._file()
        start = self._size
        try:
            self._write_all(fd, data, start)
            _sync(fd)
        except OSError as error:
            try:
                os.ftruncate(fd, start)
                _sync(fd)
            except OSError as cut:
                self._fd = None
                os.close(fd)
                raise LogError(
                    f"append failed ({error}) and cutting it back failed ({cut})",
                    indeterminate=True,
                ) from error
            raise LogError(f"append failed: {error}") from error
        self._size = start + len(data)
        self._next_seq += count

    def append(self, records: Sequence[Mapping[str, Any]]) -> list[int]:
        """Encodes and appends ``records`` (``{type, data}``); returns their ``seq``s."""
        first = self._next_seq
        self.append_encoded(self.encode(records, first), len(records))
        return list(range(first, first + len(records)))

    def sync(self) -> None:
        """Makes everything written durable."""
        _sync(self._file())

    @staticmethod
    def _write_all(fd: int, data: bytes, offset: int) -> None:
        view = memoryview(data)
        while view:
            written = os.pwrite(fd, view, offset)
            view = view[written:]
            offset += written

    def close(self) -> None:
        """Syncs and releases the file and its lock."""
        if self._fd is not None:
            fd, self._fd = self._fd, None
            try:
                _sync(fd)
            finally:
                os.close(fd)
