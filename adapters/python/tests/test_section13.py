"""SPEC §13 in the Python binding: ``resume`` (S57), ``fate`` (S58), crash repair's redelivery
(S59, I16) with its allowance checked at every log open, ``resume_on_open``, and the port's
``fate`` request and ``given.repair``. The corpus's §13 traces replay in ``test_port.py``."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any, Awaitable, Callable

import pytest

from coxswain import (
    Disposed,
    Enter,
    Event,
    Fate,
    InvalidRedelivery,
    Machine,
    Message,
    InvalidInput,
    StepAnswer,
    UnrepresentableValue,
    log,
)
from coxswain.asyncio import Agent, FileLog, Host, MemoryLog, PreStepContext, StepContext
from coxswain.port import Port

M1 = Message("m1", "hi")
M2 = Message("m2", "more")

#: The messages' record form, as the log and the events carry them.
J1 = {"id": "m1", "source": {"kind": "user"}, "content": "hi"}
J2 = {"id": "m2", "source": {"kind": "user"}, "content": "more"}


def run(main: Callable[[], Awaitable[None]]) -> None:
    asyncio.run(asyncio.wait_for(main(), 20))


def settle(transition: Any) -> list[dict[str, Any]]:
    """The transition's events as log records; it is settled (persisted)."""
    records = [event.record() for event in transition.events]
    transition.persisted()
    return records


def crashed_log() -> list[dict[str, Any]]:
    """A log cut off while turn 1's pre-step request was outstanding: it claimed m1 (waking,
    from NT) and m2 (quiet, from NS), and no model call saw either (S59)."""
    machine = Machine()
    records = settle(machine.inject(M2))
    records += settle(machine.followup(M1))
    outstanding = machine.outstanding()
    assert outstanding is not None and outstanding.kind == "preStep"
    return records


#: What crash repair with A = 1 appends to `crashed_log()`, exactly (S50, S59): the closer, then
#: one splice per message, in claim order (S28: NS items, then the NT item), each at the front
#: of the list it was claimed from, `wakeup` as it was, `redelivery: 1`.
REPAIRED_A1 = [
    {"type": "turn/end", "data": {"turn": 1, "reason": {"kind": "interrupted"}}},
    {"type": "agent/inbox/spliced",
     "data": {"target": "next-step", "start": 0, "inserted": [J2], "redelivery": 1}},
    {"type": "agent/inbox/spliced",
     "data": {"target": "next-turn", "start": 0, "inserted": [J1], "wakeup": True,
              "redelivery": 1}},
]


# ----- Machine: resume (S57) and fate (S58) -----


def test_s58_fate_through_a_turn_and_after_dispose() -> None:
    machine = Machine(delivery_memory=8)
    assert machine.fate("m1") == Fate("unknown")  # never seen: an answer, not an error
    settle(machine.inject(M2))
    assert machine.fate("m2") == Fate({"pending": "next-step"})
    assert machine.fate("m2").kind == "pending" and machine.fate("m2").target == "next-step"
    settle(machine.followup(M1))  # turn 1 claims both
    claimed = machine.fate("m1")
    assert claimed == Fate({"claimed": {"turn": 1}})
    assert (claimed.kind, claimed.turn, claimed.step, claimed.end) == ("claimed", 1, None, None)
    settle(machine.answer_pre_step(Enter((M1,))))  # the host drops m2 (S29)
    settle(machine.answer_step("completed"))
    settle(machine.answer_turn_stopping("done"))
    assert machine.fate("m1").to_json() == {"claimed": {"turn": 1, "step": 1, "end": "completed"}}
    assert machine.fate("m2").to_json() == {"claimed": {"turn": 1, "end": "completed"}}
    settle(machine.inject(Message("m3", "x")))
    settle(machine.clear())
    assert machine.fate("m3") == Fate("discarded")
    assert machine.fate("m3").kind == "discarded" and machine.fate("m3").turn is None
    settle(machine.dispose())
    # A query: answered once disposed too, and it changes nothing.
    assert machine.fate("m1").to_json() == {"claimed": {"turn": 1, "step": 1, "end": "completed"}}
    assert machine.fate("zz") == Fate("unknown")
    assert len({machine.fate("m1"), Fate({"claimed": {"turn": 1, "step": 1, "end": "completed"}})}) == 1


def test_s57_resume_wakes_parked_work_and_is_rejected_only_disposed() -> None:
    restored = Machine.restore(settle(Machine().inject(M2)) + [
        {"type": "agent/inbox/spliced",
         "data": {"target": "next-turn", "start": 0, "inserted": [J1], "wakeup": True}},
    ])
    assert restored.status == "idle"  # parked (S48)
    wire = restored.resume().into_outputs()
    assert [o.to_json() for o in wire] == [
        {"notify": {"type": "agent/status", "status": "running"}},
        {"event": {"type": "turn/start", "data": {"turn": 1}}},
        {"event": {"type": "agent/inbox/spliced",
                   "data": {"target": "next-step", "start": 0, "removedCount": 1, "inserted": []}}},
        {"event": {"type": "agent/inbox/spliced",
                   "data": {"target": "next-turn", "start": 0, "removedCount": 1, "inserted": []}}},
        {"notify": {"type": "agent/inbox/claimed", "message": J2, "turn": 1}},
        {"notify": {"type": "agent/inbox/claimed", "message": J1, "turn": 1}},
        {"request": {"preStep": {"turn": 1, "step": 1, "messages": [J2, J1]}}},
    ]
    assert restored.resume().into_outputs() == ()  # running: nothing, no latch
    assert not restored.is_wake_latched()
    quiet = Machine()
    settle(quiet.inject(M2))
    assert quiet.resume().into_outputs() == () and quiet.status == "idle"  # S19
    settle(quiet.dispose())
    with pytest.raises(Disposed) as refused:
        quiet.resume()
    assert refused.value.kind == "disposed"


def test_s58_unbounded_memory_is_the_cores_and_reads_back() -> None:
    with pytest.raises(InvalidInput) as bad:
        Machine(delivery_memory="forever")  # type: ignore[arg-type]
    assert str(bad.value) == 'delivery_memory is a number of ids or "unbounded": \'forever\''

    machine = Machine.restore([], delivery_memory="unbounded")
    assert machine.delivery_memory == "unbounded"
    assert Machine(delivery_memory=3).delivery_memory == 3
    for n in range(300):
        settle(machine.inject(Message(f"q{n}", "x")))
        settle(machine.clear())
    assert machine.fate("q0") == Fate("discarded")  # never forgotten
    bounded = Machine(2)
    for n in range(3):
        settle(bounded.inject(Message(f"q{n}", "x")))
        settle(bounded.clear())
    assert bounded.fate("q0") == Fate("unknown")  # forgotten by capacity (S51)


# ----- crash repair with redelivery (S50, S59, I16) -----


def test_s59_repair_with_allowance_1_appends_exactly_these_records() -> None:
    repaired = Machine.repair(crashed_log(), redelivery=1, delivery_memory="unbounded")
    assert [event.record() for event in repaired.appended] == REPAIRED_A1
    assert repaired.interrupted_turn == 1
    machine = repaired.machine
    # I16: both pending again, parked (S48), their fates pending.
    assert machine.status == "idle"
    assert [p.message.id for p in machine.pending("next-turn")] == ["m1"]
    assert [(p.message.id, p.waking) for p in machine.pending("next-step")] == [("m2", False)]
    assert machine.fate("m1") == Fate({"pending": "next-turn"})
    # A second crash in the redelivered turn: A = 1 is spent, the closer alone.
    log_so_far = crashed_log() + REPAIRED_A1
    log_so_far += settle(machine.resume())
    again = Machine.repair(log_so_far, redelivery=1, delivery_memory="unbounded")
    assert [event.record() for event in again.appended] == [
        {"type": "turn/end", "data": {"turn": 2, "reason": {"kind": "interrupted"}}},
    ]
    assert again.machine.fate("m1").to_json() == {"claimed": {"turn": 2, "end": "interrupted"}}


def test_s50_default_allowance_is_the_closer_alone() -> None:
    repaired = Machine.repair(crashed_log(), delivery_memory=4)
    assert [event.record() for event in repaired.appended] == REPAIRED_A1[:1]
    assert repaired.machine.fate("m1").to_json() == {"claimed": {"turn": 1, "end": "interrupted"}}
    assert Machine.repair(crashed_log() + REPAIRED_A1[:1], redelivery=5).appended == ()


def test_s59_a_redelivery_splice_round_trips_through_the_typed_events() -> None:
    data = log.encode(crashed_log())
    restored = log.restore(log.parse(data).records, redelivery=1)
    assert restored.redelivered == 2 and restored.interrupted_turn == 1
    splice = restored.closers[2]
    assert isinstance(splice, Event)
    assert splice.data == REPAIRED_A1[2]["data"]  # the typed event keeps `redelivery`
    assert splice.data["redelivery"] == 1
    # Written and read back, the record is the same; restoring it gives the same machine.
    written = log.encode([c.record() for c in restored.closers], first_seq=5)
    assert [{"type": r["type"], "data": r["data"]} for r in log.parse(written).records] == REPAIRED_A1
    machine = Machine.restore(crashed_log() + [c.record() for c in restored.closers])
    assert machine.fate("m1") == Fate({"pending": "next-turn"})
    assert [p.message.id for p in machine.pending("next-step")] == ["m2"]


# ----- the allowance is checked at every open (S59) -----

BAD_ALLOWANCES: list[tuple[object, str]] = [
    (-1, "the redelivery allowance -1 is negative (S59)"),
    (True, "the redelivery allowance True is not an integer (S59)"),
    (1.0, "the redelivery allowance 1.0 is not an integer (S59)"),
    ("1", "the redelivery allowance '1' is not an integer (S59)"),
    (None, "the redelivery allowance None is not an integer (S59)"),
    (1001, "the redelivery allowance 1001 is above 1000 (S59)"),
    (2**64, "the redelivery allowance 18446744073709551616 is above 1000 (S59)"),
    (-(2**70), "the redelivery allowance -1180591620717411303424 is negative (S59)"),
]


@pytest.mark.parametrize("bad,text", BAD_ALLOWANCES, ids=[repr(b) for b, _ in BAD_ALLOWANCES])
def test_s59_a_bad_allowance_is_refused_at_every_open_naming_it(
    tmp_path: Path, bad: Any, text: str
) -> None:
    def refused(call: Callable[[], object]) -> InvalidRedelivery:
        with pytest.raises(InvalidRedelivery) as caught:
            call()
        assert str(caught.value) == text
        assert caught.value.value is bad
        assert isinstance(caught.value, ValueError)
        return caught.value

    refused(lambda: Machine.repair(crashed_log(), redelivery=bad))
    refused(lambda: log.restore(crashed_log(), redelivery=bad))
    # A file log: nothing read or written, a missing file not even created.
    missing = tmp_path / "missing.jsonl"
    refused(lambda: FileLog.open(missing, 0, None, 0, bad))
    assert not missing.exists()
    crashed = tmp_path / "crashed.jsonl"
    crashed.write_bytes(log.encode(crashed_log()) + b'{"seq":4,"ty')  # a torn tail too
    before = crashed.read_bytes()
    refused(lambda: FileLog.open(crashed, 0, None, 0, bad))
    assert crashed.read_bytes() == before
    # A memory log: not taken, not changed.
    memory = MemoryLog(before)
    refused(lambda: memory.resume(0, None, 0, bad))
    assert memory.bytes() == before
    memory.resume(0, None, 0)  # not held by the refused open

    async def main() -> None:
        with pytest.raises(InvalidRedelivery) as caught:
            await Agent.open(Seen(), crashed, redelivery=bad)
        assert str(caught.value) == text
        with pytest.raises(InvalidRedelivery):
            await Agent.open(Seen(), MemoryLog(before), redelivery=bad)

    run(main)
    assert crashed.read_bytes() == before


def test_s59_the_bound_itself_is_accepted() -> None:
    assert [e.record() for e in Machine.repair(crashed_log(), redelivery=1000).appended] == REPAIRED_A1
    assert Machine.repair(crashed_log(), redelivery=0).appended[0].record() == REPAIRED_A1[0]


# ----- the asyncio agent -----


class Seen(Host):
    """Records the messages each pre-step request handed it, and completes every step."""

    def __init__(self) -> None:
        self.seen: list[list[str]] = []

    async def pre_step(self, cx: PreStepContext) -> Any:
        self.seen.append([m.id for m in cx.messages])
        return await super().pre_step(cx)

    async def step(self, cx: StepContext) -> StepAnswer:
        return "completed"


def records(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def test_resume_on_open_runs_the_redelivered_work(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    path.write_bytes(log.encode(crashed_log()))

    async def main() -> None:
        host = Seen()
        agent, recovery = await Agent.open(host, path, redelivery=1, resume_on_open=True)
        assert (recovery.interrupted_turn, recovery.closers, recovery.redelivered) == (1, 3, 2)
        await agent.when_idle()
        assert host.seen == [["m2", "m1"]]  # run once, in claim order, with no send
        assert await agent.fate("m1") == Fate({"claimed": {"turn": 2, "step": 1, "end": "completed"}})
        await agent.dispose()
        # S58: answered after dispose, from the machine as it ended.
        assert await agent.fate("m2") == Fate({"claimed": {"turn": 2, "step": 1, "end": "completed"}})
        assert await agent.fate("nope") == Fate("unknown")

    run(main)
    written = [{"type": r["type"], "data": r["data"]} for r in records(path)]
    assert written[:5] == crashed_log() and written[5:8] == REPAIRED_A1
    assert [r["seq"] for r in records(path)][:9] == list(range(1, 10))
    assert written[8] == {"type": "turn/start", "data": {"turn": 2}}


def test_without_resume_on_open_redelivered_work_parks_until_resume(tmp_path: Path) -> None:
    memory = MemoryLog(log.encode(crashed_log()))

    async def main() -> None:
        host = Seen()
        agent, recovery = await Agent.open(host, memory, redelivery=1)
        assert recovery.redelivered == 2 and recovery.pending_next_turn == 1
        await agent.when_idle()
        assert host.seen == [] and agent.status == "idle"  # S48: parked
        assert await agent.fate("m1") == Fate({"pending": "next-turn"})
        await agent.resume()  # S57
        await agent.when_idle()
        assert host.seen == [["m2", "m1"]]
        await agent.resume()  # nothing parked: nothing happens
        # A bad id is the caller's error; the agent goes on.
        with pytest.raises(TypeError):
            await agent.fate(3)  # type: ignore[arg-type]
        with pytest.raises(UnrepresentableValue, match="lone surrogate"):
            await agent.fate("a\udc80")
        assert await agent.fate("m2") == Fate({"claimed": {"turn": 2, "step": 1, "end": "completed"}})
        await agent.close()
        assert await agent.fate("m1") == Fate({"claimed": {"turn": 2, "step": 1, "end": "completed"}})

    run(main)


def test_default_options_are_s50_unchanged(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    path.write_bytes(log.encode(crashed_log()))

    async def main() -> None:
        host = Seen()
        agent, recovery = await Agent.open(host, path, resume_on_open=True)
        assert (recovery.closers, recovery.redelivered) == (1, 0)
        await agent.when_idle()
        assert host.seen == []  # nothing to resume: the claims are gone (S50)
        assert await agent.fate("m1") == Fate({"claimed": {"turn": 1, "end": "interrupted"}})
        await agent.dispose()
        with pytest.raises(Disposed):
            await agent.resume()

    run(main)
    assert [r["type"] for r in records(path)][5:] == ["turn/end"]


# ----- the port (docs/PORTS.md additions) -----


def test_port_fate_request_and_given_repair() -> None:
    port = Port()
    assert port.reply({"fate": {"id": "a"}}) == {
        "error": "a fate request before `begin` (or after `end`)"
    }
    given = {"log": crashed_log(), "memory": "unbounded", "repair": {"redeliver": 1}}
    ready = port.reply({"begin": {"trace": "t", "given": given}})
    assert ready == {"ready": {"repaired": [{"event": r} for r in REPAIRED_A1]}}
    assert port.reply({"fate": {"id": "m1"}}) == {"fate": {"pending": "next-turn"}}
    assert port.reply({"fate": {"id": "zz"}}) == {"fate": "unknown"}
    assert port.reply({"fate": {"id": 3}}) == {"error": 'a fate request is {"id": string}'}
    assert port.reply({"in": {"resume": {}}})["outputs"][1] == {
        "event": {"type": "turn/start", "data": {"turn": 2}}
    }
    assert port.reply({"end": {}}) == {"ended": {}}
    # A balanced log: repair appends nothing, an empty list.
    balanced = {"log": [], "repair": {"redeliver": 0}}
    assert port.reply({"begin": {"trace": "b", "given": balanced}}) == {"ready": {"repaired": []}}
    # Without `repair`: `ready` as before.
    assert port.reply({"begin": {"trace": "p", "given": {"log": []}}}) == {"ready": {}}
    for bad, text in BAD_ALLOWANCES:
        reply = port.reply({"begin": {"given": {"log": [], "repair": {"redeliver": bad}}}})
        assert reply == {"error": f"InvalidRedelivery: {text}"}
    assert port.reply({"begin": {"given": {"repair": {"redeliver": 1, "x": 2}}}}) == {
        "error": "InvalidInput: `repair` is not {\"redeliver\": A}: {'redeliver': 1, 'x': 2}"
    }
    assert port.reply({"fate": {"id": "a"}})["error"].startswith("a fate request before")
    invalid = {"log": [{"data": {}}], "repair": {"redeliver": 1}}
    assert port.reply({"begin": {"given": invalid}}) == {"rejected": "invalid-log"}
