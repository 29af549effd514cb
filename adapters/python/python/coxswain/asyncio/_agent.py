"""``Agent``: an IO loop over the session layer's agent loop (``coxswain._native.Session``, the
Rust ``coxswain_session::AgentLoop``), which decides which commands make a batch, who waits for
what, what an unwritten hook answers, what a refused host answer means, which failed appends stop
the agent, the defaults and every error's kind. The driver moves commands, bytes, time and tasks.
A ``MemoryLog``'s append and an unsynced ``FileLog``'s (``sync="never"``: the page cache) are
committed in line, in the call that brings them; one that syncs waits on the log's writer thread,
and the callers that arrive meanwhile are the next batch (group commit)."""

from __future__ import annotations

import asyncio
import contextvars
import os
from functools import partial
from typing import Any, Awaitable, Callable, cast

from .._filelog import FileLog, LogError, SyncPolicy
from .._memorylog import MemoryLog
from .._native import Session, check_redelivery
from .._types import (Abort, Begin, DeliveryMemory, Enter, Notification, PreStepRequest,
                      Request, StatusChanged, StepRequest, TurnStoppingRequest, answer_json)
from ._errors import (AgentError, Closed, IdTooLong, MessageTooLarge, PersistenceError,
                      StepClosed, Stopped)
from ._host import (EAGER, Host, HostCall, Scope, launch, pre_step_context, start,
                    step_context, turn_stopping_context, written)
from ._inputs import Calls
from ._updates import Ended, Ending, Lagged, Notified, Recorded, Recovery, Reports, Update

__all__ = ["Agent", "AgentError", "Closed", "Stopped", "PersistenceError", "StepClosed",
           "IdTooLong", "MessageTooLarge", "Recovery", "Recorded", "Notified", "Ended", "Lagged",
           "Update", "Ending"]


class Agent(Calls, Reports):
    """One running agent: its calls (``_inputs.Calls``) hand the loop commands; ``Reports``."""

    DEFAULT_DELIVERY_MEMORY = 256
    #: The default admission bound (S55), as the tokio adapter's ``Options::max_pending``.
    DEFAULT_MAX_PENDING = 10_000
    #: The session layer's defaults (``Options::DEFAULT``), the times in seconds.
    DEFAULTS: dict[str, Any] = dict(Session.DEFAULTS)
    #: Host calls started eagerly in a row (CPython 3.12+, ``_host.start``) before the loop has a
    #: pass (a host that never suspends cannot starve it); refilled when entered from the loop.
    EAGER_CALLS = 16

    def __init__(self, host: Host, log: FileLog | MemoryLog, session: Session) -> None:
        self._host, self._log, self._session = host, log, session
        self._loop = asyncio.get_running_loop()
        # Each host call's and job's task starts from a copy of the opener's context.
        self._context = contextvars.copy_context()
        self._busy = self._again = False
        self._eager = self.EAGER_CALLS
        self._wake: asyncio.Future[None] | None = None  # the driver task waits for a command
        self._timer: asyncio.TimerHandle | None = None  # on the loop's next deadline
        self._scope, self._subscribers = Scope(), []
        self._ending: Ending | None = None
        self._final_sync: LogError | None = None
        self._idle, self._ended = asyncio.Event(), asyncio.Event()
        self._status, self._last_turn = session.status(), session.last_turn()
        self._settled()
        self._task: asyncio.Task[None] | None = None
        # An append that syncs runs off the loop (a driver task awaits it), so the loop never
        # waits for the disk; the others are committed in line.
        if not (isinstance(log, MemoryLog) or log.sync_policy == "never"):
            self._task = self._loop.create_task(self._run(), name="coxswain-agent")

    @classmethod
    async def open(cls, host: Host, path: str | os.PathLike[str] | MemoryLog, *,
                   delivery_memory: DeliveryMemory = DEFAULT_DELIVERY_MEMORY,
                   max_batch: int | None = None,
                   max_pending: int | None = DEFAULT_MAX_PENDING,
                   abort_grace: float | None = None, retry_after: float | None = None,
                   max_id_bytes: int | None = None, max_message_bytes: int | None = None,
                   redelivery: int = 0, resume_on_open: bool = False,
                   sync: SyncPolicy = "every-append") -> tuple[Agent, Recovery]:
        """Opens an agent on the log file at ``path`` (missing or empty: a new session), resumed
        and repaired (``FileLog.open``: S46–S50), or on a :class:`~coxswain.log.MemoryLog`.
        ``max_pending``: the admission bound (S55, ``None``: unbounded; pass it and
        ``delivery_memory`` every time, S51; ``delivery_memory`` may be ``"unbounded"``, S58).
        ``None`` takes the session layer's default (:attr:`DEFAULTS`): ``abort_grace`` (seconds
        an aborted host call has before it is answered ``fail``, ``host-abandoned``, S38–S40),
        ``retry_after`` (seconds after a failed append before the host answers it held are
        written again), ``max_batch`` (commands an append carries at most), ``max_id_bytes``,
        ``max_message_bytes`` (beyond them a send raises :class:`IdTooLong`,
        :class:`MessageTooLarge`). ``redelivery``: crash repair's allowance (S59), an ``int``
        from 0 to 1000, else :class:`~coxswain.InvalidRedelivery` before anything is read.
        ``resume_on_open``: once open, send ``resume`` (S57); default off (S48). ``sync``: the
        file's :data:`~coxswain.log.SyncPolicy` (else :class:`~coxswain.InvalidInput`)."""
        allowance = check_redelivery(redelivery)
        if (max_batch is not None and max_batch < 1) or (max_pending is not None
                                                         and max_pending < 1):
            raise ValueError("max_batch and max_pending are at least 1")
        seed = int.from_bytes(os.urandom(8), "little")  # ids come from callers: HashDoS
        log: FileLog | MemoryLog
        if isinstance(path, MemoryLog):
            log, resumed = path, path.resume(delivery_memory, max_pending, seed, allowance)
        else:
            log, resumed = await asyncio.to_thread(partial(
                FileLog.open, path, delivery_memory, max_pending, seed, allowance, sync=sync))
        try:
            session = Session(resumed.machine, abort_grace, max_id_bytes, max_message_bytes,
                              retry_after, max_batch, written(host, "pre_step"),
                              written(host, "turn_stopping"))
        except BaseException:
            log.close()
            raise
        agent = cls(host, log, session)
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

    async def dispose(self) -> None:
        """Disposes (S45): returns once ``disposed`` was emitted, the running call returned and the
        log synced and released. Never await it inside a host call (cancel from there)."""
        await self._input({"dispose": {}})
        await self._released()
        if self._ending != "disposed":
            raise self._ended_error()

    async def close(self) -> None:
        """Stops without disposing once what was sent before is durable: the running call is
        cancelled, the log synced and released; an open turn is ``interrupted`` at reopen (S50)."""
        await self._send("control", "close")
        await self._released()

    # ----- the driver -----

    async def _send(self, command: str, *args: Any) -> Any:
        reply: asyncio.Future[Any] = self._loop.create_future()
        getattr(self._session, command)(reply, *args)  # a refusal is its reply
        self._kick()
        return await reply  # answered already when it was committed in line

    def _kick(self) -> None:
        """Has the loop take what came in: in line (no driver task, or ended), else its task."""
        self._again = True
        if self._busy:
            return
        if self._task is None or self._ending is not None:
            self._busy, self._eager = True, self.EAGER_CALLS
            try:
                while self._again:
                    self._again = False
                    log = self._log if isinstance(self._log, MemoryLog) else self._log.committer()
                    self._carry_out(self._session.commit(log, self._loop.time(),
                                                         bool(self._subscribers)))
            finally:
                self._busy = False
            self._settled()
        elif self._wake is not None and not self._wake.done():
            self._wake.set_result(None)

    async def _run(self) -> None:
        """The driver task of a file's log: each batch written on its writer thread; the callers
        that arrive meanwhile wait together, and are the next batch (group commit)."""
        session, log, loop = self._session, cast(FileLog, self._log), self._loop
        while self._ending is None:
            if not self._again:
                self._wake = loop.create_future()
                await self._wake
                self._eager = self.EAGER_CALLS
                continue
            self._again = False
            sealed = session.poll_append(log.next_seq, loop.time(), bool(self._subscribers))
            if sealed is not None:
                self._again = True  # what came meanwhile is the next batch
                batch, data, count, records, ends_turn = sealed
                error: BaseException | None = None
                if count:
                    self._busy = True
                    try:
                        await log.append_in_thread(data, count, ends_turn)
                    except Exception as failed:
                        error = failed
                    finally:
                        self._busy = False
                if error is None and records is not None:
                    self._publish_records(log.next_seq - count, records)
                session.appended(batch, error, loop.time())
            self._carry_out(session.outputs())
            self._settled()

    def _carry_out(self, outputs: list[Any]) -> None:
        """Carries out the loop's outputs, in order: replies, effects, jobs, the ending."""
        for output in outputs:
            kind = type(output)
            if kind is tuple:
                tag, waiter, value = output
                if tag < 2:  # a reply: ok, or failed (a maintenance job's: `(reply, job)`)
                    if type(waiter) is tuple:
                        waiter = waiter[0]
                    if not waiter.done():
                        (waiter.set_exception if tag else waiter.set_result)(value)
                elif tag == 2:  # a maintenance job's beginning is durable: run it in its activity
                    (reply, job), scope = waiter, self._scope
                    scope.call = None
                    scope.task = start(self._loop, job(scope.cancelled), self._context.copy())
                    scope.task.add_done_callback(partial(self._job_ended, reply))
                elif tag == 3:
                    self._end(waiter)
                else:  # the records just appended, for subscribers
                    self._publish_records(waiter, value)
            elif kind is StatusChanged:  # the effects
                self._status = output.status
                if self._subscribers:
                    self._publish(Notified(output))
            elif kind is StepRequest or kind is PreStepRequest or kind is TurnStoppingRequest:
                self._call_host(output, self._scope)
            elif kind is Begin:
                self._scope = Scope()
                if isinstance(output.activity, int):
                    self._last_turn = output.activity
            elif kind is Abort:
                self._scope.cancel()
            elif self._subscribers:  # the other notifications
                self._publish(Notified(cast(Notification, output)))

    def _settled(self) -> None:
        """After a commit: the idle state, and the timer on the loop's next deadline."""
        ended = self._ending is not None
        (self._idle.set if ended or self._session.is_quiescent() else self._idle.clear)()
        deadline = None if ended else self._session.poll_timeout()
        armed = None if self._timer is None else self._timer.when()
        if deadline != armed:
            if self._timer is not None:
                self._timer.cancel()
            self._timer = None if deadline is None else self._loop.call_at(deadline,
                                                                            self._timed_out)

    def _timed_out(self) -> None:
        self._timer = None
        self._session.handle_timeout(self._loop.time())  # nothing while a batch is written
        self._kick()

    def _job_ended(self, reply: asyncio.Future[Any], _: object = None) -> None:
        self._session.job_ended(reply)
        self._kick()

    def _call_host(self, request: Request, scope: Scope) -> None:
        """Starts the host call in a task of its own (the scope cancels it), which reports as it
        ends (``_host.launch``: eagerly, a call that returns at once has reported already)."""
        cx: Any
        method: Callable[[Any], Awaitable[Any]]
        if type(request) is StepRequest:
            key, method = ("step", request.turn, request.step), self._host.step
            cx = step_context(request.turn, request.step, scope.cancelled, self)
        elif type(request) is PreStepRequest:
            key, method = ("preStep", request.turn, request.step), self._host.pre_step
            cx = pre_step_context(request.turn, request.step, request.messages, scope.cancelled,
                                  self)
        else:
            key, method = ("turnStopping", request.turn, 0), self._host.turn_stopping
            cx = turn_stopping_context(request.turn, scope.cancelled, self)
        call = scope.call = HostCall(self._answered, key)
        eager = EAGER and self._eager > 0 and not scope.cancelled.is_set()
        self._eager -= eager
        launch(self._loop, scope, call.run(method, cx), self._context.copy(), eager)

    def _answered(self, request: tuple[str, int, int], failure: str | None, value: Any) -> None:
        """The host call for ``request`` returned ``value`` (a word, messages to enter, nothing, a
        trace value) or ``failure``d (``value``: the detail); what that means is the loop's."""
        session = self._session
        if failure is not None:
            session.host_failed(request, failure, value)
        elif type(value) is str:  # a word (`completed`, `done`, ...): no JSON made
            session.answer_word(request, value)
        elif value is None:
            session.returned_nothing(request)
        elif type(value) is Enter and request[0] == "preStep":  # the messages themselves
            session.answer_enter(request, tuple(value.messages))
        else:
            try:
                session.answer(request, answer_json(request[0], value))
            except Exception as invalid:  # not even shaped as an answer
                session.host_failed(request, "invalid-answer", repr(invalid))
        self._kick()

    def _end(self, ending: Ending) -> None:
        """The loop ended the agent: stop what runs, sync and release the log, publish, answer."""
        self._ending = ending
        self._scope.cancel()
        if self._wake is not None and not self._wake.done():
            self._wake.set_result(None)  # the driver task ends
        try:
            self._log.close()  # it takes no append after this
        except LogError as error:  # the file was replaced, truncated or written by another
            self._final_sync = error
        self._publish(Ended(ending))
        self._subscribers.clear()
        self._idle.set()
        self._ended.set()
        self._session.finish()
        self._carry_out(self._session.outputs())
