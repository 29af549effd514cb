"""What the asyncio agent takes from the session layer (``coxswain-session``) instead of deciding
itself: the host-failure codes, the resume, a random seed for the id indexes, and through
``coxswain._native.Session`` (its agent loop) the batches, the waiters, group commit with
rollback, the stop policy, admission, the abort grace, the hooks a host did not write and every
error's kind (issue 51, decisions 1-7)."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from coxswain import (AlreadyPending, BatchError, EncodeError, InvalidInput, Machine, Message,
                      StepAnswer, TurnMismatch, _native)
from coxswain._native import Session, host_failure
from coxswain.asyncio import (Agent, Host, LogError, MemoryLog, PersistenceError, StepContext,
                              Stopped)


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


# ----- coxswain._native.Session: the session layer's agent loop as the asyncio agent drives it -----

A = Message("a", "hi")
B = Message("b", "more")


def shape(outputs: list[Any]) -> list[Any]:
    """Effects by class name; replies as ``(tag, waiter, value)`` with an error by its kind."""
    return [
        (o[0], o[1], getattr(o[2], "kind") if isinstance(o[2], BaseException) else o[2])
        if isinstance(o, tuple) else type(o).__name__
        for o in outputs
    ]


def write(session: Session, now: float = 0.0, error: BaseException | None = None,
          first_seq: int = 1) -> list[Any]:
    """Seals the next batch, reports it written (or failed with ``error``); its outputs."""
    sealed = session.poll_append(first_seq, now, False)
    assert sealed is not None
    session.appended(sealed[0], error, now)
    return session.outputs()


def records(session: Session, now: float = 0.0) -> list[dict[str, Any]]:
    """Seals the next batch with its records, reports it written; its records."""
    sealed = session.poll_append(1, now, True)
    assert sealed is not None and sealed[3] is not None
    session.appended(sealed[0], None, now)
    return sealed[3]


def test_the_defaults_are_the_session_layers() -> None:
    """Decision 6: every default is ``coxswain_session::Options::DEFAULT``'s, read from it."""
    assert Session.DEFAULTS == {"abort_grace": 5.0, "retry_after": 0.1, "max_batch": 64,
                                "max_id_bytes": 256, "max_message_bytes": 1 << 20}
    assert Agent.DEFAULTS == Session.DEFAULTS and Session.CLOSED == "closed"


def test_a_batch_is_staged_encoded_and_released_in_input_order() -> None:
    session = Session(_native.Machine())
    assert session.poll_append(1, 0.0, False) is None and session.outputs() == []
    session.feed("a", {"followup": A.to_json()})
    session.feed("b", {"inject": B.to_json()})
    sealed = session.poll_append(7, 0.0, True)
    assert sealed is not None
    batch, data, count, written, ends_turn = sealed
    assert batch == 1 and session.poll_append(1, 0.0, False) is None  # being written
    assert not ends_turn  # no `turn/end` in it (what a log syncing per turn syncs on)
    assert count == 4 and data.count(b"\n") == 4 and data.startswith(b'{"seq":7,')
    assert [r["type"] for r in written or []] == [
        "agent/inbox/spliced", "turn/start", "agent/inbox/spliced", "agent/inbox/spliced"
    ]
    with pytest.raises(BatchError) as other:
        session.appended(2, None, 0.0)
    assert other.value.kind == "other-batch"
    session.appended(1, None, 0.0)
    # a's effects, then its reply (found); then b's.
    assert shape(session.outputs()) == [
        "Inserted", "StatusChanged", "Begin", "Claimed", "PreStepRequest", (0, "a", True),
        "Inserted", (0, "b", True),
    ]
    assert session.outstanding() == ("preStep", 1, 1) and session.last_turn() == 1
    with pytest.raises(BatchError) as not_sealed:
        session.appended(1, None, 0.0)
    assert not_sealed.value.kind == "not-sealed"


def test_max_batch_bounds_a_batch_and_pending_fate_close_end_it() -> None:
    """Decision 5: ``pending``, ``fate`` and ``close`` end the batch being gathered and are
    answered once it is durable, against it; ``max_batch`` commands at most go in one."""
    session = Session(_native.Machine(), max_batch=2)
    for id in "xyz":
        session.feed(id, {"inject": Message(id, 1).to_json()})
    session.control("fate", "fate", "y")
    session.control("pending", "pending")
    assert shape(write(session)) == ["Inserted", (0, "x", True), "Inserted", (0, "y", True)]
    assert shape(write(session)) == ["Inserted", (0, "z", True)]  # the fate ended it
    assert session.poll_append(1, 0.0, False) is None  # both answered, nothing to write
    [fate, (tag, waiter, (nt, ns))] = session.outputs()
    assert fate == (0, "fate", {"pending": "next-step"})
    assert (tag, waiter, nt, [m["id"] for m, _ in ns]) == (0, "pending", [], ["x", "y", "z"])
    with pytest.raises(InvalidInput):
        Session(_native.Machine(), max_batch=0)


def test_a_failed_batch_is_taken_back_and_its_host_answer_staged_again_after_the_pause() -> None:
    """Decision 4: a failed append fails its callers (``persistence``, its cause the log's
    error) and the agent goes on; the host answer it held is staged again after the pause."""
    session = Session(_native.Machine())
    session.feed("a", {"followup": A.to_json()})
    write(session)
    # A host answer and a caller's inject, in one batch that fails at 3.0 s.
    session.answer(("preStep", 1, 1), {"preStep": {"enter": [A.to_json()]}})
    session.feed("b", {"inject": B.to_json()})
    cause = LogError("disk full")
    [(tag, waiter, error)] = write(session, 3.0, cause)
    assert (tag, waiter, type(error), error.kind) == (1, "b", PersistenceError, "persistence")
    assert error.log_error is cause and str(error) == "disk full" and not error.indeterminate
    assert session.pending("next-step") == [] and session.outstanding() == ("preStep", 1, 1)
    assert not session.has_batch() and session.ending() is None
    # The session's retry pause (0.1 s): nothing before it, then the answer is staged again.
    assert session.poll_timeout() == pytest.approx(3.1)
    session.handle_timeout(3.05)
    assert not session.has_batch()
    session.handle_timeout(3.1)
    assert session.has_batch()
    assert shape(write(session, 3.1)) == ["StepRequest"]
    assert session.outstanding() == ("step", 1, 1) and session.poll_timeout() is None


@pytest.mark.parametrize("flag", ["indeterminate", "fenced"])
def test_an_indeterminate_or_fenced_append_stops_the_agent(flag: str) -> None:
    """Decision 4: only an append that may be in the log, or one another writer fenced, stops
    the agent: its callers are told once the ending is out, and every later call is
    ``stopped``; ``fate`` is still answered."""
    session = Session(_native.Machine())
    session.feed("a", {"followup": A.to_json()})
    cause = LogError("eio", **{flag: True})  # type: ignore[arg-type]
    assert shape(write(session, 0.0, cause)) == [(3, "stopped", None)]
    assert session.ending() == "stopped"
    session.finish()
    [(tag, waiter, error)] = session.outputs()
    kind = "indeterminate" if flag == "indeterminate" else "persistence"
    assert (tag, waiter, error.kind, error.indeterminate) == (1, "a", kind, kind != "persistence")
    session.feed("b", {"inject": B.to_json()})
    session.control("fate", "fate", "a")
    [(_, _, stopped), fate] = session.outputs()
    assert type(stopped) is Stopped and stopped.kind == "stopped"
    assert fate == (0, "fate", "unknown")
    assert type(session.ended_error()) is Stopped


def test_a_failed_maintenance_end_is_held_and_staged_again() -> None:
    session = Session(_native.Machine(), retry_after=1.0)
    session.maintenance("begin", "job")
    assert shape(write(session)) == ["Begin", (2, ("begin", "job"), None)]
    session.feed("b", {"inject": B.to_json()})
    session.job_ended("end")
    assert shape(write(session, 0.0, LogError("x"))) == [(1, "b", "persistence")]
    assert not session.is_quiescent()  # still in maintenance until the end is staged again
    session.handle_timeout(1.0)
    assert shape(write(session, 1.0)) == [(0, "end", None)]
    assert session.is_quiescent()


def test_a_second_answer_to_one_call_is_dropped() -> None:
    """S4: only the running call's first answer counts; a later one (a host that answered twice,
    an abandoned call answering late) is dropped, not an error."""
    session = Session(_native.Machine())
    session.feed("a", {"followup": A.to_json()})
    write(session)
    session.answer(("preStep", 1, 1), {"preStep": "reject"})
    session.answer(("preStep", 1, 1), {"preStep": "reject"})
    assert [r["type"] for r in records(session)] == ["turn/end"]
    assert session.outstanding() is None and not session.has_batch()
    assert session.poll_append(1, 0.0, False) is None


def test_a_host_answer_is_checked_against_its_request() -> None:
    session = Session(_native.Machine())
    session.feed("a", {"followup": A.to_json()})
    write(session)
    # Not the running call: a late answer, dropped (S4).
    session.answer(("step", 1, 1), {"step": "completed"})
    session.host_failed(("preStep", 1, 2), "raised", "x")
    assert session.poll_append(1, 0.0, False) is None and session.outputs() == []
    # Not an answer of that request: the session answers `fail` (host-invalid-answer).
    session.answer(("preStep", 1, 1), {"preStep": "completed"})
    session.answer(("preStep", 1, 1), object())  # answered already: dropped
    ended = records(session)[-1]
    assert ended["type"] == "turn/end"
    assert ended["data"]["reason"]["error"]["code"] == "host-invalid-answer"
    with pytest.raises(InvalidInput):
        session.host_failed(("preStep", 1, 1), "exploded", "")
    with pytest.raises(InvalidInput):
        session.answer(("lunch", 1, 1), {"step": "completed"})


def test_an_entered_batch_too_deep_for_the_log_fails_the_step_instead() -> None:
    """S38, decision 3: the host's answer cannot be written, so the session answers ``fail``
    (``host-invalid-answer``, the refusal's text) for it."""
    session = Session(_native.Machine())
    session.feed("a", {"followup": A.to_json()})
    write(session)
    deep: object = 1
    for _ in range(200):
        deep = [deep]
    session.answer(("preStep", 1, 1), {"preStep": {"enter": [Message("a", deep).to_json()]}})
    error = records(session)[-1]["data"]["reason"]["error"]
    assert error == {"code": "host-invalid-answer", "message": (
        "the host's preStep call gave an invalid answer: the value nests 201 levels deep; at "
        "most 124 fit in a log record")}


def test_unwritten_hooks_are_answered_inside_the_batch_and_none_answers_as_they_do() -> None:
    """Decisions 1, 2: no pre-step hook: the follow-up's batch holds the step's start; a
    turn-stopping hook that returns nothing is done; a step that returns nothing is an invalid
    answer."""
    session = Session(_native.Machine(), pre_step=False)
    session.feed("a", {"followup": A.to_json()})
    assert [r["type"] for r in records(session)] == [
        "agent/inbox/spliced", "turn/start", "agent/inbox/spliced", "step/start", "user/message"]
    assert shape(session.outputs()) == [
        "Inserted", "StatusChanged", "Begin", "Claimed", "StepRequest", (0, "a", True)]
    session.answer_word(("step", 1, 1), "completed")
    assert [r["type"] for r in records(session)] == ["step/end"]
    assert shape(session.outputs()) == ["TurnStoppingRequest"]
    session.returned_nothing(("turnStopping", 1, 0))
    [end] = records(session)
    assert end["data"] == {"turn": 1, "reason": {"kind": "completed"}}
    session.feed("b", {"followup": B.to_json()})
    write(session)
    session.returned_nothing(("step", 2, 1))
    [_, end] = records(session)
    assert end["data"]["reason"] == {"kind": "error", "error": {
        "message": "the host's step call gave an invalid answer: it returned nothing",
        "code": "host-invalid-answer"}}


def test_the_abort_grace_is_a_deadline_the_driver_polls() -> None:
    session = Session(_native.Machine(), 1.5)
    session.feed("a", {"followup": A.to_json()})
    write(session, 1.0)
    session.answer_word(("preStep", 1, 1), "reject")
    session.feed("b", {"followup": B.to_json()})
    write(session, 1.0)
    assert session.outstanding() == ("preStep", 2, 1) and session.poll_timeout() is None
    session.feed("c", {"cancel": {"cause": {"kind": "user"}, "keepInbox": False}})
    assert session.poll_timeout() is None  # not before the abort is released
    assert shape(write(session, 10.0)) == ["Abort", (0, "c", True)]
    assert session.poll_timeout() == 11.5
    session.handle_timeout(11.0)
    assert not session.has_batch()
    session.handle_timeout(11.5)  # staged: fail, code host-abandoned
    assert session.poll_timeout() is None
    assert [r["data"]["reason"]["kind"] for r in records(session, 11.5)] == ["aborted"]
    assert session.is_quiescent() and session.outstanding() is None
    session.answer_word(("preStep", 2, 1), "reject")  # the abandoned call, late: dropped
    assert session.poll_append(1, 12.0, False) is None


def test_admission_refusals_are_typed_and_change_nothing() -> None:
    from coxswain.asyncio import IdTooLong, MessageTooLarge, StepClosed

    session = Session(_native.Machine(), 5.0, 4, 64)
    session.feed("long", {"inject": Message("abcde", 1).to_json()})
    session.feed("large", {"inject": Message("a", "x" * 64).to_json()})
    session.record("closed", 1, 1, [{"type": "model/output", "data": {}}])
    assert session.poll_append(1, 0.0, False) is None
    [long, large, closed] = session.outputs()
    assert type(long[2]) is IdTooLong and (long[2].bytes, long[2].max) == (5, 4)
    assert type(large[2]) is MessageTooLarge and type(closed[2]) is StepClosed
    assert [o[:2] + (o[2].kind,) for o in (long, large, closed)] == [
        (1, "long", "id-too-long"), (1, "large", "message-too-large"),
        (1, "closed", "step-closed")]
    with pytest.raises(EncodeError):
        session.record("w", 1, 1, [{"type": "turn/end", "data": {}}])
    with pytest.raises(InvalidInput):
        session.feed("w", {"nonsense": 1})
    with pytest.raises(TypeError):
        session.feed("w", {"inject": {"id": "a", "content": object()}})
    assert not session.has_batch() and session.poll_append(1, 0.0, False) is None
    with pytest.raises(InvalidInput):
        Session(_native.Machine(), -1.0)
    with pytest.raises(InvalidInput):
        Session(_native.Machine(), retry_after=-1.0)


# ----- the typed entry points the asyncio agent stages through (no JSON value made) -----


def test_typed_deliveries_and_answers_stage_what_their_json_forms_stage() -> None:
    """``deliver``, ``answer_enter`` and ``answer_word`` stage the inputs ``feed`` and ``answer``
    stage from trace values: the same records, byte for byte, and every output carrying the
    delivered message hands back the caller's object (S8)."""

    def turn(typed: bool) -> tuple[bytes, list[Any]]:
        session, lines, seen = Session(_native.Machine()), b"", []
        log = MemoryLog()
        log.resume(0, None, 0)

        def commit() -> list[Any]:
            nonlocal lines
            released = session.commit(log, 0.0, False)
            seen.extend(released)
            return released

        if typed:
            session.deliver("a", "followup", A)
        else:
            session.feed("a", {"followup": A.to_json()})
        [request] = [r for r in commit() if type(r).__name__ == "PreStepRequest"]
        if typed:
            session.answer_enter(("preStep", 1, 1), request.messages)
        else:
            session.answer(("preStep", 1, 1),
                           {"preStep": {"enter": [m.to_json() for m in request.messages]}})
        commit()
        if typed:
            session.answer_word(("step", 1, 1), "completed")
        else:
            session.answer(("step", 1, 1), {"step": "completed"})
        commit()
        if typed:
            session.answer_word(("turnStopping", 1, 0), "done")
        else:
            session.answer(("turnStopping", 1, 0), {"turnStopping": "done"})
        commit()
        assert commit() == []
        return log.bytes(), seen

    typed, by_json = turn(True), turn(False)
    assert typed[0] == by_json[0] and typed[0].count(b"\n") == 7
    assert shape(typed[1]) == shape(by_json[1]) == [
        "Inserted", "StatusChanged", "Begin", "Claimed", "PreStepRequest", (0, "a", True),
        "StepRequest", "TurnStoppingRequest", "StatusChanged",
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
    is its caller's error, with its kind, and changes nothing (S5)."""

    def ended(typed: bool) -> dict[str, Any]:
        session = Session(_native.Machine())
        session.deliver("a", "followup", A)
        write(session)
        if typed:
            session.answer_word(("step", 1, 1), "completed")
            session.answer_word(("preStep", 1, 1), "completed")
        else:
            session.answer(("step", 1, 1), {"step": "completed"})
            session.answer(("preStep", 1, 1), {"preStep": "completed"})
        record: dict[str, Any] = records(session)[-1]
        return record

    assert ended(True) == ended(False)
    assert ended(True)["data"]["reason"]["error"]["code"] == "host-invalid-answer"
    session = Session(_native.Machine())
    session.deliver("a", "followup", A)
    session.deliver("b", "inject", B)
    write(session)
    before = (session.pending("next-step"), session.status(), session.has_batch())
    session.deliver("again", "send", B, "next-turn", True)
    session.deliver("guard", "send", Message("c", 1), "next-turn", True, ("idleAfter", 0))
    assert session.poll_append(1, 0.0, False) is None
    [again, guard] = session.outputs()
    assert type(again[2]) is AlreadyPending and again[2].kind == "already-pending"
    assert type(guard[2]) is TurnMismatch and guard[2].kind == "turn-mismatch"
    with pytest.raises(InvalidInput):
        session.deliver("w", "shout", Message("c", 1))
    assert (session.pending("next-step"), session.status(), session.has_batch()) == before
    assert session.pending("next-step") == [(B.to_json(), False)]
