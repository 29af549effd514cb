"""The exceptions of coxswain: one class per rejection kind, under one base.

A rejected input changed nothing and emitted nothing (SPEC S5). ``kind`` is the rejection kind of
the conformance trace format (FORMAT.md). ``was_delivered`` tells a retrying caller it may stop:
true only for :class:`AlreadyPending` and :class:`AlreadyDelivered` (the same message is pending
or was delivered); a :class:`Conflict` is a caller bug (S56), never success.
"""

from __future__ import annotations

import os
from typing import ClassVar

from ._types import Expect, Target

__all__ = [
    "CoxswainError",
    "Rejected",
    "AlreadyPending",
    "AlreadyDelivered",
    "Conflict",
    "TurnMismatch",
    "Full",
    "UnexpectedCompletion",
    "Busy",
    "Disposed",
    "AfterDisposal",
    "Undrained",
    "UnrepresentableValue",
    "InvalidLog",
    "InvalidInput",
    "InvalidRedelivery",
    "CorruptLog",
    "LineTooLong",
    "LogError",
    "LogLocked",
    "LogPermissionDenied",
    "LogReplaced",
    "LogStorageFull",
    "LogTampered",
    "LogTruncated",
    "NotRegularFile",
    "BatchError",
    "EncodeError",
    "TooDeep",
]


class CoxswainError(Exception):
    """The base of every error coxswain raises."""


class Rejected(CoxswainError):
    """The machine rejected an input: nothing changed (S5)."""

    kind: ClassVar[str] = "rejected"

    def __init__(self, message: str, id: str | None = None) -> None:
        super().__init__(message)
        #: The message id the rejection is about (``AlreadyPending``, ``AlreadyDelivered``,
        #: ``Conflict``).
        self.id = id

    @property
    def was_delivered(self) -> bool:
        """Whether the rejection says this very message was delivered already (a retry may
        stop): true for :class:`AlreadyPending` and :class:`AlreadyDelivered` only."""
        return False


class AlreadyPending(Rejected):
    """The id is already pending in NT or NS, for the same message (S9, S13)."""

    kind = "already-pending"

    @property
    def was_delivered(self) -> bool:
        return True


class AlreadyDelivered(Rejected):
    """The delivery memory holds the id, for the same message: a retry of a delivery already
    made (S51, S52)."""

    kind = "already-delivered"

    @property
    def was_delivered(self) -> bool:
        return True


class Conflict(Rejected):
    """The id is pending, or held by the delivery memory, for a *different* message (S56): the
    caller reused an id. The new message was not delivered; ``was_delivered`` is false."""

    kind = "conflict"

    def __init__(self, message: str, id: str) -> None:
        super().__init__(message, id)
        self.id: str = id


class TurnMismatch(Rejected):
    """A guarded send's expected-turn guard does not hold (S54): the turn it named ended or was
    stopped, or a turn started since the caller looked."""

    kind = "turn-mismatch"

    def __init__(self, message: str, kind: str, turn: int) -> None:
        super().__init__(message)
        #: The guard that did not hold.
        self.expect = Expect.idle_after(turn) if kind == "idleAfter" else Expect.turn(turn)


class Full(Rejected):
    """The list the delivery joins (after S18's retargeting) already holds ``max_pending``
    items: the machine's admission bound (S55)."""

    kind = "full"

    def __init__(self, message: str, target: Target, max_pending: int) -> None:
        super().__init__(message)
        #: The full list.
        self.target: Target = target
        #: The bound.
        self.max_pending = max_pending


class UnexpectedCompletion(Rejected):
    """An answer to a request that is not outstanding, or ``end_maintenance`` with none (S4)."""

    kind = "unexpected-completion"


class Busy(Rejected):
    """``begin_maintenance`` while not idle (S43)."""

    kind = "busy"


class Disposed(Rejected):
    """The machine is disposed and accepts no input (S45)."""

    kind = "disposed"


#: The core's name for :class:`Disposed`.
AfterDisposal = Disposed


class Undrained(Rejected):
    """The previous transition was neither persisted nor drained (``Machine.drain`` hands it
    out again). A host error, never part of a conformance trace."""

    kind = "undrained"


class BatchError(CoxswainError):
    """A batch call that does not fit the machine's state; nothing changed. ``kind`` says why:
    ``already-open`` (``begin_batch`` twice), ``not-open`` (a closer without a batch) or
    ``undrained`` (``begin_batch`` while a transition waits to be persisted or drained)."""

    def __init__(self, message: str, kind: str) -> None:
        super().__init__(message)
        #: ``already-open``, ``not-open`` or ``undrained``.
        self.kind = kind


class InvalidLog(CoxswainError):
    """A log the machine cannot be restored from (S46, S47); nothing was restored."""

    def __init__(self, message: str, index: int) -> None:
        super().__init__(message)
        #: The 0-based position of the offending event.
        self.index = index


class InvalidInput(CoxswainError, ValueError):
    """An input that is not one of FORMAT.md's shapes (not a rejection: nothing was applied)."""


class InvalidRedelivery(CoxswainError, ValueError):
    """A redelivery allowance (S59) that is not an ``int`` from 0 to 1000
    (``coxswain_session::MAX_REDELIVERY``): negative, a ``bool``, a ``float``, not an ``int`` at
    all, or above the bound (an ``int`` of any size: it is never converted). Refused when the log
    is opened, before anything is read or written; the text names the value."""

    def __init__(self, message: str, value: object) -> None:
        super().__init__(message)
        #: The allowance that was refused, as it was passed.
        self.value = value


class UnrepresentableValue(InvalidInput, TypeError):
    """A value JSON and the log cannot carry exactly (an ``int`` beyond 64 bits, a NaN or
    infinite ``float``, a non-``str`` key, a ``set``, an object): refused at the call, nothing
    changed. It is an ``InvalidInput`` (so a ``ValueError``) and a ``TypeError``."""


class CorruptLog(CoxswainError):
    """A stored log that cannot be read back or restored; names the 1-based line. From a log
    file: ``kind`` is ``corrupt`` (a line that is no record) or ``invalid`` (records the core
    does not accept, S46, S47), ``path`` the file (``None`` for bytes parsed in memory)."""

    def __init__(
        self, message: str, line: int, *, kind: str = "corrupt",
        path: str | os.PathLike[str] | None = None,
    ) -> None:
        super().__init__(message)
        self.line = line
        #: ``corrupt`` or ``invalid`` (``line-too-long`` for :class:`LineTooLong`): the Rust
        #: log's kind (``coxswain_file_log::LogError::kind``).
        self.kind = kind
        #: The log file, if it is one.
        self.path = None if path is None else os.fspath(path)


class LineTooLong(CorruptLog):
    """A line of a log file is longer than the longest record a session writes
    (``MAX_LINE_BYTES``, the Rust logs' limit): the read stopped there, holding no more of the
    line than the limit and one chunk. Nothing was restored or written."""

    def __init__(self, path: str | os.PathLike[str], line: int, max: int) -> None:
        super().__init__(
            f"{path}: line {line} is longer than {max} bytes (the longest record a session "
            "writes)",
            line,
            kind="line-too-long",
            path=path,
        )
        #: The log file's path.
        self.path: str = os.fspath(path)
        #: The limit.
        self.max = max


class EncodeError(CoxswainError, ValueError):
    """A record the log reader would refuse (too deep, a reserved type…); nothing was written."""


class TooDeep(EncodeError):
    """A value nests deeper than a log record can hold it (``coxswain_log::TooDeep``): a message
    delivered to an agent, a host event's ``data``, a record to encode. Nothing changed and
    nothing was written. Its text is the Rust ``TooDeep``'s, as every layer says it; it is an
    :class:`EncodeError` (so a ``ValueError``), as it was before it had a name of its own."""

    def __init__(self, message: str, depth: int, max: int) -> None:
        super().__init__(message)
        #: How deep the value nests (arrays and objects, its own included).
        self.depth = depth
        #: The most it may nest where it is written.
        self.max = max


# ----- the log's errors: one class per kind of ``coxswain_file_log::LogError`` -----


class LogError(CoxswainError):
    """A log failed: reading, writing, syncing or opening its file. ``kind`` is the Rust log's
    name for what failed (``coxswain_file_log::LogError::kind``, the one vocabulary every
    language uses: ``io``, ``indeterminate``, ``failed``, ``closed``, ``seq-exhausted``,
    ``fenced``, … and the kinds of the subclasses), ``path`` the file (``None`` for a log that
    is no file), and the message names the file.

    From an append, the batch is not in the log, except ``indeterminate``: a failed append
    could not be cut back (or the file was found shorter than the log, and a cut-back never
    extends a file), so the log may or may not hold it; ``undo`` is why the cut-back failed (a
    :class:`LogTruncated` for a shorter file) and ``__cause__`` why the append failed. The log
    then takes no more appends (``failed``) until it is re-opened. ``fenced``: another writer
    owns the session (a log of the embedder's that fences writers raises it so). An agent whose
    append fails ``indeterminate`` or ``fenced`` stops (the session layer's stop policy); after
    any other failure it goes on."""

    #: The kind of the class's errors.
    KIND: ClassVar[str] = "io"

    def __init__(
        self, message: str, *, indeterminate: bool = False, undo: BaseException | None = None,
        fenced: bool = False, kind: str | None = None,
        path: str | os.PathLike[str] | None = None,
    ) -> None:
        super().__init__(message)
        self.indeterminate = indeterminate
        self.undo = undo
        self.fenced = fenced
        if kind is None:
            kind = "indeterminate" if indeterminate else "fenced" if fenced else self.KIND
        #: The Rust log's kind of the error.
        self.kind: str = kind
        #: The log file.
        self.path: str | None = None if path is None else os.fspath(path)


class NotRegularFile(LogError):
    """The log's path names something that is not a regular file (a FIFO, a directory, a
    socket, a device): refused at open, before anything is read or written (a FIFO is never
    opened blocking: that could hang). ``file_type`` says what it is, in the Rust logs'
    words."""

    KIND = "not-regular"

    def __init__(self, message: str, *, path: str | os.PathLike[str], file_type: str,
                 kind: str | None = None) -> None:
        super().__init__(message, kind=kind, path=path)
        self.path: str = os.fspath(path)
        #: ``a FIFO``, ``a directory``, ``a socket``, ``a character device``, ``a block
        #: device`` or ``not a file``.
        self.file_type = file_type


class LogLocked(LogError):
    """Another writer holds the log's file (another ``FileLog``, here or in another process, in
    any language, or an agent not yet closed): refused at open, nothing read or written."""

    KIND = "locked"


class LogStorageFull(LogError):
    """The log's file system is full (``ENOSPC``, or a quota): nothing of the append is in the
    log (it was cut back). Free space and send again."""

    KIND = "storage-full"


class LogPermissionDenied(LogError):
    """The process may not open, write or lock the log's file, or sync its directory
    (``EACCES``, ``EPERM``, a read-only file system): nothing was written."""

    KIND = "permission-denied"


class LogReplaced(LogError):
    """The file at the log's path is no longer the one this log writes: it was removed, renamed
    or replaced. Nothing more is acknowledged."""

    KIND = "replaced"


class _Length(LogError):
    """A log error about the file's length: as this log left it (``expected``) and now
    (``found``)."""

    def __init__(self, message: str, *, path: str | os.PathLike[str], expected: int, found: int,
                 kind: str | None = None) -> None:
        super().__init__(message, kind=kind, path=path)
        self.path: str = os.fspath(path)
        #: The file's length as this log left it.
        self.expected = expected
        #: Its length now.
        self.found = found


class LogTruncated(_Length):
    """The log's file is shorter than what this log wrote (cut in place: a ``logrotate`` with
    ``copytruncate``, a ``: > file``): records acknowledged before may be gone. Nothing more is
    acknowledged; from an append, the batch is not in the log."""

    KIND = "truncated"


class LogTampered(_Length):
    """Another writer wrote to the log's file, ignoring its lock: it is longer than what this log
    wrote (``found > expected``: appended to), or does not end in the bytes this log wrote last
    (``found == expected``: overwritten at its end). Nothing more is acknowledged; from an
    append, the batch is not in the log."""

    KIND = "tampered"
