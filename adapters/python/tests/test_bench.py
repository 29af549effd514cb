"""The restore bench runs (a smoke run of a small log: it restores the same bytes both ways and
prints both figures and the ratio; timings are never asserted)."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

BENCH = Path(__file__).resolve().parents[1] / "bench" / "restore.py"


def test_the_restore_bench_prints_both_paths_and_their_ratio() -> None:
    done = subprocess.run(
        [sys.executable, str(BENCH), "--records", "500"], check=True, timeout=120,
        capture_output=True, text=True,
    )
    lines = done.stdout.strip().splitlines()
    assert len(lines) == 5
    assert re.fullmatch(r"restore of a 500-record log \(\d+ bytes\), medians of 7", lines[0])
    assert re.fullmatch(r"FileLog\.open \(as Agent\.open\) +\d+\.\d ms", lines[1])
    assert re.fullmatch(r"the Rust restore \(ResumePlan::from_bytes\) +\d+\.\d ms", lines[2])
    assert re.fullmatch(r"ratio FileLog\.open/Rust  \d+\.\d\dx", lines[3])
    assert re.fullmatch(r"through Python records \(the path before\) +\d+\.\d ms  ratio \d+\.\d\dx", lines[4])


def test_the_cycle_bench_prints_every_path_beside_the_deque() -> None:
    """A smoke run of ``bench/cycle.py``: every path's line, with its ratio to the baseline
    (its asserts check each path does a whole cycle: 15 outputs, a turn, 7 outputs of the
    agent loop)."""
    done = subprocess.run(
        [sys.executable, str(BENCH.with_name("cycle.py")), "--cycles", "200", "--repeat", "1"],
        check=True, timeout=120, capture_output=True, text=True,
    )
    lines = done.stdout.strip().splitlines()
    assert lines[0] == "cycles: 200 x 1 rounds (median), 15 outputs each"
    assert re.fullmatch(r"baseline \(deque\) +\d+\.\d\d us/cycle", lines[1])
    names = ["coxswain typed", "coxswain native", "asyncio Agent", "asyncio Agent",
             "asyncio floor", "session alone"]
    assert len(lines) == 2 + len(names)
    for name, line in zip(names, lines[2:]):
        assert re.match(rf"{name} +\d+\.\d\d us/cycle  ratio +\d+\.\dx baseline", line), line
    # The Agent on a MemoryLog, then on a FileLog with sync off (issue 52).
    assert lines[4].endswith("  (MemoryLog, 20 cycles a round)"), lines[4]
    assert lines[5].endswith("  (FileLog, sync never, 2 cycles a round)"), lines[5]
