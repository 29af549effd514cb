"""The asyncio ``Agent`` over the session layer's agent loop (issue 51): the hooks a host did not
write, a hook that returns nothing, the retry pause, the stop policy and one kind name for every
error, as a user of the binding sees them (common.md decisions 1-7)."""

from __future__ import annotations

import asyncio
import time
from typing import Any, Awaitable, Callable

import pytest

import coxswain
from coxswain import Enter, Message, PreStepAnswer, StepAnswer, TurnStoppingAnswer
from coxswain.asyncio import (Agent, Host, LogError, MemoryLog, PersistenceError, PreStepContext,
                              StepContext, TurnStoppingContext)

A = Message("a", "hi")
B = Message("b", "more")


def run(main: Callable[[], Awaitable[None]]) -> None:
    asyncio.run(asyncio.wait_for(main(), 20))


class Log(MemoryLog):
    """A ``MemoryLog`` that counts the appends carrying records and raises ``faults[n]`` at the
    ``n``-th (1 is the first after open)."""

    def __init__(self, **faults: LogError) -> None:
        super().__init__()
        self.faults = {int(n.strip("_")): error for n, error in faults.items()}
        self.appends: list[float] = []  # when each call was made

    def append_encoded(self, data: bytes, count: int) -> None:
        if data and self.opened:
            self.appends.append(time.monotonic())
            fault = self.faults.get(len(self.appends))
            if fault is not None:
                raise fault
        super().append_encoded(data, count)

    opened = False

    def lines(self) -> list[str]:
        return self.bytes().decode().splitlines()


async def opened(host: Any, log: Log, **options: Any) -> Agent:
    agent, _ = await Agent.open(host, log, **options)
    log.opened = True
    return agent


class Quiet(Host):
    """Only the step: the pre-step and turn-stopping hooks are ``Host``'s own (not written)."""

    async def step(self, cx: StepContext) -> StepAnswer:
        return "completed"


class Duck:
    """Not a ``Host`` at all: no ``pre_step`` or ``turn_stopping`` attribute."""

    async def step(self, cx: StepContext) -> StepAnswer:
        return "completed"


class Nothing(Host):
    """Both hooks written, both returning nothing (``None``)."""

    async def pre_step(self, cx: PreStepContext) -> PreStepAnswer:
        return None  # type: ignore[return-value]

    async def step(self, cx: StepContext) -> StepAnswer:
        return "completed"

    async def turn_stopping(self, cx: TurnStoppingContext) -> TurnStoppingAnswer:
        return None  # type: ignore[return-value]


async def one_turn(host: Any) -> tuple[list[str], int]:
    log = Log()
    agent = await opened(host, log)
    await agent.followup(A)
    await agent.when_idle()
    await agent.close()
    return log.lines(), len(log.appends)


def test_a_host_without_hooks_has_them_answered_inside_the_batch() -> None:
    """Decision 1: a hook the host did not write (``Host``'s own, or none at all) is answered
    by the session inside the batch that requested it: a quiet turn is two appends."""
    quiet = asyncio.run(one_turn(Quiet()))
    assert asyncio.run(one_turn(Duck())) == quiet
    lines, appends = quiet
    assert appends == 2
    assert [line.split('"type":"')[1].split('"')[0] for line in lines] == [
        "agent/inbox/spliced", "turn/start", "agent/inbox/spliced", "step/start",
        "user/message", "step/end", "turn/end"]


def test_a_hook_returning_none_answers_what_the_missing_hook_answers() -> None:
    """Decision 2: ``None`` from ``pre_step`` enters the claimed batch, from ``turn_stopping`` is
    done: the same log as a host without them (each answer its own append: four)."""
    nothing, appends = asyncio.run(one_turn(Nothing()))
    assert nothing == asyncio.run(one_turn(Quiet()))[0] and appends == 4


def test_the_retry_pause_is_taken_from_open() -> None:
    """Decision 6: ``retry_after`` (seconds): the step's answer, whose append failed, is written
    again once the pause is over, and the turn ends then."""

    async def main() -> None:
        log = Log(_2=LogError("disk full (injected)"))
        agent = await opened(Quiet(), log, retry_after=0.3)
        await agent.followup(A)
        await agent.when_idle()
        assert len(log.appends) == 3 and log.appends[2] - log.appends[1] >= 0.29
        assert agent.ending is None and (await agent.fate("a")).to_json() == {
            "claimed": {"turn": 1, "step": 1, "end": "completed"}}
        await agent.close()

    run(main)


@pytest.mark.parametrize("flag", ["indeterminate", "fenced"])
def test_an_indeterminate_or_fenced_append_stops_the_agent(flag: str) -> None:
    """Decision 4: the caller is told (``indeterminate``, or ``persistence`` when fenced), every
    later call raises ``Stopped`` (kind ``stopped``); ``fate`` is still answered."""

    async def main() -> None:
        log = Log(_1=LogError("no (injected)", **{flag: True}))  # type: ignore[arg-type]
        agent = await opened(Quiet(), log)
        with pytest.raises(PersistenceError) as failed:
            await agent.followup(A)
        assert failed.value.kind == ("indeterminate" if flag == "indeterminate" else "persistence")
        assert failed.value.indeterminate == (flag == "indeterminate")
        assert agent.ending == "stopped"
        with pytest.raises(coxswain.asyncio.Stopped) as stopped:
            await agent.inject(B)
        assert stopped.value.kind == "stopped"
        with pytest.raises(coxswain.asyncio.Stopped):
            await agent.when_idle()
        assert (await agent.fate("a")).to_json() == "unknown"
        await agent.close()

    run(main)


def test_a_plain_failed_append_fails_its_callers_and_the_agent_goes_on() -> None:
    async def main() -> None:
        cause = LogError("disk full (injected)")
        log = Log(_1=cause)
        agent = await opened(Quiet(), log)
        with pytest.raises(PersistenceError) as failed:
            await agent.followup(A)
        assert failed.value.kind == "persistence" and failed.value.log_error is cause
        assert str(failed.value) == "disk full (injected)" and agent.ending is None
        await agent.followup(A)  # taken back (S5): it may be sent again
        await agent.when_idle()
        await agent.close()
        assert len(log.lines()) == 7

    run(main)


def test_every_agent_error_has_its_kind() -> None:
    """Decision 7: the same kind names in every language, from the session layer."""
    deep: Any = []
    for _ in range(200):
        deep = [deep]
    kinds: list[str] = []

    class Late(Host):
        context: StepContext | None = None

        async def step(self, cx: StepContext) -> StepAnswer:
            self.context = cx
            return "completed"

    async def kind(call: Awaitable[Any]) -> None:
        try:
            await call
        except Exception as error:  # noqa: BLE001 - its kind is the point
            kinds.append(getattr(error, "kind", f"no kind: {type(error).__name__}"))
        else:
            kinds.append("ok")

    async def main() -> None:
        host = Late()
        agent = await opened(host, Log(), max_id_bytes=8, max_message_bytes=1000)
        await kind(agent.inject(Message("a" * 9, 1)))
        await kind(agent.inject(Message("a", "x" * 1000)))
        await kind(agent.inject(Message("d", deep)))
        await kind(agent.inject(A))
        await kind(agent.inject(A))
        await kind(agent.send(B, "next-turn", True, expect=coxswain.Expect.idle_after(5)))
        await kind(agent.followup(B))
        await agent.when_idle()
        assert host.context is not None
        await kind(host.context.record("model/output", {}))  # its step has ended
        await agent.dispose()
        await kind(agent.inject(B))
        closed = await opened(Quiet(), Log())
        await closed.close()
        await kind(closed.inject(B))

    run(main)
    assert kinds == ["id-too-long", "message-too-large", "too-deep", "ok", "already-pending",
                     "turn-mismatch", "ok", "step-closed", "disposed", "closed"]


def test_a_refused_host_answer_fails_the_call_and_the_agent_goes_on() -> None:
    """Decision 3: a pre-step answer the session refuses (a message too deep for the log) is
    an invalid answer: the turn ends ``host-invalid-answer`` with the refusal's text; the next
    turn runs."""
    deep: Any = []
    for _ in range(200):
        deep = [deep]

    class Deep(Quiet):
        async def pre_step(self, cx: PreStepContext) -> PreStepAnswer:
            return Enter((Message(cx.messages[0].id, deep) if cx.turn == 1 else cx.messages[0],))

    async def main() -> None:
        log = Log()
        agent = await opened(Deep(), log)
        await agent.followup(A)
        await agent.when_idle()
        await agent.followup(B)
        await agent.when_idle()
        assert agent.ending is None and agent.last_turn == 2
        await agent.close()
        ends = [line for line in log.lines() if '"turn/end"' in line]
        assert ends == [
            '{"seq":4,"type":"turn/end","data":{"turn":1,"reason":{"kind":"error","error":'
            '{"message":"the host\'s preStep call gave an invalid answer: the value nests 202 '
            'levels deep; at most 124 fit in a log record","code":"host-invalid-answer"}}}}',
            '{"seq":11,"type":"turn/end","data":{"turn":2,"reason":{"kind":"completed"}}}']

    run(main)


def test_max_batch_bounds_what_one_append_of_a_file_carries(
    tmp_path: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Decision 5, 6: the callers that arrive together share an append, ``max_batch`` of them
    at most; a ``pending`` ends the batch before it and sees it durable."""
    from coxswain.asyncio import FileLog

    real, counts = FileLog.append_encoded, []

    def append(self: FileLog, data: bytes, count: int) -> None:
        counts.append(count)
        real(self, data, count)

    async def main() -> None:
        agent, _ = await Agent.open(Quiet(), tmp_path / "s.jsonl", max_batch=4)
        monkeypatch.setattr(FileLog, "append_encoded", append)
        sends = [agent.inject(Message(f"m{i}", i)) for i in range(10)]
        done: list[Any] = await asyncio.gather(*sends, agent.pending())
        nt, ns = done[-1]
        assert counts == [4, 4, 2] and nt == () and len(ns) == 10
        await agent.close()

    run(main)
