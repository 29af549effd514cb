"""What an :class:`~coxswain.asyncio.Agent` publishes and reports: updates, the subscriber's
buffer, how it ended, what opening it found."""

from __future__ import annotations

import asyncio
from collections import deque
from dataclasses import dataclass
from typing import AsyncIterator, Literal, Mapping, Union

from .._types import JSON, Notification

__all__ = ["Ending", "Recovery", "Recorded", "Notified", "Ended", "Lagged", "Update"]

Ending = Literal["disposed", "closed", "stopped"]
"""How a driver ended: the core emitted ``disposed``, ``close`` was called, or an append failed."""


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
