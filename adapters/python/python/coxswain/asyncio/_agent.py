"""``Agent``: the driver moves inputs, bytes, time and tasks between its callers, its log and the
host; every decision is the session layer's (``coxswain._native.Session``, the Rust
``coxswain_session::Session``): admission, group commit (the commands waiting together are one
batch, one write and one ``fdatasync``, then each member's effects and answer, in input order),
the rollback of a failed append, the abort grace and the host-failure codes.

Where a commit runs depends only on the log. A file's append waits in a thread, so a driver task
commits, and the callers that arrive meanwhile are the next batch. A ``MemoryLog``'s append does
no IO: a command is committed in line, in the call that brings it (a caller's delivery, a host
call's answer, a timer), with the commands carrying it out queues (a default hook's answer), so a
turn costs no driver task and no turn of the event loop besides its host calls' own tasks."""

from __future__ import annotations

import asyncio
import contextvars
import os
from collections import deque
from typing import Any, Awaitable, Callable, TypeVar, cast

from .._errors import Disposed as DisposedError
from .._native import check_redelivery
from .._filelog import FileLog, LogError
from .._memorylog import MemoryLog
from .._native import Session
from .._types import (JSON, Abort, Begin, DeliveryMemory, Disposed, Effect, Enter, Fate,
                      Notification, PreStepRequest, Request, StatusChanged, StepRequest,
                      TurnStoppingRequest, answer_json)
from ._errors import (AgentError, Closed, IdTooLong, MessageTooLarge, PersistenceError,
                      StepClosed, Stopped)
from ._host import (STOP, Host, PreStepContext, Scope, StepContext, TurnStoppingContext,
                    enter_claimed)
from ._inputs import Calls, Command
from ._updates import Ended, Ending, Lagged, Notified, Recorded, Recovery, Reports, Update

__all__ = ["Agent", "AgentError", "Closed", "Stopped", "PersistenceError", "StepClosed",
           "IdTooLong", "MessageTooLarge", "Recovery", "Recorded", "Notified", "Ended", "Lagged",
           "Update", "Ending"]

T = TypeVar("T")

#: The commands answered after the batch before them, outside any batch.
_CONTROLS = ("pending", "fate", "close")


async def _call(method: Callable[[Any], Awaitable[T]], cx: Any) -> T:
    return await method(cx)


class _HostCall:
    """One host call's task body: it awaits the hook and answers the call with what it did."""

    __slots__ = ("_agent", "_key", "_answered")

    def __init__(self, agent: Agent, key: tuple[str, int, int]) -> None:
        self._agent, self._key, self._answered = agent, key, False

    async def run(self, method: Callable[[Any], Awaitable[Any]], cx: Any) -> None:
        try:
            value = await method(cx)
        except (Exception, asyncio.CancelledError) as error:  # a cancel answers it too (S40)
            self._answered = True
            self._agent._answered(self._key, error)
            return
        self._answered = True
        self._agent._returned(self._key, value)

    def unstarted(self, task: asyncio.Task[Any]) -> None:
        """The task ended: a call cancelled before its first line never answered."""
        if not self._answered:
            self._answered = True
            self._agent._answered(self._key, None)


class Agent(Calls, Reports):
    """A handle to one running agent: its calls (``_inputs.Calls``) queue commands for the
    driver, which owns the session and the log; ``_updates.Reports`` reads what it reports."""

    DEFAULT_DELIVERY_MEMORY = 256
    DEFAULT_MAX_BATCH = 64
    #: The default admission bound (S55), as the tokio adapter's ``Options::max_pending``.
    DEFAULT_MAX_PENDING = 10_000

    def __init__(self, host: Host, log: FileLog | MemoryLog, session: Session,
                 max_batch: int) -> None:
        self._host, self._log, self._session, self._max_batch = host, log, session, max_batch
        self._loop = asyncio.get_running_loop()
        # The context each host call's and job's task starts from, a copy of its own: the
        # opener's, wherever the commit that starts it runs (a caller's task, a host call's).
        self._context = contextvars.copy_context()
        self._queue: deque[Command] = deque()
        self._busy = False  # a commit runs (it takes what waits when it is done)
        self._wake: asyncio.Future[None] | None = None  # the driver task waits for a command
        self._timer: asyncio.TimerHandle | None = None  # on the session's next deadline
        self._scope, self._subscribers = Scope(), []
        self._members: list[Command | None] = []  # the staged batch's by place (None: the driver's)
        self._held: dict[tuple[int, int], Command | None] = {}  # answers the session holds, by member
        self._ending: Ending | None = None
        self._final_sync: LogError | None = None
        self._idle, self._ended = asyncio.Event(), asyncio.Event()
        self._status, self._last_turn = session.status(), session.last_turn()
        self._update_state()
        # A log that appends without IO (``MemoryLog``) is committed in line, where its
        # commands arrive: no task. A file's appends wait in a thread: the driver task's.
        self._task: asyncio.Task[None] | None = None
        if not isinstance(log, MemoryLog):
            self._task = self._loop.create_task(self._run(), name="coxswain-agent")

    @classmethod
    async def open(cls, host: Host, path: str | os.PathLike[str] | MemoryLog, *,
                   delivery_memory: DeliveryMemory = DEFAULT_DELIVERY_MEMORY,
                   max_batch: int = DEFAULT_MAX_BATCH,
                   max_pending: int | None = DEFAULT_MAX_PENDING, abort_grace: float = 5.0,
                   max_id_bytes: int = 256,
                   max_message_bytes: int = 1 << 20, redelivery: int = 0,
                   resume_on_open: bool = False) -> tuple[Agent, Recovery]:
        """Opens an agent on the log file at ``path`` (missing or empty: a new session), resuming
        and repairing what it holds (``FileLog.open``: S46–S50); ``path`` may be a
        :class:`~coxswain.log.MemoryLog` instead (the same bytes in memory, nothing durable: for
        tests and benches). ``max_pending``: the admission
        bound (S55, ``None``: unbounded; pass it and ``delivery_memory`` every time, S51;
        ``delivery_memory`` may be ``"unbounded"``, S58);
        ``abort_grace``: the seconds an aborted host call has to return before the session answers
        it ``fail`` (``host-abandoned``, S38–S40); ``max_id_bytes``, ``max_message_bytes``: the
        limits beyond which a send raises :class:`IdTooLong`, :class:`MessageTooLarge`.
        ``redelivery``: crash repair's allowance ``A`` (S59, default 0: S50 unchanged), an
        ``int`` from 0 to 1000, else :class:`~coxswain.InvalidRedelivery` before anything is read
        or written. ``resume_on_open``: once open, send ``resume`` (S57) so parked waking work
        (restored, or redelivered) runs without waiting for a new delivery; default off (S48:
        restored work parks)."""
        allowance = check_redelivery(redelivery)
        if max_batch < 1 or (max_pending is not None and max_pending < 1):
            raise ValueError("max_batch and max_pending are at least 1")
        seed = int.from_bytes(os.urandom(8), "little")  # ids come from callers: HashDoS
        log: FileLog | MemoryLog
        if isinstance(path, MemoryLog):
            log, resumed = path, path.resume(delivery_memory, max_pending, seed, allowance)
        else:
            log, resumed = await asyncio.to_thread(FileLog.open, path, delivery_memory,
                                                   max_pending, seed, allowance)
        try:
            session = Session(resumed.machine, abort_grace, max_id_bytes, max_message_bytes)
        except BaseException:
            log.close()
            raise
        agent = cls(host, log, session, max_batch)
        recovery = Recovery(resumed.records, resumed.torn, resumed.interrupted, resumed.closers,
                            session.last_turn(), len(session.pending("next-turn")),
                            len(session.pending("next-step")), resumed.redelivered)
        if resume_on_open:
            try:
                await agent.resume()
            except BaseException:
                await agent.close()
                raise
        return agent, recovery

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
        try:
            json: JSON = await self._send("fate", id)
        except (AgentError, DisposedError):  # it ended (before or meanwhile): its machine, as
            json = self._session.fate(id)  # it ended, still answers
        return Fate(json)

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
        reply: asyncio.Future[Any] = self._loop.create_future()
        self._queue.append(Command(kind, arg, reply, job))
        self._kick()
        return await reply  # answered already when it was committed in line

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

    def _kick(self) -> None:
        """Commits what waits, unless a commit runs (it takes what waits when it is done): in
        line on a log that appends without IO (nothing to wait for), else by the driver task."""
        if self._busy or self._ending is not None:
            return
        if self._task is None:
            self._commit_in_line()
        elif self._wake is not None and not self._wake.done():
            self._wake.set_result(None)

    def _commit_in_line(self) -> None:
        """Commits every waiting group, one batch each, here and now: the log's append does no
        IO. Commands that carrying out a batch queues (a default hook's answer) join the next."""
        self._busy = True
        try:
            while self._queue and self._ending is None:
                staged = self._stage_next()
                if staged is not None:
                    batch, data, count = staged
                    try:
                        self._log.append_encoded(data, count)
                    except Exception as error:
                        self._failed(batch, error)
                    else:
                        self._release(batch, count)
                if self._queue and self._queue[0].kind in _CONTROLS:
                    self._control()
        except BaseException as error:  # a bug in the driver: stop rather than hang callers
            self._end("stopped")
            if not isinstance(error, (Exception, asyncio.CancelledError)):
                raise
        finally:
            self._busy = False
            self._settled()

    async def _run(self) -> None:
        """The driver task of a log whose append does IO (a file): each batch's write in a
        thread, the event loop free meanwhile; the callers that arrive by then wait together,
        and are the next batch (group commit)."""
        try:
            while self._ending is None:
                if not self._queue:
                    self._wake = self._loop.create_future()
                    await self._wake
                    continue
                self._busy = True
                staged = self._stage_next()
                if staged is not None:
                    batch, data, count = staged
                    try:
                        await asyncio.to_thread(self._log.append_encoded, data, count)
                    except Exception as error:
                        self._failed(batch, error)
                    else:
                        self._release(batch, count)
                self._busy = False
                self._control()
                self._settled()
        except BaseException as error:  # a bug in the driver: stop rather than hang callers
            self._end("stopped")
            if not isinstance(error, (Exception, asyncio.CancelledError)):
                raise
        finally:
            self._settled()

    def _stage_next(self) -> tuple[int, bytes, int] | None:
        """Stages the next group (up to ``max_batch`` commands, ending before a control, which
        ``_control`` then answers) and seals it: ``(batch, lines, count)`` to append, or
        ``None`` when nothing was staged. A refused command is answered here (S5)."""
        queue, session, members = self._queue, self._session, self._members
        taken = 0
        while queue and taken < self._max_batch and queue[0].kind not in _CONTROLS:
            command = queue.popleft()
            taken += 1
            kind = command.kind
            try:
                if kind == "deliver":
                    session.deliver(*command.arg)
                elif kind == "word":
                    if session.answer_word(*command.arg) is None:
                        continue  # the answer of a call given up on (S4)
                elif kind == "enter":
                    if session.answer_enter(*command.arg) is None:
                        continue
                elif kind == "input":
                    session.feed(command.arg)
                elif kind == "record":
                    session.record(*command.arg)
                elif kind == "timeout":  # a retry pause or an abort grace ran out (S40)
                    for was, place in session.handle_timeout(self._loop.time()) or ():
                        waiter = None if was is None else self._held.pop(was, None)
                        if isinstance(place, BaseException):
                            self._reply(waiter, place)
                        else:
                            members.append(waiter)
                    continue
                elif (session.answer if kind == "answer" else session.host_failed)(
                        *command.arg) is None:
                    continue
            except Exception as error:  # refused against the durable state, nothing changed (S5);
                self._reply(command, error)  # one against staged members is an `Ack::Refused`
                continue
            members.append(command)
        try:
            return session.seal_encoded(self._log.next_seq)
        except Exception as error:  # not encodable: the batch fails whole (S5)
            batch = session.seal()
            if batch is None:
                raise
            self._failed(batch, error)
            return None

    def _release(self, batch: int, count: int) -> None:
        """The batch is in the log: its records to subscribers, then each member's effects
        carried out and its answer given, in input order."""
        session = self._session
        if self._subscribers:
            for seq, record in enumerate(session.records(), self._log.next_seq - count):
                self._publish(Recorded(seq, record))
        members, self._members, member = self._members, [], 0
        carry_out = self._carry_out
        for release in session.persisted(batch, self._loop.time()):
            if type(release) is tuple:  # (place, found), after its member's effects
                place, found = release
                self._reply(members[place], found)
                member = place + 1
            elif self._ending is None:
                carry_out(cast(Effect, release), members[member])

    def _control(self) -> None:
        """Answers a ``pending`` or ``close`` at the head of the queue: after the batch before it."""
        queue = self._queue
        if not queue or queue[0].kind not in _CONTROLS or self._ending is not None:
            return
        control = queue.popleft()
        if control.kind == "close":
            self._end("closed")
            self._reply(control, None)
        elif control.kind == "fate":  # as of the last durable batch
            try:
                fate: Any = self._session.fate(control.arg)
            except Exception as error:  # not a str, not UTF-8 text: the caller's, not the driver's
                fate = error
            self._reply(control, fate)
        else:  # pending: both lists, as of the last durable batch
            self._reply(control, [self._session.pending(t) for t in ("next-turn", "next-step")])

    def _settled(self) -> None:
        """After a commit: the idle state, the timer on the session's next deadline (a retry
        pause's end, an abort grace's) and, once ended, the answer of every caller left."""
        self._update_state()
        if self._ending is not None:
            while self._queue:
                self._reply(self._queue.popleft(), self._ended_error())
            deadline = None
        else:
            deadline = self._session.poll_timeout()
        armed = None if self._timer is None else self._timer.when()
        if deadline != armed:
            if self._timer is not None:
                self._timer.cancel()
            self._timer = None if deadline is None else self._loop.call_at(deadline,
                                                                            self._timed_out)

    def _timed_out(self) -> None:
        self._timer = None
        if self._ending is None:
            self._queue.append(Command("timeout", None, None))
            self._kick()

    def _failed(self, batch: int, error: Exception) -> None:
        """The append failed: the session took the batch back (S5). Its callers (those refused
        against it too) get PersistenceError; the answers it held are the session's to stage
        again after its retry pause, their waiters (a maintenance job's caller) with them."""
        members, held = self._session.failed(batch, self._loop.time())
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
        kind = type(effect)
        if kind is StatusChanged:
            self._status = cast(StatusChanged, effect).status
            if self._subscribers:
                self._publish(Notified(cast(StatusChanged, effect)))
        elif kind is PreStepRequest or kind is StepRequest or kind is TurnStoppingRequest:
            self._call_host(cast(Request, effect), self._scope)
        elif kind is Begin:
            self._scope = scope = Scope()
            activity = cast(Begin, effect).activity
            if isinstance(activity, int):
                self._last_turn = activity
            elif member is not None and member.job is not None:  # the maintenance it began
                job, ended = member.job
                scope.task = self._loop.create_task(_call(job, scope.cancelled),
                                                    context=self._context.copy())
                scope.task.add_done_callback(lambda _: self._job_ended(ended))
        elif kind is Abort:
            self._scope.cancel()
        elif kind is Disposed:
            self._end("disposed")
        elif self._subscribers:  # the other notifications
            self._publish(Notified(cast(Notification, effect)))

    def _job_ended(self, ended: asyncio.Future[Any]) -> None:
        if self._ending is None:
            self._queue.append(Command("input", {"maintenance": "end"}, ended))
            self._kick()
        else:
            self._reply(Command("input", None, ended), self._ended_error())

    def _call_host(self, request: Request, scope: Scope) -> None:
        """Starts the host call in a task of its own (the scope cancels it), which answers the
        call as it ends (no done callback's turn of the event loop in between); the callback
        answers only a call cancelled before its first line ran. A hook left as ``Host``'s
        default (enter the claimed batch, done) never suspends: it is answered here and now,
        with ``Host``'s own answer, and no task."""
        cx: Any
        method: Callable[[Any], Awaitable[Any]]
        if type(request) is PreStepRequest:
            key, method = ("preStep", request.turn, request.step), self._host.pre_step
            if getattr(method, "__func__", None) is Host.pre_step and not scope.cancelled.is_set():
                return self._returned(key, enter_claimed(request.messages))
            cx = PreStepContext(request.turn, request.step, request.messages, scope.cancelled, self)
        elif type(request) is StepRequest:
            key, method = ("step", request.turn, request.step), self._host.step
            cx = StepContext(request.turn, request.step, scope.cancelled, self)
        else:
            key, method = ("turnStopping", request.turn, 0), self._host.turn_stopping
            if (getattr(method, "__func__", None) is Host.turn_stopping
                    and not scope.cancelled.is_set()):
                return self._returned(key, STOP)
            cx = TurnStoppingContext(request.turn, scope.cancelled, self)
        call = _HostCall(self, key)
        scope.task = self._loop.create_task(call.run(method, cx), context=self._context.copy())
        if scope.cancelled.is_set():
            scope.task.cancel()
        scope.task.add_done_callback(call.unstarted)

    def _returned(self, request: tuple[str, int, int], value: Any) -> None:
        """The host call made for ``request`` returned ``value``: staged as its answer (a word
        or the messages to enter as they are, else as its trace value); what it means is the
        session's, which fails the call (``host-invalid-answer``) if it is no answer."""
        if type(value) is str:  # a word (`completed`, `done`, ...): no JSON made
            command = Command("word", (request, value), None)
        elif type(value) is Enter and request[0] == "preStep":  # the messages themselves
            command = Command("enter", (request, tuple(value.messages)), None)
        else:
            try:
                command = Command("answer", (request, answer_json(request[0], value)), None)
            except Exception as invalid:  # not even shaped as an answer
                command = Command("failed", (request, "invalid-answer", repr(invalid)), None)
        self._stage_later(command)

    def _answered(self, request: tuple[str, int, int],
                  outcome: StopIteration | BaseException | None) -> None:
        """Says what the host call did: returned (``StopIteration``, its value), raised, or was
        cancelled (``None``: before it began; a cancelled call is answered too, S40); what that
        means and the code a failure gets are the session's."""
        if isinstance(outcome, StopIteration):
            return self._returned(request, outcome.value)
        if outcome is None or isinstance(outcome, asyncio.CancelledError):
            command = Command("failed", (request, "cancelled", ""), None)
        else:
            command = Command("failed", (request, "raised", repr(outcome)), None)
        self._stage_later(command)

    def _stage_later(self, command: Command) -> None:
        """Queues a command no caller waits on (a host call's answer), unless the agent ended."""
        if self._ending is None:
            self._queue.append(command)
            self._kick()

    def _end(self, ending: Ending) -> None:
        if self._ending is not None:
            return
        self._ending = ending
        self._scope.cancel()
        if self._wake is not None and not self._wake.done():
            self._wake.set_result(None)  # the driver task ends
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
