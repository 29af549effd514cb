"""``Machine``: the core's contract in Python, sans-IO (feed inputs, persist, act).

Each input method returns a :class:`Transition`: append its ``events`` to the durable log as one
batch, make them durable, then call ``persisted()`` and carry out every effect in order. A
transition left neither persisted nor drained leaves the machine *undrained*: the next input
raises :class:`~coxswain.Undrained` until :meth:`Machine.drain` hands it out again and it is
settled — the core's drain contract (``Transition::events``/``persisted``/``into_outputs``).
Every delivery rule is the Rust core's; this module only translates.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Iterable, Literal, Mapping, overload

from . import _native
from ._errors import BatchError
from ._types import (
    JSON,
    Begin,
    CancelCause,
    DeliveryMemory,
    Enter,
    Event,
    Expect,
    Fate,
    Message,
    Output,
    PreStepAnswer,
    Status,
    StepAnswer,
    Target,
    TurnStoppingAnswer,
    answer_json,
    memory_capacity,
)

__all__ = ["Machine", "Transition", "Pending", "Outstanding", "Repaired"]

Phase = Literal["idle", "running", "maintenance", "disposed"]


@dataclass(frozen=True, slots=True)
class Pending:
    """One pending item: its message and whether it is waking (S10, S19)."""

    message: Message
    waking: bool


@dataclass(frozen=True, slots=True)
class Outstanding:
    """The request the machine waits on (S4): ``kind`` is ``preStep``, ``step`` or
    ``turnStopping`` (whose ``step`` is 0)."""

    kind: Literal["preStep", "step", "turnStopping"]
    turn: int
    step: int


@dataclass(frozen=True, slots=True)
class Repaired:
    """A log repaired and restored (:meth:`Machine.repair`, S50, S59): the machine (idle, its
    items parked, S48), the events repair appended to the log, in order (``step/end`` if a step
    was open, ``turn/end {kind: "interrupted"}``, then one redelivery splice per message
    re-inserted: append them to the stored log before anything else), and the turn the log
    ended inside, if any."""

    machine: "Machine"
    appended: tuple[Event, ...]
    interrupted_turn: int | None


Transition = _native.Transition
"""What one accepted input produced (immutable, made in Rust). ``events``: the durable events,
one batch; ``effects``: what to carry out once they are durable (``Begin`` included);
``outputs``: every output in wire order (FORMAT.md), for recorders and ports (``wire``: the same
as JSON values). ``found`` is false only for a ``remove``/``replace`` of an id not pending.
``persisted()`` settles it and returns the effects; ``into_outputs(begin=False)`` settles it and
returns the outputs (with ``begin=True`` also each ``Begin`` where its activity begins, for a
harness that reads the wire order and scopes its cancellation by activity)."""


_EMPTY = Transition(True, (), (), ())
_NOT_FOUND = Transition(False, (), (), ())
_KINDS: Mapping[str, Literal["preStep", "step", "turnStopping"]] = {
    "preStep": "preStep",
    "step": "step",
    "turnStopping": "turnStopping",
}


class Machine:
    """The delivery state machine (sans-IO). ``delivery_memory`` is the capacity of the
    delivery memory (S51): how many ids that left the lists a retried delivery may not reuse.
    ``max_pending`` is the admission bound (S55): a send whose list (after S18) holds that many
    items, or a prepend into such a list, raises :class:`~coxswain.Full`; ``None`` (the
    default) is unbounded, and it is at least 1 (else :class:`~coxswain.InvalidInput`)."""

    __slots__ = ("_native",)

    def __init__(
        self,
        delivery_memory: DeliveryMemory = 0,
        *,
        max_pending: int | None = None,
        hash_seed: int = 0,
    ) -> None:
        self._native = _native.Machine(memory_capacity(delivery_memory), max_pending, hash_seed)

    @classmethod
    def restore(
        cls,
        log: Iterable[Mapping[str, JSON]],
        *,
        seed_length: int = 0,
        delivery_memory: DeliveryMemory = 0,
        max_pending: int | None = None,
    ) -> "Machine":
        """Restores a machine from a log of ``{type, data}`` records (S46–S48; other keys such
        as ``seq`` are ignored, host events skipped). Raises :class:`~coxswain.InvalidLog`.
        ``delivery_memory`` (a number of ids or ``"unbounded"``, S58) and ``max_pending`` are
        not in the log (S51, S55): pass the same at every restore; a restored list longer than
        ``max_pending`` is kept. The delivery memory's records (S58) are rebuilt from the log."""
        machine = cls.__new__(cls)
        machine._native = _native.Machine.restore(
            list(log), seed_length, memory_capacity(delivery_memory), max_pending
        )
        return machine

    @classmethod
    def repair(
        cls,
        log: Iterable[Mapping[str, JSON]],
        *,
        redelivery: int = 0,
        seed_length: int = 0,
        delivery_memory: DeliveryMemory = 0,
        max_pending: int | None = None,
    ) -> Repaired:
        """Crash repair (S50, S59), then restore: a log that ends inside a turn gets that turn's
        closers, and with the redelivery allowance ``redelivery`` (``A``, default 0: S50
        unchanged) each message the turn claimed after its last ``step/start`` (no model call saw
        it) is re-inserted at the front of its list, unless it was redelivered ``A`` times
        already or is pending again; it then parks (S48) until a wake or :meth:`resume` (S57).
        Returns the machine and the events appended (the core's own ``Restorer::repair``).
        Raises :class:`~coxswain.InvalidRedelivery` (an allowance that is not an ``int`` from 0
        to 1000, before anything is read) or :class:`~coxswain.InvalidLog`."""
        allowance = _native.check_redelivery(redelivery)
        native, appended, interrupted = _native.repair_log(
            list(log), seed_length, memory_capacity(delivery_memory), max_pending, allowance
        )
        return Repaired(cls._wrap(native), tuple(appended), interrupted)

    @classmethod
    def _wrap(cls, native: _native.Machine) -> "Machine":
        machine = cls.__new__(cls)
        machine._native = native
        return machine

    # ----- inputs -----

    def handle(self, input: Mapping[str, JSON]) -> Transition:
        """Applies an input given as a trace ``"in"`` value (FORMAT.md). Raises
        :class:`~coxswain.Undrained` while the previous input's transition is not settled."""
        return self._native.handle_typed(input)

    def _typed(self, input: Mapping[str, JSON], *given: Message) -> Transition:
        """``handle``, with the input's ``Message`` objects handed back by its outputs (S8)."""
        return self._native.handle_typed(input, given)

    def drain(self) -> Transition:
        """The transition not settled yet (after one was dropped), or an empty one."""
        return self._native.undrained() or _EMPTY

    def send(
        self, message: Message, target: Target, wakeup: bool, *, expect: Expect | None = None
    ) -> Transition:
        """``send(message, target, wakeup, expect)`` (S16, S54): with ``expect`` the send is
        accepted only while the guard holds, else it raises :class:`~coxswain.TurnMismatch`
        (after the identity checks: the retry of an accepted guarded send still raises
        :class:`~coxswain.AlreadyPending` or :class:`~coxswain.AlreadyDelivered`)."""
        guard = None if expect is None else (expect.kind, expect.number)
        return self._native.deliver("send", message, target, wakeup, guard)

    def steer_expecting(self, turn: int, message: Message) -> Transition:
        """A steer meant for turn ``turn`` (S54): it joins that turn, or raises
        :class:`~coxswain.TurnMismatch` once the turn has ended or was stopped (instead of
        joining the next one, or becoming a turn of its own after a stop, S18)."""
        return self.send(message, "next-step", True, expect=Expect.turn(turn))

    def followup_if_idle_after(self, turn: int, message: Message) -> Transition:
        """A follow-up sent only while idle with no turn since ``turn`` (S54); else it raises
        :class:`~coxswain.TurnMismatch`."""
        return self.send(message, "next-turn", True, expect=Expect.idle_after(turn))

    def followup(self, message: Message) -> Transition:
        """A follow-up: a turn of its own (S22)."""
        return self._native.deliver("followup", message)

    def steer(self, message: Message) -> Transition:
        """Steering: joins the running turn at its next step boundary."""
        return self._native.deliver("steer", message)

    def inject(self, message: Message) -> Transition:
        """Context that rides along with the next step; never wakes (S20)."""
        return self._native.deliver("inject", message)

    def remove(self, id: str) -> Transition:
        """Removes a pending message (S15); ``found`` is false if it was not pending."""
        return self.handle({"remove": id})

    def replace(self, id: str, message: Message) -> Transition:
        """Replaces a pending message in place (S15)."""
        return self._typed({"replace": {"id": id, "message": message.to_json()}}, message)

    def prepend(self, target: Target, message: Message) -> Transition:
        """Puts a quiet message first in ``target`` (S15)."""
        return self._typed({"prepend": {"target": target, "message": message.to_json()}}, message)

    def clear(self) -> Transition:
        """Discards everything pending (S15)."""
        return self.handle({"clear": {}})

    def cancel(self, cause: CancelCause | None = None, *, keep_inbox: bool = False) -> Transition:
        """``cancel(cause, {keepInbox})`` (S39); the cause defaults to ``user``."""
        cause = cause or CancelCause()
        return self.handle({"cancel": {"cause": cause.to_json(), "keepInbox": keep_inbox}})

    def begin_maintenance(self) -> Transition:
        """Begins maintenance (S43): only while idle, else :class:`~coxswain.Busy`."""
        return self.handle({"maintenance": "begin"})

    def end_maintenance(self) -> Transition:
        """Ends maintenance (S43, S25)."""
        return self.handle({"maintenance": "end"})

    def dispose(self) -> Transition:
        """Disposes the machine (S45)."""
        return self.handle({"dispose": {}})

    def resume(self) -> Transition:
        """``resume`` (S57): starts parked waking work (after a restore, a take-over, a
        ``keepInbox`` cancel). Idle with waking work, it wakes exactly as a waking send would;
        otherwise it emits nothing and changes nothing (no latch, quiet items never open a turn).
        Raises :class:`~coxswain.Disposed` only once disposed."""
        return self.handle({"resume": {}})

    def answer_pre_step(self, answer: PreStepAnswer) -> Transition:
        """Answers the outstanding ``preStep`` request (S29, S30). An ``Enter`` of the messages
        the request handed out goes back as the machine's own messages (no conversion)."""
        if isinstance(answer, Enter):
            return self._native.enter(tuple(answer.messages))
        return self._answer("preStep", answer)

    def answer_step(self, answer: StepAnswer) -> Transition:
        """Answers the outstanding ``step`` request (S32, S33)."""
        if isinstance(answer, str):  # a word crosses as itself (one call, no JSON value)
            return self._native.answer_word("step", answer)
        return self._answer("step", answer)

    def answer_turn_stopping(self, answer: TurnStoppingAnswer) -> Transition:
        """Answers the outstanding ``turnStopping`` request (S33)."""
        if isinstance(answer, str):
            return self._native.answer_word("turnStopping", answer)
        return self._answer("turnStopping", answer)

    def _answer(
        self, kind: str, answer: PreStepAnswer | StepAnswer | TurnStoppingAnswer
    ) -> Transition:
        if isinstance(answer, str):
            return self._native.answer_word(kind, answer)
        return self.handle(answer_json(kind, answer))

    # ----- batches (group commit) -----

    def begin_batch(self) -> None:
        """Opens a batch: the inputs fed from now on can be taken back together with
        :meth:`roll_back_batch` when the host cannot persist their events (its log refused the
        append, the disk is full), leaving the machine as if none had been fed. Persist and
        settle each transition as usual; :meth:`commit_batch` keeps them once they are durable.
        Raises :class:`~coxswain.BatchError` (``already-open``, ``undrained``)."""
        if self._native.undrained() is not None:
            raise BatchError("the previous input's outputs were not drained", "undrained")
        self._native.begin_batch()

    def commit_batch(self) -> None:
        """Closes the batch and keeps its inputs. Raises :class:`~coxswain.BatchError`
        (``not-open``)."""
        self._native.commit_batch()

    def roll_back_batch(self) -> None:
        """Closes the batch and takes back every input fed since :meth:`begin_batch`: lists,
        delivery memory, phase and turn number are as they were, and a transition still waiting
        to be settled is dropped (its effects must not be carried out). Raises
        :class:`~coxswain.BatchError` (``not-open``)."""
        self._native.roll_back_batch()

    @property
    def is_batch_open(self) -> bool:
        """Whether a batch is open."""
        return self._native.is_batch_open()

    # ----- queries -----

    @property
    def status(self) -> Status:
        """The public status (S23)."""
        return self._native.status()

    @property
    def phase(self) -> Phase:
        """``disposed``, ``maintenance``, ``running`` (a turn) or ``idle``."""
        if self._native.is_disposed():
            return "disposed"
        if self._native.is_maintenance():
            return "maintenance"
        return self._native.status()

    def is_quiescent(self) -> bool:
        """No turn and no maintenance is running (S44)."""
        return self._native.is_quiescent()

    def is_disposed(self) -> bool:
        """The machine is disposed (S45)."""
        return self._native.is_disposed()

    def is_disposing(self) -> bool:
        """A dispose is under way (S45)."""
        return self._native.is_disposing()

    def is_cancel_requested(self) -> bool:
        """The current activity was cancelled (S39)."""
        return self._native.is_cancel_requested()

    def cancel_cause(self) -> CancelCause | None:
        """The first cancel cause of the current activity."""
        cause: Any = self._native.cancel_cause()
        return None if cause is None else CancelCause.from_json(cause)

    def is_wake_latched(self) -> bool:
        """A wake is latched (S25)."""
        return self._native.is_wake_latched()

    @property
    def last_turn(self) -> int:
        """The last turn number; the next turn is this + 1."""
        return self._native.last_turn()

    @property
    def delivery_memory(self) -> DeliveryMemory:
        """The delivery memory's capacity (S51), or ``"unbounded"`` (S58)."""
        capacity = self._native.delivery_memory()
        return "unbounded" if capacity == _native.UNBOUNDED_MEMORY else capacity

    @property
    def hash_seed(self) -> int:
        """The seed of the id indexes' hasher (``hash_seed``; the agent draws a random one, so
        ids crafted to collide under known keys do not: HashDoS). No output depends on it."""
        return self._native.hash_seed()

    @property
    def max_pending(self) -> int | None:
        """The admission bound (S55), ``None`` when unbounded."""
        return self._native.max_pending()

    def pending(self, target: Target) -> tuple[Pending, ...]:
        """One pending list, in order."""
        return tuple(
            Pending(message, waking) for message, waking in self._native.pending_typed(target)
        )

    def is_pending(self, id: str) -> bool:
        """Whether ``id`` is pending in either list."""
        return self._native.is_pending(id)

    def delivered(self) -> tuple[str, ...]:
        """The ids the delivery memory holds, oldest first (S51)."""
        return tuple(self._native.delivered())

    def remembers(self, id: str) -> bool:
        """Whether the delivery memory holds ``id`` (S52)."""
        return self._native.remembers(id)

    def fate(self, id: str) -> Fate:
        """What became of ``id`` (S58): pending in a list, else the record the delivery memory
        holds for it (``discarded``, or ``claimed`` by a turn with the first step that carried it
        and how that turn ended), else ``unknown`` (never seen, or forgotten: an unknown id is
        never an error). A query: it changes nothing, and is answered in every phase, also once
        disposed."""
        return Fate(self._native.fate(id))

    def outstanding(self) -> Outstanding | None:
        """The outstanding request (S4), if any."""
        found = self._native.outstanding()
        if found is None:
            return None
        kind, turn, step = found
        return Outstanding(_KINDS[kind], turn, step)
