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
