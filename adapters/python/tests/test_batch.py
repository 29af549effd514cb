"""``Machine.begin_batch`` / ``commit_batch`` / ``roll_back_batch``: a harness that owns its log
hands a batch whose append failed back to the machine, which is then exactly as before it."""

from __future__ import annotations

import pytest

from coxswain import BatchError, Enter, Machine, Message, Undrained

A = Message("a", "hello")
B = Message("b", "more")


def state(m: Machine) -> tuple[object, ...]:
    """Everything a host can ask the machine."""
    return (
        m.phase,
        m.last_turn,
        m.pending("next-turn"),
        m.pending("next-step"),
        m.delivered(),
        m.outstanding(),
        m.is_cancel_requested(),
        m.is_wake_latched(),
    )


def test_a_failed_append_rolls_the_batch_back_and_the_machine_goes_on() -> None:
    m = Machine(delivery_memory=4)
    log: list[object] = []
    m.inject(Message("c", "ctx")).persisted()
    before = state(m)
    m.begin_batch()
    assert m.is_batch_open
    events: list[object] = []
    held: list[object] = []  # the harness holds the effects until the append is durable
    first = m.followup(A)
    events.extend(first.events)
    held.extend(first.persisted())
    second = m.steer(B)
    events.extend(second.events)
    held.extend(second.persisted())
    assert len(events) == 5  # a's splice, turn/start, the claims of c (NS) and a (NT); b's splice
    assert len(held) == 7  # inserted a, running, begin, claimed c and a, preStep; inserted b
    assert m.last_turn == 1 and m.delivered() == ("c", "a")
    # The append was refused: take the whole batch back.
    m.roll_back_batch()
    assert not m.is_batch_open
    assert state(m) == before
    assert m.last_turn == 0 and m.delivered() == ()
    # The machine goes on: the same inputs are accepted again, and this time the append works.
    m.begin_batch()
    t = m.followup(A)
    log.extend(t.events)
    t.persisted()
    m.commit_batch()
    assert m.last_turn == 1 and m.delivered() == ("c", "a")
    assert m.answer_pre_step(Enter((A,))).found


def test_batch_calls_that_do_not_fit_raise_and_change_nothing() -> None:
    m = Machine()
    with pytest.raises(BatchError) as not_open:
        m.commit_batch()
    assert not_open.value.kind == "not-open"
    with pytest.raises(BatchError):
        m.roll_back_batch()
    m.begin_batch()
    with pytest.raises(BatchError) as twice:
        m.begin_batch()
    assert twice.value.kind == "already-open"
    m.commit_batch()
    pending = m.followup(A)  # not settled yet
    with pytest.raises(BatchError) as undrained:
        m.begin_batch()
    assert undrained.value.kind == "undrained"
    assert not m.is_batch_open
    pending.persisted()
    m.begin_batch()
    m.roll_back_batch()
    assert m.last_turn == 1


def test_a_transition_left_unsettled_goes_with_the_rollback() -> None:
    m = Machine()
    m.begin_batch()
    m.followup(A)  # dropped before it was persisted
    with pytest.raises(Undrained):
        m.steer(B)
    m.roll_back_batch()
    assert m.drain().is_empty() and m.last_turn == 0
    assert m.followup(A).found
