"""``MemoryLog`` and the asyncio ``Agent``'s host calls: the log's bytes as a FileLog's (S46-S50
on resume), one holder at a time; each host call a task of its own from its first line (its own
context, ``current_task()``, ``asyncio.timeout``), answered even when cancelled unstarted, a
default hook answered without one, and a host that never suspends does not starve the event
loop."""

from __future__ import annotations

import asyncio
import contextvars
import json
import subprocess
import sys
from typing import Any, Awaitable, Callable

import pytest

from coxswain import (Claimed, Enter, Inserted, Message, PreStepAnswer, StepAnswer,
                      TurnStoppingAnswer)
from coxswain.asyncio import (Agent, Host, LogError, MemoryLog, Notified, PreStepContext,
                              StepContext, TurnStoppingContext)
from coxswain.asyncio._host import EAGER
from coxswain.log import FileLog

A = Message("a", "hi")
SEEN: contextvars.ContextVar[str] = contextvars.ContextVar("seen", default="unset")


def run(main: Callable[[], Awaitable[None]]) -> None:
    asyncio.run(asyncio.wait_for(main(), 20))


def lines(log: MemoryLog) -> list[dict[str, Any]]:
    return [json.loads(line) for line in log.bytes().decode().splitlines()]


class Eager(Host):
    """Answers at once (never suspends); notes what it saw from inside its calls."""

    def __init__(self) -> None:
        self.statuses: list[str] = []
        self.seen: list[str] = []
        self.agent: Agent | None = None

    async def pre_step(self, cx: PreStepContext) -> PreStepAnswer:
        assert self.agent is not None
        self.statuses.append(self.agent.status)
        return Enter(cx.messages)

    async def step(self, cx: StepContext) -> StepAnswer:
        self.seen.append(SEEN.get())
        SEEN.set("set in step")  # its own context: not the driver's, not the next call's
        return "completed"

    async def turn_stopping(self, cx: TurnStoppingContext) -> TurnStoppingAnswer:
        self.seen.append(SEEN.get())
        return "done"


def test_a_turn_on_a_memory_log_writes_the_records_a_file_log_would() -> None:
    log, host = MemoryLog(), Eager()

    async def main() -> None:
        agent, recovery = await Agent.open(host, log)
        host.agent = agent
        assert recovery.records == 0
        await agent.followup(A)
        await agent.when_idle()
        assert SEEN.get() == "unset"
        await agent.dispose()

    run(main)
    assert [(r["seq"], r["type"]) for r in lines(log)] == [
        (1, "agent/inbox/spliced"), (2, "turn/start"), (3, "agent/inbox/spliced"),
        (4, "step/start"), (5, "user/message"), (6, "step/end"), (7, "turn/end"),
    ]
    assert lines(log)[6]["data"] == {"turn": 1, "reason": {"kind": "completed"}}
    # The pre-step call saw the agent running, and each call ran in a context of its own.
    assert host.statuses == ["running"]
    assert host.seen == ["unset", "unset"]
    assert log.next_seq == 8


def test_a_memory_log_resumes_as_a_file_log_does(tmp_path: Any) -> None:
    """S50: the torn tail dropped, the open turn closed `interrupted`; the same bytes as
    FileLog.open leaves in a file."""

    class Hang(Host):
        async def step(self, cx: StepContext) -> StepAnswer:
            await asyncio.Event().wait()
            return "completed"

    first = MemoryLog()

    async def start() -> None:
        agent, _ = await Agent.open(Hang(), first)
        await agent.followup(A)
        await agent.close()  # inside turn 1: the next open closes it

    run(start)
    torn = first.bytes() + b'{"seq": 9, "ty'
    path = tmp_path / "s.jsonl"
    path.write_bytes(torn)
    again = MemoryLog(torn)
    resumed = again.resume(0, None, 7)
    file_log, from_file = FileLog.open(path, 0, None, 7)
    file_log.close()
    assert again.bytes() == path.read_bytes()
    assert (resumed.records, resumed.torn, resumed.closers, resumed.interrupted) == (
        from_file.records, from_file.torn, from_file.closers, from_file.interrupted)
    # Five records read, line 6 (14 bytes) torn, turn 1 closed by two records.
    assert (resumed.records, resumed.torn, resumed.closers, resumed.interrupted) == (
        5, (6, 14), 2, 1)
    assert lines(again)[5:] == [
        {"seq": 6, "type": "step/end", "data": {"turn": 1, "step": 1}},
        {"seq": 7, "type": "turn/end", "data": {"turn": 1, "reason": {"kind": "interrupted"}}},
    ]
    assert again.next_seq == 8


def test_a_memory_log_has_one_holder_and_takes_no_append_once_closed() -> None:
    log = MemoryLog()
    log.resume(0, None, 1)
    with pytest.raises(LogError, match="held by another agent"):
        log.resume(0, None, 1)
    before = log.bytes()
    log.close()
    with pytest.raises(LogError, match="closed"):
        log.append([{"type": "note", "data": 1}])
    assert log.bytes() == before and log.next_seq == 1
    log.resume(0, None, 1)  # let go: it may be resumed again
    assert log.append([{"type": "note", "data": 1}]) == [1]
    assert lines(log) == [{"seq": 1, "type": "note", "data": 1}]


def test_a_host_call_is_its_own_task_from_its_first_line() -> None:
    """`asyncio.timeout` and `current_task()` inside a host call name the call's task, never the
    driver's: the timeout cancels the call, which raises `TimeoutError` (answered `fail`,
    `host-raised`, S38), and the agent goes on to take the next turn."""

    class Slow(Host):
        def __init__(self) -> None:
            self.tasks: list[asyncio.Task[Any] | None] = []

        async def step(self, cx: StepContext) -> StepAnswer:
            self.tasks.append(asyncio.current_task())
            async with asyncio.timeout(0.01):
                await asyncio.Event().wait()
            return "completed"

    host = Slow()
    log = MemoryLog()

    async def main() -> None:
        agent, _ = await Agent.open(host, log, delivery_memory=0)
        await agent.followup(A)
        await agent.when_idle()
        await agent.followup(A)
        await agent.when_idle()
        assert agent.ending is None and agent.last_turn == 2
        # The caller's task committed each turn's batches in line: the calls ran in tasks of
        # their own, one each.
        assert asyncio.current_task() not in host.tasks and None not in host.tasks
        assert len(set(host.tasks)) == 2
        await agent.dispose()

    run(main)
    ends = [r["data"] for r in lines(log) if r["type"] == "turn/end"]
    error = {"message": "the host's step call raised: TimeoutError()", "code": "host-raised"}
    assert ends == [{"turn": t, "reason": {"kind": "error", "error": error}} for t in (1, 2)]


def test_a_call_cancelled_before_its_task_ran_is_answered_cancelled() -> None:
    """max_batch 1: the follow-up's batch starts the pre-step call's task, and the cancel's batch
    (taken before the loop ran that task) cancels it unstarted: the call is answered all the same
    (S40) and the turn ends `aborted`; the host's hook never ran. Tasks start on the loop's next
    pass: on 3.11 always; on 3.12+ under a task factory of the user's, which the agent honours
    instead of starting the call eagerly (eagerly, the turn ends inside the follow-up's call:
    test_eager.py)."""

    class Counting(Host):
        def __init__(self) -> None:
            self.calls = 0

        async def pre_step(self, cx: PreStepContext) -> PreStepAnswer:
            self.calls += 1
            return Enter(cx.messages)

        async def step(self, cx: StepContext) -> StepAnswer:
            self.calls += 1
            return "completed"

    host, log = Counting(), MemoryLog()

    def lazy(loop: asyncio.AbstractEventLoop, coro: Any, **kw: Any) -> asyncio.Task[Any]:
        return asyncio.Task(coro, loop=loop, **kw)

    async def main() -> None:
        asyncio.get_running_loop().set_task_factory(lazy)
        agent, _ = await Agent.open(host, log, max_batch=1)
        await asyncio.gather(agent.followup(A), agent.cancel())
        await asyncio.wait_for(agent.when_idle(), 5)
        await agent.dispose()

    run(main)
    assert host.calls == 0
    assert [(r["seq"], r["type"]) for r in lines(log)] == [
        (1, "agent/inbox/spliced"), (2, "turn/start"), (3, "agent/inbox/spliced"),
        (4, "turn/end"),
    ]
    assert lines(log)[3]["data"] == {
        "turn": 1, "reason": {"kind": "aborted", "reason": {"kind": "user"}}}


FOREVER = """
import asyncio
from coxswain import Message
from coxswain.asyncio import Agent, Host, MemoryLog

class Forever(Host):
    async def step(self, cx):
        return "continue"

async def main():
    agent, _ = await Agent.open(Forever(), MemoryLog())
    await agent.followup(Message("a", "hi"))
    await agent.cancel()
    await agent.when_idle()
    print(agent.status, agent.last_turn)
    await agent.dispose()

asyncio.run(main())
"""


def test_a_host_that_never_suspends_does_not_starve_other_tasks() -> None:
    """Steps answered `continue` at once, forever: the driver still lets the caller's cancel in
    (in a process of its own: a starved event loop would never time out). A call answered
    without a turn of the loop (a hand-made eager start) would starve it."""
    done = subprocess.run([sys.executable, "-c", FOREVER], capture_output=True, text=True,
                          timeout=60, check=True)
    assert done.stdout == "idle 1\n"


class StepOnly(Host):
    """Overrides only ``step``: ``pre_step`` and ``turn_stopping`` are ``Host``'s defaults."""

    async def step(self, cx: StepContext) -> StepAnswer:
        return "completed"


class Overrides(StepOnly):
    """Overrides all three, answering as the defaults do."""

    async def pre_step(self, cx: PreStepContext) -> PreStepAnswer:
        return Enter(cx.messages)

    async def turn_stopping(self, cx: TurnStoppingContext) -> TurnStoppingAnswer:
        return "done"


def test_a_default_hook_is_answered_without_a_task_and_writes_what_it_would() -> None:
    """A ``pre_step`` or ``turn_stopping`` the host did not override is ``Host``'s own default:
    the driver answers it as that hook would (enter the claimed batch, done) without a task for
    it. One turn of a step-only host starts one task, the step's; overriding both starts three;
    the records are the same."""

    async def turn(host: Host) -> tuple[int, list[tuple[str, Any]]]:
        loop, log = asyncio.get_running_loop(), MemoryLog()
        agent, _ = await Agent.open(host, log, delivery_memory=0)
        await agent.when_idle()
        tasks: list[str] = []

        def factory(loop: asyncio.AbstractEventLoop, coro: Any, **kw: Any) -> asyncio.Task[Any]:
            tasks.append(getattr(coro, "__qualname__", "?"))
            return asyncio.Task(coro, loop=loop, **kw)

        loop.set_task_factory(factory)
        try:
            await agent.followup(A)
            await agent.when_idle()
        finally:
            loop.set_task_factory(None)
        await agent.dispose()
        return len(tasks), [(r["type"], r["data"]) for r in lines(log)]

    async def main() -> None:
        alone, overridden = await turn(StepOnly()), await turn(Overrides())
        assert alone[0] == 1 and overridden[0] == 3
        assert alone[1] == overridden[1]
        assert [t for t, _ in alone[1]] == [
            "agent/inbox/spliced", "turn/start", "agent/inbox/spliced", "step/start",
            "user/message", "step/end", "turn/end"]
        assert alone[1][-1][1] == {"turn": 1, "reason": {"kind": "completed"}}

    run(main)


def test_a_memory_log_is_committed_in_line_and_hands_back_the_callers_message() -> None:
    """No IO to wait for: a caller's delivery is committed where it is made, the batches a
    default hook's answer adds with it, before the call returns (no driver task, no turn of the
    event loop); the step's call is then started: not yet run on 3.11; on 3.12+ run eagerly,
    and, as it answered at once, the turn has ended too. Every output carrying the
    message hands back the caller's object (S8): the host's batch, the subscriber's
    notifications."""

    class Seeing(Host):
        def __init__(self) -> None:
            self.batches: list[tuple[Message, ...]] = []

        async def pre_step(self, cx: PreStepContext) -> PreStepAnswer:
            self.batches.append(cx.messages)
            return Enter(cx.messages)

        async def step(self, cx: StepContext) -> StepAnswer:
            return "completed"

    async def main() -> None:
        log = MemoryLog()
        agent, _ = await Agent.open(StepOnly(), log)
        assert agent._task is None
        await agent.followup(A)
        message = {"id": "a", "content": "hi", "source": {"kind": "user"}}
        assert lines(log) == [
            {"seq": 1, "type": "agent/inbox/spliced", "data": {
                "target": "next-turn", "start": 0, "inserted": [message], "wakeup": True}},
            {"seq": 2, "type": "turn/start", "data": {"turn": 1}},
            {"seq": 3, "type": "agent/inbox/spliced", "data": {
                "target": "next-turn", "start": 0, "removedCount": 1, "inserted": []}},
            {"seq": 4, "type": "step/start", "data": {"turn": 1, "step": 1}},
            {"seq": 5, "type": "user/message", "data": message},
        ] + ([{"seq": 6, "type": "step/end", "data": {"turn": 1, "step": 1}},
              {"seq": 7, "type": "turn/end", "data": {"turn": 1, "reason": {"kind": "completed"}}}]
             if EAGER else [])
        assert agent.status == ("idle" if EAGER else "running") and agent.last_turn == 1
        await agent.when_idle()
        assert log.next_seq == 8
        await agent.dispose()

        host, log = Seeing(), MemoryLog()
        agent, _ = await Agent.open(host, log)
        updates = agent.subscribe()
        await agent.followup(A)
        await agent.when_idle()
        await agent.dispose()
        notified = [u.notification for u in [u async for u in updates] if isinstance(u, Notified)]
        carried = [n.message for n in notified if isinstance(n, (Inserted, Claimed))]
        assert [type(n).__name__ for n in notified if isinstance(n, (Inserted, Claimed))] == [
            "Inserted", "Claimed"]
        assert all(m is A for m in carried) and host.batches[0][0] is A

    run(main)
