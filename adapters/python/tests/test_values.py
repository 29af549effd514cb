"""Values kept exactly, refused at the call, and shared (issue 28, items 1 and 2).

A value JSON and the log cannot carry exactly (an ``int`` beyond 64 bits, a NaN or infinite
``float``, a non-``str`` key, a ``set``, an object) raises ``UnrepresentableValue`` and changes
nothing (S5); integers up to 64 bits round-trip exactly through the machine, the log's record
format and a restore; a delivered ``Message`` is the one object every output carries (S8), and
its record form in events is one ``dict``.
"""

from __future__ import annotations

import math

import pytest

import coxswain
from coxswain import (
    Claimed,
    Enter,
    Inserted,
    Machine,
    Message,
    PreStepRequest,
    UnrepresentableValue,
)
from coxswain.log import encode, parse, restore

REFUSED: list[tuple[str, object, str]] = [
    ("an int beyond 64 bits", 2**64, "an integer beyond 64 bits"),
    ("an int below -2**63", -(2**63) - 1, "an integer beyond 64 bits"),
    ("NaN", math.nan, "a float that JSON cannot hold (NaN, infinity)"),
    ("infinity", {"x": -math.inf}, "a float that JSON cannot hold (NaN, infinity)"),
    ("a non-str key", {1: "x"}, "a JSON object's keys are strings"),
    ("a set", {1, 2}, "not a JSON value: set"),
    ("an object", object(), "not a JSON value: object"),
]


@pytest.mark.parametrize("name,content,why", REFUSED, ids=[r[0] for r in REFUSED])
def test_a_value_json_cannot_carry_is_refused_and_nothing_changes(
    name: str, content: object, why: str
) -> None:
    m = Machine(delivery_memory=4)
    m.inject(Message("kept", "context")).persisted()
    before = (m.pending("next-step"), m.pending("next-turn"), m.phase, m.last_turn)
    for deliver in (m.followup, m.steer, m.inject):
        with pytest.raises(UnrepresentableValue) as raised:
            deliver(Message("bad", content))
        assert why in str(raised.value), name
        # Typed, and still what a caller catching the standard classes expects.
        assert isinstance(raised.value, coxswain.InvalidInput)
        assert isinstance(raised.value, ValueError) and isinstance(raised.value, TypeError)
        assert (m.pending("next-step"), m.pending("next-turn"), m.phase, m.last_turn) == before
        assert not m.remembers("bad") and not m.is_pending("bad")
    # Not left undrained: the next input is accepted.
    assert m.inject(Message("next", [1, 2.5, None])).persisted()


def test_integers_to_64_bits_round_trip_through_the_machine_the_log_and_a_restore() -> None:
    content = {"max": 2**64 - 1, "min": -(2**63), "past_2_53": 2**53 + 1, "float": 0.5}
    m = Machine()
    transition = m.inject(Message("m", content))
    splice = transition.events[0]
    inserted = splice.data["inserted"]
    assert inserted[0]["content"] == content
    lines = encode([event.record() for event in transition.events])
    assert b'"max":18446744073709551615' in lines and b'"min":-9223372036854775808' in lines
    assert b'"past_2_53":9007199254740993' in lines
    read = parse(lines)
    assert read.records[0]["data"]["inserted"][0]["content"] == content
    restored = restore(read.records).machine
    (pending,) = restored.pending("next-step")
    assert pending.message.content == content
    assert type(pending.message.content["past_2_53"]) is int


def test_s8_a_delivered_message_is_one_object_in_every_output() -> None:
    m = Machine()
    given = Message("m1", {"parts": ["hello"]})
    followup = m.followup(given)
    effects = followup.persisted()
    carried = [
        e.message for e in effects if isinstance(e, (Inserted, Claimed))
    ] + [msg for e in effects if isinstance(e, PreStepRequest) for msg in e.messages]
    assert len(carried) == 3 and all(message is given for message in carried)
    record = followup.events[0].data["inserted"][0]
    assert record == given.to_json()
    enter = m.answer_pre_step(Enter((given,)))
    user_message = enter.events[1]
    assert user_message.type == "user/message"
    assert user_message.data is record, "one record dict for the message, in every event"
    enter.persisted()
    # A message the machine restored (never delivered here) is made once, then shared.
    restored = Machine.restore(
        [
            {
                "type": "agent/inbox/spliced",
                "data": {"target": "next-turn", "start": 0, "inserted": [{"id": "r", "content": 1}], "wakeup": True},
            }
        ]
    )
    t = restored.followup(Message("later", "x"))
    claimed = [e.message for e in t.persisted() if isinstance(e, Claimed)]
    request = [e for e in t.effects if isinstance(e, PreStepRequest)]
    assert claimed[0].id == "r" and request[0].messages[0] is claimed[0]
    # The pending lists hand back the same objects.
    idle = Machine()
    parked = Message("parked", "later")
    idle.inject(parked).persisted()
    assert idle.pending("next-step")[0].message is parked


def test_outputs_are_frozen_compare_by_fields_and_match() -> None:
    a = Message("a", "x")
    claimed = Claimed(a, 1)
    assert claimed == Claimed(message=a, turn=1)
    assert hash(coxswain.StepRequest(1, 2)) == hash(coxswain.StepRequest(turn=1, step=2))
    other: object = Inserted(a)
    assert claimed != Claimed(a, 2) and claimed != other
    assert repr(claimed) == f"Claimed(message={a!r}, turn=1)"
    with pytest.raises(AttributeError):
        claimed.turn = 2  # type: ignore[misc]
    match claimed:
        case Claimed(message, turn):
            assert message is a and turn == 1
        case _:
            pytest.fail("Claimed did not match its fields")
    assert claimed.to_json() == {
        "notify": {"type": "agent/inbox/claimed", "message": a.to_json(), "turn": 1}
    }


def test_a_host_error_keeps_every_field_in_agent_error_and_turn_end() -> None:
    details = {"status": 429, "retry": {"afterMs": 1500}}
    m = Machine()
    effects = m.followup(Message("m", "hi")).persisted()
    batch = next(e for e in effects if isinstance(e, PreStepRequest)).messages
    m.answer_pre_step(Enter(batch)).persisted()
    failed = m.answer_step(coxswain.Fail(coxswain.ErrorInfo("rate limited", "429", details)))
    (error,) = [e.error for e in failed.persisted() if isinstance(e, coxswain.TurnFailed)]
    assert error == coxswain.ErrorInfo("rate limited", "429", details)
    assert error.to_json() == {"message": "rate limited", "code": "429", **details}
    end = failed.events[-1]
    assert end.type == "turn/end"
    assert end.data == {"turn": 1, "reason": {"kind": "error", "error": error.to_json()}}
