"""Restoring a session of ``--records`` records (default 100000: whole follow-up turns, then
quiet injects) as the asyncio agent opens a log file (``FileLog.open``: read, resume, repair),
beside the Rust restore of the same bytes in the same process (the session layer's
``ResumePlan::from_bytes`` through ``_native.resume_log``, no Python around it) and the path
``FileLog.open`` took before it resumed from bytes (every record a Python dict and back:
``log.parse``, then ``log.restore``). Medians of 7 interleaved runs.

    python bench/restore.py [--records N]
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

from coxswain import Enter, Machine, Message, Transition, _native, log
from coxswain._filelog import FileLog


def session_log(count: int) -> bytes:
    """A log of ``count`` records: 7-record follow-up turns, then quiet injects to the count."""
    machine = Machine()
    events: list[dict[str, object]] = []

    def take(transition: Transition) -> None:
        events.extend({"type": e.type, "data": e.data} for e in transition.events)
        transition.persisted()

    i = 0
    while len(events) + 7 <= count:
        message = Message(f"m{i}", f"hello {i}")
        take(machine.followup(message))
        take(machine.answer_pre_step(Enter((message,))))
        take(machine.answer_step("completed"))
        take(machine.answer_turn_stopping("done"))
        i += 1
    i = 0
    while len(events) < count:
        take(machine.inject(Message(f"q{i}", "quiet")))
        i += 1
    return log.encode(events, first_seq=1)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--records", type=int, default=100_000)
    args = parser.parse_args()
    data = session_log(args.records)
    ours: list[float] = []
    rust: list[float] = []
    records: list[float] = []
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "session.jsonl"
        for _ in range(7):
            start = time.perf_counter()
            restored = _native.resume_log(data)
            rust.append(time.perf_counter() - start)
            assert restored[3] == args.records
            path.write_bytes(data)
            start = time.perf_counter()
            opened, resumed = FileLog.open(path, 0, None, 0)
            ours.append(time.perf_counter() - start)
            opened.close()
            assert resumed.records == args.records
            start = time.perf_counter()
            log.restore(log.parse(data).records)
            records.append(time.perf_counter() - start)
    agent, baseline = statistics.median(ours), statistics.median(rust)
    before = statistics.median(records)
    print(f"restore of a {args.records}-record log ({len(data)} bytes), medians of 7")
    print(f"FileLog.open (as Agent.open)  {agent * 1e3:8.1f} ms")
    print(f"the Rust restore (ResumePlan::from_bytes)  {baseline * 1e3:8.1f} ms")
    print(f"ratio FileLog.open/Rust  {agent / baseline:.2f}x")
    print(f"through Python records (the path before)  {before * 1e3:8.1f} ms  ratio {before / baseline:.2f}x")


if __name__ == "__main__":
    main()
