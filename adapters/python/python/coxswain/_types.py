"""The typed, immutable values of coxswain: messages, causes, answers and outputs.

Every class is a frozen dataclass with ``to_json()`` giving its value in the conformance trace
format (FORMAT.md), the vocabulary the Rust core speaks; ``output_from_json`` reads an ``"out"``
value back.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, Literal, Mapping, Union

JSON = Any
"""Any JSON value: ``dict`` (string keys), ``list``, ``str``, ``int``, ``float``, ``bool``, ``None``."""

Target = Literal["next-turn", "next-step"]
"""A pending list: NT (``"next-turn"``) or NS (``"next-step"``)."""

Status = Literal["idle", "running"]
"""The public status (S23)."""

_USER: Mapping[str, JSON] = MappingProxyType({"kind": "user"})

DeliveryMemory = Union[int, Literal["unbounded"]]
"""The delivery memory's capacity (S51): a number of ids, or ``"unbounded"`` (S58: no id is ever
forgotten, for a host that promises idempotency for as long as a session lives)."""


def memory_capacity(memory: DeliveryMemory) -> int:
    """The capacity the core takes for ``memory``: ``"unbounded"`` is the core's own
    ``Config::UNBOUNDED_DELIVERY_MEMORY``; any other ``str`` raises
    :class:`~coxswain.InvalidInput`; a number is passed as it is (the binding refuses what is no
    ``usize``)."""
    from ._native import UNBOUNDED_MEMORY

    if memory == "unbounded":
        return UNBOUNDED_MEMORY
    if isinstance(memory, str):
        from ._errors import InvalidInput

        raise InvalidInput(f'delivery_memory is a number of ids or "unbounded": {memory!r}')
    return memory


TurnEndKind = Literal["completed", "max-tokens", "blocked", "aborted", "error", "interrupted"]
"""The ``kind`` of a ``turn/end`` reason (S34, S50)."""


@dataclass(frozen=True, slots=True)
class Fate:
    """What became of a message id (S58), as ``Machine.fate`` and ``Agent.fate`` answer it.

    It holds the core's own spelling (``Fate::to_json``, FORMAT.md's ``F``): ``json`` is
    ``{"pending": T}``, ``"discarded"``, ``"unknown"`` or ``{"claimed": {"turn": n, "step": n,
    "end": K}}`` (``step`` and ``end`` absent while they are), and :meth:`to_json` gives it back
    as it is; the properties read it. Equal fates are equal values (``Fate("unknown")``)."""

    json: JSON

    @property
    def kind(self) -> Literal["pending", "discarded", "claimed", "unknown"]:
        """``pending`` (S9), ``discarded`` (an ordinary removal, S12), ``claimed`` (by a turn,
        S28) or ``unknown`` (never seen, or forgotten)."""
        if isinstance(self.json, str):
            return "discarded" if self.json == "discarded" else "unknown"
        return "pending" if "pending" in self.json else "claimed"

    @property
    def target(self) -> Target | None:
        """The list it is pending in (``pending`` only)."""
        target: Target | None = self.json["pending"] if self.kind == "pending" else None
        return target

    def _claimed(self, key: str) -> Any:
        return self.json["claimed"].get(key) if self.kind == "claimed" else None

    @property
    def turn(self) -> int | None:
        """The turn that claimed it (``claimed`` only)."""
        turn: int | None = self._claimed("turn")
        return turn

    @property
    def step(self) -> int | None:
        """The first step of that turn whose ``user/message`` carried it; ``None`` while none
        has (``claimed`` only)."""
        step: int | None = self._claimed("step")
        return step

    @property
    def end(self) -> TurnEndKind | None:
        """The ``kind`` of that turn's ``turn/end`` reason; ``None`` while it is open."""
        end: TurnEndKind | None = self._claimed("end")
        return end

    def to_json(self) -> JSON:
        """The core's spelling (FORMAT.md's ``F``)."""
        return self.json

    def __hash__(self) -> int:
        import json

        return hash(json.dumps(self.json, sort_keys=True))


@dataclass(frozen=True, slots=True)
class Message:
    """A user-role message ``{id, source, content}`` (S6). Only ``id`` means anything to the
    machine; ``source`` (whose ``kind`` tells a human prompt from injected context, S7),
    ``content`` and any ``extra`` fields are carried verbatim."""

    id: str
    content: JSON = None
    source: JSON = field(default_factory=lambda: {"kind": "user"})
    extra: Mapping[str, JSON] = field(default_factory=dict)

    def to_json(self) -> dict[str, JSON]:
        value: dict[str, JSON] = {"id": self.id, "source": self.source, "content": self.content}
        value.update(self.extra)
        return value

    @staticmethod
    def from_json(value: Mapping[str, JSON]) -> "Message":
        extra = {k: v for k, v in value.items() if k not in ("id", "source", "content")}
        return Message(
            id=value["id"],
            content=value.get("content"),
            source=value.get("source", {"kind": "user"}),
            extra=extra,
        )


@dataclass(frozen=True, slots=True)
class Expect:
    """An expected-turn guard on a send (S54): ``Expect.turn(n)`` holds while turn ``n`` runs
    and was not stopped; ``Expect.idle_after(n)`` while the machine is idle (not in maintenance)
    and its last turn is ``n``. A send whose guard does not hold raises
    :class:`~coxswain.TurnMismatch` and changes nothing."""

    kind: Literal["turn", "idleAfter"]
    number: int

    @staticmethod
    def turn(number: int) -> "Expect":
        """``{"turn": number}``: while turn ``number`` runs."""
        return Expect("turn", number)

    @staticmethod
    def idle_after(number: int) -> "Expect":
        """``{"idleAfter": number}``: while idle with no turn since turn ``number``."""
        return Expect("idleAfter", number)

    def to_json(self) -> dict[str, JSON]:
        return {self.kind: self.number}


@dataclass(frozen=True, slots=True)
class ErrorInfo:
    """A failure ``{message, code, …}`` (S38): ``details`` are the other fields of the host's
    error, kept as they are and written back beside ``message`` and ``code``."""

    message: str
    code: str
    details: Mapping[str, JSON] = field(default_factory=dict)

    def to_json(self) -> dict[str, JSON]:
        value: dict[str, JSON] = {"message": self.message, "code": self.code}
        value.update(self.details)
        return value


@dataclass(frozen=True, slots=True)
class CancelCause:
    """Why an activity is cancelled (S39): ``user``, ``parent``, ``hook`` (with a reason) or
    ``disposed``."""

    kind: Literal["user", "parent", "hook", "disposed"] = "user"
    reason: str | None = None

    def to_json(self) -> dict[str, JSON]:
        if self.kind == "hook":
            return {"kind": "hook", "reason": self.reason or ""}
        return {"kind": self.kind}

    @staticmethod
    def from_json(value: Mapping[str, JSON]) -> "CancelCause":
        return CancelCause(kind=value["kind"], reason=value.get("reason"))


# ----- answers to the machine's requests -----


from ._native import Enter as Enter  # noqa: E402  (``preStep`` answer: enter with these messages, S30)


@dataclass(frozen=True, slots=True)
class Reject:
    """``preStep`` answer: reject the step; the turn ends ``blocked`` (S29)."""


@dataclass(frozen=True, slots=True)
class Fail:
    """Any request's answer: it failed; the turn ends with this error (S38)."""

    error: ErrorInfo


PreStepAnswer = Union[Enter, Reject, Fail]
StepAnswer = Union[Literal["completed", "max-tokens", "continue"], Fail]
TurnStoppingAnswer = Union[Literal["done"], Fail]


# ----- outputs -----
#
# The output classes are made in Rust (``coxswain._native``): each is a frozen class that behaves
# as a frozen dataclass (positional and keyword construction, read-only fields, ``==`` and
# ``hash`` by fields, ``repr``, ``match``) and costs one allocation to make. Their fields:
#
# - ``Event(type, data)``: a durable event; ``record()`` is the log record ``{type, data}``.
# - ``Inserted(message)``, ``Discarded(message)``, ``Claimed(message, turn)``,
#   ``StatusChanged(status)``, ``TurnFailed(turn, step, error)``: notifications.
# - ``PreStepRequest(turn, step, messages)``, ``StepRequest(turn, step)``,
#   ``TurnStoppingRequest(turn)``: requests; ``Abort(cause)``; ``Disposed()``.
# - ``Begin(activity)``: an effect only, the turn number or ``"maintenance"``.
#
# A message in an output is the ``Message`` that was delivered (S8), one object however many
# outputs carry it; in an event's ``data`` it is its record form, one ``dict``.

from ._native import (  # noqa: E402
    Abort as Abort,
    Begin as Begin,
    Claimed as Claimed,
    Discarded as Discarded,
    Disposed as Disposed,
    Event as Event,
    Inserted as Inserted,
    PreStepRequest as PreStepRequest,
    StatusChanged as StatusChanged,
    StepRequest as StepRequest,
    TurnFailed as TurnFailed,
    TurnStoppingRequest as TurnStoppingRequest,
)

Notification = Union[Inserted, Discarded, Claimed, StatusChanged, TurnFailed]
Request = Union[PreStepRequest, StepRequest, TurnStoppingRequest]
Output = Union[Event, Notification, Request, Abort, Disposed]
"""One output in wire order (a trace's ``"out"`` line)."""
Effect = Union[Notification, Begin, Request, Abort, Disposed]
"""What the host carries out once the transition's events are durable."""


def _error(value: Mapping[str, JSON]) -> ErrorInfo:
    details = {k: v for k, v in value.items() if k not in ("message", "code")}
    return ErrorInfo(message=value["message"], code=value["code"], details=details)


def output_from_json(value: Mapping[str, JSON]) -> Output:
    """The typed output of a trace ``"out"`` value."""
    if "event" in value:
        event = value["event"]
        return Event(type=event["type"], data=event["data"])
    if "notify" in value:
        note = value["notify"]
        kind = note["type"]
        if kind == "agent/inbox/inserted":
            return Inserted(Message.from_json(note["message"]))
        if kind == "agent/inbox/discarded":
            return Discarded(Message.from_json(note["message"]))
        if kind == "agent/inbox/claimed":
            return Claimed(Message.from_json(note["message"]), note["turn"])
        if kind == "agent/status":
            return StatusChanged(note["status"])
        if kind == "agent/error":
            return TurnFailed(note["turn"], note["step"], _error(note["error"]))
        raise ValueError(f"unknown notification {kind!r}")
    if "request" in value:
        request = value["request"]
        if "preStep" in request:
            r = request["preStep"]
            return PreStepRequest(
                r["turn"], r["step"], tuple(Message.from_json(m) for m in r["messages"])
            )
        if "step" in request:
            r = request["step"]
            return StepRequest(r["turn"], r["step"])
        if "turnStopping" in request:
            return TurnStoppingRequest(request["turnStopping"]["turn"])
        if "abort" in request:
            return Abort(CancelCause.from_json(request["abort"]["cause"]))
        raise ValueError(f"unknown request {request!r}")
    if "disposed" in value:
        return Disposed()
    raise ValueError(f"unknown output {value!r}")


def answer_json(kind: str, answer: PreStepAnswer | StepAnswer | TurnStoppingAnswer) -> JSON:
    """The trace ``"in"`` value answering request ``kind`` (``preStep``, ``step``,
    ``turnStopping``)."""
    if isinstance(answer, Fail):
        return {kind: {"fail": answer.error.to_json()}}
    if isinstance(answer, Enter):
        return {kind: {"enter": [m.to_json() for m in answer.messages]}}
    if isinstance(answer, Reject):
        return {kind: "reject"}
    return {kind: answer}
