"""What callers hand an :class:`~coxswain.asyncio.Agent`'s driver: each call as the command it
sends (a delivery as the trace ``"in"`` value it stands for, docs/FORMAT.md). Declarations only:
the driver (``_agent.py``) moves the commands, the session layer's agent loop decides what they
do."""

from __future__ import annotations

import asyncio
from typing import Any, Awaitable, Callable, TypeVar

from .._machine import Pending
from .._native import Session
from .._types import CancelCause, Expect, Fate, Message, Target
from ._errors import Closed

__all__ = ["Calls"]

T = TypeVar("T")


class Calls:
    """The calls of an agent that send its driver a command. A delivery returns once its batch
    is durable, or raises the refusal (nothing changed, S5) or ``PersistenceError`` (not in the
    log, and the machine as before it: send it again)."""

    async def _send(self, command: str, *args: Any) -> Any:
        """Hands the agent loop ``command`` (``deliver``, ``feed``, ``record``, ``maintenance``,
        ``control``: the native session's method) with ``args``; returns its answer."""
        raise NotImplementedError

    async def _input(self, input: Any) -> bool:
        found: bool = await self._send("feed", input)
        return found

    async def _record(self, turn: int, step: int, records: list[Any]) -> None:
        """Host events of a running step (``StepContext.record``)."""
        await self._send("record", turn, step, records)

    async def send(self, message: Message, target: Target, wakeup: bool, *,
                   expect: Expect | None = None) -> None:
        """``send`` (S16, S54): with ``expect``, accepted only while the guard holds, else
        :class:`~coxswain.TurnMismatch` (after the identity checks: the retry of an accepted
        guarded send raises ``AlreadyPending`` or ``AlreadyDelivered``, S13, S52)."""
        guard = None if expect is None else (expect.kind, expect.number)
        await self._send("deliver", "send", message, target, wakeup, guard)

    async def steer_expecting(self, turn: int, message: Message) -> None:
        """A steer meant for turn ``turn`` (S54): it joins that turn at its next step boundary,
        or raises :class:`~coxswain.TurnMismatch` once the turn has ended or was stopped. Name
        the turn the caller saw: ``last_turn`` while running, or a host context's."""
        await self.send(message, "next-step", True, expect=Expect.turn(turn))

    async def followup_if_idle_after(self, turn: int, message: Message) -> None:
        """A follow-up sent only while the agent is idle with no turn since ``turn`` (S54); else
        it raises :class:`~coxswain.TurnMismatch`."""
        await self.send(message, "next-turn", True, expect=Expect.idle_after(turn))

    async def followup(self, message: Message) -> None:
        """A follow-up: a turn of its own (S22)."""
        await self._send("deliver", "followup", message)

    async def steer(self, message: Message) -> None:
        """Steering: joins the running turn at its next step boundary."""
        await self._send("deliver", "steer", message)

    async def inject(self, message: Message) -> None:
        """Context that rides along with the next step; never wakes (S20)."""
        await self._send("deliver", "inject", message)

    async def remove(self, id: str) -> bool:
        """Removes a pending message (S15); false if it was not pending."""
        return await self._input({"remove": id})

    async def replace(self, id: str, message: Message) -> bool:
        """Replaces a pending message in place (S15); false if ``id`` was not pending."""
        return await self._input({"replace": {"id": id, "message": message.to_json()}})

    async def prepend(self, target: Target, message: Message) -> None:
        """Puts a quiet message first in ``target`` (S15)."""
        await self._input({"prepend": {"target": target, "message": message.to_json()}})

    async def clear(self) -> None:
        """Discards everything pending (S15)."""
        await self._input({"clear": {}})

    async def cancel(self, cause: CancelCause | None = None, *, keep_inbox: bool = False) -> None:
        """``cancel(cause, {keepInbox})`` (S39): returns once durable; the running call's task is
        cancelled by then, and the turn ends when that call has returned, or when the abort
        grace runs out (the session answers it ``fail``, code ``host-abandoned``, S40)."""
        cause = cause or CancelCause()
        await self._input({"cancel": {"cause": cause.to_json(), "keepInbox": keep_inbox}})

    async def run_maintenance(self, job: Callable[[asyncio.Event], Awaitable[T]]) -> T:
        """Runs ``job`` as maintenance (S43), only while idle (else :class:`~coxswain.Busy`), in a
        task of its own given its activity's cancellation event (a ``cancel`` cancels it); once
        it returns the maintenance ends (a wake latched meanwhile replays, S25). Returns its
        value once that end is durable."""
        loop = asyncio.get_running_loop()
        value: asyncio.Future[T] = loop.create_future()

        async def wrapped(cancelled: asyncio.Event) -> None:
            try:
                value.set_result(await job(cancelled))
            except Exception as error:
                value.set_exception(error)
            except asyncio.CancelledError:
                closed = Closed("the maintenance job was cancelled")
                closed.kind = Session.CLOSED
                value.set_exception(closed)

        await self._send("maintenance", wrapped)  # once its end is durable
        return await value

    async def resume(self) -> None:
        """``resume`` (S57): starts parked waking work (restored or redelivered items park,
        S48) as a waking send would, once durable; otherwise nothing changes. Raises
        :class:`~coxswain.Disposed` only once disposed."""
        await self._input({"resume": {}})

    async def fate(self, id: str) -> Fate:
        """What became of ``id`` (S58), as of the last durable batch: pending, discarded,
        claimed by a turn (with the first step that carried it and how that turn ended), or
        unknown (never an error). A query: it changes nothing, and is answered also once the
        agent ended (disposed, closed or stopped), from its machine as it ended."""
        return Fate(await self._send("control", "fate", id))

    async def pending(self) -> tuple[tuple[Pending, ...], tuple[Pending, ...]]:
        """A snapshot of both pending lists: ``(NT, NS)``, as of the last durable batch."""
        nt, ns = (tuple(Pending(Message.from_json(message), waking) for message, waking in items)
                  for items in await self._send("control", "pending"))
        return nt, ns
