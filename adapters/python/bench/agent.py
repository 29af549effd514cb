"""The asyncio ``Agent``'s own cost, beside the same file writes done by hand, same run.

Three paths over one log file each, the sync made a no-op (``--sync`` keeps ``fdatasync``) so
the driver's cost shows rather than the disk's:

* ``inject``: one caller, ``await agent.inject(...)`` after ``await agent.inject(...)`` (one
  batch, one record per input);
* ``group``: 64 callers at once, ``asyncio.gather`` of 64 injects (group commit: one batch);
* ``turn``: ``followup`` then ``when_idle``: a whole turn of a host that completes at once.

The baseline writes one record per input to a file with ``os.write`` in a thread, as the agent's
log does, without a machine.

    python bench/agent.py [--inputs N] [--repeat R] [--sync]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import tempfile
import time
from typing import Awaitable, Callable

import coxswain._filelog as filelog
from coxswain import Message, StepAnswer
from coxswain.asyncio import Agent, Host, StepContext


class Quiet(Host):
    async def step(self, cx: StepContext) -> StepAnswer:
        return "completed"


async def timed(body: Callable[[Agent], Awaitable[int]]) -> float:
    with tempfile.TemporaryDirectory() as directory:
        agent, _ = await Agent.open(Quiet(), os.path.join(directory, "s.jsonl"))
        start = time.perf_counter()
        count = await body(agent)
        elapsed = time.perf_counter() - start
        await agent.close()
    return elapsed / count


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--inputs", type=int, default=2_000)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--sync", action="store_true")
    args = parser.parse_args()
    if not args.sync:
        filelog._sync = lambda fd: None
    n: int = args.inputs

    async def inject(agent: Agent) -> int:
        for i in range(n):
            await agent.inject(Message(f"m{i}", i))
        return n

    async def group(agent: Agent) -> int:
        rounds = max(1, n // 64)
        for r in range(rounds):
            await asyncio.gather(*(agent.inject(Message(f"m{r}.{i}", i)) for i in range(64)))
        return rounds * 64

    async def turn(agent: Agent) -> int:
        turns = max(1, n // 10)
        for i in range(turns):
            await agent.followup(Message(f"m{i}", i))
            await agent.when_idle()
        return turns

    async def baseline(_: Agent) -> int:
        with tempfile.TemporaryFile() as file:
            fd = file.fileno()
            for i in range(n):
                line = b'{"seq":%d,"type":"agent/inbox/spliced","data":{}}\n' % i
                await asyncio.to_thread(os.write, fd, line)
        return n

    def best(body: Callable[[Agent], Awaitable[int]]) -> float:
        return min(asyncio.run(timed(body)) for _ in range(args.repeat))

    base = best(baseline)
    print(f"inputs: {n} x {args.repeat} runs (best), sync {'on' if args.sync else 'off'}")
    print(f"baseline (write in a thread)  {base * 1e6:8.1f} us/input")
    for name, body, unit in (("inject", inject, "input"), ("group", group, "input"),
                             ("turn", turn, "turn")):
        took = best(body)
        print(f"agent {name:<6}  {took * 1e6:8.1f} us/{unit:<5}  ratio {took / base:6.1f}x baseline")


if __name__ == "__main__":
    main()
