"""``Agent``: one driver task moves inputs, bytes, time and tasks between its callers, its log file
and the host; every decision is the session layer's (``coxswain._native.Session``, the Rust
``coxswain_session::Session``): admission, group commit (the commands waiting together are one
batch, one write and one ``fdatasync``, then each member's effects and answer, in input order),
the rollback of a failed append, the abort grace and the host-failure codes."""

from __future__ import annotations

import asyncio
import os
from typing import Any, Awaitable, Callable, Coroutine, TypeVar, cast

from .._errors import Disposed as DisposedError
from .._filelog import FileLog, LogError
from .._memorylog import MemoryLog
from .._native import Session
from .._types import (Abort, Begin, Disposed, Effect, PreStepRequest, StatusChanged,
                      StepRequest, TurnStoppingRequest, answer_json)
from ._errors import (AgentError, Closed, IdTooLong, MessageTooLarge, PersistenceError,
                      StepClosed, Stopped)
from ._host import Host, PreStepContext, Scope, StepContext, TurnStoppingContext
from ._inputs import Calls, Command
from ._updates import Ended, Ending, Lagged, Notified, Recorded, Recovery, Reports, Update

__all__ = ["Agent", "AgentError", "Closed", "Stopped", "PersistenceError", "StepClosed",
           "IdTooLong", "MessageTooLarge", "Recovery", "Recorded", "Notified", "Ended", "Lagged",
           "Update", "Ending"]

T = TypeVar("T")

#: The hooks ``Host`` answers itself (enter the claimed batch, done): run without a task.
_DEFAULT_HOOKS = (Host.pre_step, Host.turn_stopping)


async def _call(method: Callable[[Any], Awaitable[T]], cx: Any) -> T:
    return await method(cx)


class _HostCall:
    """One host call's task body: it awaits the hook and answers the call with what it did."""

    __slots__ = ("_agent", "_key", "_answered")

    def __init__(self, agent: Agent, key: tuple[str, int, int]) -> None:
        self._agent, self._key, self._answered = agent, key, False

    async def run(self, method: Callable[[Any], Awaitable[Any]], cx: Any) -> None:
        outcome: StopIteration | BaseException
        try:
            outcome = StopIteration(await method(cx))
        except (Exception, asyncio.CancelledError) as error:  # a cancel answers it too (S40)
            outcome = error
        self._answered = True
        self._agent._answered(self._key, outcome)

    def unstarted(self, task: asyncio.Task[Any]) -> None:
        """The task ended: a call cancelled before its first line never answered."""
        if not self._answered:
            self._answered = True
            self._agent._answered(self._key, None)


class Agent(Calls, Reports):
    """A handle to one running agent: its calls (``_inputs.Calls``) go to the driver task, which
    owns the session and the log; ``_updates.Reports`` reads what the driver reports."""

    DEFAULT_DELIVERY_MEMORY = 256
    DEFAULT_MAX_BATCH = 64
    #: The default admission bound (S55), as the tokio adapter's ``Options::max_pending``.
    DEFAULT_MAX_PENDING = 10_000

    def __init__(self, host: Host, log: FileLog | MemoryLog, session: Session,
                 max_batch: int) -> None:
        self._host, self._log, self._session, self._max_batch = host, log, session, max_batch
        self._queue: asyncio.Queue[Command] = asyncio.Queue()
        self._scope, self._subscribers = Scope(), []
        self._members: list[Command | None] = []  # the staged batch's by place (None: the driver's)
        self._held: dict[tuple[int, int], Command | None] = {}  # answers the session holds, by member
        self._ending: Ending | None = None
        self._final_sync: LogError | None = None
        self._idle, self._ended = asyncio.Event(), asyncio.Event()
        self._status, self._last_turn = session.status(), session.last_turn()
        self._update_state()
        self._task = asyncio.get_running_loop().create_task(self._run(), name="coxswain-agent")

    @classmethod
    async def open(cls, host: Host, path: str | os.PathLike[str] | MemoryLog, *,
                   delivery_memory: int = DEFAULT_DELIVERY_MEMORY,
                   max_batch: int = DEFAULT_MAX_BATCH,
                   max_pending: int | None = DEFAULT_MAX_PENDING, abort_grace: float = 5.0,
                   max_id_bytes: int = 256,
                   max_message_bytes: int = 1 << 20) -> tuple[Agent, Recovery]:
        """Opens an agent on the log file at ``path`` (missing or empty: a new session), resuming
        and repairing what it holds (``FileLog.open``: S46–S50); ``path`` may be a
        :class:`~coxswain.log.MemoryLog` instead (the same bytes in memory, nothing durable: for
        tests and benches). ``max_pending``: the admission
        bound (S55, ``None``: unbounded; pass it and ``delivery_memory`` every time, S51);
        ``abort_grace``: the seconds an aborted host call has to return before the session answers
        it ``fail`` (``host-abandoned``, S38–S40); ``max_id_bytes``, ``max_message_bytes``: the
        limits beyond which a send raises :class:`IdTooLong`, :class:`MessageTooLarge`."""
        if max_batch < 1 or (max_pending is not None and max_pending < 1):
            raise ValueError("max_batch and max_pending are at least 1")
        seed = int.from_bytes(os.urandom(8), "little")  # ids come from callers: HashDoS
        log: FileLog | MemoryLog
        if isinstance(path, MemoryLog):
            log, resumed = path, path.resume(delivery_memory, max_pending, seed)
        else:
            log, resumed = await asyncio.to_thread(FileLog.open, path, delivery_memory,
                                                   max_pending, seed)
        try:
            session = Session(resumed.machine, abort_grace, max_id_bytes, max_message_bytes)
        except BaseException:
            log.close()
            raise
        counts = [len(session.pending(t)) for t in ("next-turn", "next-step")]
        return cls(host, log, session, max_batch), Recovery(
            resumed.records, resumed.torn, resumed.interrupted, resumed.closers,
            session.last_turn(), *counts)

    async def dispose(self) -> None:
        """Disposes (S45): returns once ``disposed`` was emitted, the running call returned and the
        log synced and released. Never await it inside a host call (cancel from there)."""
        await self._input({"dispose": {}})
        await self._released()
        if self._ending != "disposed":
            raise self._ended_error()

    async def close(self) -> None:
        """Stops now without disposing: the running call's task is cancelled, the log synced and
        released; a turn left open is closed ``interrupted`` at the next open (S50)."""
        if self._ending is None:
            try:
                await self._send("close", None)
            except (AgentError, DisposedError):  # it ended meanwhile
                pass
        await self._released()

    # ----- the driver -----

    async def _send(self, kind: str, arg: Any, job: Any = None) -> Any:
        if self._ending is not None:
            raise self._ended_error()
        reply: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self._queue.put_nowait(Command(kind, arg, reply, job))
        return await reply

    def _ended_error(self) -> AgentError | DisposedError:
        if self._ending == "disposed":
            return DisposedError("the machine is disposed and accepts no input")
        if self._ending == "stopped":
            return Stopped("the agent stopped (its log may hold a failed append): re-open it")
        return Closed("the agent is closed")

    def _update_state(self) -> None:
        (self._idle.set if self._ending or self._session.is_quiescent() else self._idle.clear)()

    def _publish(self, update: Update) -> None:
        for subscriber in self._subscribers:
            subscriber.put(update)

    def _reply(self, command: Command | None, outcome: Any) -> None:
        reply = None if command is None else command.reply
        if reply is not None and not reply.done():
            answer = reply.set_exception if isinstance(outcome, BaseException) else reply.set_result
            answer(outcome)

    async def _run(self) -> None:
        loop, session, controls = asyncio.get_running_loop(), self._session, ("pending", "close")
        try:
            while self._ending is None:
                group, deadline = list[Command](), session.poll_timeout()
                wait = None if deadline is None else max(0.0, deadline - loop.time())
                try:
                    group.append(await asyncio.wait_for(self._queue.get(), wait))
                except TimeoutError:  # a retry pause or an abort grace ran out: the session stages
                    for was, place in session.handle_timeout(loop.time()) or ():  # (S40)
                        waiter = None if was is None else self._held.pop(was, None)
                        if isinstance(place, BaseException):
                            self._reply(waiter, place)
                        else:
                            self._members.append(waiter)
                while (group and group[-1].kind not in controls and len(group) < self._max_batch
                       and not self._queue.empty()):
                    group.append(self._queue.get_nowait())
                control = group.pop() if group and group[-1].kind in controls else None
                await self._commit(group)  # the batch before a control, then the control
                if control is not None and control.kind == "close":
                    self._end("closed")
                    self._reply(control, None)
                elif control is not None:  # pending: both lists, as of the last durable batch
                    lists = [session.pending(t) for t in ("next-turn", "next-step")]
                    self._reply(control, self._ended_error() if self._ending else lists)
        except BaseException as error:  # a bug in the driver: stop rather than hang callers
            self._end("stopped")
            if not isinstance(error, (Exception, asyncio.CancelledError)):
                raise
        finally:
            while not self._queue.empty():
                self._reply(self._queue.get_nowait(), self._ended_error())

    async def _commit(self, group: list[Command]) -> None:
        """Stages the group, appends the batch as one write, then releases it in input order."""
        session = self._session
        for command in group:
            try:
                if command.kind == "input":
                    session.feed(command.arg)
                elif command.kind == "record":
                    session.record(*command.arg)
                elif (session.answer if command.kind == "answer" else session.host_failed)(
                        *command.arg) is None:
                    continue  # the answer of a call given up on (S4)
            except Exception as error:  # refused against the durable state, nothing changed (S5);
                self._reply(command, error)  # one against staged members is an `Ack::Refused`
                continue
            self._members.append(command)
        batch, log = session.seal(), self._log
        if batch is not None:
            try:
                data, count = session.encode(log.next_seq)
                if isinstance(log, MemoryLog):  # no IO: no thread
                    log.append_encoded(data, count)
                else:
                    await asyncio.to_thread(log.append_encoded, data, count)
            except Exception as error:
                self._failed(batch, error)
                return
            for seq, record in enumerate(session.records() if self._subscribers else (),
                                         log.next_seq - count):
                self._publish(Recorded(seq, record))
            members, self._members, member = self._members, [], 0
            for release in session.persisted(batch, asyncio.get_running_loop().time()):
                if isinstance(release, tuple):  # (place, found), after its member's effects
                    self._reply(members[release[0]], release[1])
                    member = release[0] + 1
                elif self._ending is None:
                    self._carry_out(release, members[member])
        self._update_state()

    def _failed(self, batch: int, error: Exception) -> None:
        """The append failed: the session took the batch back (S5). Its callers (those refused
        against it too) get PersistenceError; the answers it held are the session's to stage
        again after its retry pause, their waiters (a maintenance job's caller) with them."""
        members, held = self._session.failed(batch, asyncio.get_running_loop().time())
        staged, self._members = self._members, []
        log_error = error if isinstance(error, LogError) else None
        indeterminate = log_error is not None and log_error.indeterminate
        if indeterminate:
            self._end("stopped")  # before any caller is told, so `ending` says so at once
            members, held = sorted(members + held), []
        for i in members:
            self._reply(staged[i], PersistenceError(str(error), indeterminate=indeterminate,
                                                    log_error=log_error))
        self._held.update(((batch, i), staged[i]) for i in held)
        self._update_state()

    def _carry_out(self, effect: Effect, member: Command | None) -> None:
        if isinstance(effect, Begin):
            self._scope = scope = Scope()
            if isinstance(effect.activity, int):
                self._last_turn = effect.activity
            elif member is not None and member.job is not None:  # the maintenance it began
                job, ended = member.job
                scope.task = asyncio.get_running_loop().create_task(_call(job, scope.cancelled))
                scope.task.add_done_callback(lambda _: self._job_ended(ended))
        elif isinstance(effect, (PreStepRequest, StepRequest, TurnStoppingRequest)):
            self._call_host(effect, self._scope)
        elif isinstance(effect, Abort):
            self._scope.cancel()
        elif isinstance(effect, Disposed):
            self._end("disposed")
        else:
            if isinstance(effect, StatusChanged):
                self._status = effect.status
            if self._subscribers:
                self._publish(Notified(effect))

    def _job_ended(self, ended: asyncio.Future[Any]) -> None:
        if self._ending is None:
            self._queue.put_nowait(Command("input", {"maintenance": "end"}, ended))
        else:
            self._reply(Command("input", None, ended), self._ended_error())

    def _call_host(self, request: PreStepRequest | StepRequest | TurnStoppingRequest,
                   scope: Scope) -> None:
        """Starts the host call in a task of its own (the scope cancels it), which answers the
        call as it ends (no done callback's turn of the event loop in between); the callback
        answers only a call cancelled before its first line ran. A hook left as ``Host``'s
        default is answered at once, as it would answer."""
        cx: Any
        method: Callable[[Any], Awaitable[Any]]
        if isinstance(request, PreStepRequest):
            key, method = ("preStep", request.turn, request.step), self._host.pre_step
            cx = PreStepContext(request.turn, request.step, request.messages, scope.cancelled, self)
        elif isinstance(request, StepRequest):
            key, method = ("step", request.turn, request.step), self._host.step
            cx = StepContext(request.turn, request.step, scope.cancelled, self)
        else:
            key, method = ("turnStopping", request.turn, 0), self._host.turn_stopping
            cx = TurnStoppingContext(request.turn, scope.cancelled, self)
        if getattr(method, "__func__", None) in _DEFAULT_HOOKS and not scope.cancelled.is_set():
            # ``Host``'s own default (enter the claimed batch, done) never suspends: it runs
            # here, to its return, with no task.
            coroutine = cast(Coroutine[Any, Any, Any], method(cx))
            try:
                coroutine.send(None)
            except StopIteration as returned:
                self._answered(key, returned)
                return
            coroutine.close()  # it suspended after all: run it as a call of its own
        call = _HostCall(self, key)
        scope.task = asyncio.get_running_loop().create_task(call.run(method, cx))
        if scope.cancelled.is_set():
            scope.task.cancel()
        scope.task.add_done_callback(call.unstarted)

    def _answered(self, request: tuple[str, int, int],
                  outcome: StopIteration | BaseException | None) -> None:
        """Says what the host call did: returned (``StopIteration``, its value), raised, or was
        cancelled (``None``: before it began; a cancelled call is answered too, S40); what that
        means and the code a failure gets are the session's."""
        if isinstance(outcome, StopIteration):
            try:
                command = Command("answer", (request, answer_json(request[0], outcome.value)), None)
            except Exception as invalid:  # not even shaped as an answer
                command = Command("failed", (request, "invalid-answer", repr(invalid)), None)
        elif outcome is None or isinstance(outcome, asyncio.CancelledError):
            command = Command("failed", (request, "cancelled", ""), None)
        else:
            command = Command("failed", (request, "raised", repr(outcome)), None)
        if self._ending is None:
            self._queue.put_nowait(command)

    def _end(self, ending: Ending) -> None:
        if self._ending is not None:
            return
        self._ending = ending
        self._scope.cancel()
        try:
            self._log.close()  # it takes no append after this
        except LogError as error:  # the file was replaced, truncated or written by another
            self._final_sync = error
        except OSError as error:
            self._final_sync = LogError(f"the final sync of the log failed: {error}")
        self._publish(Ended(ending))
        self._subscribers.clear()
        self._idle.set()
        self._ended.set()
