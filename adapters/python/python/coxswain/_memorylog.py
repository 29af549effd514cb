"""``MemoryLog``: the session log's bytes kept in memory, in :class:`~coxswain.log.FileLog`'s
record format, for tests, benches and harnesses that persist elsewhere. Nothing is durable: what
it holds is gone with the process (the Node binding's and the tokio adapter's ``MemoryLog`` are
the same idea)."""

from __future__ import annotations

import builtins

from . import _native
from ._filelog import LogError, RecordLog, Resumed
from ._types import DeliveryMemory, memory_capacity

__all__ = ["MemoryLog"]


class MemoryLog(RecordLog):
    """A log in memory, starting from ``data`` (the bytes of a log, e.g. a file's read back).

    As a :class:`~coxswain.log.FileLog` is locked, one agent at a time holds it: :meth:`resume`
    takes it (:class:`~coxswain.log.LogError` while another holds it) and :meth:`close` lets
    it go; a closed log takes no appends until it is resumed again, and its bytes stay readable.
    """

    def __init__(self, data: bytes = b"") -> None:
        self._chunks: list[bytes] = [bytes(data)] if data else []
        self._next_seq = 1
        self._held = False
        self._closed = False

    def resume(
        self, delivery_memory: DeliveryMemory, max_pending: int | None, hash_seed: int,
        redelivery: int = 0,
    ) -> Resumed:
        """Reads the log back and resumes it through the session layer's plan, then repairs it,
        as :meth:`FileLog.open <coxswain.log.FileLog.open>` does (S46-S50, S59): a torn final
        record dropped, an unterminated one ended, the closers of a turn it ended inside appended,
        then the redelivery splices of the allowance ``redelivery``. A log that is refused
        (:class:`~coxswain.CorruptLog`) is left as it was; an allowance that is not an ``int``
        from 0 to 1000 raises :class:`~coxswain.InvalidRedelivery` first, nothing read."""
        allowance = _native.check_redelivery(redelivery)
        if self._held:
            raise LogError("the memory log is held by another agent", kind="locked")
        (machine, closers, interrupted, records, cut_to, torn, unterminated, next_seq,
         redelivered) = _native.resume_log(self.bytes(), memory_capacity(delivery_memory),
                                           max_pending, hash_seed, allowance)
        data = self.bytes()
        if cut_to is not None:
            data = data[:cut_to]
        if unterminated:
            data += b"\n"
        self._chunks = [data] if data else []
        self._next_seq = next_seq
        self._held, self._closed = True, False
        if closers:
            self.append(closers)
        return Resumed(records, torn, machine, len(closers), interrupted, redelivered)

    def bytes(self) -> bytes:
        """Every byte the log holds."""
        if len(self._chunks) > 1:
            self._chunks = [b"".join(self._chunks)]
        return self._chunks[0] if self._chunks else b""

    def append_encoded(self, data: builtins.bytes, count: int) -> None:
        """Appends ``count`` encoded records (:class:`~coxswain.log.LogError` once closed)."""
        if self._closed:
            raise LogError("the memory log is closed", kind="closed")
        if data:
            self._chunks.append(bytes(data))
            self._next_seq += count

    def sync(self) -> None:
        """Nothing to make durable (:class:`~coxswain.log.LogError` once closed)."""
        if self._closed:
            raise LogError("the memory log is closed", kind="closed")

    def close(self) -> None:
        """Lets the log go: no more appends until it is resumed again; the bytes stay readable."""
        self._held, self._closed = False, True
