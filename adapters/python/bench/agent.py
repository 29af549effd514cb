"""The asyncio ``Agent`` on a log file, beside the same file writes done by hand, same run.

Three paths over one log file each, the sync off (the log's ``sync="never"``; ``--sync`` keeps
``fdatasync`` on every append) so the driver's cost shows rather than the disk's:

* ``inject``: one caller, ``await agent.inject(...)`` after ``await agent.inject(...)`` (one
  batch, one record per input);
* ``group``: 64 callers at once, ``asyncio.gather`` of 64 injects (group commit: one batch);
* ``turn``: ``followup`` then ``when_idle``: a whole turn of a host that completes at once.

The baseline writes one record per input to a file with ``os.write`` in a thread, as the agent's
log does, without a machine.

``--against PYTHON`` runs the same rows under another interpreter (another build of the binding,
say the one before a change) in the same run, alternating: each round runs every row here, then
there; each row's best of the rounds is printed for both, with their ratio. A binding whose
``Agent.open`` takes no ``sync`` (before issue 52) gets its sync turned off by replacing its
Python ``_sync``.

    python bench/agent.py [--inputs N] [--repeat R] [--sync] [--against PYTHON]
"""

from __future__ import annotations

import argparse
import asyncio
import inspect
import json
import os
import subprocess
import sys
import tempfile
import time
from typing import Any, Awaitable, Callable

import coxswain._filelog as filelog
from coxswain import Message, StepAnswer
from coxswain.asyncio import Agent, Host, StepContext

ROWS = ("baseline", "inject", "group", "turn")
UNITS = {"baseline": "input", "inject": "input", "group": "input", "turn": "turn"}


class Quiet(Host):
    async def step(self, cx: StepContext) -> StepAnswer:
        return "completed"


def measure(n: int, repeat: int, sync: bool) -> dict[str, float]:
    """Every row's best of ``repeat`` runs, in seconds per input (per turn for ``turn``)."""
    options: dict[str, Any] = {}
    if not sync:
        if "sync" in inspect.signature(Agent.open).parameters:
            options["sync"] = "never"
        else:  # a binding before issue 52: its Python log's sync made a no-op
            setattr(filelog, "_sync", lambda fd: None)

    async def timed(body: Callable[[Agent], Awaitable[int]]) -> float:
        with tempfile.TemporaryDirectory() as directory:
            agent, _ = await Agent.open(Quiet(), os.path.join(directory, "s.jsonl"), **options)
            start = time.perf_counter()
            count = await body(agent)
            elapsed = time.perf_counter() - start
            await agent.close()
        return elapsed / count

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
                if sync:
                    await asyncio.to_thread(os.fdatasync, fd)
        return n

    bodies = {"baseline": baseline, "inject": inject, "group": group, "turn": turn}
    return {row: min(asyncio.run(timed(bodies[row])) for _ in range(repeat)) for row in ROWS}


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--inputs", type=int, default=2_000)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--sync", action="store_true")
    parser.add_argument("--against", metavar="PYTHON",
                        help="also run every row under this interpreter, alternating")
    parser.add_argument("--json", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    n: int = args.inputs
    if args.json:
        print(json.dumps(measure(n, args.repeat, args.sync)))
        return
    print(f"inputs: {n} x {args.repeat} runs (best), sync {'on' if args.sync else 'off'}")
    if args.against is None:
        best = measure(n, args.repeat, args.sync)
        base = best["baseline"]
        print(f"baseline (write in a thread)  {base * 1e6:8.1f} us/input")
        for row in ROWS[1:]:
            print(f"agent {row:<6}  {best[row] * 1e6:8.1f} us/{UNITS[row]:<5}  "
                  f"ratio {best[row] / base:6.1f}x baseline")
        return
    # Alternating rounds: one run of every row here, then one there, `repeat` times.
    command = [args.against, os.path.abspath(__file__), "--inputs", str(n), "--repeat", "1",
               "--json"] + (["--sync"] if args.sync else [])
    here: dict[str, float] = {}
    there: dict[str, float] = {}
    for _ in range(args.repeat):
        for row, took in measure(n, 1, args.sync).items():
            here[row] = min(here.get(row, took), took)
        done = subprocess.run(command, check=True, capture_output=True, text=True)
        for row, took in json.loads(done.stdout).items():
            there[row] = min(there.get(row, took), took)
    print(f"this: {sys.executable}; against: {args.against} ({args.repeat} alternating rounds)")
    for row in ROWS:
        name = "baseline (write in a thread)" if row == "baseline" else f"agent {row}"
        print(f"{name:<28}  {here[row] * 1e6:8.1f} us/{UNITS[row]:<5}  against "
              f"{there[row] * 1e6:8.1f}  ratio {here[row] / there[row]:5.2f}x")


if __name__ == "__main__":
    main()
