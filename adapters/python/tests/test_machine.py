"""``coxswain.Machine``: the core's contract through the typed API, outputs pinned exactly."""

from __future__ import annotations

from typing import Callable

import pytest

import coxswain
from coxswain import (
    Abort,
    Begin,
    CancelCause,
    Claimed,
    Discarded,
    Enter,
    ErrorInfo,
    Event,
    Fail,
    Inserted,
    Machine,
    Message,
    PreStepRequest,
    Reject,
    StatusChanged,
    StepRequest,
    TurnFailed,
    TurnStoppingRequest,
)

A = Message("a", "hi")
B = Message("b", "more")


def settle(transition: coxswain.Transition) -> tuple[coxswain.Effect, ...]:
    return transition.persisted()


def test_an_idle_followup_runs_one_turn_exactly() -> None:
    """FORMAT.md's example (S24, S27–S36): events first, effects after persisted()."""
    m = Machine()
    t = m.followup(A)
    a = A.to_json()
    assert t.found
    assert t.events == (
        Event("agent/inbox/spliced", {"target": "next-turn", "start": 0, "inserted": [a], "wakeup": True}),
        Event("turn/start", {"turn": 1}),
        Event("agent/inbox/spliced", {"target": "next-turn", "start": 0, "removedCount": 1, "inserted": []}),
    )
    assert t.persisted() == (
        Inserted(A),
        StatusChanged("running"),
        Begin(1),
        Claimed(A, 1),
        PreStepRequest(1, 1, (A,)),
    )
    t = m.answer_pre_step(Enter((A,)))
    assert t.events == (Event("step/start", {"turn": 1, "step": 1}), Event("user/message", a))
    assert t.persisted() == (StepRequest(1, 1),)
    t = m.answer_step("completed")
    assert t.events == (Event("step/end", {"turn": 1, "step": 1}),)
    assert t.persisted() == (TurnStoppingRequest(1),)
    t = m.answer_turn_stopping("done")
    assert t.events == (Event("turn/end", {"turn": 1, "reason": {"kind": "completed"}}),)
    assert t.persisted() == (StatusChanged("idle"),)
    assert m.phase == "idle" and m.is_quiescent() and m.last_turn == 1


def test_outputs_are_the_wire_order_and_round_trip() -> None:
    m = Machine()
    t = m.followup(A)
    assert [o.to_json() for o in t.outputs] == list(t.wire)
    assert t.into_outputs() == t.outputs
    assert t.wire[1] == {"notify": {"type": "agent/inbox/inserted", "message": A.to_json()}}


def test_an_undrained_transition_rejects_the_next_input_until_drained() -> None:
    """The drain contract: a transition neither persisted nor drained blocks the machine."""
    m = Machine()
    t = m.followup(A)
    with pytest.raises(coxswain.Undrained) as caught:
        m.steer(B)
    assert caught.value.kind == "undrained"
    assert m.drain() is t
    assert m.drain().persisted()[0] == Inserted(A)
    assert m.drain().is_empty()
    settle(m.steer(B))
    assert [p.message.id for p in m.pending("next-step")] == ["b"]


def test_each_rejection_has_its_class_and_changes_nothing() -> None:
    """S5 and one class per kind, under one base."""
    m = Machine(delivery_memory=2)
    with pytest.raises(coxswain.UnexpectedCompletion):  # S4
        m.answer_step("completed")
    with pytest.raises(coxswain.UnexpectedCompletion):
        m.end_maintenance()
    settle(m.inject(A))
    with pytest.raises(coxswain.AlreadyPending) as pending:  # S13
        m.followup(A)
    assert pending.value.id == "a" and pending.value.kind == "already-pending"
    assert m.pending("next-step") == (coxswain.Pending(A, False),)
    settle(m.followup(B))  # claims a (NS) and b at the turn boundary
    with pytest.raises(coxswain.AlreadyDelivered) as delivered:  # S52
        m.followup(A)
    assert delivered.value.id == "a"
    assert m.delivered() == ("a", "b") and m.remembers("a")
    with pytest.raises(coxswain.Busy):  # S43
        m.begin_maintenance()
    for error in (coxswain.AlreadyPending, coxswain.Busy, coxswain.Disposed, coxswain.Undrained):
        assert issubclass(error, coxswain.Rejected) and issubclass(error, coxswain.CoxswainError)
    assert coxswain.AfterDisposal is coxswain.Disposed


def test_remove_reports_found() -> None:
    m = Machine()
    t = m.remove("nope")  # S15: absent id, nothing emitted
    assert not t.found and t.is_empty()
    settle(m.inject(A))
    t = m.remove("a")
    assert t.found
    assert t.events == (
        Event("agent/inbox/spliced", {"target": "next-step", "start": 0, "removedCount": 1, "inserted": [], "outcome": "canceled"}),
    )
    assert t.persisted() == (Discarded(A),)


def test_cancel_aborts_and_the_answer_ends_the_turn_aborted() -> None:
    """S39, S40: abort, then the outstanding request is still answered."""
    m = Machine()
    settle(m.followup(A))
    t = m.cancel(CancelCause("hook", "stop"))
    assert Abort(CancelCause("hook", "stop")) in t.persisted()
    assert m.is_cancel_requested() and m.cancel_cause() == CancelCause("hook", "stop")
    t = m.answer_pre_step(Fail(ErrorInfo("cancelled", "cancelled")))
    assert t.events[-1] == Event(
        "turn/end", {"turn": 1, "reason": {"kind": "aborted", "reason": {"kind": "hook", "reason": "stop"}}}
    )
    settle(t)
    assert m.phase == "idle"


def test_a_rejected_pre_step_ends_blocked_and_a_failure_reports_an_error() -> None:
    m = Machine()
    settle(m.followup(A))
    t = m.answer_pre_step(Reject())
    assert t.events[-1] == Event("turn/end", {"turn": 1, "reason": {"kind": "blocked"}})
    settle(t)
    settle(m.followup(B))
    t = m.answer_pre_step(Fail(ErrorInfo("boom", "x")))
    assert TurnFailed(2, 0, ErrorInfo("boom", "x")) in t.persisted()


def test_maintenance_begins_an_activity_with_no_wire_output() -> None:
    m = Machine()
    t = m.begin_maintenance()
    assert t.events == () and t.outputs == ()
    assert t.persisted() == (Begin("maintenance"),)
    assert m.phase == "maintenance"
    settle(m.end_maintenance())
    assert str(m.phase) == "idle"


def test_dispose_then_every_input_is_disposed() -> None:
    m = Machine()
    assert m.dispose().persisted() == (coxswain.DisposedOutput(),)
    assert m.phase == "disposed"
    with pytest.raises(coxswain.Disposed):
        m.clear()


def test_restore_from_a_log_with_delivery_memory() -> None:
    """S46–S48, S53: items park, the memory is rebuilt from the replayed splices."""
    m = Machine(delivery_memory=4)
    log: list[dict[str, object]] = []
    steps: list[Callable[[], coxswain.Transition]] = [
        lambda: m.inject(B),
        lambda: m.followup(A),
        lambda: m.answer_pre_step(Enter((B, A))),
        lambda: m.answer_step("completed"),
        lambda: m.answer_turn_stopping("done"),
    ]
    for step in steps:
        t = step()
        log.extend({"seq": 0, **e.record()} for e in t.events)
        t.persisted()
    restored = Machine.restore(log, delivery_memory=4)
    assert restored.phase == "idle" and restored.last_turn == 1
    assert restored.delivered() == ("b", "a")
    assert restored.delivery_memory == 4
    with pytest.raises(coxswain.AlreadyDelivered):
        restored.followup(A)


def test_an_invalid_log_raises_invalid_log() -> None:
    with pytest.raises(coxswain.InvalidLog) as caught:  # S47
        Machine.restore([{"type": "turn/start", "data": {"turn": 1}}, {"data": {}}])
    assert caught.value.index == 1


def test_bad_values_are_typed_errors_not_crashes() -> None:
    m = Machine()
    with pytest.raises(coxswain.InvalidInput):
        m.handle({"bogus": 1})
    with pytest.raises(TypeError):
        m.followup(Message("x", object()))
    with pytest.raises(coxswain.InvalidInput):
        m.pending("sideways")  # type: ignore[arg-type]
    nested: object = []
    for _ in range(400):
        nested = [nested]
    with pytest.raises(ValueError):
        m.followup(Message("deep", nested))
    assert m.phase == "idle" and m.pending("next-turn") == ()


def test_outputs_are_frozen() -> None:
    import dataclasses

    with pytest.raises(dataclasses.FrozenInstanceError):
        A.id = "z"  # type: ignore[misc]
    t = Machine().followup(A)
    with pytest.raises(dataclasses.FrozenInstanceError):
        t.events = ()  # type: ignore[misc]
