"""``FileLog``: the session's JSON-lines log file, the one file log every coxswain runtime writes.

The log is the Rust crate ``coxswain-file-log`` (``coxswain._native.FileLog``), the tokio and
threads drivers' and the Node binding's too: this module only wraps it. It locks the file
(``flock``: a writer in any language excludes the others), refuses a path that is not a regular
file (a FIFO, a directory, a socket: :class:`NotRegularFile`, never opened blocking), and
checks before every append and again before acknowledging it (and at every sync and close) that
the file still ends as it left it and the path still names it: a file removed, renamed or
replaced (:class:`LogReplaced`), cut in place (``copytruncate``, ``: > file``:
:class:`LogTruncated`), or appended to or overwritten at its end by a writer that ignores the
lock (:class:`LogTampered`) fails the append instead of acknowledging it. A failed append is
cut back (never extending the file) and the log takes appends again; one whose cut-back failed
too (``indeterminate``) leaves the log refusing every append (``failed``) until it is re-opened.
Not detected: bytes overwritten in place before the last 32 the log wrote, and a change undone
before the next check.

Every call that does IO releases the GIL: the asyncio agent awaits its appends on a worker
thread. Its errors are the Rust log's, by kind (``LogError.kind``), each naming the file.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, Literal, Mapping, Sequence

from . import _native
from ._errors import (
    LogError,
    LogLocked,
    LogPermissionDenied,
    LogReplaced,
    LogStorageFull,
    LogTampered,
    LogTruncated,
    NotRegularFile,
)
from ._types import DeliveryMemory, memory_capacity

__all__ = [
    "FileLog", "LogError", "LogLocked", "LogPermissionDenied", "LogReplaced", "LogStorageFull",
    "LogTampered", "LogTruncated", "NotRegularFile", "ReadBack", "Resumed", "SyncPolicy",
]

#: When a :class:`FileLog` syncs (``fdatasync``) on its own (``coxswain_file_log::SyncPolicy``;
#: the Node binding's ``sync`` option takes the same words): ``every-append`` (the default:
#: nothing acknowledged that a power loss can take back), ``per-turn`` (after an append that
#: ends a turn; safe against a process crash, not a power loss, in between) or ``never`` (only
#: when it is synced or closed). An explicit :meth:`FileLog.sync` always syncs.
SyncPolicy = Literal["every-append", "per-turn", "never"]


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


def _write_all(fd: int, data: bytes) -> None:
    """Writes all of ``data`` to ``fd``: the log's write as Python spells it. The log does its
    own; replace ``FileLog._write_all`` (a test's fault injection) and it calls this instead,
    with the file's descriptor, taking the GIL (every check and the cut-back stay its own)."""
    view = memoryview(data)
    while view:
        written = os.write(fd, view)
        view = view[written:]


def _fdatasync(fd: int) -> None:
    """Makes ``fd``'s data durable: the log's sync as Python spells it (see :func:`_write_all`;
    replace the module's ``_sync``)."""
    os.fdatasync(fd)


#: The log's sync as Python spells it; replaced, the log calls it instead of its own.
_sync = _fdatasync


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
        first = self.next_seq
        self.append_encoded(self.encode(records, first), len(records))
        return list(range(first, first + len(records)))


class FileLog(RecordLog):
    """A session's log file, opened locked for appending (created if missing), syncing as
    ``sync`` says (:data:`SyncPolicy`; anything else raises :class:`~coxswain.InvalidInput`
    naming it, before the path is looked at). Raises :class:`NotRegularFile`,
    :class:`LogLocked`, :class:`LogPermissionDenied` or :class:`LogError` (naming the path).
    Blocking (the GIL released)."""

    #: The log's write, as a test replaces it (see :func:`_write_all`).
    _write_all = staticmethod(_write_all)

    def __init__(self, path: str | os.PathLike[str], sync: SyncPolicy = "every-append") -> None:
        #: The path as given.
        self.path = os.fspath(path)
        self._log = _native.FileLog.open(path, sync)
        #: The writer thread :meth:`append_in_thread` runs appends on (made when first used).
        self._writer: ThreadPoolExecutor | None = None

    @classmethod
    def open(
        cls, path: str | os.PathLike[str], delivery_memory: DeliveryMemory,
        max_pending: int | None, hash_seed: int, redelivery: int = 0, *,
        sync: SyncPolicy = "every-append",
    ) -> tuple["FileLog", Resumed]:
        """Opens the log at ``path`` and resumes it (the Rust log's one resume path,
        ``coxswain_file_log::FileLog::resume``): read back through the session layer's plan
        (the machine restored with the host's delivery memory, S51, admission bound, S55, and
        hash seed; the closers of a turn it ended inside, then, with the redelivery allowance
        ``redelivery``, S59, the splices that re-insert what that turn claimed and no model call
        saw), and only once all that succeeded repaired (a torn tail dropped, an unterminated
        record ended, the closers appended, S50). A log that is refused
        (:class:`~coxswain.CorruptLog`) is left as it was and released. An allowance that is not
        an ``int`` from 0 to 1000 raises :class:`~coxswain.InvalidRedelivery` before the path is
        even looked at. Blocking (the GIL released)."""
        allowance = _native.check_redelivery(redelivery)
        log = cls(path, sync)
        try:
            machine, records, torn, closers, interrupted, redelivered = log._log.resume(
                memory_capacity(delivery_memory), max_pending, hash_seed, allowance, log._hooks()
            )
        except BaseException:
            with contextlib.suppress(LogError):  # released; the error is the resume's
                log._log.close()
            raise
        return log, Resumed(records, torn, machine, closers, interrupted, redelivered)

    @staticmethod
    def _hooks() -> tuple[Any, Any] | None:
        """The write and sync a test put in place of the log's own, if it did."""
        write, sync = FileLog._write_all, _sync
        if write is _write_all and sync is _fdatasync:
            return None
        return write, sync

    @property
    def next_seq(self) -> int:
        """The ``seq`` the next appended record gets (1 before the log was read back)."""
        return self._log.next_seq

    def committer(self) -> Any:
        """What the agent's in-line commit appends to: the native log itself (no Python call
        per batch), unless a test replaced the log's write or sync (then this wrapper)."""
        return self if self._hooks() is not None else self._log

    @property
    def sync_policy(self) -> SyncPolicy:
        """When the log syncs on its own (:data:`SyncPolicy`)."""
        policy: SyncPolicy = self._log.sync_policy
        return policy

    def append(self, records: Sequence[Mapping[str, Any]]) -> list[int]:
        """Encodes and appends ``records`` (``{type, data}``), reading and repairing the log
        first if that was not done; returns their ``seq``s."""
        if self._log.next_seq == 1:
            self._log.append_encoded(b"", 0, False, None, self._hooks())  # reads, repairs first
        first = self.next_seq  # the lines' numbers, checked under the log's lock
        self.append_encoded(self.encode(records, first), len(records), True, first)
        return list(range(first, first + len(records)))

    def append_encoded(self, data: bytes, count: int, ends_turn: bool = True,
                       first_seq: int | None = None) -> None:
        """Appends ``count`` records encoded as ``data`` as one write, syncing as the policy says
        for a batch that does (``ends_turn``) or does not end a turn. ``first_seq``: the ``seq``
        they were numbered from; unless it is :attr:`next_seq` when the log takes them (another
        append came first), or ``data`` is not ``count`` records, nothing is written
        (:class:`~coxswain.EncodeError`-like ``LogError``, kind ``encode``). From a failed append
        the batch is not in the log (cut back), except ``indeterminate`` (see :class:`LogError`)."""
        write, sync = FileLog._write_all, _sync
        hooks = None if write is _write_all and sync is _fdatasync else (write, sync)
        self._log.append_encoded(data, count, ends_turn, first_seq, hooks)

    async def append_in_thread(self, data: bytes, count: int, ends_turn: bool) -> None:
        """:meth:`append_encoded` on the log's writer thread (one warm thread of its own, made at
        the first call and stopped at :meth:`close`; no context copied, unlike
        ``asyncio.to_thread``), so the event loop never waits for the disk."""
        if self._writer is None:
            self._writer = ThreadPoolExecutor(1, thread_name_prefix="coxswain-log")
        loop = asyncio.get_running_loop()
        if self._log.sync_policy == "per-turn":  # only that policy reads whether it ends a turn
            await loop.run_in_executor(self._writer, self.append_encoded, data, count, ends_turn)
        else:
            await loop.run_in_executor(self._writer, self.append_encoded, data, count)

    def sync(self) -> None:
        """Makes everything written durable, and checks the file is still the log's and ends
        as it left it (:class:`LogReplaced`, :class:`LogTruncated`, :class:`LogTampered`)."""
        self._log.sync(self._hooks())

    def close(self) -> None:
        """Syncs and releases the file and its lock; raises as :meth:`sync` does (released all
        the same). Closing again does nothing; any other call on a closed log raises
        :class:`LogError` (``closed``)."""
        if self._writer is not None:
            self._writer.shutdown(wait=False)
            self._writer = None
        self._log.close(self._hooks())
