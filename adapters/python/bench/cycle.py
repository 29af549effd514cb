"""The follow-up cycle through the Python binding beside a pure-Python deque baseline, same run.

One cycle, as the core's cycle bench (benches/benches/cycle.rs): followup -> claim -> preStep
answered enter -> step answered completed -> turnStopping answered done, every transition settled
(events read, then ``persisted()``): 15 outputs. The baseline does the same queue work in pure
Python: a ``collections.deque`` gets 8, 3, 2 and 2 outputs pushed and drained per input.
``native`` is the same cycle on the raw JSON layer the port uses (no typed objects).

    python bench/cycle.py [--cycles N] [--repeat R]

Each of R rounds times every path in turn (interleaved: this VM's speed wanders between runs);
prints each path's median time per cycle and its ratio to the baseline's median.
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections import deque
from typing import Callable

from coxswain import Enter, Machine, Message, PreStepRequest, _native

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


def baseline_cycle(queue: deque[tuple[int, int]]) -> int:
    outputs = 0
    for round_, count in enumerate((8, 3, 2, 2)):
        for i in range(count):
            queue.append((round_, i))
        while queue:
            queue.popleft()
            outputs += 1
    return outputs


def timed(run: Callable[[], int], cycles: int) -> float:
    start = time.perf_counter()
    for _ in range(cycles):
        run()
    return (time.perf_counter() - start) / cycles


def medians(paths: list[Callable[[], int]], cycles: int, repeat: int) -> list[float]:
    """Each path's median seconds per cycle over ``repeat`` interleaved rounds."""
    rounds: list[list[float]] = [[] for _ in paths]
    for _ in range(repeat):
        for times, run in zip(rounds, paths):
            times.append(timed(run, cycles))
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

    base, typed, nat = medians(
        [
            lambda: baseline_cycle(queue),
            lambda: typed_cycle(machine, message),
            lambda: native_cycle(native, raw),
        ],
        args.cycles,
        args.repeat,
    )
    print(f"cycles: {args.cycles} x {args.repeat} rounds (median), {CYCLE_OUTPUTS} outputs each")
    print(f"baseline (deque)  {base * 1e6:8.2f} us/cycle")
    print(f"coxswain typed    {typed * 1e6:8.2f} us/cycle  ratio {typed / base:6.1f}x baseline")
    print(f"coxswain native   {nat * 1e6:8.2f} us/cycle  ratio {nat / base:6.1f}x baseline")


if __name__ == "__main__":
    main()
