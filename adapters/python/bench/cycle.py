"""The follow-up cycle through the Python binding beside a pure-Python deque baseline, same run.

One cycle, as the core's cycle bench (benches/benches/cycle.rs): followup -> claim -> preStep
answered enter -> step answered completed -> turnStopping answered done, every transition settled
(events read, then ``persisted()``): 15 outputs. The baseline does the same queue work in pure
Python: a ``collections.deque`` gets 8, 3, 2 and 2 outputs pushed and drained per input.
``native`` is the same cycle on the raw JSON layer the port uses (no typed objects). ``Agent``
is a whole turn through the asyncio ``Agent`` on a ``MemoryLog`` (no disk): ``await
agent.followup(message)`` then ``await agent.when_idle()``, a host whose step completes at once
(the same 15 outputs, the driver's Futures and the host call's task besides; on CPython 3.12+ that
task starts eagerly, and the whole turn is done inside ``followup``, no pass of the event loop);
it runs N/10 cycles a round. The second ``Agent`` row is the same turn on a ``FileLog`` with
``sync="never"`` (no fsync; each batch still written, and checked, in a worker thread the driver
task awaits: two a turn), N/100 cycles a round. ``asyncio floor`` is that turn's asyncio alone,
nothing of coxswain: the caller's delivery done in line (a ``MemoryLog`` has no IO to wait for),
one task for the step (started on the loop's next pass, as on 3.11), which sets the idle Event the
caller awaits. ``session alone`` is that turn's native work alone, no driver: its two batches
staged, sealed, appended to a ``MemoryLog`` and released, in a loop. The floor and the session
alone are what a turn through the ``Agent`` on 3.11 cannot do without. The host writes no
pre-step or turn-stopping hook: the session layer answers them inside the batches that request
them (a turn is two appends).

    python bench/cycle.py [--cycles N] [--repeat R]

Each of R rounds times every path in turn (interleaved: this VM's speed wanders between runs);
prints each path's median time per cycle and its ratio to the baseline's median.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import tempfile
import time
from collections import deque
from pathlib import Path
from typing import Any, Callable

from coxswain import Enter, Machine, Message, PreStepRequest, StepAnswer, _native
from coxswain.asyncio import Agent, Host, MemoryLog, StepContext

CYCLE_OUTPUTS = 15


def typed_cycle(machine: Machine, message: Message) -> int:
    t = machine.followup(message)
    outputs = len(t.events)
    batch: tuple[Message, ...] = ()
    for effect in t.persisted():
        outputs += 1
        if isinstance(effect, PreStepRequest):
            batch = effect.messages
    t = machine.answer_pre_step(Enter(batch))
    outputs += len(t.events) + len(t.persisted())
    t = machine.answer_step("completed")
    outputs += len(t.events) + len(t.persisted())
    t = machine.answer_turn_stopping("done")
    outputs += len(t.events) + len(t.persisted())
    return outputs


def native_cycle(machine: _native.Machine, message: dict[str, object]) -> int:
    _, outputs = machine.handle({"followup": message})
    count = len(outputs)
    batch = outputs[-1]["request"]["preStep"]["messages"]
    for answer in ({"preStep": {"enter": batch}}, {"step": "completed"}, {"turnStopping": "done"}):
        count += len(machine.handle(answer)[1])
    return count + 1  # the `Begin` effect, which has no wire form


def session_turn(session: _native.Session, log: MemoryLog, message: Message) -> int:
    """The native work of the agent's turn and nothing else: the follow-up and the step's answer
    handed to the session layer's agent loop, each committed in line to the ``MemoryLog``
    (staged, sealed, encoded, appended, released; the unwritten hooks answered by the session
    inside those batches), with no driver around them (no output carried out, no host call).
    Returns the outputs."""
    session.deliver(None, "followup", message)
    released = session.commit(log, 0.0, False)
    request = released[-2]  # the step request, before the follow-up's reply
    session.answer_word(("step", request.turn, request.step), "completed")
    return len(released) + len(session.commit(log, 0.0, False))


def baseline_cycle(queue: deque[tuple[int, int]]) -> int:
    outputs = 0
    for round_, count in enumerate((8, 3, 2, 2)):
        for i in range(count):
            queue.append((round_, i))
        while queue:
            queue.popleft()
            outputs += 1
    return outputs


class Completes(Host):
    async def step(self, cx: StepContext) -> StepAnswer:
        return "completed"


async def agent_cycle(agent: Agent, message: Message) -> None:
    await agent.followup(message)
    await agent.when_idle()


class Floor:
    """The asyncio a turn through the ``Agent`` cannot do without, and nothing else: the step's
    task (a host call runs in a task of its own) and the idle Event the caller waits on."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.loop = loop
        self.idle = asyncio.Event()
        self.idle.set()

    async def step(self) -> None:
        self.idle.set()  # the step's answer ends the turn

    async def turn(self) -> None:
        self.idle.clear()  # the follow-up, committed in line, starts the step's call
        self.loop.create_task(self.step())
        await self.idle.wait()


def timed(run: Callable[[], int], cycles: int) -> float:
    start = time.perf_counter()
    for _ in range(cycles):
        run()
    return (time.perf_counter() - start) / cycles


def agent_timed(loop: asyncio.AbstractEventLoop, agent: Agent, message: Message,
                cycles: int) -> float:
    async def run() -> float:
        start = time.perf_counter()
        for _ in range(cycles):
            await agent_cycle(agent, message)
        return (time.perf_counter() - start) / cycles

    return loop.run_until_complete(run())


def floor_timed(loop: asyncio.AbstractEventLoop, floor: Floor, cycles: int) -> float:
    async def run() -> float:
        start = time.perf_counter()
        for _ in range(cycles):
            await floor.turn()
        return (time.perf_counter() - start) / cycles

    return loop.run_until_complete(run())


def medians(paths: list[Callable[[], float]], repeat: int) -> list[float]:
    """Each path's median seconds per cycle over ``repeat`` interleaved rounds."""
    rounds: list[list[float]] = [[] for _ in paths]
    for _ in range(repeat):
        for times, run in zip(rounds, paths):
            times.append(run())
    return [statistics.median(times) for times in rounds]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cycles", type=int, default=20_000)
    parser.add_argument("--repeat", type=int, default=7)
    args = parser.parse_args()

    machine = Machine()
    message = Message("m", "hello")
    native = _native.Machine()
    raw = message.to_json()
    queue: deque[tuple[int, int]] = deque()
    # Claimed ids may be delivered again (S9): one message serves every cycle.
    assert typed_cycle(machine, message) == CYCLE_OUTPUTS
    assert native_cycle(native, raw) == CYCLE_OUTPUTS
    assert baseline_cycle(queue) == CYCLE_OUTPUTS
    loop = asyncio.new_event_loop()
    # The same message every turn: a delivery memory of 0 lets its id come again (S51).
    agent, _ = loop.run_until_complete(Agent.open(Completes(), MemoryLog(), delivery_memory=0))
    agent_cycles = max(1, args.cycles // 10)
    warm = max(1, agent_cycles // 10)
    agent_timed(loop, agent, message, warm)
    assert agent.last_turn == warm and agent.status == "idle"  # every cycle a whole turn
    scratch = tempfile.TemporaryDirectory(prefix="coxswain-cycle-")
    on_file, _ = loop.run_until_complete(Agent.open(
        Completes(), Path(scratch.name) / "cycle.jsonl", delivery_memory=0, sync="never"))
    file_cycles = max(1, args.cycles // 100)
    agent_timed(loop, on_file, message, max(1, file_cycles // 10))
    assert on_file.last_turn == max(1, file_cycles // 10) and on_file.status == "idle"
    floor = Floor(loop)
    floor_timed(loop, floor, warm)
    log = MemoryLog()
    session = _native.Session(log.resume(0, None, 0).machine, pre_step=False, turn_stopping=False)
    assert session_turn(session, log, message) == 7  # 6 effects, 1 reply

    cycles = args.cycles
    base, typed, nat, driven, filed, bare, alone = medians(
        [
            lambda: timed(lambda: baseline_cycle(queue), cycles),
            lambda: timed(lambda: typed_cycle(machine, message), cycles),
            lambda: timed(lambda: native_cycle(native, raw), cycles),
            lambda: agent_timed(loop, agent, message, agent_cycles),
            lambda: agent_timed(loop, on_file, message, file_cycles),
            lambda: floor_timed(loop, floor, agent_cycles),
            lambda: timed(lambda: session_turn(session, log, message), agent_cycles),
        ],
        args.repeat,
    )
    loop.run_until_complete(agent.dispose())
    loop.run_until_complete(on_file.dispose())
    loop.close()
    scratch.cleanup()
    print(f"cycles: {args.cycles} x {args.repeat} rounds (median), {CYCLE_OUTPUTS} outputs each")
    print(f"baseline (deque)  {base * 1e6:8.2f} us/cycle")
    print(f"coxswain typed    {typed * 1e6:8.2f} us/cycle  ratio {typed / base:6.1f}x baseline")
    print(f"coxswain native   {nat * 1e6:8.2f} us/cycle  ratio {nat / base:6.1f}x baseline")
    print(f"asyncio Agent     {driven * 1e6:8.2f} us/cycle  ratio {driven / base:6.1f}x baseline"
          f"  (MemoryLog, {agent_cycles} cycles a round)")
    print(f"asyncio Agent     {filed * 1e6:8.2f} us/cycle  ratio {filed / base:6.1f}x baseline"
          f"  (FileLog, sync never, {file_cycles} cycles a round)")
    print(f"asyncio floor     {bare * 1e6:8.2f} us/cycle  ratio {bare / base:6.1f}x baseline"
          "  (the same turn's asyncio alone)")
    print(f"session alone     {alone * 1e6:8.2f} us/cycle  ratio {alone / base:6.1f}x baseline"
          "  (the same turn's native work, no driver)")


if __name__ == "__main__":
    main()
