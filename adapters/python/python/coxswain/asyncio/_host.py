"""The embedder's side: the ``Host`` protocol and the contexts its calls receive."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import Any, Awaitable, Callable, Protocol

from .._types import Enter, Message, PreStepAnswer, StepAnswer, TurnStoppingAnswer
from ._inputs import Calls

__all__ = ["Host", "PreStepContext", "StepContext", "TurnStoppingContext", "Scope",
           "enter_claimed", "STOP", "written", "HostCall"]


class Scope:
    """One activity's cancellation (S42): the event its host calls see (``cx.cancelled``) and the
    task of the call (or maintenance job) running in it, cancelled with it."""

    def __init__(self) -> None:
        self.cancelled = asyncio.Event()
        self.task: asyncio.Task[Any] | None = None

    def cancel(self) -> None:
        self.cancelled.set()
        if self.task is not None:
            self.task.cancel()


@dataclass(frozen=True, slots=True)
class PreStepContext:
    """What :meth:`Host.pre_step` gets: the claimed batch (S28) of this turn's next step."""

    turn: int
    step: int
    messages: tuple[Message, ...]
    #: Set when the turn is cancelled (the call's task is cancelled too).
    cancelled: asyncio.Event = field(repr=False)
    #: The agent's calls (deliveries, edits, cancel, maintenance, pending), to deliver to from
    #: inside the host call. Not its ``close``/``dispose``: those wait for the call to end.
    agent: Calls = field(repr=False)


@dataclass(frozen=True, slots=True)
class StepContext:
    """What :meth:`Host.step` gets."""

    turn: int
    step: int
    cancelled: asyncio.Event = field(repr=False)
    agent: Calls = field(repr=False)

    async def record(self, type: str, data: Any) -> None:
        """Appends one host event (model output, a tool call…) to the durable log, inside this
        step; returns once it is durable. Raises ``StepClosed`` once the step was answered and
        :class:`~coxswain.EncodeError` for a type of the machine's own."""
        await self.agent._record(self.turn, self.step, [{"type": type, "data": data}])


@dataclass(frozen=True, slots=True)
class TurnStoppingContext:
    """What :meth:`Host.turn_stopping` gets (hooks may steer or inject meanwhile)."""

    turn: int
    cancelled: asyncio.Event = field(repr=False)
    agent: Calls = field(repr=False)


def enter_claimed(messages: tuple[Message, ...]) -> Enter:
    """``Host.pre_step``'s answer: enter the claimed batch as it is (S30)."""
    return Enter(messages)


#: ``Host.turn_stopping``'s answer: the turn is done (S33).
STOP: TurnStoppingAnswer = "done"


class Host(Protocol):
    """The embedder's asynchronous work, which the core sequences (S3, S4): at most one call runs
    at a time, in a task of its own. Cancelling the turn (``Agent.cancel``, dispose) cancels
    that task and sets ``cx.cancelled``; the call is then answered ``fail`` (code
    ``host-cancelled``), or, if it has not returned within the agent's ``abort_grace``, the
    session answers it ``fail`` (``host-abandoned``) and drops its late answer (S38–S40). An
    exception answers ``fail`` (``host-raised``), an answer that is not one ``fail``
    (``host-invalid-answer``): the session layer's vocabulary (``coxswain_session::HostFailure``);
    the core decides what the answer means. ``pre_step`` and ``turn_stopping`` are optional: a
    host without one (or with ``Host``'s own, unchanged) is answered by the session layer inside
    the batch that requested it, with no call and no write of its own (``pre_step`` enters the
    claimed batch, ``turn_stopping`` is done); a hook that returns ``None`` answers the same. A
    ``step`` that returns ``None`` gave no answer: ``fail`` (``host-invalid-answer``)."""

    async def pre_step(self, cx: PreStepContext) -> PreStepAnswer:
        """The pre-step decision (S29)."""
        return enter_claimed(cx.messages)

    async def step(self, cx: StepContext) -> StepAnswer:
        """The step: the model call and its tools (S32)."""
        ...

    async def turn_stopping(self, cx: TurnStoppingContext) -> TurnStoppingAnswer:
        """The turn-stopping hooks (S33)."""
        return STOP


def written(host: Host, hook: str) -> bool:
    """Whether ``host`` wrote ``hook``: it has one, and not ``Host``'s own (decision 1)."""
    method = getattr(host, hook, None)
    return method is not None and getattr(method, "__func__", None) is not getattr(Host, hook)


class HostCall:
    """One host call's task body: it awaits the hook, then reports what the call did to
    ``report(key, failure, value)``: returned ``value`` (``failure`` ``None``), ``raised`` (the
    error's message, its repr when it has none) or was ``cancelled`` (also before it began)."""

    __slots__ = ("_report", "_key", "_answered")

    def __init__(self, report: Callable[[Any, str | None, Any], None], key: Any) -> None:
        self._report, self._key, self._answered = report, key, False

    async def run(self, method: Callable[[Any], Awaitable[Any]], cx: Any) -> None:
        try:
            value = await method(cx)
        except asyncio.CancelledError:  # a cancel answers it too (S40)
            self._answered = True
            self._report(self._key, "cancelled", "")
        except Exception as error:
            self._answered = True
            self._report(self._key, "raised", str(error) or repr(error))
        else:
            self._answered = True
            self._report(self._key, None, value)

    def unstarted(self, task: asyncio.Task[Any]) -> None:
        """The task ended: a call cancelled before its first line never answered."""
        if not self._answered:
            self._answered = True
            self._report(self._key, "cancelled", "")
