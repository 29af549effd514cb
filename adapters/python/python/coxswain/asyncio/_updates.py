"""What an :class:`~coxswain.asyncio.Agent` publishes and reports: updates, the subscriber's
buffer, how it ended, what opening it found, and the calls that read them (:class:`Reports`)."""

from __future__ import annotations

import asyncio
from collections import deque
from dataclasses import dataclass
from typing import AsyncIterator, Literal, Mapping, Sequence, Union

from .._native import Session
from .._types import JSON, Notification

__all__ = ["Ending", "Recovery", "Recorded", "Notified", "Ended", "Lagged", "Update", "Reports"]

Ending = Literal["disposed", "closed", "stopped"]
"""How a driver ended: the core emitted ``disposed``, ``close`` was called, or an append failed and
could not be cut back."""


@dataclass(frozen=True, slots=True)
class Recovery:
    """What :meth:`Agent.open` found in the log and did to it."""

    records: int
    torn_tail: tuple[int, int] | None
    interrupted_turn: int | None
    closers: int
    last_turn: int
    pending_next_turn: int
    pending_next_step: int
    #: How many messages crash repair redelivered (S59: the last of the ``closers``).
    redelivered: int = 0


@dataclass(frozen=True, slots=True)
class Recorded:
    """Update: a record was appended to the durable log (the machine's event or the host's)."""

    seq: int
    record: Mapping[str, JSON]


@dataclass(frozen=True, slots=True)
class Notified:
    """Update: a live notification of the core."""

    notification: Notification


@dataclass(frozen=True, slots=True)
class Ended:
    """Update: the driver ended; no update follows."""

    ending: Ending


@dataclass(frozen=True, slots=True)
class Lagged:
    """Update: this subscriber fell more than its capacity behind and ``skipped`` updates (the
    oldest) were dropped for it; the updates after this one are the newest kept."""

    skipped: int


Update = Union[Recorded, Notified, Ended, Lagged]


class _Subscriber:
    """One subscriber's buffer: at most ``capacity`` updates; the oldest go when it is full."""

    __slots__ = ("buffer", "capacity", "skipped", "ready")

    def __init__(self, capacity: int) -> None:
        self.buffer: deque[Update] = deque()
        self.capacity = capacity
        self.skipped = 0
        self.ready = asyncio.Event()

    def put(self, update: Update) -> None:
        if len(self.buffer) >= self.capacity and not isinstance(update, Ended):
            self.buffer.popleft()
            self.skipped += 1
        self.buffer.append(update)
        self.ready.set()

    async def updates(self) -> AsyncIterator[Update]:
        while True:
            while not self.buffer:
                self.ready.clear()
                await self.ready.wait()
            if self.skipped:
                skipped, self.skipped = self.skipped, 0
                yield Lagged(skipped)
            update = self.buffer.popleft()
            yield update
            if isinstance(update, Ended):
                return


class Reports:
    """The calls of an agent that read what its driver reports (the driver sets these)."""

    _status: str
    _last_turn: int
    _ending: Ending | None
    _idle: asyncio.Event
    _ended: asyncio.Event
    _subscribers: list[_Subscriber]
    _final_sync: Exception | None
    _session: Session

    def _ended_error(self) -> Exception:
        """The error of a call once the agent has ended (the session layer's, with its kind)."""
        return self._session.ended_error()

    def _publish(self, update: Update) -> None:
        for subscriber in self._subscribers:
            subscriber.put(update)

    def _publish_records(self, first_seq: int, records: Sequence[Mapping[str, JSON]]) -> None:
        for seq, record in enumerate(records, first_seq):
            self._publish(Recorded(seq, record))

    async def _released(self) -> None:
        """Waits for the driver to end and release its log; raises that last sync's error."""
        await self._ended.wait()
        if self._final_sync is not None:
            raise self._final_sync

    @property
    def status(self) -> str:
        """The public status (S23) as of the last durable batch; ``idle`` once ended."""
        return "idle" if self._ending is not None else self._status

    @property
    def last_turn(self) -> int:
        """The number of the last turn opened (0 before the first, S27), the running one while
        :attr:`status` is ``running``, as of the last durable batch: what a guarded send names.
        The machine checks the guard when the send arrives (S54)."""
        return self._last_turn

    @property
    def ending(self) -> Ending | None:
        """How the driver ended, if it did."""
        return self._ending

    async def finished(self) -> Ending:
        """How the driver ended, once it has ended and released its log."""
        await self._ended.wait()
        assert self._ending is not None
        return self._ending

    async def when_idle(self) -> None:
        """Returns once the agent is quiescent (S44): no turn and no maintenance running. Raises
        if the agent stopped or was closed first; returns if it was disposed. Never await it
        inside a host call: the activity it waits for includes that call."""
        await self._idle.wait()
        if self._ending not in (None, "disposed"):
            raise self._ended_error()

    def subscribe(self, capacity: int = 1024) -> AsyncIterator[Update]:
        """Live updates from now on: every durable record as it is appended and every
        notification, in the core's order, then :class:`Ended`. A subscriber that falls more
        than ``capacity`` behind lags: it gets :class:`Lagged` and skips the oldest."""
        if capacity < 1:
            raise ValueError("capacity is at least 1")
        subscriber = _Subscriber(capacity)
        if self._ending is not None:
            subscriber.put(Ended(self._ending))
        else:
            self._subscribers.append(subscriber)
        return subscriber.updates()
