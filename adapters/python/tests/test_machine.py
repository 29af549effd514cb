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


# ----- SPEC §12: guards (S54), the admission bound (S55), conflicts (S56) -----


def test_s54_a_guarded_steer_joins_its_turn_and_a_stale_one_is_refused() -> None:
    m = Machine()
    settle(m.followup(A))  # turn 1, its pre-step outstanding
    s = Message("s", "look at the tests too")
    t = m.steer_expecting(1, s)
    assert t.events == (
        Event("agent/inbox/spliced", {"target": "next-step", "start": 0, "inserted": [s.to_json()], "wakeup": True}),
    )
    assert settle(t) == (Inserted(s),)
    with pytest.raises(coxswain.TurnMismatch) as mismatch:  # turn 2 has not started
        m.steer_expecting(2, Message("x", "x"))
    assert mismatch.value.expect == coxswain.Expect.turn(2)
    assert mismatch.value.kind == "turn-mismatch" and not mismatch.value.was_delivered
    assert str(mismatch.value) == "the send expected turn 2 running, which does not hold"
    # The identity check comes first: the retry of the accepted steer is a delivery.
    with pytest.raises(coxswain.AlreadyPending) as retry:
        m.steer_expecting(2, s)
    assert retry.value.was_delivered
    settle(m.answer_pre_step(Enter((A,))))
    settle(m.answer_step("completed"))  # NS holds s: claimed between steps
    settle(m.answer_pre_step(Enter((s,))))
    settle(m.answer_step("completed"))
    settle(m.answer_turn_stopping("done"))
    assert m.phase == "idle" and m.last_turn == 1
    with pytest.raises(coxswain.TurnMismatch) as late:  # turn 1 ended: refused, not turn 2
        m.steer_expecting(1, Message("late", "too late"))
    assert late.value.expect == coxswain.Expect("turn", 1)
    assert m.pending("next-turn") == () and m.pending("next-step") == ()


def test_s54_followup_if_idle_after_and_a_guarded_send() -> None:
    m = Machine()
    with pytest.raises(coxswain.TurnMismatch) as mismatch:
        m.followup_if_idle_after(1, A)
    assert mismatch.value.expect == coxswain.Expect.idle_after(1)
    assert str(mismatch.value) == "the send expected idle after turn 1, which does not hold"
    quiet = m.send(B, "next-step", False, expect=coxswain.Expect.idle_after(0))
    assert settle(quiet) == (Inserted(B),)
    settle(m.begin_maintenance())
    with pytest.raises(coxswain.TurnMismatch):  # maintenance is not idle
        m.followup_if_idle_after(0, A)
    settle(m.end_maintenance())
    t = m.followup_if_idle_after(0, A)
    assert [e.type for e in t.events] == [
        "agent/inbox/spliced", "turn/start", "agent/inbox/spliced", "agent/inbox/spliced",
    ]
    assert t.events[1] == Event("turn/start", {"turn": 1})
    settle(t)
    assert coxswain.Expect.turn(3).to_json() == {"turn": 3}
    assert coxswain.Expect.idle_after(0).to_json() == {"idleAfter": 0}


def test_s55_max_pending_refuses_a_delivery_into_a_full_list() -> None:
    m = Machine(max_pending=1)
    assert m.max_pending == 1 and Machine().max_pending is None
    settle(m.inject(A))
    with pytest.raises(coxswain.Full) as full:
        m.inject(B)
    assert (full.value.target, full.value.max_pending, full.value.kind) == ("next-step", 1, "full")
    assert str(full.value) == "the next-step list is full (1 items pending)"
    assert not full.value.was_delivered
    with pytest.raises(coxswain.Full):
        m.prepend("next-step", B)
    settle(m.send(B, "next-turn", False))
    with pytest.raises(coxswain.Full) as full:
        m.prepend("next-turn", Message("c", "c"))
    assert full.value.target == "next-turn"
    # S13 before S55: an identical retry into a full list is still a delivery.
    with pytest.raises(coxswain.AlreadyPending):
        m.inject(A)
    # replace keeps the length: never full.
    assert m.replace("a", Message("a2", "x")).found
    with pytest.raises(coxswain.InvalidInput):
        Machine(max_pending=0)


def test_s55_a_restored_list_longer_than_the_bound_is_kept() -> None:
    m = Machine()
    log: list[dict[str, object]] = []
    for message in (A, B):
        t = m.send(message, "next-turn", False)
        log.extend(e.record() for e in t.events)
        t.persisted()
    restored = Machine.restore(log, max_pending=1)
    assert [p.message.id for p in restored.pending("next-turn")] == ["a", "b"]
    assert restored.max_pending == 1
    with pytest.raises(coxswain.Full):
        restored.send(Message("c", "c"), "next-turn", False)
    settle(restored.remove("a"))
    with pytest.raises(coxswain.Full):  # still P items
        restored.send(Message("c", "c"), "next-turn", False)
    settle(restored.remove("b"))
    settle(restored.send(Message("c", "c"), "next-turn", False))


def test_s56_an_id_reused_for_another_message_is_a_conflict() -> None:
    m = Machine(delivery_memory=2)
    counted = Message("n", {"count": 1, "text": "x"})
    settle(m.inject(counted))
    with pytest.raises(coxswain.Conflict) as conflict:
        m.inject(Message("n", "other"))
    assert (conflict.value.id, conflict.value.kind) == ("n", "conflict")
    assert not conflict.value.was_delivered
    assert str(conflict.value) == "message id `n` is already used by a different message"
    with pytest.raises(coxswain.Conflict):  # another source is another message
        m.followup(Message("n", {"count": 1, "text": "x"}, source={"kind": "plugin"}))
    # The same JSON value (key order free, 1 equals 1.0) is a retry.
    with pytest.raises(coxswain.AlreadyPending) as retry:
        m.steer(Message("n", {"text": "x", "count": 1.0}))
    assert retry.value.was_delivered
    settle(m.remove("n"))
    with pytest.raises(coxswain.Conflict):  # held by the memory with its message (S52, S56)
        m.inject(Message("n", "other"))
    with pytest.raises(coxswain.AlreadyDelivered) as delivered:
        m.inject(counted)
    assert delivered.value.was_delivered
    for error in (coxswain.Conflict, coxswain.TurnMismatch, coxswain.Full):
        assert issubclass(error, coxswain.Rejected)


def test_integers_within_64_bits_are_kept_exactly_and_larger_ones_refused() -> None:
    """Content integers cross exactly within -2**63 ..= 2**64 - 1 (beyond 2**53 too); a larger
    one is refused with ``ValueError`` at the call and nothing changes (S5), instead of being
    rounded to a float on its way to the log."""
    exact = Message("exact", {"max": 2**64 - 1, "min": -(2**63), "odd": 2**53 + 1})
    m = Machine()
    m.begin_maintenance().persisted()  # held: the follow-up stays pending, untouched
    t = m.followup(exact)
    (spliced,) = t.events
    assert spliced == Event(
        "agent/inbox/spliced",
        {"target": "next-turn", "start": 0, "inserted": [exact.to_json()], "wakeup": True},
    )
    assert t.persisted() == (Inserted(exact),)
    (pending,) = m.pending("next-turn")
    content = pending.message.content
    assert content == {"max": 18446744073709551615, "min": -9223372036854775808, "odd": 9007199254740993}
    assert isinstance(content, dict) and all(type(n) is int for n in content.values())
    for too_large in (2**64, -(2**63) - 1, 10**30):
        with pytest.raises(ValueError, match="beyond 64 bits"):
            m.followup(Message("huge", {"n": too_large}))
        with pytest.raises(ValueError, match="beyond 64 bits"):
            m.inject(Message("huge", too_large))
    assert [p.message.id for p in m.pending("next-turn")] == ["exact"]
    assert m.pending("next-step") == ()
    settle(m.followup(Message("next", "after the refusals")))


def test_into_outputs_with_begin_puts_each_begin_where_its_activity_begins() -> None:
    """The wire order with ``Begin`` (the core's ``into_outputs_with_begin``): the turn's right
    after its ``turn/start``, a maintenance job's first; without the option, FORMAT.md's order."""
    a = A.to_json()
    spliced = Event("agent/inbox/spliced", {"target": "next-turn", "start": 0, "inserted": [a], "wakeup": True})
    start = Event("turn/start", {"turn": 1})
    claim = Event("agent/inbox/spliced", {"target": "next-turn", "start": 0, "removedCount": 1, "inserted": []})
    wire = (spliced, Inserted(A), StatusChanged("running"), start, Claimed(A, 1), PreStepRequest(1, 1, (A,)))
    m = Machine()
    assert m.followup(A).into_outputs(begin=True) == wire[:4] + (Begin(1), claim) + wire[4:]
    m = Machine()
    assert m.followup(A).into_outputs() == wire[:4] + (claim,) + wire[4:]
    m = Machine()
    assert m.begin_maintenance().into_outputs(begin=True) == (Begin("maintenance"),)
    ended = m.end_maintenance()
    assert ended.into_outputs(begin=True) == ended.outputs


def test_an_events_data_is_made_on_first_read_and_is_then_the_same_dict() -> None:
    """``Event.data`` of the core's events is made when first read (outputs.rs ``EventData``):
    each read hands back the one dict, equal to the event built from Python with that data,
    and the splice's ``inserted`` holds the message's one event-form dict (S8)."""
    m = Machine()
    followup = m.followup(A)
    events = followup.events
    assert [event.data is event.data for event in events] == [True] * len(events)
    assert events == (
        Event("agent/inbox/spliced", {"target": "next-turn", "start": 0, "inserted": [A.to_json()], "wakeup": True}),
        Event("turn/start", {"turn": 1}),
        Event("agent/inbox/spliced", {"target": "next-turn", "start": 0, "removedCount": 1, "inserted": []}),
    )
    assert repr(events[1]) == "Event(type='turn/start', data={'turn': 1})"
    assert events[1].record() == {"type": "turn/start", "data": {"turn": 1}}
    with pytest.raises(TypeError, match="unhashable"):
        hash(events[1])  # as the frozen dataclass it replaces: a dict field is unhashable
    settle(followup)
    enter = m.answer_pre_step(Enter((A,)))
    assert enter.events[1].data is events[0].data["inserted"][0]
    assert enter.events == (
        Event("step/start", {"turn": 1, "step": 1}),
        Event("user/message", A.to_json()),
    )
    settle(enter)
    settle(m.answer_step("completed"))
    (end,) = m.answer_turn_stopping("done").events
    assert end == Event("turn/end", {"turn": 1, "reason": {"kind": "completed"}})
    assert end.to_json() == {"event": {"type": "turn/end", "data": {"turn": 1, "reason": {"kind": "completed"}}}}


def test_a_word_answer_is_the_same_input_as_its_json_value_and_a_bad_word_changes_nothing() -> None:
    """A ``str`` answer crosses as the word itself (machine.rs ``word_answer``, the core's serde
    names): the same transition as the answer given as its trace JSON value; a string that is no
    answer word raises ``InvalidInput`` and the machine still waits on the same request (S5)."""

    def stepping() -> Machine:
        m = Machine()
        settle(m.followup(A))
        settle(m.answer_pre_step(Enter((A,))))
        return m

    def rest(m: Machine, step: coxswain.Transition) -> tuple[object, ...]:
        """The step's outputs, then what the turn does next: its end once stopping is done."""
        outputs = (step.events, settle(step))
        if m.outstanding() == coxswain.Outstanding("turnStopping", 1, 0):
            return (*outputs, m.answer_turn_stopping("done").events)
        return outputs

    ends = {}
    for word in ("completed", "max-tokens", "continue"):
        by_word, by_value = stepping(), stepping()
        ends[word] = rest(by_word, by_word.answer_step(word))
        assert ends[word] == rest(by_value, by_value.handle({"step": word}))
    assert ends["completed"][-1] == (Event("turn/end", {"turn": 1, "reason": {"kind": "completed"}}),)
    assert ends["max-tokens"][-1] == (Event("turn/end", {"turn": 1, "reason": {"kind": "max-tokens"}}),)
    assert ends["continue"][1] == (PreStepRequest(1, 2, ()),)
    for bad in ("done", "Completed", "fail", ""):
        m = stepping()
        with pytest.raises(coxswain.InvalidInput):
            m.answer_step(bad)  # type: ignore[arg-type]
        assert m.outstanding() == coxswain.Outstanding("step", 1, 1)
    m = stepping()
    settle(m.answer_step("completed"))
    with pytest.raises(coxswain.InvalidInput):
        m.answer_turn_stopping("completed")  # type: ignore[arg-type]
    assert m.answer_turn_stopping("done").events == (
        Event("turn/end", {"turn": 1, "reason": {"kind": "completed"}}),
    )
