"""What callers hand an :class:`~coxswain.asyncio.Agent`'s driver: each call as the command it
sends (a delivery as the trace ``"in"`` value it stands for, docs/FORMAT.md). Declarations only:
the driver (``_agent.py``) moves the commands, the session layer decides what they do."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Any, Awaitable, Callable, TypeVar

from .._machine import Pending
from .._types import CancelCause, Expect, Message, Target
from ._errors import Closed

__all__ = ["Command", "Calls"]

T = TypeVar("T")


@dataclass(slots=True)
class Command:
    """For the driver: ``deliver`` (a typed delivery: ``Session.deliver``'s arguments),
    ``input`` (a trace ``"in"`` value; ``job``: a maintenance begin's job and its end's future),
    ``record`` (``(turn, step, records)``), a host call's answer (its request, then a ``word``,
    the messages it would ``enter``, or any other ``answer`` as its trace value) or
    ``failed`` (what happened), a ``timeout`` (the session's deadline passed), ``pending`` or
    ``close``."""

    kind: str
    arg: Any
    reply: "asyncio.Future[Any] | None"
    job: "tuple[Callable[[asyncio.Event], Awaitable[Any]], asyncio.Future[Any]] | None" = None


class Calls:
    """The calls of an agent that send its driver a command. A delivery returns once its batch
    is durable, or raises the refusal (nothing changed, S5) or ``PersistenceError`` (not in the
    log, and the machine as before it: send it again)."""

    async def _send(self, kind: str, arg: Any, job: Any = None) -> Any:
        """Queues the command and returns its answer (the driver's)."""
        raise NotImplementedError

    async def _input(self, input: Any) -> bool:
        found: bool = await self._send("input", input)
        return found

    async def _record(self, turn: int, step: int, records: list[Any]) -> None:
        """Host events of a running step (``StepContext.record``)."""
        await self._send("record", (turn, step, records))

    async def send(self, message: Message, target: Target, wakeup: bool, *,
                   expect: Expect | None = None) -> None:
        """``send`` (S16, S54): with ``expect``, accepted only while the guard holds, else
        :class:`~coxswain.TurnMismatch` (after the identity checks: the retry of an accepted
        guarded send raises ``AlreadyPending`` or ``AlreadyDelivered``, S13, S52)."""
        guard = None if expect is None else (expect.kind, expect.number)
        await self._send("deliver", ("send", message, target, wakeup, guard))

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
        await self._send("deliver", ("followup", message))

    async def steer(self, message: Message) -> None:
        """Steering: joins the running turn at its next step boundary."""
        await self._send("deliver", ("steer", message))

    async def inject(self, message: Message) -> None:
        """Context that rides along with the next step; never wakes (S20)."""
        await self._send("deliver", ("inject", message))

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
                value.set_exception(Closed("the maintenance job was cancelled"))

        ended: asyncio.Future[bool] = loop.create_future()
        await self._send("input", {"maintenance": "begin"}, (wrapped, ended))
        await ended
        return await value

    async def pending(self) -> tuple[tuple[Pending, ...], tuple[Pending, ...]]:
        """A snapshot of both pending lists: ``(NT, NS)``, as of the last durable batch."""
        nt, ns = (tuple(Pending(Message.from_json(message), waking) for message, waking in items)
                  for items in await self._send("pending", None))
        return nt, ns
