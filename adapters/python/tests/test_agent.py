"""``coxswain.asyncio.Agent``: the tokio adapter's semantics on asyncio (acknowledged once
durable, one host call at a time, cancellation by cancelling the host task, resume)."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any, Awaitable, Callable

import pytest

import coxswain
from coxswain import Fail, Message, PreStepAnswer, StepAnswer
from coxswain.asyncio import (
    Agent,
    Ended,
    Host,
    LogError,
    MemoryLog,
    Notified,
    PreStepContext,
    Recorded,
    StepClosed,
    StepContext,
    Update,
)

A = Message("a", "hi")
B = Message("b", "more")


def run(main: Callable[[], Awaitable[None]]) -> None:
    asyncio.run(asyncio.wait_for(main(), 20))


def records(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def types(path: Path) -> list[str]:
    return [r["type"] for r in records(path)]


class Model(Host):
    """Records its output inside the step, then completes."""

    async def step(self, cx: StepContext) -> StepAnswer:
        await cx.record("model/output", {"text": f"turn {cx.turn}"})
        return "completed"


class Hang(Host):
    """A step that runs until its task is cancelled; counts its calls."""

    def __init__(self) -> None:
        self.started = asyncio.Event()
        self.cancelled = 0

    async def step(self, cx: StepContext) -> StepAnswer:
        self.started.set()
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            self.cancelled += 1
            assert cx.cancelled.is_set()
            raise
        return "completed"


def test_a_followup_is_acknowledged_once_durable_and_runs_one_turn(tmp_path: Path) -> None:
    log = tmp_path / "s.jsonl"

    async def main() -> None:
        agent, recovery = await Agent.open(Model(), log)
        assert recovery.records == 0 and recovery.last_turn == 0
        await agent.followup(A)
        # Acknowledged: the splice is in the file already (S24's first event).
        assert records(log)[0] == {
            "seq": 1,
            "type": "agent/inbox/spliced",
            "data": {"target": "next-turn", "start": 0, "inserted": [A.to_json()], "wakeup": True},
        }
        await agent.when_idle()
        await agent.dispose()
        assert agent.ending == "disposed"

    run(main)
    assert types(log) == [
        "agent/inbox/spliced", "turn/start", "agent/inbox/spliced", "step/start",
        "user/message", "model/output", "step/end", "turn/end",
    ]
    assert [r["seq"] for r in records(log)] == list(range(1, 9))
    assert records(log)[5]["data"] == {"text": "turn 1"}
    assert records(log)[7]["data"] == {"turn": 1, "reason": {"kind": "completed"}}


def test_subscribers_see_records_and_notifications_in_the_core_order(tmp_path: Path) -> None:
    """As the tokio driver publishes: each batch's records once durable, then its effects. The
    host writes no pre-step hook: the session answers it inside the follow-up's batch (decision
    1), so the step's start is in that batch."""
    seen: list[str] = []

    async def main() -> None:
        agent, _ = await Agent.open(Model(), tmp_path / "s.jsonl")

        async def watch() -> None:
            async for update in agent.subscribe():
                seen.append(describe(update))

        watcher = asyncio.create_task(watch())
        await asyncio.sleep(0)
        await agent.followup(A)
        await agent.when_idle()
        await agent.dispose()
        await watcher

    run(main)
    assert seen == [
        "1 agent/inbox/spliced", "2 turn/start", "3 agent/inbox/spliced", "4 step/start",
        "5 user/message", "Inserted", "running", "Claimed", "6 model/output", "7 step/end",
        "8 turn/end", "idle", "ended disposed",
    ]


def describe(update: Update) -> str:
    if isinstance(update, Recorded):
        return f"{update.seq} {update.record['type']}"
    if isinstance(update, Notified):
        n = update.notification
        return n.status if isinstance(n, coxswain.StatusChanged) else type(n).__name__
    assert isinstance(update, Ended)
    return f"ended {update.ending}"


def test_cancel_cancels_the_host_task_and_the_turn_ends_aborted(tmp_path: Path) -> None:
    """S39, S40: the abort cancels the running call's task; its answer closes the turn."""
    log = tmp_path / "s.jsonl"
    host = Hang()

    async def main() -> None:
        agent, _ = await Agent.open(host, log)
        await agent.followup(A)
        await host.started.wait()
        await agent.cancel(coxswain.CancelCause("hook", "enough"))
        await agent.when_idle()
        await agent.dispose()

    run(main)
    assert host.cancelled == 1
    assert records(log)[-1]["data"] == {
        "turn": 1,
        "reason": {"kind": "aborted", "reason": {"kind": "hook", "reason": "enough"}},
    }


def test_a_host_exception_fails_the_turn(tmp_path: Path) -> None:
    class Broken(Host):
        async def pre_step(self, cx: PreStepContext) -> PreStepAnswer:
            raise RuntimeError("no")

        async def step(self, cx: StepContext) -> StepAnswer:
            return "completed"

    log = tmp_path / "s.jsonl"

    async def main() -> None:
        agent, _ = await Agent.open(Broken(), log)
        await agent.followup(A)
        await agent.when_idle()
        await agent.close()

    run(main)
    reason = records(log)[-1]["data"]["reason"]
    assert reason["kind"] == "error" and reason["error"]["code"] == "host-raised"


def test_rejections_reach_the_caller_and_change_nothing(tmp_path: Path) -> None:
    log = tmp_path / "s.jsonl"

    async def main() -> None:
        agent, _ = await Agent.open(Model(), log, delivery_memory=8)
        await agent.inject(B)
        with pytest.raises(coxswain.AlreadyPending):  # S13
            await agent.inject(B)
        await agent.followup(A)
        await agent.when_idle()
        with pytest.raises(coxswain.AlreadyDelivered):  # S52: a retry after the claim
            await agent.followup(A)
        assert await agent.remove("zzz") is False
        await agent.dispose()
        with pytest.raises(coxswain.Disposed):
            await agent.followup(Message("c", 1))

    run(main)
    # inject (NS), followup (NT), then the turn claims each list with a splice of its own (S28)
    assert types(log).count("agent/inbox/spliced") == 4


def test_host_events_outside_their_step_are_refused(tmp_path: Path) -> None:
    kept: list[StepContext] = []

    class Keep(Host):
        async def step(self, cx: StepContext) -> StepAnswer:
            with pytest.raises(coxswain.EncodeError):  # the machine's own vocabulary
                await cx.record("turn/end", {})
            kept.append(cx)
            return "completed"

    async def main() -> None:
        agent, _ = await Agent.open(Keep(), tmp_path / "s.jsonl")
        await agent.followup(A)
        await agent.when_idle()
        with pytest.raises(StepClosed):
            await kept[0].record("late", {})
        await agent.dispose()

    run(main)


def test_close_mid_step_then_resume_closes_the_turn_interrupted(tmp_path: Path) -> None:
    """S50: the log ends inside a turn; the next open appends step/end and turn/end
    interrupted, and the parked items stay pending (S48)."""
    log = tmp_path / "s.jsonl"
    host = Hang()

    async def first() -> None:
        agent, _ = await Agent.open(host, log)
        await agent.followup(A)
        await host.started.wait()
        await agent.inject(B)
        await agent.close()
        assert agent.ending == "closed"

    run(first)
    assert types(log)[-1] == "agent/inbox/spliced"

    async def second() -> None:
        agent, recovery = await Agent.open(Model(), log)
        assert (recovery.interrupted_turn, recovery.closers, recovery.last_turn) == (1, 2, 1)
        assert recovery.pending_next_step == 1
        nt, ns = await agent.pending()
        assert nt == () and [p.message.id for p in ns] == ["b"]
        await agent.followup(Message("c", "again"))
        await agent.when_idle()
        await agent.dispose()

    run(second)
    got = records(log)
    assert got[6:8] == [
        {"seq": 7, "type": "step/end", "data": {"turn": 1, "step": 1}},
        {"seq": 8, "type": "turn/end", "data": {"turn": 1, "reason": {"kind": "interrupted"}}},
    ]
    assert {"seq": 10, "type": "turn/start", "data": {"turn": 2}} in got


def test_a_torn_tail_is_dropped_at_open(tmp_path: Path) -> None:
    log = tmp_path / "s.jsonl"

    async def first() -> None:
        agent, _ = await Agent.open(Model(), log)
        await agent.inject(A)
        await agent.close()

    run(first)
    whole = log.read_bytes()
    log.write_bytes(whole + b'{"seq":2,"type":"agent/inb')

    async def second() -> None:
        agent, recovery = await Agent.open(Model(), log)
        assert recovery.torn_tail == (2, 26) and recovery.records == 1
        await agent.close()

    run(second)
    assert log.read_bytes() == whole


def test_a_corrupt_log_is_refused_and_left_as_it_was(tmp_path: Path) -> None:
    log = tmp_path / "s.jsonl"
    text = b'{"seq":1,"type":"turn/start","data":{}}\n'
    log.write_bytes(text)

    async def main() -> None:
        with pytest.raises(coxswain.CorruptLog) as caught:
            await Agent.open(Model(), log)
        assert caught.value.line == 1

    run(main)
    assert log.read_bytes() == text


def test_a_second_writer_is_locked_out(tmp_path: Path) -> None:
    async def main() -> None:
        agent, _ = await Agent.open(Model(), tmp_path / "s.jsonl")
        with pytest.raises(LogError):
            await Agent.open(Model(), tmp_path / "s.jsonl")
        await agent.close()
        again, _ = await Agent.open(Model(), tmp_path / "s.jsonl")
        await again.close()

    run(main)


def test_maintenance_runs_while_idle_only(tmp_path: Path) -> None:
    """S43: maintenance while idle; busy otherwise; a follow-up meanwhile waits for its end."""
    log = tmp_path / "s.jsonl"

    async def main() -> None:
        agent, _ = await Agent.open(Model(), log)

        async def job(cancelled: asyncio.Event) -> str:
            await agent.followup(A)  # latched: the turn starts when the maintenance ends (S25)
            return "compacted"

        assert await agent.run_maintenance(job) == "compacted"
        await agent.when_idle()
        await agent.dispose()

    run(main)
    assert types(log)[:2] == ["agent/inbox/spliced", "turn/start"]
    assert types(log)[-1] == "turn/end"


def test_concurrent_deliveries_commit_in_groups_and_all_acknowledge(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Group commit: 50 deliveries waiting together take one write and one sync."""
    import coxswain._filelog as filelog

    log = tmp_path / "s.jsonl"
    syncs: list[int] = []
    real = filelog._sync

    def counting(fd: int) -> None:
        syncs.append(fd)
        real(fd)

    monkeypatch.setattr(filelog, "_sync", counting)

    class Quiet(Host):
        async def step(self, cx: StepContext) -> StepAnswer:
            return "completed"

    async def main() -> None:
        agent, _ = await Agent.open(Quiet(), log)
        await asyncio.gather(*(agent.inject(Message(f"m{i}", i)) for i in range(50)))
        nt, ns = await agent.pending()
        assert [p.message.id for p in ns] == [f"m{i}" for i in range(50)]
        await agent.dispose()

    run(main)
    assert [r["seq"] for r in records(log)] == list(range(1, 52))
    assert records(log)[-1]["data"]["removedCount"] == 50  # S45: dispose discards NS


def test_a_fail_answer_is_typed() -> None:
    answer: StepAnswer = Fail(coxswain.ErrorInfo("x", "y"))
    assert coxswain._types.answer_json("step", answer) == {"step": {"fail": {"message": "x", "code": "y"}}}


def test_an_invalid_host_answer_fails_the_turn_and_bad_input_fails_only_its_call(
    tmp_path: Path,
) -> None:
    class Wrong(Host):
        async def step(self, cx: StepContext) -> StepAnswer:
            return "finished"  # type: ignore[return-value]

    log = tmp_path / "s.jsonl"

    async def main() -> None:
        agent, _ = await Agent.open(Wrong(), log)
        with pytest.raises(TypeError):  # not JSON: refused, nothing changed
            await agent.followup(Message("x", object()))
        deep: object = 1
        for _ in range(124):  # with the message's own object: 125 > MAX_MESSAGE_DEPTH (124)
            deep = [deep]
        with pytest.raises(coxswain.EncodeError):  # too deep for a log record: refused first
            await agent.followup(Message("y", deep))
        await agent.followup(A)
        await agent.when_idle()
        await agent.dispose()

    run(main)
    reason = records(log)[-1]["data"]["reason"]
    assert reason["kind"] == "error" and reason["error"]["code"] == "host-invalid-answer"
    assert records(log)[0]["data"]["inserted"][0]["id"] == "a"


def test_a_slow_subscriber_lags_and_skips_the_oldest(tmp_path: Path) -> None:
    from coxswain.asyncio import Lagged

    seen: list[Update] = []

    async def main() -> None:
        agent, _ = await Agent.open(Model(), tmp_path / "s.jsonl")
        updates = agent.subscribe(capacity=2)
        for i in range(4):  # 4 records and 4 notifications, nobody reading
            await agent.inject(Message(f"m{i}", i))
        await agent.close()
        async for update in updates:
            seen.append(update)

    run(main)
    assert seen[0] == Lagged(6)
    # The newest two kept (the last inject's record and notification), then the end.
    assert [describe(u) for u in seen[1:]] == ["4 agent/inbox/spliced", "Inserted", "ended closed"]


# ----- SPEC §12 through the agent: guards (S54), the bound (S55), conflicts (S56) -----


def test_s54_guarded_sends_join_their_turn_or_are_refused(tmp_path: Path) -> None:
    log = tmp_path / "s.jsonl"
    host = Hang()

    async def main() -> None:
        agent, _ = await Agent.open(host, log)
        assert agent.last_turn == 0
        with pytest.raises(coxswain.TurnMismatch) as mismatch:
            await agent.followup_if_idle_after(1, A)
        assert mismatch.value.expect == coxswain.Expect.idle_after(1)
        await agent.followup_if_idle_after(0, A)
        await host.started.wait()
        assert agent.last_turn == 1 and agent.status == "running"
        await agent.steer_expecting(1, B)
        with pytest.raises(coxswain.TurnMismatch):
            await agent.steer_expecting(2, Message("x", "x"))
        with pytest.raises(coxswain.AlreadyPending) as retry:  # identity first (S13, S54)
            await agent.steer_expecting(2, B)
        assert retry.value.was_delivered
        await agent.cancel()
        await agent.when_idle()
        with pytest.raises(coxswain.TurnMismatch):  # turn 1 ended
            await agent.steer_expecting(1, Message("late", "late"))
        await agent.send(Message("q", "q"), "next-turn", False, expect=coxswain.Expect.idle_after(1))
        assert [p.message.id for p in (await agent.pending())[0]] == ["q"]
        await agent.dispose()

    run(main)
    spliced = [r["data"] for r in records(log) if r["type"] == "agent/inbox/spliced"]
    assert [(d["target"], [m["id"] for m in d["inserted"]]) for d in spliced] == [
        ("next-turn", ["a"]),
        ("next-turn", []),  # the claim of a
        ("next-step", ["b"]),
        ("next-step", []),  # the cancel's clear (keepInbox false)
        ("next-turn", ["q"]),
        ("next-turn", []),  # dispose's clear
    ]


def test_s55_max_pending_is_the_machines_bound(tmp_path: Path) -> None:
    log = tmp_path / "s.jsonl"

    async def main() -> None:
        agent, _ = await Agent.open(Model(), log, max_pending=1)
        await agent.inject(A)
        with pytest.raises(coxswain.Full) as full:
            await agent.inject(B)
        assert (full.value.target, full.value.max_pending) == ("next-step", 1)
        await agent.close()
        # Reopened unbounded, then with a bound again: the restored list is kept (S55).
        agent, _ = await Agent.open(Model(), log, max_pending=None)
        await agent.inject(B)
        await agent.close()
        agent, recovery = await Agent.open(Model(), log, max_pending=1)
        assert recovery.pending_next_step == 2
        with pytest.raises(coxswain.Full):
            await agent.inject(Message("c", "c"))
        await agent.dispose()
        with pytest.raises(ValueError):
            await Agent.open(Model(), tmp_path / "other.jsonl", max_pending=0)

    run(main)
    assert Agent.DEFAULT_MAX_PENDING == 10_000


def test_s56_a_conflict_is_never_success(tmp_path: Path) -> None:
    log = tmp_path / "s.jsonl"

    async def main() -> None:
        agent, _ = await Agent.open(Model(), log)
        await agent.followup(A)
        await agent.when_idle()
        with pytest.raises(coxswain.Conflict) as conflict:  # a's id, held, another message
            await agent.followup(Message("a", "something else"))
        assert conflict.value.id == "a" and not conflict.value.was_delivered
        with pytest.raises(coxswain.AlreadyDelivered) as delivered:
            await agent.followup(A)
        assert delivered.value.was_delivered
        await agent.dispose()

    run(main)
    assert types(log).count("turn/start") == 1


# ----- issue 26: the session layer decides; the agent moves bytes, time and tasks -----


def failing_appends(monkeypatch: pytest.MonkeyPatch, *calls: int) -> list[int]:
    """The log's appends fail (cut back cleanly, nothing written) at these calls (1 is the next
    one); returns the list of calls made, for the test to count."""
    from coxswain.asyncio import FileLog

    real, made = FileLog.append_encoded, []

    def append(self: FileLog, data: bytes, count: int) -> None:
        made.append(count)
        if len(made) in calls:
            raise LogError("append failed: injected")
        real(self, data, count)

    monkeypatch.setattr(FileLog, "append_encoded", append)
    return made


def test_a_failed_append_of_a_host_answer_is_fed_again_and_the_turn_goes_on(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The batch holding the step's answer fails: the session takes it back and holds the
    answer; staged again after the retry pause, the turn runs once, with no record twice."""
    log = tmp_path / "s.jsonl"

    async def main() -> None:
        agent, _ = await Agent.open(Model(), log)
        # 1: the follow-up (its turn's start and step's start: no pre-step hook, decision 1);
        # 2: the model output; 3: the step's answer.
        made = failing_appends(monkeypatch, 3)
        await agent.followup(A)
        await agent.when_idle()
        assert made == [5, 1, 2, 2]  # step/end and turn/end, refused, then written
        await agent.dispose()

    run(main)
    assert types(log)[:8] == [
        "agent/inbox/spliced", "turn/start", "agent/inbox/spliced", "step/start",
        "user/message", "model/output", "step/end", "turn/end",
    ]
    assert [r["seq"] for r in records(log)] == list(range(1, len(records(log)) + 1))


def test_a_refusal_judged_against_a_failed_batch_is_a_persistence_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two sends of b in one batch: the second is refused as already pending against the first.
    The batch fails, so b is not pending: both callers get PersistenceError, and b is accepted
    when sent again."""
    from coxswain.asyncio import PersistenceError

    async def main() -> None:
        agent, _ = await Agent.open(Model(), tmp_path / "s.jsonl")
        failing_appends(monkeypatch, 1)
        got = await asyncio.gather(agent.inject(B), agent.inject(B), return_exceptions=True)
        assert [type(g) for g in got] == [PersistenceError, PersistenceError]
        await agent.inject(B)
        with pytest.raises(coxswain.AlreadyPending):  # judged against a durable batch: stands
            await agent.inject(B)
        await agent.dispose()

    run(main)


def test_a_failed_maintenance_end_is_fed_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    log = tmp_path / "s.jsonl"

    async def main() -> None:
        agent, _ = await Agent.open(Model(), log)
        # The begin writes no record (no append); 1: the follow-up, 2: the end.
        made = failing_appends(monkeypatch, 2)

        async def job(cancelled: asyncio.Event) -> str:
            await agent.followup(A)  # latched: the turn starts when the maintenance ends (S25)
            return "compacted"

        assert await agent.run_maintenance(job) == "compacted"
        await agent.when_idle()
        # 2: the end, and the latched turn's turn/start, claim and step's start (no pre-step
        # hook: decision 1), refused; 3: staged again after the retry pause.
        assert made[:3] == [1, 4, 4]
        await agent.dispose()

    run(main)
    assert types(log)[:2] == ["agent/inbox/spliced", "turn/start"]
    assert types(log).count("turn/end") == 1


def test_a_maintenance_end_whose_append_failed_is_committed_after_the_retry_pause(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The append carrying the maintenance end fails once (the log works again after): the
    session holds the end and stages it again after its retry pause; the job's caller gets the
    job's value (no error) once that end is durable, the agent goes on, quiescent, and takes a
    follow-up. Maintenance begin and end write no record of their own: the follow-up the job
    sends is latched (S25), so the end's batch carries the turn it replays, which shows in the
    log exactly once."""
    import time

    from coxswain.asyncio import FileLog

    log = tmp_path / "s.jsonl"
    real = FileLog.append_encoded
    calls: list[tuple[int, float]] = []  # (count, when the call was made), every append
    written: list[float] = []  # when each append that went through returned

    def append(self: FileLog, data: bytes, count: int) -> None:
        calls.append((count, time.monotonic()))
        if len(calls) == 2:  # the begin writes nothing; 1: the latched follow-up, 2: the end
            raise LogError("append failed: injected")
        real(self, data, count)
        written.append(time.monotonic())

    async def main() -> None:
        agent, _ = await Agent.open(Model(), log)
        monkeypatch.setattr(FileLog, "append_encoded", append)
        returned: list[float] = []

        async def job(cancelled: asyncio.Event) -> str:
            await agent.followup(A)  # durable and latched: it waits for the end
            assert agent.status == "idle" and agent.last_turn == 0
            return "compacted"

        value = await asyncio.wait_for(agent.run_maintenance(job), 5)
        returned.append(time.monotonic())
        assert value == "compacted"  # the job's value, not a PersistenceError
        assert agent.ending is None
        # The follow-up, the end with the replayed turn's turn/start, claim, step's start and
        # entered message (refused), the same end again: once, after the pause, before the
        # caller returned.
        assert [count for count, _ in calls[:3]] == [1, 4, 4]
        assert calls[2][1] - calls[1][1] >= 0.09  # loosely: the 100 ms retry pause
        assert len(written) >= 2 and written[1] <= returned[0]
        await asyncio.wait_for(agent.when_idle(), 5)  # the replayed turn ran, and nothing else
        assert agent.ending is None and agent.status == "idle" and agent.last_turn == 1
        # then the turn: its model output, its step/end with its turn/end
        assert [count for count, _ in calls] == [1, 4, 4, 1, 2]
        await agent.followup(B)  # quiescent: a follow-up opens a turn of its own
        await asyncio.wait_for(agent.when_idle(), 5)
        assert agent.ending is None and agent.last_turn == 2
        assert [count for count, _ in calls] == [1, 4, 4, 1, 2, 5, 1, 2]
        await agent.dispose()
        assert agent.ending == "disposed"

    run(main)
    turn = ["turn/start", "agent/inbox/spliced", "step/start", "user/message", "model/output",
            "step/end", "turn/end"]
    written_records = records(log)
    assert types(log) == ["agent/inbox/spliced", *turn, "agent/inbox/spliced", *turn]
    assert [r["seq"] for r in written_records] == list(range(1, 17))
    assert written_records[0]["data"]["inserted"] == [A.to_json()]
    assert written_records[8]["data"]["inserted"] == [B.to_json()]
    assert [r["data"] for r in written_records if r["type"] == "turn/start"] == [
        {"turn": 1}, {"turn": 2}]
    assert [r["data"] for r in written_records if r["type"] == "turn/end"] == [
        {"turn": 1, "reason": {"kind": "completed"}}, {"turn": 2, "reason": {"kind": "completed"}}]


@pytest.mark.parametrize("kind", ["file", "memory"])
def test_an_aborted_call_that_outlives_the_abort_grace_is_abandoned(tmp_path: Path,
                                                                      kind: str) -> None:
    """S38–S40: a step that swallows its cancellation; after the abort grace the session answers
    it ``fail`` (``host-abandoned``) and the turn ends aborted; its late answer is dropped. On a
    file the driver task commits; on a ``MemoryLog`` the grace's timer commits in line."""
    log = tmp_path / "s.jsonl"
    memory = MemoryLog()
    release, started = asyncio.Event(), asyncio.Event()

    class Stubborn(Host):
        async def step(self, cx: StepContext) -> StepAnswer:
            started.set()
            try:
                await asyncio.Event().wait()
            except asyncio.CancelledError:
                pass  # goes on regardless
            await release.wait()
            return "completed"

    async def main() -> None:
        agent, _ = await Agent.open(Stubborn(), log if kind == "file" else memory,
                                    abort_grace=0.05)
        await agent.followup(A)
        await started.wait()
        await agent.cancel()
        await asyncio.wait_for(agent.when_idle(), 5)
        release.set()
        await asyncio.sleep(0.01)  # the late answer arrives, and is dropped
        assert agent.ending is None and agent.status == "idle"
        await agent.dispose()

    run(main)
    if kind == "memory":
        log.write_bytes(memory.bytes())
    end = [r["data"] for r in records(log) if r["type"] == "turn/end"]
    assert end == [{"turn": 1, "reason": {"kind": "aborted", "reason": {"kind": "user"}}}]


def test_ids_and_messages_beyond_the_limits_are_refused(tmp_path: Path) -> None:
    from coxswain.asyncio import IdTooLong, MessageTooLarge

    log = tmp_path / "s.jsonl"

    async def main() -> None:
        agent, _ = await Agent.open(Model(), log, max_id_bytes=4, max_message_bytes=64)
        with pytest.raises(IdTooLong) as long:
            await agent.inject(Message("abcde", "x"))
        assert (long.value.bytes, long.value.max) == (5, 4)
        with pytest.raises(MessageTooLarge) as large:
            await agent.inject(Message("a", "x" * 64))
        assert large.value.max == 64 and large.value.bytes > 64
        with pytest.raises(IdTooLong):  # the id a remove names, too
            await agent.remove("abcde")
        await agent.inject(Message("a", "x"))
        await agent.close()
        with pytest.raises(ValueError):
            await Agent.open(Model(), tmp_path / "other.jsonl", abort_grace=-1)

    run(main)
    assert types(log) == ["agent/inbox/spliced"]
