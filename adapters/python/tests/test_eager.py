"""The asyncio ``Agent``'s host calls as eager tasks (issue 52): on CPython 3.12+ a host call
(and a maintenance job) runs its first step at once, in a task of its own, so a turn whose hooks
return without suspending takes no pass of the event loop; on 3.11 every call starts on the
loop's next pass, as before. Either way ``current_task()`` and ``asyncio.timeout`` inside a call
name the call's own task, a cancel (and the abort grace, S38-S40) stops it, and an exception
answers ``fail`` (``host-raised``). Each test pins what each interpreter does; CI runs them on
3.11, 3.12 and 3.13."""

from __future__ import annotations

import asyncio
import itertools
import json
import sys
from pathlib import Path
from typing import Any, Awaitable, Callable

import pytest

from coxswain import Enter, Message, PreStepAnswer, StepAnswer, TurnStoppingAnswer
from coxswain.asyncio import (Agent, Host, MemoryLog, PreStepContext, StepContext,
                              TurnStoppingContext)
from coxswain.asyncio._host import EAGER

A = Message("a", "hi")
KINDS = ["memory", "file"]


def run(main: Callable[[], Awaitable[None]]) -> None:
    asyncio.run(asyncio.wait_for(main(), 20))


class Target:
    """A ``MemoryLog`` or a file, and the records written to it."""

    def __init__(self, kind: str, tmp_path: Path) -> None:
        self.memory = MemoryLog() if kind == "memory" else None
        self.path = tmp_path / "s.jsonl"

    @property
    def log(self) -> MemoryLog | Path:
        return self.path if self.memory is None else self.memory

    def records(self) -> list[dict[str, Any]]:
        raw = self.path.read_bytes() if self.memory is None else self.memory.bytes()
        return [json.loads(line) for line in raw.decode().splitlines()]

    def ends(self) -> list[Any]:
        return [r["data"] for r in self.records() if r["type"] == "turn/end"]


def test_eager_is_what_the_interpreter_can_do() -> None:
    assert EAGER is (sys.version_info >= (3, 12))


class AtOnce(Host):
    """All three hooks written, each returning at once; notes the task each ran in."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, asyncio.Task[Any] | None]] = []

    async def pre_step(self, cx: PreStepContext) -> PreStepAnswer:
        self.calls.append(("pre_step", asyncio.current_task()))
        return Enter(cx.messages)

    async def step(self, cx: StepContext) -> StepAnswer:
        self.calls.append(("step", asyncio.current_task()))
        return "completed"

    async def turn_stopping(self, cx: TurnStoppingContext) -> TurnStoppingAnswer:
        self.calls.append(("turn_stopping", asyncio.current_task()))
        return "done"


def test_a_turn_whose_hooks_return_at_once_takes_no_pass_of_the_loop() -> None:
    """On a ``MemoryLog`` the follow-up is committed in line; eagerly, its three host calls run
    and answer inside that call too: the turn has ended when ``followup`` returns, and a callback
    scheduled before it has not run. On 3.11 each call waits for a pass of the loop."""
    host, target = AtOnce(), Target("memory", Path())

    async def main() -> None:
        loop = asyncio.get_running_loop()
        agent, _ = await Agent.open(host, target.log)
        passes: list[str] = []
        loop.call_soon(passes.append, "pass")
        await agent.followup(A)
        assert (agent.status, [name for name, _ in host.calls], passes) == (
            ("idle", ["pre_step", "step", "turn_stopping"], []) if EAGER
            else ("running", [], []))
        await agent.when_idle()
        assert passes == ([] if EAGER else ["pass"])
        assert [name for name, _ in host.calls] == ["pre_step", "step", "turn_stopping"]
        # Each call in a task of its own, never the caller's; each task ended.
        tasks = [task for _, task in host.calls]
        assert None not in tasks and asyncio.current_task() not in tasks
        assert len(set(tasks)) == 3 and all(t is not None and t.done() for t in tasks)
        await agent.dispose()

    run(main)
    assert target.ends() == [{"turn": 1, "reason": {"kind": "completed"}}]


@pytest.mark.parametrize("kind", KINDS)
def test_current_task_and_timeout_name_the_calls_own_task(tmp_path: Path, kind: str) -> None:
    """Inside an eager call ``current_task()`` is the call's task, whose first line ran before
    the caller got its answer (on a ``MemoryLog``); ``asyncio.timeout`` there cancels that task
    alone: the step raises ``TimeoutError`` (answered ``fail``, ``host-raised``), the caller's
    task is not cancelled, and the next turn runs."""
    target = Target(kind, tmp_path)

    class TimesOut(Host):
        def __init__(self) -> None:
            self.tasks: list[asyncio.Task[Any] | None] = []
            self.caller: asyncio.Task[Any] | None = None

        async def step(self, cx: StepContext) -> StepAnswer:
            task = asyncio.current_task()
            self.tasks.append(task)
            assert task is not None and task is not self.caller and not task.done()
            async with asyncio.timeout(0.01):
                await asyncio.Event().wait()
            return "completed"

    host = TimesOut()

    async def main() -> None:
        host.caller = asyncio.current_task()
        agent, _ = await Agent.open(host, target.log, delivery_memory=0)
        await agent.followup(A)
        # On a file the driver task commits, and started the call before it answered.
        assert len(host.tasks) == (1 if EAGER or kind == "file" else 0)
        await agent.when_idle()
        await agent.followup(A)
        await agent.when_idle()
        assert host.caller is not None and host.caller.cancelling() == 0
        assert (agent.ending, agent.last_turn, len(set(host.tasks))) == (None, 2, 2)
        assert all(t is not None and t.done() and t.cancelling() == 0 for t in host.tasks)
        await agent.dispose()

    run(main)
    error = {"message": "the host's step call raised: TimeoutError()", "code": "host-raised"}
    assert target.ends() == [{"turn": t, "reason": {"kind": "error", "error": error}}
                             for t in (1, 2)]


@pytest.mark.parametrize("kind", KINDS)
def test_a_cancel_stops_an_eager_call(tmp_path: Path, kind: str) -> None:
    """A step started eagerly that then suspends is cancelled by ``cancel`` (S39): its task
    gets ``CancelledError``, the call is answered, and the turn ends ``aborted``."""
    target = Target(kind, tmp_path)
    seen: list[str] = []

    class Waits(Host):
        async def step(self, cx: StepContext) -> StepAnswer:
            seen.append("started")
            try:
                await asyncio.Event().wait()
            except asyncio.CancelledError:
                seen.append(f"cancelled, event set: {cx.cancelled.is_set()}")
                raise
            return "completed"

    async def main() -> None:
        agent, _ = await Agent.open(Waits(), target.log)
        await agent.followup(A)
        assert seen == (["started"] if EAGER or kind == "file" else [])
        await asyncio.sleep(0.01)
        assert (seen, agent.status) == (["started"], "running")
        await agent.cancel()
        await asyncio.wait_for(agent.when_idle(), 5)
        assert (agent.ending, agent.status) == (None, "idle")
        await agent.dispose()

    run(main)
    assert seen == ["started", "cancelled, event set: True"]
    assert target.ends() == [{"turn": 1, "reason": {"kind": "aborted", "reason": {"kind": "user"}}}]


@pytest.mark.parametrize("kind", KINDS)
def test_an_eager_call_that_swallows_its_cancel_is_abandoned_after_the_grace(
        tmp_path: Path, kind: str) -> None:
    """S38-S40: a step that ignores its cancellation; once the abort grace runs out the session
    answers it ``fail`` (``host-abandoned``), the turn ends aborted, and its late answer is
    dropped."""
    target = Target(kind, tmp_path)
    release, seen = asyncio.Event(), []

    class Stubborn(Host):
        async def step(self, cx: StepContext) -> StepAnswer:
            seen.append("started")
            try:
                await asyncio.Event().wait()
            except asyncio.CancelledError:
                seen.append("cancel swallowed")
            await release.wait()
            seen.append("answered late")
            return "completed"

    async def main() -> None:
        agent, _ = await Agent.open(Stubborn(), target.log, abort_grace=0.05)
        await agent.followup(A)
        await asyncio.sleep(0.01)
        await agent.cancel()
        await asyncio.wait_for(agent.when_idle(), 5)
        assert (agent.ending, agent.status) == (None, "idle")
        release.set()
        await asyncio.sleep(0.01)  # the late answer arrives, and is dropped
        assert (agent.ending, agent.status, agent.last_turn) == (None, "idle", 1)
        await agent.dispose()

    run(main)
    assert seen == ["started", "cancel swallowed", "answered late"]
    assert target.ends() == [{"turn": 1, "reason": {"kind": "aborted", "reason": {"kind": "user"}}}]


@pytest.mark.parametrize("kind", KINDS)
def test_an_eager_call_that_raises_at_once_fails_the_turn(tmp_path: Path, kind: str) -> None:
    """A hook raising in its first step (inside the task's eager start) is answered ``fail``
    (``host-raised``, the message, or the repr of an exception without one) as a call that
    raised later is; the agent goes on to the next turn."""
    target = Target(kind, tmp_path)

    class Raises(Host):
        def __init__(self) -> None:
            self.errors: list[Exception] = [RuntimeError("no"), KeyError()]

        async def pre_step(self, cx: PreStepContext) -> PreStepAnswer:
            raise self.errors.pop(0)

        async def step(self, cx: StepContext) -> StepAnswer:
            return "completed"

    async def main() -> None:
        agent, _ = await Agent.open(Raises(), target.log, delivery_memory=0)
        await agent.followup(A)
        assert agent.status == ("idle" if EAGER and kind == "memory" else "running")
        await agent.when_idle()
        await agent.followup(A)
        await agent.when_idle()
        assert (agent.ending, agent.last_turn) == (None, 2)
        await agent.dispose()

    run(main)
    assert target.ends() == [
        {"turn": 1, "reason": {"kind": "error", "error": {
            "message": "the host's preStep call raised: no", "code": "host-raised"}}},
        {"turn": 2, "reason": {"kind": "error", "error": {
            "message": "the host's preStep call raised: KeyError()", "code": "host-raised"}}},
    ]


def test_eager_calls_in_a_row_are_bounded_so_the_loop_gets_a_pass() -> None:
    """A host that never suspends: ``Agent.EAGER_CALLS`` calls start eagerly in a row, the next
    on the loop's next pass (from whose answer the next run of eager calls starts), so other
    tasks run. Seen as the loop's pass count each step saw: 40 steps (39 ``continue``), in runs
    of 16, then 17 (the call started on a pass, then 16 eager), then the rest; on 3.11 each
    step on a pass of its own."""
    seen: list[int] = []
    passes = [0]

    class Continues(Host):
        async def step(self, cx: StepContext) -> StepAnswer:
            seen.append(passes[0])
            return "continue" if cx.step < 40 else "completed"

    async def main() -> None:
        loop = asyncio.get_running_loop()

        def tick() -> None:
            passes[0] += 1
            if seen[-1:] != [-1]:
                loop.call_soon(tick)

        agent, _ = await Agent.open(Continues(), MemoryLog())
        loop.call_soon(tick)
        await agent.followup(A)
        await agent.when_idle()
        seen.append(-1)  # the ticks stop
        await agent.dispose()

    run(main)
    assert Agent.EAGER_CALLS == 16
    runs = [len(list(group)) for _, group in itertools.groupby(seen[:-1])]
    assert runs == ([16, 17, 7] if EAGER else [1] * 40)


def test_a_task_factory_of_the_users_is_honoured() -> None:
    """The agent never sets the loop's task factory, and starts no call eagerly past one the
    user set: that factory makes every call's task (here: a lazy one, so the turn takes passes
    of the loop on every interpreter)."""
    host, made = AtOnce(), []

    def factory(loop: asyncio.AbstractEventLoop, coro: Any, **kw: Any) -> asyncio.Task[Any]:
        made.append(coro.__qualname__)
        return asyncio.Task(coro, loop=loop, **kw)

    async def main() -> None:
        loop = asyncio.get_running_loop()
        loop.set_task_factory(factory)
        agent, _ = await Agent.open(host, MemoryLog())
        await agent.followup(A)
        assert (agent.status, host.calls) == ("running", [])
        await agent.when_idle()
        assert loop.get_task_factory() is factory
        assert made == ["HostCall.run"] * 3
        await agent.dispose()

    run(main)
    assert [name for name, _ in host.calls] == ["pre_step", "step", "turn_stopping"]


def test_a_maintenance_job_starts_eagerly() -> None:
    """A maintenance job (S43) runs its first step as it is started, in a task of its own,
    inside the ``run_maintenance`` call on 3.12+ (on 3.11 on the loop's next pass); its value
    comes back once its end is durable."""
    order: list[str] = []

    async def main() -> None:
        agent, _ = await Agent.open(AtOnce(), MemoryLog())
        caller = asyncio.current_task()

        async def job(cancelled: asyncio.Event) -> str:
            order.append("job started")
            task = asyncio.current_task()
            assert task is not None and task is not caller
            await asyncio.sleep(0)
            return "value"

        asyncio.get_running_loop().call_soon(order.append, "pass")
        assert await agent.run_maintenance(job) == "value"
        await agent.dispose()

    run(main)
    assert order == (["job started", "pass"] if EAGER else ["pass", "job started"])


@pytest.mark.parametrize("kind", KINDS)
def test_a_call_ended_by_a_base_exception_is_answered_cancelled(tmp_path: Path,
                                                                 kind: str) -> None:
    """A hook that raises a ``BaseException`` that is not an ``Exception`` (nor one asyncio
    re-raises, as ``KeyboardInterrupt``) ends its task with it: the call is answered as a
    cancelled one (``host-cancelled``, S40) once the task has ended, eager or not, and the agent
    goes on."""
    target = Target(kind, tmp_path)

    class Odd(BaseException):
        pass

    class Raises(Host):
        async def step(self, cx: StepContext) -> StepAnswer:
            if cx.turn == 1:
                raise Odd("odd")
            return "completed"

    async def main() -> None:
        loop = asyncio.get_running_loop()
        loop.set_exception_handler(lambda loop, context: None)  # the task's unretrieved Odd
        agent, _ = await Agent.open(Raises(), target.log, delivery_memory=0)
        await agent.followup(A)
        await asyncio.wait_for(agent.when_idle(), 5)
        await agent.followup(A)
        await asyncio.wait_for(agent.when_idle(), 5)
        assert (agent.ending, agent.last_turn) == (None, 2)
        await agent.dispose()

    run(main)
    assert target.ends() == [
        {"turn": 1, "reason": {"kind": "error", "error": {
            "message": "the host's step call was cancelled", "code": "host-cancelled"}}},
        {"turn": 2, "reason": {"kind": "completed"}},
    ]
