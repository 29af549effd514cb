"""The session log's record format, owned by the Rust crate ``coxswain-log`` and exposed here so
Python writes and reads exactly what ``adapters/tokio``'s FileLog and ``coxswain verify`` do.

A line is ``{"seq": N, "type": T, "data": D}`` and ``\\n``; the machine's events (six types) and
the host's (any other type) interleave in one sequence. :class:`FileLog` does the file IO;
:class:`MemoryLog` keeps the same bytes in memory (nothing durable: tests, benches).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Iterable, Mapping

from . import _native
from ._errors import LineTooLong
from ._filelog import (
    FileLog, LogError, LogLocked, LogPermissionDenied, LogReplaced, LogStorageFull, LogTampered,
    LogTruncated, NotRegularFile, ReadBack, SyncPolicy,
)
from ._machine import Machine
from ._memorylog import MemoryLog
from ._types import JSON, DeliveryMemory, Event, memory_capacity

__all__ = [
    "encode", "parse", "restore", "Restored", "FileLog", "LineTooLong", "LogError", "LogLocked",
    "LogPermissionDenied", "LogReplaced", "LogStorageFull", "LogTampered", "LogTruncated",
    "MemoryLog", "NotRegularFile", "ReadBack", "SyncPolicy",
]


def encode(records: Iterable[Mapping[str, JSON]], first_seq: int = 1) -> bytes:
    """The lines of ``records`` (``{type, data}`` each) numbered from ``first_seq``. Raises
    :class:`~coxswain.EncodeError`, encoding nothing, for a record the reader would refuse (too
    deep, a machine type with the wrong data, a host event of the machine's own type)."""
    return _native.encode_records(first_seq, list(records))


def parse(data: bytes) -> ReadBack:
    """Reads a log back: every complete record, the torn final record left out (S50). Raises
    :class:`~coxswain.CorruptLog` naming the line of anything else that is not a record."""
    records, complete_len, torn, unterminated, next_seq = _native.parse_log(data)
    return ReadBack(tuple(records), complete_len, torn, unterminated, next_seq)


@dataclass(frozen=True, slots=True)
class Restored:
    """A log restored as ``Agent.open`` does: the machine, the closers to append first (S50;
    the last ``redelivered`` of them the redelivery splices, S59) and the turn the log ended
    inside."""

    machine: Machine
    closers: tuple[Event, ...]
    interrupted_turn: int | None
    redelivered: int = 0


def restore(
    records: Iterable[Mapping[str, Any]], *, delivery_memory: DeliveryMemory = 0,
    redelivery: int = 0,
) -> Restored:
    """Restores the machine from records read back (S46–S48), closing an open final turn (S50)
    and, with the redelivery allowance ``redelivery`` (S59; default 0), re-inserting what that
    turn claimed and no model call saw. Raises :class:`~coxswain.InvalidRedelivery` (before
    anything is read) or :class:`~coxswain.CorruptLog` naming the line of the first record
    refused."""
    allowance = _native.check_redelivery(redelivery)
    native, closers, interrupted, redelivered = _native.open_log(
        list(records), memory_capacity(delivery_memory), None, 0, allowance
    )
    return Restored(Machine._wrap(native), tuple(closers), interrupted, redelivered)
