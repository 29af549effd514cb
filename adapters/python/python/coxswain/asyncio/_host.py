"""The embedder's side: the ``Host`` protocol and the contexts its calls receive."""

from __future__ import annotations

import asyncio
import contextvars
import sys
from dataclasses import dataclass, field
from typing import Any, Awaitable, Callable, Coroutine, Protocol

from .._types import Enter, Message, PreStepAnswer, StepAnswer, TurnStoppingAnswer
from ._inputs import Calls

__all__ = ["Host", "PreStepContext", "StepContext", "TurnStoppingContext", "Scope",
           "enter_claimed", "STOP", "written", "HostCall", "EAGER", "start"]

#: Whether host calls and maintenance jobs start as eager tasks (CPython 3.12+, where
#: ``asyncio.Task`` takes ``eager_start``): their first step runs at once, inside the task, so a
#: call that returns without suspending has answered when it was started, and a turn whose hooks
#: return at once takes no pass of the event loop. On 3.11 every task starts on the loop's next
#: pass, as before.
EAGER = sys.version_info >= (3, 12)

if sys.version_info >= (3, 12):
    def start(loop: asyncio.AbstractEventLoop, coro: Coroutine[Any, Any, None],
              context: contextvars.Context) -> asyncio.Task[None]:
        """Runs ``coro`` in a task of its own, in ``context``: an eager task (its first step runs
        now, with ``current_task()`` naming it, so ``asyncio.timeout`` inside it cancels it
        alone), unless the loop has a task factory, its user's: then that factory makes it, as
        ``loop.create_task`` (the agent never sets one)."""
        if loop.get_task_factory() is None:
            return asyncio.Task(coro, loop=loop, context=context, eager_start=True)
        return loop.create_task(coro, context=context)
else:
    def start(loop: asyncio.AbstractEventLoop, coro: Coroutine[Any, Any, None],
              context: contextvars.Context) -> asyncio.Task[None]:
        """Runs ``coro`` in a task of its own, in ``context``, from the loop's next pass."""
        return loop.create_task(coro, context=context)


def launch(loop: asyncio.AbstractEventLoop, scope: Scope, coro: Coroutine[Any, Any, None],
           context: contextvars.Context, eager: bool) -> None:
    """Starts the host call ``coro`` (of ``scope.call``) as ``scope``'s task: now when ``eager``
    (:func:`start`), else from the loop's next pass; a scope cancelled already cancels it before
    its first line ran (S40)."""
    if eager:
        scope.task = start(loop, coro, context)
        return
    scope.task = loop.create_task(coro, context=context)
    if scope.cancelled.is_set() and scope.call is not None:
        scope.call.cancelling(scope.task)
        scope.task.cancel()


class Scope:
    """One activity's cancellation (S42): the event its host calls see (``cx.cancelled``) and the
    task of the call (or maintenance job) running in it, cancelled with it; ``call``: that
    task's host call, none for a job."""

    __slots__ = ("cancelled", "task", "call")

    def __init__(self) -> None:
        self.cancelled = asyncio.Event()
        self.task: asyncio.Task[Any] | None = None
        self.call: HostCall | None = None

    def cancel(self) -> None:
        self.cancelled.set()
        if self.task is not None:
            if self.call is not None:
                self.call.cancelling(self.task)
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


# The driver makes one context per host call. A frozen dataclass's ``__init__`` sets each field
# through ``object.__setattr__`` (its own ``__setattr__`` refuses); these make the same object
# setting the slots straight through their descriptors, in about half the time.
_new = object.__new__
_PRE = tuple(PreStepContext.__dict__[name].__set__
             for name in ("turn", "step", "messages", "cancelled", "agent"))
_STEP = tuple(StepContext.__dict__[name].__set__
              for name in ("turn", "step", "cancelled", "agent"))
_STOPPING = tuple(TurnStoppingContext.__dict__[name].__set__
                  for name in ("turn", "cancelled", "agent"))


def pre_step_context(turn: int, step: int, messages: tuple[Message, ...],
                     cancelled: asyncio.Event, agent: Calls) -> PreStepContext:
    """``PreStepContext(turn, step, messages, cancelled, agent)``, made faster."""
    cx: PreStepContext = _new(PreStepContext)
    set_turn, set_step, set_messages, set_cancelled, set_agent = _PRE
    set_turn(cx, turn)
    set_step(cx, step)
    set_messages(cx, messages)
    set_cancelled(cx, cancelled)
    set_agent(cx, agent)
    return cx


def step_context(turn: int, step: int, cancelled: asyncio.Event, agent: Calls) -> StepContext:
    """``StepContext(turn, step, cancelled, agent)``, made faster."""
    cx: StepContext = _new(StepContext)
    set_turn, set_step, set_cancelled, set_agent = _STEP
    set_turn(cx, turn)
    set_step(cx, step)
    set_cancelled(cx, cancelled)
    set_agent(cx, agent)
    return cx


def turn_stopping_context(turn: int, cancelled: asyncio.Event,
                          agent: Calls) -> TurnStoppingContext:
    """``TurnStoppingContext(turn, cancelled, agent)``, made faster."""
    cx: TurnStoppingContext = _new(TurnStoppingContext)
    set_turn, set_cancelled, set_agent = _STOPPING
    set_turn(cx, turn)
    set_cancelled(cx, cancelled)
    set_agent(cx, agent)
    return cx


def enter_claimed(messages: tuple[Message, ...]) -> Enter:
    """``Host.pre_step``'s answer: enter the claimed batch as it is (S30)."""
    return Enter(messages)


#: ``Host.turn_stopping``'s answer: the turn is done (S33).
STOP: TurnStoppingAnswer = "done"


class Host(Protocol):
    """The embedder's asynchronous work, which the core sequences (S3, S4): at most one call runs at
    a time, in a task of its own (on CPython 3.12+ an eager one, :data:`EAGER`: its first step runs
    at once, so a hook that returns without suspending takes no pass of the event loop;
    ``asyncio.current_task()`` is the call's task on every version). Cancelling the turn
    (``Agent.cancel``, dispose) cancels that task and sets ``cx.cancelled``; the call is then
    answered ``fail`` (code ``host-cancelled``), or, if it has not returned within the agent's
    ``abort_grace``, the session answers it ``fail`` (``host-abandoned``) and drops its late answer
    (S38–S40). An exception answers ``fail`` (``host-raised``), an answer that is not one ``fail``
    (``host-invalid-answer``): the session layer's vocabulary (``coxswain_session::HostFailure``);
    the core decides what the answer means. ``pre_step`` and ``turn_stopping`` are optional: a host
    without one (or with ``Host``'s own, unchanged) is answered by the session layer inside the
    batch that requested it, with no call and no write of its own (``pre_step`` enters the claimed
    batch, ``turn_stopping`` is done); a hook that returns ``None`` answers the same. A ``step``
    that returns ``None`` gave no answer: ``fail`` (``host-invalid-answer``)."""

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
    error's message, its repr when it has none) or was ``cancelled`` (also before it began: the
    one who cancels the task says so first, :meth:`cancelling`; or ended by a ``BaseException``
    that is not an ``Exception``). No callback watches a call that ends as it should."""

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
        except BaseException:  # answered `cancelled` once the task has ended with it
            task = asyncio.current_task()
            if task is not None:
                task.add_done_callback(self.unstarted)
            raise
        else:
            self._answered = True
            self._report(self._key, None, value)

    def cancelling(self, task: asyncio.Task[Any]) -> None:
        """``task``, this call's, is about to be cancelled: unless the call has answered, it may
        not have begun (a task cancelled before its first step never runs a line of it), so
        :meth:`unstarted` sees the task end."""
        if not self._answered:
            task.add_done_callback(self.unstarted)

    def unstarted(self, task: asyncio.Task[Any]) -> None:
        """The task ended: a call cancelled before its first line (or ended by a
        ``BaseException`` that is not an ``Exception``) never answered."""
        if not self._answered:
            self._answered = True
            self._report(self._key, "cancelled", "")
