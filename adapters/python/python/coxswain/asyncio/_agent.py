"""``Agent``: one driver task owns the machine and its log file; callers' deliveries resolve
once durable. The semantics of ``adapters/tokio``'s Agent, on asyncio.

The driver translates and decides nothing. It takes the commands waiting in its queue (a
caller's input, a host event to record, a host call's answer) as one *group*: feeds each to the
machine in arrival order, appends every event of the group as one write and one
``fdatasync``, and only once that is durable carries out each input's effects (publish,
begin a cancellation scope, start a host call, abort) and acknowledges it, in order. A failed
append fails every input of the group and stops the agent (re-open it from its log).
"""

from __future__ import annotations

import asyncio
import os
from dataclasses import dataclass
from typing import Any, AsyncIterator, Awaitable, Callable, Literal, Mapping, Sequence, TypeVar, Union

from .._errors import CoxswainError
from .._errors import Disposed as DisposedError
from .._filelog import FileLog, LogError, ReadBack
from .._machine import Machine, Pending, Transition
from .._native import check_message_json, host_failure, open_log
from .._types import (
    JSON,
    Abort,
    Begin,
    CancelCause,
    Disposed,
    Effect,
    Enter,
    ErrorInfo,
    Expect,
    Fail,
    Message,
    PreStepAnswer,
    PreStepRequest,
    Reject,
    StatusChanged,
    StepAnswer,
    StepRequest,
    Target,
    TurnStoppingAnswer,
    TurnStoppingRequest,
    answer_json,
)
from ._errors import AgentError, Closed, PersistenceError, StepClosed, Stopped
from ._host import Host, PreStepContext, StepContext, TurnStoppingContext
from ._updates import Ended, Ending, Lagged, Notified, Recorded, Recovery, Update, _Subscriber

__all__ = [
    "Agent",
    "AgentError",
    "Closed",
    "Stopped",
    "PersistenceError",
    "StepClosed",
    "Recovery",
    "Recorded",
    "Notified",
    "Ended",
    "Lagged",
    "Update",
    "Ending",
]

T = TypeVar("T")

class _Scope:
    """One activity's cancellation (S42): its running call's task and its event."""

    __slots__ = ("cancelled", "task")

    def __init__(self) -> None:
        self.cancelled = asyncio.Event()
        self.task: asyncio.Task[Any] | None = None

    def cancel(self) -> None:
        self.cancelled.set()
        if self.task is not None and not self.task.done():
            self.task.cancel()


@dataclass(slots=True)
class _Input:
    input: Mapping[str, JSON]
    reply: "asyncio.Future[bool] | None"
    job: "_Job | None" = None


@dataclass(slots=True)
class _Record:
    turn: int
    step: int
    records: list[Mapping[str, JSON]]
    reply: "asyncio.Future[bool]"


@dataclass(slots=True)
class _Control:
    kind: Literal["pending", "close"]
    reply: "asyncio.Future[Any]"


_Command = Union[_Input, _Record, _Control]


_LITERALS = {"preStep": (), "step": ("completed", "max-tokens", "continue"), "turnStopping": ("done",)}


def _checked(kind: str, answer: Any) -> Any:
    """The host's answer if it is one of the ``kind``'s answers; raises ``TypeError`` if not."""
    if isinstance(answer, Fail) and isinstance(answer.error, ErrorInfo):
        return answer
    if kind == "preStep":
        if isinstance(answer, Reject):
            return answer
        if isinstance(answer, Enter) and all(isinstance(m, Message) for m in answer.messages):
            for message in answer.messages:
                _message(message)
            return answer
    elif isinstance(answer, str) and answer in _LITERALS[kind]:
        return answer
    raise TypeError(f"{answer!r} is not a {kind} answer")


def _open_log(
    path: str | os.PathLike[str], delivery_memory: int, max_pending: int | None
) -> tuple[FileLog, ReadBack, Any, list[Any], int | None]:
    """Opens, reads back, restores and (only once all that succeeded) repairs the log: blocking
    file IO, run in a thread."""
    log = FileLog(path)
    try:
        read = log.read_back()
        # Ids come from callers: key the core's id indexes with a random seed (HashDoS).
        seed = int.from_bytes(os.urandom(8), "little")
        native, closers, interrupted = open_log(
            list(read.records), delivery_memory, max_pending, seed
        )
        changed = log.repair_tail(read)
        if closers:
            log.append(closers)
        elif changed:
            log.sync()
    except BaseException:
        log.close()
        raise
    return log, read, native, closers, interrupted


def _message(message: Message) -> JSON:
    """The message's JSON, refused (``EncodeError``, nothing changed) if a log record could not
    hold it, as the tokio adapter checks before delivering."""
    value = message.to_json()
    check_message_json(value)
    return value


async def _awaited(call: Awaitable[T]) -> T:
    return await call


@dataclass(slots=True)
class _Job:
    """A maintenance job and the future its end's durability resolves."""

    run: Callable[[asyncio.Event], Awaitable[Any]]
    ended: "asyncio.Future[bool]"


@dataclass(slots=True)
class _Member:
    reply: "asyncio.Future[bool] | None"
    outcome: bool | BaseException
    records: Sequence[Mapping[str, JSON]]
    effects: tuple[Effect, ...]
    job: _Job | None


class Agent:
    """A handle to one running agent. Every call goes to the driver task, which owns the
    machine and the log; a delivery returns once its durable splice is persisted (and raises
    the core's rejection, changing nothing, if the core rejects it)."""

    DEFAULT_DELIVERY_MEMORY = 256
    DEFAULT_MAX_BATCH = 64
    #: The default admission bound (S55), as the tokio adapter's ``Options::max_pending``.
    DEFAULT_MAX_PENDING = 10_000

    def __init__(self, host: Host, log: FileLog, machine: Machine, max_batch: int) -> None:
        self._host = host
        self._log: FileLog | None = log
        self._machine = machine
        self._max_batch = max_batch
        self._queue: asyncio.Queue[_Command] = asyncio.Queue()
        self._scope = _Scope()
        self._subscribers: list[_Subscriber] = []
        self._ending: Ending | None = None
        self._final_sync: LogError | None = None
        self._idle = asyncio.Event()
        self._ended = asyncio.Event()
        self._maintenance: tuple[asyncio.Future[Any], asyncio.Future[Any]] | None = None
        self._status = machine.status
        self._last_turn = machine.last_turn
        self._update_state()
        self._task = asyncio.get_running_loop().create_task(self._run(), name="coxswain-agent")

    @classmethod
    async def open(
        cls,
        host: Host,
        path: str | os.PathLike[str],
        *,
        delivery_memory: int = DEFAULT_DELIVERY_MEMORY,
        max_batch: int = DEFAULT_MAX_BATCH,
        max_pending: int | None = DEFAULT_MAX_PENDING,
    ) -> tuple["Agent", Recovery]:
        """Opens an agent on the log file at ``path``: empty or missing (a new session), or
        holding a session to resume. Reads it back, restores the machine (S46–S48: items
        park, nothing wakes) and only then repairs it (drops a torn tail, closes an interrupted
        turn, S50); a log that is rejected (:class:`~coxswain.CorruptLog`) is left as it was.
        ``max_pending`` is the machine's admission bound (S55; ``None``: unbounded): a delivery
        into a list holding that many items raises :class:`~coxswain.Full`. Pass the same
        ``delivery_memory`` and ``max_pending`` every time (S51, S55: they are not in the
        log)."""
        if max_batch < 1:
            raise ValueError("max_batch is at least 1")
        if max_pending is not None and max_pending < 1:
            raise ValueError("max_pending is at least 1")
        log, read, native, closers, interrupted = await asyncio.to_thread(
            _open_log, path, delivery_memory, max_pending
        )
        machine = Machine._wrap(native)
        recovery = Recovery(
            records=len(read.records),
            torn_tail=read.torn,
            interrupted_turn=interrupted,
            closers=len(closers),
            last_turn=machine.last_turn,
            pending_next_turn=len(machine.pending("next-turn")),
            pending_next_step=len(machine.pending("next-step")),
        )
        return cls(host, log, machine, max_batch), recovery

    # ----- deliveries -----

    async def send(
        self, message: Message, target: Target, wakeup: bool, *, expect: Expect | None = None
    ) -> None:
        """``send(message, target, wakeup, expect)`` (S16, S54): with ``expect`` it is accepted
        only while the guard holds, else it raises :class:`~coxswain.TurnMismatch` (after the
        identity checks: the retry of an accepted guarded send raises
        :class:`~coxswain.AlreadyPending` or :class:`~coxswain.AlreadyDelivered`, whose
        ``was_delivered`` is true)."""
        send: dict[str, JSON] = {"message": _message(message), "target": target, "wakeup": wakeup}
        if expect is not None:
            send["expect"] = expect.to_json()
        await self._input({"send": send})

    async def steer_expecting(self, turn: int, message: Message) -> None:
        """A steer meant for turn ``turn`` (S54): it joins that turn at its next step boundary,
        or raises :class:`~coxswain.TurnMismatch` once the turn has ended or was stopped
        (instead of joining the next turn, or becoming a turn of its own after a stop, S18).
        Name the turn the caller saw: :attr:`last_turn` while running, or a host context's."""
        await self.send(message, "next-step", True, expect=Expect.turn(turn))

    async def followup_if_idle_after(self, turn: int, message: Message) -> None:
        """A follow-up sent only while the agent is idle with no turn since ``turn`` (S54);
        else it raises :class:`~coxswain.TurnMismatch`."""
        await self.send(message, "next-turn", True, expect=Expect.idle_after(turn))

    async def followup(self, message: Message) -> None:
        """A follow-up: a turn of its own (S22). Returns once durable."""
        await self._input({"followup": _message(message)})

    async def steer(self, message: Message) -> None:
        """Steering: joins the running turn at its next step boundary."""
        await self._input({"steer": _message(message)})

    async def inject(self, message: Message) -> None:
        """Context that rides along with the next step; never wakes (S20)."""
        await self._input({"inject": _message(message)})

    async def remove(self, id: str) -> bool:
        """Removes a pending message (S15); false if it was not pending."""
        return await self._input({"remove": id})

    async def replace(self, id: str, message: Message) -> bool:
        """Replaces a pending message in place (S15); false if ``id`` was not pending."""
        return await self._input({"replace": {"id": id, "message": _message(message)}})

    async def prepend(self, target: Target, message: Message) -> None:
        """Puts a quiet message first in ``target`` (S15)."""
        await self._input({"prepend": {"target": target, "message": _message(message)}})

    async def clear(self) -> None:
        """Discards everything pending (S15)."""
        await self._input({"clear": {}})

    async def cancel(self, cause: CancelCause | None = None, *, keep_inbox: bool = False) -> None:
        """``cancel(cause, {keepInbox})`` (S39): returns once durable; the running call's task
        is cancelled by then, and the turn ends when that call has returned."""
        cause = cause or CancelCause()
        await self._input({"cancel": {"cause": cause.to_json(), "keepInbox": keep_inbox}})

    async def run_maintenance(self, job: Callable[[asyncio.Event], Awaitable[T]]) -> T:
        """Runs a maintenance job (S43): only while idle (else :class:`~coxswain.Busy`). The job
        gets its activity's cancellation event and runs in a task of its own (a ``cancel``
        cancels it); when it returns the maintenance ends and a wake latched meanwhile replays
        (S25). Returns the job's value once the end is durable."""
        loop = asyncio.get_running_loop()
        value: asyncio.Future[Any] = loop.create_future()

        async def wrapped(cancelled: asyncio.Event) -> None:
            try:
                value.set_result(await job(cancelled))
            except Exception as error:
                value.set_exception(error)
            except asyncio.CancelledError:
                value.set_exception(Closed("the maintenance job was cancelled"))

        ended: asyncio.Future[bool] = loop.create_future()
        await self._send(lambda reply: _Input({"maintenance": "begin"}, reply, _Job(wrapped, ended)))
        await ended
        result: T = await value
        return result

    # ----- state -----

    async def when_idle(self) -> None:
        """Returns once the agent is quiescent (S44): no turn and no maintenance running.
        Raises if the agent stopped or was closed first; returns if it was disposed. Never
        await it inside a host call: the activity it waits for includes that call."""
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

    async def dispose(self) -> None:
        """Disposes the agent (S45): cancels everything, waits for the running host call to
        return, and returns once ``disposed`` was emitted, the log synced and released, and
        the driver ended. Never await it inside a host call (cancel from there instead)."""
        await self._input({"dispose": {}})
        await self._ended.wait()
        if self._final_sync is not None:
            raise self._final_sync
        if self._ending != "disposed":
            raise self._ended_error()

    async def close(self) -> None:
        """Stops the driver now, without disposing: the running call's task is cancelled and
        its answer ignored, the log synced and released. A turn left open is closed
        ``interrupted`` when the log is opened again, as after a crash."""
        if self._ending is None:
            try:
                await self._send(lambda reply: _Control("close", reply))
            except AgentError:
                pass
        await self._ended.wait()
        if self._final_sync is not None:
            raise self._final_sync

    async def finished(self) -> Ending:
        """How the driver ended, once it has ended and released its log."""
        await self._ended.wait()
        assert self._ending is not None
        return self._ending

    @property
    def status(self) -> str:
        """The public status (S23); ``idle`` once the driver has ended."""
        return "idle" if self._ending is not None else self._status

    @property
    def last_turn(self) -> int:
        """The number of the last turn opened (0 before the first, S27), the running one while
        :attr:`status` is ``running``, as of the last input made durable: what a guarded send
        names. The machine checks the guard when the send arrives (S54)."""
        return self._last_turn

    @property
    def ending(self) -> Ending | None:
        """How the driver ended, if it did."""
        return self._ending

    async def pending(self) -> tuple[tuple[Pending, ...], tuple[Pending, ...]]:
        """A snapshot of both pending lists: ``(NT, NS)``."""
        snapshot: tuple[tuple[Pending, ...], tuple[Pending, ...]] = await self._send(
            lambda reply: _Control("pending", reply)
        )
        return snapshot

    # ----- plumbing -----

    async def _input(self, input: Mapping[str, JSON]) -> bool:
        found: bool = await self._send(lambda reply: _Input(input, reply))
        return found

    async def _record(self, turn: int, step: int, records: list[Mapping[str, JSON]]) -> None:
        await self._send(lambda reply: _Record(turn, step, records, reply))

    async def _send(self, command: Callable[["asyncio.Future[Any]"], _Command]) -> Any:
        if self._ending is not None:
            raise self._ended_error()
        reply: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self._queue.put_nowait(command(reply))
        return await reply

    def _ended_error(self) -> BaseException:
        if self._ending == "disposed":
            return DisposedError("the machine is disposed and accepts no input")
        if self._ending == "stopped":
            return Stopped("the agent stopped after a persistence failure; re-open it from the log")
        return Closed("the agent is closed")

    def _update_state(self) -> None:
        if self._machine.is_quiescent() or self._ending is not None:
            self._idle.set()
        else:
            self._idle.clear()

    def _publish(self, update: Update) -> None:
        for subscriber in self._subscribers:
            subscriber.put(update)

    async def _run(self) -> None:
        try:
            while self._ending is None:
                first = await self._queue.get()
                if isinstance(first, _Control):
                    self._control(first)
                    continue
                group: list[_Input | _Record] = [first]
                while len(group) < self._max_batch and not self._queue.empty():
                    nxt = self._queue.get_nowait()
                    if isinstance(nxt, _Control):
                        await self._commit(group)
                        group = []
                        if self._ending is None:
                            self._control(nxt)
                        else:
                            nxt.reply.set_exception(self._ended_error())
                        break
                    group.append(nxt)
                if group:
                    await self._commit(group)
        except BaseException as error:  # a bug in the driver: stop rather than hang callers
            if self._ending is None:
                self._end("stopped")
            if not isinstance(error, (Exception, asyncio.CancelledError)):
                raise
        finally:
            while not self._queue.empty():
                left = self._queue.get_nowait()
                if left.reply is not None and not left.reply.done():
                    left.reply.set_exception(self._ended_error())

    def _control(self, command: _Control) -> None:
        if command.kind == "pending":
            command.reply.set_result(
                (self._machine.pending("next-turn"), self._machine.pending("next-step"))
            )
        else:
            self._end("closed")
            command.reply.set_result(None)

    async def _commit(self, group: list[_Input | _Record]) -> None:
        """Feeds the group, appends its events as one batch, then settles each member."""
        members: list[_Member] = []
        data: list[bytes] = []
        log = self._log
        assert log is not None
        seq = log.next_seq
        fatal: BaseException | None = None
        for command in group:
            if isinstance(command, _Record):
                outstanding = self._machine.outstanding()
                if outstanding is None or (outstanding.kind, outstanding.turn, outstanding.step) != (
                    "step",
                    command.turn,
                    command.step,
                ):
                    error = StepClosed("the step is closed: host events go inside their step")
                    members.append(_Member(command.reply, error, [], (), None))
                    continue
                try:
                    data.append(log.encode(command.records, seq))
                except CoxswainError as refused:
                    members.append(_Member(command.reply, refused, [], (), None))
                    continue
                seq += len(command.records)
                members.append(_Member(command.reply, True, command.records, (), None))
                continue
            try:
                transition: Transition = self._machine.handle(command.input)
            except Exception as refused:  # rejected (S5) or not an input: nothing changed
                members.append(_Member(command.reply, refused, [], (), None))
                continue
            records = [event.record() for event in transition.events]
            effects = transition.persisted()  # held, not carried out, until the append is durable
            try:
                data.append(log.encode(records, seq))
            except CoxswainError as refused:
                fatal = refused
            seq += len(records)
            members.append(_Member(command.reply, transition.found, records, effects, command.job))
            if fatal is not None:
                break
        count = sum(len(m.records) for m in members)
        if fatal is None and count:
            try:
                await asyncio.to_thread(log.append_encoded, b"".join(data), count)
            except LogError as error:
                fatal = error
        if fatal is not None:
            # Ended (the log closed, the ending published) before any caller is told: a caller
            # that gets its error finds ``ending`` and ``when_idle`` saying so.
            self._end("stopped")
            indeterminate = isinstance(fatal, LogError) and fatal.indeterminate
            log_error = fatal if isinstance(fatal, LogError) else None
            for member in members:
                if member.reply is not None and not member.reply.done():
                    if isinstance(member.outcome, BaseException):
                        member.reply.set_exception(member.outcome)
                    else:
                        member.reply.set_exception(
                            PersistenceError(
                                str(fatal), indeterminate=indeterminate, log_error=log_error
                            )
                        )
            return
        first = seq - count
        for member in members:
            for record in member.records:
                self._publish(Recorded(first, record))
                first += 1
            if self._ending is None:
                for effect in member.effects:
                    self._carry_out(effect, member.job)
                self._update_state()
            if member.reply is not None and not member.reply.done():
                if isinstance(member.outcome, BaseException):
                    member.reply.set_exception(member.outcome)
                else:
                    member.reply.set_result(member.outcome)

    def _carry_out(self, effect: Effect, job: _Job | None) -> None:
        if isinstance(effect, Begin):
            self._scope = _Scope()
            if isinstance(effect.activity, int):
                self._last_turn = effect.activity
            if effect.activity == "maintenance" and job is not None:
                scope = self._scope
                scope.task = asyncio.get_running_loop().create_task(_awaited(job.run(scope.cancelled)))
                asyncio.get_running_loop().create_task(self._end_job(scope.task, job))
        elif isinstance(effect, (PreStepRequest, StepRequest, TurnStoppingRequest)):
            self._call_host(effect, self._scope)
        elif isinstance(effect, Abort):
            self._scope.cancel()
        elif isinstance(effect, Disposed):
            self._end("disposed")
        else:
            if isinstance(effect, StatusChanged):
                self._status = effect.status
            self._publish(Notified(effect))

    async def _end_job(self, task: "asyncio.Task[Any]", job: _Job) -> None:
        await asyncio.wait([task])
        if self._ending is None:
            self._queue.put_nowait(_Input({"maintenance": "end"}, job.ended))
        elif not job.ended.done():
            job.ended.set_exception(self._ended_error())

    def _call_host(
        self, request: PreStepRequest | StepRequest | TurnStoppingRequest, scope: _Scope
    ) -> None:
        """Starts the host call in a task of its own (the scope cancels that task)."""
        loop = asyncio.get_running_loop()
        call: Awaitable[Any]
        if isinstance(request, PreStepRequest):
            kind = "preStep"
            call = self._host.pre_step(
                PreStepContext(request.turn, request.step, request.messages, scope.cancelled, self)
            )
        elif isinstance(request, StepRequest):
            kind = "step"
            call = self._host.step(StepContext(request.turn, request.step, scope.cancelled, self))
        else:
            kind = "turnStopping"
            call = self._host.turn_stopping(TurnStoppingContext(request.turn, scope.cancelled, self))
        inner: asyncio.Task[Any] = loop.create_task(_awaited(call))
        scope.task = inner
        if scope.cancelled.is_set():
            inner.cancel()
        loop.create_task(self._answer(kind, inner))

    async def _answer(self, kind: str, inner: "asyncio.Task[Any]") -> None:
        """Waits for the host call and feeds its answer (S40: a cancelled call is answered)."""
        answer: PreStepAnswer | StepAnswer | TurnStoppingAnswer
        await asyncio.wait([inner])
        # What happened is said here; the code the log gets is the session layer's.
        if inner.cancelled():
            answer = Fail(ErrorInfo(*host_failure("cancelled", kind, "")))
        elif inner.exception() is not None:
            answer = Fail(ErrorInfo(*host_failure("raised", kind, repr(inner.exception()))))
        else:
            answer = inner.result()
        try:
            input = answer_json(kind, _checked(kind, answer))
        except (TypeError, ValueError, AttributeError, CoxswainError) as error:
            invalid = ErrorInfo(*host_failure("invalid-answer", kind, str(error)))
            input = answer_json(kind, Fail(invalid))
        if self._ending is None:
            self._queue.put_nowait(_Input(input, None))

    def _end(self, ending: Ending) -> None:
        if self._ending is not None:
            return
        self._ending = ending
        self._scope.cancel()
        log, self._log = self._log, None
        if log is not None:
            try:
                log.close()
            except LogError as error:  # the file was replaced, truncated or written by another
                self._final_sync = error
            except OSError as error:
                self._final_sync = LogError(f"the final sync of the log failed: {error}")
        self._publish(Ended(ending))
        self._subscribers.clear()
        self._idle.set()
        self._ended.set()
