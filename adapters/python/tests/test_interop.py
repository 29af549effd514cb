"""One log format, two implementations: a session written from Python passes ``coxswain
verify`` and resumes in Rust (``coxswain run SCRIPT --log FILE``, the tokio adapter), and a
session written by Rust resumes in Python. Needs the ``coxswain`` binary: ``$COXSWAIN_BIN``, or
``$CARGO_TARGET_DIR/debug/coxswain`` (.ci/run builds it); skipped without it unless
``COXSWAIN_REQUIRE_BIN`` is set."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
from pathlib import Path
from typing import Any

import pytest

from coxswain import Message, StepAnswer
from coxswain.asyncio import Agent, Host, StepContext

from conftest import ROOT


def find_binary() -> str | None:
    explicit = os.environ.get("COXSWAIN_BIN")
    if explicit:
        return explicit
    target = Path(os.environ.get("CARGO_TARGET_DIR", ROOT / "target"))
    candidate = target / "debug" / "coxswain"
    return str(candidate) if candidate.exists() else None


BIN = find_binary()
if BIN is None and os.environ.get("COXSWAIN_REQUIRE_BIN"):
    raise RuntimeError("COXSWAIN_REQUIRE_BIN is set but no coxswain binary was found")
pytestmark = pytest.mark.skipif(BIN is None, reason="no coxswain binary (set COXSWAIN_BIN)")


def coxswain(*args: str) -> subprocess.CompletedProcess[str]:
    assert BIN is not None
    return subprocess.run([BIN, *args], capture_output=True, text=True, timeout=60)


def records(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def script(path: Path, actions: list[Any]) -> Path:
    path.write_text(json.dumps({"stepMs": 5, "actions": actions}))
    return path


class Model(Host):
    async def step(self, cx: StepContext) -> StepAnswer:
        await cx.record("model/output", {"turn": cx.turn})
        return "completed"


class Hang(Host):
    def __init__(self) -> None:
        self.started = asyncio.Event()

    async def step(self, cx: StepContext) -> StepAnswer:
        self.started.set()
        await asyncio.Event().wait()
        return "completed"


def test_a_python_session_verifies_and_resumes_in_rust(tmp_path: Path) -> None:
    log = tmp_path / "s.jsonl"

    async def python_side() -> None:
        agent, _ = await Agent.open(Model(), log)
        await agent.followup(Message("a", "from python"))
        await agent.when_idle()
        await agent.inject(Message("b", "parked"))  # quiet: stays in NS across the resume
        await agent.close()

    asyncio.run(python_side())
    verified = coxswain("verify", str(log))
    assert verified.returncode == 0, verified.stdout + verified.stderr
    before = len(records(log))
    ran = coxswain(
        "run",
        str(script(tmp_path / "r.json", [{"followup": {"id": "c", "content": "from rust"}}, {"waitIdle": {}}])),
        "--log",
        str(log),
    )
    assert ran.returncode == 0, ran.stdout + ran.stderr
    after = records(log)
    assert [r["seq"] for r in after] == list(range(1, len(after) + 1))
    rust = after[before:]
    assert rust[1] == {"seq": before + 2, "type": "turn/start", "data": {"turn": 2}}
    entered = [r["data"]["id"] for r in rust if r["type"] == "user/message"]
    assert entered == ["b", "c"]  # S28: the parked NS item and the follow-up, one batch
    assert coxswain("verify", str(log)).returncode == 0


def test_a_rust_session_resumes_in_python(tmp_path: Path) -> None:
    log = tmp_path / "s.jsonl"
    ran = coxswain(
        "run",
        str(
            script(
                tmp_path / "r.json",
                [
                    {"followup": {"id": "a", "content": "from rust"}},
                    {"waitIdle": {}},
                    {"inject": {"id": "b", "content": "parked"}},
                ],
            )
        ),
        "--log",
        str(log),
    )
    assert ran.returncode == 0, ran.stdout + ran.stderr
    written = records(log)

    async def python_side() -> None:
        agent, recovery = await Agent.open(Model(), log)
        assert recovery.records == len(written)
        assert (recovery.last_turn, recovery.pending_next_step, recovery.closers) == (1, 1, 0)
        await agent.followup(Message("c", "from python"))
        await agent.when_idle()
        await agent.dispose()

    asyncio.run(python_side())
    after = records(log)
    assert after[: len(written)] == written
    python = after[len(written):]
    assert python[0]["seq"] == len(written) + 1
    assert {"seq": len(written) + 2, "type": "turn/start", "data": {"turn": 2}} in python
    assert [r["data"]["id"] for r in python if r["type"] == "user/message"] == ["b", "c"]
    assert coxswain("verify", str(log)).returncode == 0


def test_a_python_crash_is_repaired_by_rust(tmp_path: Path) -> None:
    """S50: a log ending inside a turn needs repair (verify exit 2); the Rust side repairs it."""
    log = tmp_path / "s.jsonl"
    host = Hang()

    async def python_side() -> None:
        agent, _ = await Agent.open(host, log)
        await agent.followup(Message("a", "x"))
        await host.started.wait()
        await agent.close()

    asyncio.run(python_side())
    assert coxswain("verify", str(log)).returncode == 2
    ran = coxswain("run", str(script(tmp_path / "r.json", [{"waitIdle": {}}])), "--log", str(log))
    assert ran.returncode == 0, ran.stdout + ran.stderr
    assert records(log)[-1]["data"] == {"turn": 1, "reason": {"kind": "interrupted"}}
    assert coxswain("verify", str(log)).returncode == 0


def test_python_encodes_records_byte_for_byte_as_rust(tmp_path: Path) -> None:
    """The record format has one owner: a Rust log re-encoded through the binding is unchanged."""
    log = tmp_path / "s.jsonl"
    ran = coxswain(
        "run",
        str(script(tmp_path / "r.json", [{"followup": {"id": "a", "content": {"k": [1, 2.5, None]}}}, {"waitIdle": {}}])),
        "--log",
        str(log),
    )
    assert ran.returncode == 0, ran.stdout + ran.stderr
    from coxswain import _native

    parsed = _native.parse_log(log.read_bytes())[0]
    encoded = _native.encode_records(1, [{"type": r["type"], "data": r["data"]} for r in parsed])
    assert encoded == log.read_bytes()
