"""The agent parity suite's Python runner (issue 51, part 5): every scenario in
tests/agents/scenarios (tests/agents/FORMAT.md) run through the asyncio ``Agent``, which must give
each step's typed outcome and the log's exact bytes the scenario gives. The tokio, threads and
Node runners hold their drivers to the same files. A thin translation: the script to the
binding's API, its outcomes and errors to ``{"ok": ...}`` / ``{"error": kind}``."""

from __future__ import annotations

import asyncio
import json
import time
from pathlib import Path
from typing import Any, Callable

import pytest

import coxswain
import coxswain.asyncio as agents
from coxswain import Enter, Machine, Message, Reject
from coxswain.asyncio import Agent, Host, MemoryLog
from coxswain.log import LogError

SCENARIOS = Path(__file__).resolve().parents[3] / "tests" / "agents" / "scenarios"
DRIVER = "python"
WITHIN_MS = 10_000


def expand(content: Any) -> Any:
    """The ``$nest`` / ``$text`` shorthands of FORMAT.md."""
    if isinstance(content, dict) and isinstance(content.get("$nest"), int):
        value: list[Any] = []
        for _ in range(content["$nest"] - 1):
            value = [value]
        return value
    if isinstance(content, dict) and isinstance(content.get("$text"), int):
        return "x" * content["$text"]
    return content


def message(m: dict[str, Any]) -> Message:
    return Message(m["id"], expand(m["content"]))


def kind_of(error: BaseException) -> str:
    """Decision 7: every agent error carries its kind name; one without is a mismatch."""
    kind = getattr(error, "kind", None)
    return kind if isinstance(kind, str) else f"no kind: {type(error).__name__}: {error}"


class ScriptedLog(MemoryLog):
    """A MemoryLog that counts the appends carrying records and fails the scripted ones."""

    def __init__(self, given: list[str], faults: list[dict[str, Any]]) -> None:
        super().__init__("".join(f"{line}\n" for line in given).encode())
        self.faults = {f["append"]: f["fault"] for f in faults}
        self.calls = self.written = 0
        self.opened = False

    def append_encoded(self, data: bytes, count: int) -> None:
        if not data or not self.opened:  # repair's closers at open are not the agent's appends
            return super().append_encoded(data, count)
        self.calls += 1
        fault = self.faults.get(self.calls)
        if fault == "fail":
            raise LogError("disk full (injected)")
        if fault == "indeterminate":
            raise LogError("eio (injected)", indeterminate=True)
        if fault == "fenced":
            raise LogError("another writer owns the session (injected)", fenced=True)
        super().append_encoded(data, count)
        self.written += 1

    def lines(self) -> list[str]:
        return [line for line in self.bytes().decode().split("\n") if line]


def scripted_host(written: dict[str, Any], release: asyncio.Event) -> Host:
    """The host the scenario's ``hooks`` describe: a ``Host`` that overrides only the hooks it
    writes (the others are ``Host``'s defaults: missing, decision 1)."""
    hooks = {**written, "step": written.get("step", ["completed"])}
    calls = {"pre_step": 0, "step": 0, "turn_stopping": 0}

    def next_answer(hook: str) -> Any:
        script = hooks[hook]
        answer = script[min(calls[hook], len(script) - 1)]
        calls[hook] += 1
        return answer

    async def pre_step(self: Host, cx: Any) -> Any:
        answer = next_answer("pre_step")
        if answer == "nothing":
            return None
        if answer == "enter-claimed":
            return Enter(cx.messages)
        if answer == "reject":
            return Reject()
        if "raise" in answer:
            raise RuntimeError(answer["raise"])
        if "enter" in answer:
            by_id = {m.id: m for m in cx.messages}
            return Enter(tuple(by_id[item] if isinstance(item, str) else message(item)
                               for item in answer["enter"]))
        raise AssertionError(f"the runner has no pre_step answer {answer!r}")

    async def step_answer(cx: Any, answer: Any) -> Any:
        if answer == "nothing":
            return None
        if answer == "until-cancelled":
            await cx.cancelled.wait()
            return "completed"
        if answer == "deaf":
            while not release.is_set():
                try:
                    await release.wait()
                except asyncio.CancelledError:
                    continue  # deaf: the cancellation is ignored
            return "completed"
        if isinstance(answer, str):
            return answer
        if "raise" in answer:
            raise RuntimeError(answer["raise"])
        if "record" in answer:
            for event in answer["record"]:
                await cx.record(event["type"], event["data"])
            return await step_answer(cx, answer["then"])
        raise AssertionError(f"the runner has no step answer {answer!r}")

    async def step(self: Host, cx: Any) -> Any:
        return await step_answer(cx, next_answer("step"))

    async def turn_stopping(self: Host, cx: Any) -> Any:
        answer = next_answer("turn_stopping")
        if answer == "nothing":
            return None
        if answer == "done":
            return "done"
        if "raise" in answer:
            raise RuntimeError(answer["raise"])
        raise AssertionError(f"the runner has no turn_stopping answer {answer!r}")

    methods: dict[str, Any] = {"step": step}
    if "pre_step" in written:
        methods["pre_step"] = pre_step
    if "turn_stopping" in written:
        methods["turn_stopping"] = turn_stopping
    scripted: Host = type("Scripted", (Host,), methods)()
    return scripted


def open_options(options: dict[str, Any]) -> dict[str, Any]:
    """The binding's keyword arguments for the scenario's options (decision 6's names)."""
    kwargs: dict[str, Any] = {"delivery_memory": 256}
    if "abort_grace_ms" in options:
        kwargs["abort_grace"] = options["abort_grace_ms"] / 1000
    if "retry_after_ms" in options:
        kwargs["retry_after"] = options["retry_after_ms"] / 1000
    if "max_batch" in options:
        kwargs["max_batch"] = options["max_batch"]
    if "max_pending" in options:
        kwargs["max_pending"] = options["max_pending"]
    return kwargs


async def outcome(call: Any, within_ms: float, value: Callable[[Any], Any] = lambda v: v) -> Any:
    try:
        got = await asyncio.wait_for(call, within_ms / 1000)
    except asyncio.TimeoutError:
        return {"error": "timeout"}
    except Exception as error:  # noqa: BLE001 - every error is an outcome
        return {"error": kind_of(error)}
    return {"ok": value(got)}


def pending_ids(pending: Any) -> dict[str, list[str]]:
    nt, ns = pending
    return {"next-turn": [p.message.id for p in nt], "next-step": [p.message.id for p in ns]}


async def run_step(agent: Agent, log: ScriptedLog, step: dict[str, Any],
                   release: asyncio.Event) -> Any:
    within = step.get("within_ms", WITHIN_MS)
    do = step["do"]
    if do == "steer" and "turn" in step:
        return await outcome(agent.steer_expecting(step["turn"], message(step["message"])), within)
    if do in ("followup", "steer", "inject"):
        return await outcome(getattr(agent, do)(message(step["message"])), within)
    if do == "remove":
        return await outcome(agent.remove(step["id"]), within)
    if do == "cancel":
        cancel = agent.cancel(coxswain.CancelCause("user"), keep_inbox=step.get("keep_inbox", False))
        return await outcome(cancel, within, lambda _: None)
    if do == "resume":
        return await outcome(agent.resume(), within)
    if do == "pending":
        return await outcome(agent.pending(), within, pending_ids)
    if do == "fate":
        return await outcome(agent.fate(step["id"]), within, lambda fate: fate.to_json())
    if do == "wait-idle":
        return await outcome(agent.when_idle(), within)
    if do == "close":
        return await outcome(agent.close(), within)
    if do == "dispose":
        return await outcome(agent.dispose(), within)
    if do == "release":
        release.set()
        return None
    if do == "sleep":
        await asyncio.sleep(step["ms"] / 1000)
        return None
    if do == "await-record":
        deadline = time.monotonic() + within / 1000
        while sum(json.loads(line)["type"] == step["type"] for line in log.lines()) < step["count"]:
            if time.monotonic() > deadline:
                return {"error": "timeout"}
            await asyncio.sleep(0.005)
        return {"ok": None}
    raise AssertionError(f"the runner has no step {do}")


def canonical(value: Any) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"))


async def run(scenario: dict[str, Any]) -> list[str]:
    """Runs one scenario; returns every mismatch (empty: it holds)."""
    mismatches: list[str] = []
    log = ScriptedLog(scenario.get("given", []), scenario.get("faults", []))
    release = asyncio.Event()
    host = scripted_host(scenario.get("hooks", {}), release)
    try:
        agent, _ = await Agent.open(host, log, **open_options(scenario.get("options", {})))
    except Exception as error:  # noqa: BLE001 - reported as the mismatch it is
        return [f"open: {kind_of(error)}: {error}"]
    log.opened = True
    try:
        for index, step in enumerate(scenario["steps"]):
            got = await run_step(agent, log, step, release)
            if "expect" in step and canonical(got) != canonical(step["expect"]):
                what = step.get("id") or step.get("message", {}).get("id", "")
                mismatches.append(f"step {index} ({step['do']} {what[:16]}): expected "
                                  f"{canonical(step['expect'])}, got {canonical(got)}")
    finally:
        release.set()
        await outcome(agent.close(), WITHIN_MS)
    lines, expected = log.lines(), scenario["log"]
    for i in range(max(len(lines), len(expected))):
        want = expected[i] if i < len(expected) else "(none)"
        got_line = lines[i] if i < len(lines) else "(none)"
        if want != got_line:
            mismatches.append(f"log line {i + 1}: expected {want}, got {got_line}")
    if "appends" in scenario and log.written != scenario["appends"]:
        mismatches.append(f"appends: expected {scenario['appends']}, got {log.written}")
    return mismatches


FILES = sorted(SCENARIOS.glob("*.json"))


def test_the_scenarios_are_there() -> None:
    assert len(FILES) >= 20, f"{len(FILES)} scenarios in {SCENARIOS}"


@pytest.mark.parametrize("path", FILES, ids=[path.stem for path in FILES])
def test_agent_parity(path: Path) -> None:
    scenario = json.loads(path.read_text())
    skip = scenario.get("skip", {}).get(DRIVER)
    if skip is None and DRIVER in scenario.get("needs", {}).get("log-faults", []):
        skip = "needs log-faults"
    if skip is not None:
        pytest.skip(skip)
    mismatches = asyncio.run(run(scenario))
    assert mismatches == [], f"scenario {path.stem}, driver {DRIVER}:\n  " + "\n  ".join(
        mismatches)


def test_d4_a_bare_machine_accepts_a_message_nesting_deeper_than_a_log_record_holds() -> None:
    """Difference 4 (decision 8): a bare Machine has no depth limit in any binding; the depth
    limit is the log's (the session's admission, scenario refused-deliveries)."""
    machine = Machine()
    transition = machine.inject(Message("deep", expand({"$nest": 130})))
    assert [event.type for event in transition.events] == ["agent/inbox/spliced"]
    transition.persisted()


def test_d5_session_is_private() -> None:
    """Difference 5 (decision 8): ``Session`` is private in both bindings."""
    assert not hasattr(coxswain, "Session")
    assert not hasattr(agents, "Session")
