"""What the asyncio agent takes from the session layer (``coxswain-session``) instead of deciding
itself: the host-failure codes, the resume, a random seed for the id indexes, and through
``coxswain._native.Session`` group commit with rollback, admission and the abort grace."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from coxswain import (AlreadyPending, BatchError, EncodeError, InvalidInput, Machine, Message,
                      StepAnswer, TurnMismatch, _native)
from coxswain._native import Session, host_failure
from coxswain.asyncio import Agent, Host, StepContext


def test_one_code_per_host_failure() -> None:
    codes = {
        name: host_failure(name, "step", "")[1]
        for name in ("panicked", "raised", "cancelled", "abandoned", "invalid-answer")
    }
    assert codes == {
        "panicked": "host-panicked",
        "raised": "host-raised",
        "cancelled": "host-cancelled",
        "abandoned": "host-abandoned",
        "invalid-answer": "host-invalid-answer",
    }
    assert host_failure("raised", "preStep", "ValueError('x')") == (
        "the host's preStep call raised: ValueError('x')",
        "host-raised",
    )
    with pytest.raises(InvalidInput):
        host_failure("exploded", "step", "")
    with pytest.raises(InvalidInput):
        host_failure("raised", "lunch", "")


def test_a_machine_keeps_its_seed_and_every_agent_draws_its_own(tmp_path: Path) -> None:
    assert Machine().hash_seed == 0
    assert Machine(hash_seed=7).hash_seed == 7

    class Defaults(Host):
        async def step(self, cx: StepContext) -> StepAnswer:
            return "completed"

    async def seed(name: str) -> int:
        agent, _ = await Agent.open(Defaults(), tmp_path / name)
        seed = agent._session.hash_seed()
        await agent.close()
        return seed

    seeds = [asyncio.run(seed(f"s{i}.jsonl")) for i in range(3)]
    assert len(set(seeds)) == 3, seeds


# ----- coxswain._native.Session: the session layer as the asyncio agent drives it -----

A = Message("a", "hi")
B = Message("b", "more")


def persist(session: Session, now: float = 0.0) -> list[Any]:
    batch = session.seal()
    assert batch is not None
    return session.persisted(batch, now)


def shape(released: list[Any]) -> list[Any]:
    return [r if isinstance(r, tuple) else type(r).__name__ for r in released]


def test_a_batch_is_staged_encoded_and_released_in_input_order() -> None:
    session = Session(_native.Machine(), 5.0)
    assert session.seal() is None and session.encode(1) == (b"", 0)
    assert session.feed({"followup": A.to_json()}) == 0
    assert session.feed({"inject": B.to_json()}) == 1
    batch = session.seal()
    assert batch == 1 and session.seal() == 1  # sealed: handed out again
    with pytest.raises(BatchError) as sealed:
        session.feed({"inject": Message("c", 1).to_json()})
    assert sealed.value.kind == "sealed"
    data, count = session.encode(7)
    assert count == 4 and data.count(b"\n") == 4 and data.startswith(b'{"seq":7,')
    assert [r["type"] for r in session.records()] == [
        "agent/inbox/spliced", "turn/start", "agent/inbox/spliced", "agent/inbox/spliced"
    ]
    with pytest.raises(BatchError) as other:
        session.persisted(2, 0.0)
    assert other.value.kind == "other-batch"
    # a's effects, then its acknowledgement (place 0, found); then b's.
    assert shape(session.persisted(1, 0.0)) == [
        "Inserted", "StatusChanged", "Begin", "Claimed", "PreStepRequest", (0, True),
        "Inserted", (1, True),
    ]
    assert session.outstanding() == ("preStep", 1, 1) and session.last_turn() == 1
    with pytest.raises(BatchError) as not_sealed:
        session.failed(1, 0.0)
    assert not_sealed.value.kind == "not-sealed"


def test_a_failed_batch_is_taken_back_and_its_host_answer_staged_again_after_the_pause() -> None:
    session = Session(_native.Machine(), 5.0)
    session.feed({"followup": A.to_json()})
    persist(session)
    # A host answer and a caller's inject, in one batch that fails at 3.0 s.
    assert session.answer(("preStep", 1, 1), {"preStep": {"enter": [A.to_json()]}}) == 0
    assert session.feed({"inject": B.to_json()}) == 1
    batch = session.seal()
    assert batch is not None
    assert session.failed(batch, 3.0) == ([1], [0])  # the inject failed; the answer is held
    assert session.pending("next-step") == [] and session.outstanding() == ("preStep", 1, 1)
    assert not session.has_batch()
    # The session's retry pause (0.1 s): nothing before it, then the answer is staged again.
    assert session.poll_timeout() == pytest.approx(3.1)
    assert session.handle_timeout(3.05) is None
    assert session.handle_timeout(3.1) == [((batch, 0), 0)]
    assert session.outstanding() == ("step", 1, 1) and session.poll_timeout() is None


def test_a_failed_maintenance_end_is_held_and_staged_again() -> None:
    session = Session(_native.Machine(), 5.0, retry_after=1.0)
    session.feed({"maintenance": "begin"})
    persist(session)
    session.feed({"inject": B.to_json()})
    assert session.feed({"maintenance": "end"}) == 1
    batch = session.seal()
    assert batch is not None
    assert session.failed(batch, 0.0) == ([0], [1])
    assert not session.is_quiescent()  # still in maintenance until the end is staged again
    assert session.handle_timeout(1.0) == [((batch, 1), 0)]
    assert session.is_quiescent()


def test_a_held_answer_refused_at_its_retry_names_why() -> None:
    session = Session(_native.Machine(), 5.0)
    session.feed({"followup": A.to_json()})
    persist(session)
    assert session.answer(("preStep", 1, 1), {"preStep": "reject"}) == 0
    batch = session.seal()
    assert batch is not None
    assert session.failed(batch, 0.0) == ([], [0])
    # Within the pause the request is answered anew (a host that answered twice): the held
    # answer is stale when its retry comes (S4), and changes nothing.
    assert session.answer(("preStep", 1, 1), {"preStep": "reject"}) == 0
    persist(session)
    assert session.outstanding() is None
    [(was, why)] = session.handle_timeout(0.1) or []
    assert was == (batch, 0) and isinstance(why, Exception), why
    assert not session.has_batch() and session.poll_timeout() is None
    with pytest.raises(InvalidInput):
        Session(_native.Machine(), 5.0, retry_after=-1.0)


def test_a_host_answer_is_checked_against_its_request() -> None:
    session = Session(_native.Machine(), 5.0)
    session.feed({"followup": A.to_json()})
    persist(session)
    # Not the outstanding request: a late answer, dropped (S4).
    assert session.answer(("step", 1, 1), {"step": "completed"}) is None
    assert session.host_failed(("preStep", 1, 2), "raised", "x") is None
    # Not an answer of that request: the session answers `fail` (host-invalid-answer).
    assert session.answer(("preStep", 1, 1), {"preStep": "completed"}) == 0
    assert session.answer(("preStep", 1, 1), object()) is None  # answered already
    ended = session.records()[-1]
    assert ended["type"] == "turn/end"
    assert ended["data"]["reason"]["error"]["code"] == "host-invalid-answer"
    with pytest.raises(InvalidInput):
        session.host_failed(("preStep", 1, 1), "exploded", "")


def test_an_entered_batch_too_deep_for_the_log_fails_the_step_instead() -> None:
    """S38: the host's answer cannot be written, so the session answers ``fail`` for it."""
    session = Session(_native.Machine(), 5.0)
    session.feed({"followup": A.to_json()})
    persist(session)
    deep: object = 1
    for _ in range(200):
        deep = [deep]
    enter = {"preStep": {"enter": [Message("a", deep).to_json()]}}
    assert session.answer(("preStep", 1, 1), enter) == 0
    ended = session.records()[-1]
    assert ended["data"]["reason"]["error"]["code"] == "host-invalid-answer"


def test_the_abort_grace_is_a_deadline_the_driver_polls() -> None:
    session = Session(_native.Machine(), 1.5)
    session.feed({"followup": A.to_json()})
    persist(session, 1.0)
    assert session.poll_timeout() is None
    session.feed({"cancel": {"cause": {"kind": "user"}, "keepInbox": False}})
    assert session.poll_timeout() is None  # not before the abort is released
    assert shape(persist(session, 10.0)) == ["Abort", (0, True)]
    assert session.poll_timeout() == 11.5
    assert session.handle_timeout(11.0) is None
    assert session.handle_timeout(11.5) == [(None, 0)]  # staged: fail, code host-abandoned
    assert session.poll_timeout() is None
    assert [r["data"]["reason"]["kind"] for r in session.records()] == ["aborted"]
    persist(session, 11.5)
    assert session.is_quiescent() and session.outstanding() is None


def test_admission_refusals_are_typed_and_change_nothing() -> None:
    from coxswain.asyncio import IdTooLong, MessageTooLarge, StepClosed

    session = Session(_native.Machine(), 5.0, 4, 64)
    with pytest.raises(IdTooLong) as long:
        session.feed({"inject": Message("abcde", 1).to_json()})
    assert (long.value.bytes, long.value.max) == (5, 4)
    with pytest.raises(MessageTooLarge):
        session.feed({"inject": Message("a", "x" * 64).to_json()})
    with pytest.raises(StepClosed):
        session.record(1, 1, [{"type": "model/output", "data": {}}])
    with pytest.raises(EncodeError):
        session.record(1, 1, [{"type": "turn/end", "data": {}}])
    with pytest.raises(InvalidInput):
        session.feed({"nonsense": 1})
    with pytest.raises(TypeError):
        session.feed({"inject": {"id": "a", "content": object()}})
    assert not session.has_batch() and session.seal() is None
    with pytest.raises(InvalidInput):
        Session(_native.Machine(), -1.0)


# ----- the typed entry points the asyncio agent stages through (no JSON value made) -----


def test_typed_deliveries_and_answers_stage_what_their_json_forms_stage() -> None:
    """``deliver``, ``answer_enter`` and ``answer_word`` stage the inputs ``feed`` and ``answer``
    stage from trace values: the same records, byte for byte, and every output carrying the
    delivered message hands back the caller's object (S8)."""

    def turn(typed: bool) -> tuple[bytes, list[Any]]:
        session, lines, seen = Session(_native.Machine(), 5.0), b"", []

        def commit() -> list[Any]:
            nonlocal lines
            sealed = session.seal_encoded(len(lines.splitlines()) + 1)
            assert sealed is not None
            batch, data, count = sealed
            assert count == data.count(b"\n")
            lines += data
            released = session.persisted(batch, 0.0)
            seen.extend(released)
            return released

        assert (session.deliver("followup", A) if typed
                else session.feed({"followup": A.to_json()})) == 0
        [request] = [r for r in commit() if type(r).__name__ == "PreStepRequest"]
        assert (session.answer_enter(("preStep", 1, 1), request.messages) if typed
                else session.answer(("preStep", 1, 1),
                                    {"preStep": {"enter": [m.to_json() for m in request.messages]}})
                ) == 0
        commit()
        assert (session.answer_word(("step", 1, 1), "completed") if typed
                else session.answer(("step", 1, 1), {"step": "completed"})) == 0
        commit()
        assert (session.answer_word(("turnStopping", 1, 0), "done") if typed
                else session.answer(("turnStopping", 1, 0), {"turnStopping": "done"})) == 0
        commit()
        assert session.seal_encoded(99) is None
        return lines, seen

    typed, by_json = turn(True), turn(False)
    assert typed[0] == by_json[0]
    assert shape(typed[1]) == shape(by_json[1]) == [
        "Inserted", "StatusChanged", "Begin", "Claimed", "PreStepRequest", (0, True),
        "StepRequest", (0, True), "TurnStoppingRequest", (0, True), "StatusChanged", (0, True),
    ]
    carried = [r.message for r in typed[1] if type(r).__name__ in ("Inserted", "Claimed")]
    carried += [m for r in typed[1] if type(r).__name__ == "PreStepRequest" for m in r.messages]
    assert len(carried) == 3 and all(m is A for m in carried)
    # Through JSON the caller's object is not there to hand back: an equal copy.
    copies = [r.message for r in by_json[1] if type(r).__name__ == "Inserted"]
    assert copies == [A] and copies[0] is not A


def test_a_typed_answer_that_is_no_answer_fails_the_call_as_its_json_form_does() -> None:
    """A word that is not an answer of its request fails the call (``host-invalid-answer``,
    S38) with the detail ``answer`` writes; a late one is dropped (S4); a refused delivery
    raises and changes nothing (S5)."""

    def ended(typed: bool) -> dict[str, Any]:
        session = Session(_native.Machine(), 5.0)
        session.deliver("followup", A)
        persist(session)
        assert (session.answer_word(("step", 1, 1), "completed") if typed
                else session.answer(("step", 1, 1), {"step": "completed"})) is None
        assert (session.answer_word(("preStep", 1, 1), "completed") if typed
                else session.answer(("preStep", 1, 1), {"preStep": "completed"})) == 0
        record: dict[str, Any] = session.records()[-1]
        return record

    assert ended(True) == ended(False)
    assert ended(True)["data"]["reason"]["error"]["code"] == "host-invalid-answer"
    session = Session(_native.Machine(), 5.0)
    session.deliver("followup", A)
    session.deliver("inject", B)
    persist(session)
    before = (session.pending("next-step"), session.status(), session.has_batch())
    with pytest.raises(AlreadyPending):
        session.deliver("send", B, "next-turn", True)
    with pytest.raises(TurnMismatch):
        session.deliver("send", Message("c", 1), "next-turn", True, ("idleAfter", 0))
    with pytest.raises(InvalidInput):
        session.deliver("shout", Message("c", 1))
    assert (session.pending("next-step"), session.status(), session.has_batch()) == before
    assert session.pending("next-step") == [(B.to_json(), False)]
