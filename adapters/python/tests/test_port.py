"""`python -m coxswain.port` against docs/PORTS.md: every corpus trace replayed through the
protocol exactly as docs/FORMAT.md says (outputs compared by JSON value), plus the protocol's
own cases (hello, errors, invalid-log, exit 0 at EOF)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any, Iterator, Protocol

import pytest

from coxswain.port import Port, _json_int
from conftest import CORPUS


class Asker(Protocol):
    """One request in, its reply out: a port in a subprocess, or the same port in-process."""

    def ask(self, request: Any) -> Any: ...


class InProcess:
    """The port's `Port` in this process, each request and reply through JSON text as the
    line protocol carries them (integers read as `serve` reads them)."""

    def __init__(self) -> None:
        self.port = Port()

    def ask(self, request: Any) -> Any:
        reply = self.port.reply(json.loads(json.dumps(request), parse_int=_json_int))
        return json.loads(json.dumps(reply))


class PortProcess:
    """A port in a subprocess, one request and one reply at a time (as the runner does)."""

    def __init__(self) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "coxswain.port"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            encoding="utf-8",
        )

    def ask(self, request: Any) -> Any:
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.proc.stdin.write(json.dumps(request) + "\n")
        self.proc.stdin.flush()
        line = self.proc.stdout.readline()
        assert line.endswith("\n"), f"no reply line to {request}: {line!r}"
        reply = json.loads(line)
        assert isinstance(reply, dict) and len(reply) == 1, reply
        return reply

    def close(self) -> int:
        assert self.proc.stdin is not None
        self.proc.stdin.close()
        code = self.proc.wait(timeout=10)
        assert self.proc.stdout is not None and self.proc.stdout.read() == ""
        return code


@pytest.fixture(scope="module")
def port() -> Iterator[PortProcess]:
    process = PortProcess()
    assert process.ask({"hello": {"protocol": 1}}) == {
        "hello": {"protocol": 1, "name": "coxswain-python", "version": "0.1.0"}
    }
    yield process
    assert process.close() == 0


def lines_of(path: Path) -> list[tuple[int, str, Any]]:
    """The trace's lines (FORMAT.md): notes dropped, blank lines ignored."""
    lines = []
    for number, raw in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if not raw.strip():
            continue
        value = json.loads(raw)
        assert isinstance(value, dict) and len(value) == 1, f"{path.name}:{number}"
        ((key, body),) = value.items()
        if key != "note":
            lines.append((number, key, body))
    return lines


def replay(port: Asker, path: Path) -> int:
    """Replays one trace through the port; returns the outputs compared (and fates asked)."""
    lines = lines_of(path)
    given = None
    if lines and lines[0][1] == "given":
        given = lines.pop(0)[2]
    ready = port.ask({"begin": {"trace": path.name, "given": given}})
    if lines and lines[0][1] == "rejected":
        assert lines[0][2] == "invalid-log"
        assert ready == {"rejected": "invalid-log"}, path.name
        assert len(lines) == 1, "a trace ends after an invalid-log rejection"
        assert port.ask({"end": {}}) == {"ended": {}}
        return 0
    compared = 0
    index = 0
    if given is not None and "repair" in given:
        # S50, S59: the `out` lines right after `given` are what crash repair appended.
        repaired = []
        while index < len(lines) and lines[index][1] == "out":
            repaired.append(lines[index][2])
            index += 1
        assert ready == {"ready": {"repaired": repaired}}, path.name
        compared += len(repaired)
    else:
        assert ready == {"ready": {}}, path.name
    while index < len(lines):
        number, key, body = lines[index]
        index += 1
        if key == "fate":  # S58: the query answers exactly the line's F
            assert port.ask({"fate": {"id": body["id"]}}) == {"fate": body["is"]}, (
                f"{path.name}:{number}"
            )
            compared += 1
            continue
        assert key == "in", f"{path.name}:{number}: {key} with no input before it"
        reply = port.ask({"in": body})
        if index < len(lines) and lines[index][1] == "rejected":
            assert reply == {"rejected": lines[index][2]}, f"{path.name}:{lines[index][0]}"
            index += 1
            continue
        expected = []
        while index < len(lines) and lines[index][1] == "out":
            expected.append(lines[index][2])
            index += 1
        # JSON values compare by value (key order free) in Python's == on parsed JSON.
        assert reply == {"outputs": expected}, f"{path.name}:{number}"
        compared += len(expected)
    assert port.ask({"end": {}}) == {"ended": {}}
    return compared


def test_the_corpus_is_there() -> None:
    assert len(CORPUS) >= 30


@pytest.mark.parametrize("path", CORPUS, ids=[p.name for p in CORPUS])
def test_corpus_trace_replays_through_the_port(port: PortProcess, path: Path) -> None:
    replay(port, path)


@pytest.mark.parametrize("path", CORPUS, ids=[p.name for p in CORPUS])
def test_corpus_trace_replays_in_process(path: Path) -> None:
    replay(InProcess(), path)


def test_the_corpus_holds_section_13() -> None:
    """The §13 traces (S57 resume, S58 fate, S59 redelivery, I15, I16) are replayed too, with
    their `fate` lines and `given.repair`."""
    names = [p.name for p in CORPUS]
    assert len(CORPUS) == 248
    assert sum(n.startswith(("s57-", "s58-", "s59-", "i15-", "i16-")) for n in names) == 64
    texts = [p.read_text(encoding="utf-8") for p in CORPUS]
    assert sum('{"fate"' in t for t in texts) >= 30
    assert sum('"repair"' in t for t in texts) == 17


def test_format_md_example_outputs_are_pinned(port: PortProcess) -> None:
    assert port.ask({"begin": {"trace": "x", "given": None}}) == {"ready": {}}
    m = {"id": "a", "source": {"kind": "user"}, "content": "hi"}
    reply = port.ask({"in": {"followup": m}})
    assert reply == {
        "outputs": [
            {"event": {"type": "agent/inbox/spliced", "data": {"target": "next-turn", "start": 0, "inserted": [m], "wakeup": True}}},
            {"notify": {"type": "agent/inbox/inserted", "message": m}},
            {"notify": {"type": "agent/status", "status": "running"}},
            {"event": {"type": "turn/start", "data": {"turn": 1}}},
            {"event": {"type": "agent/inbox/spliced", "data": {"target": "next-turn", "start": 0, "removedCount": 1, "inserted": []}}},
            {"notify": {"type": "agent/inbox/claimed", "message": m, "turn": 1}},
            {"request": {"preStep": {"turn": 1, "step": 1, "messages": [m]}}},
        ]
    }
    assert port.ask({"end": {}}) == {"ended": {}}


def test_rejections_use_format_kinds(port: PortProcess) -> None:
    m = {"id": "a", "source": {"kind": "user"}, "content": "x"}
    assert port.ask({"begin": {"trace": "r", "given": None}}) == {"ready": {}}
    assert port.ask({"in": {"step": "completed"}}) == {"rejected": "unexpected-completion"}  # S4
    assert port.ask({"in": {"maintenance": "end"}}) == {"rejected": "unexpected-completion"}
    assert port.ask({"in": {"inject": m}})["outputs"][0]["event"]["type"] == "agent/inbox/spliced"
    assert port.ask({"in": {"inject": m}}) == {"rejected": "already-pending"}  # S13
    assert port.ask({"in": {"followup": {"id": "b", "source": {"kind": "user"}, "content": 1}}})
    assert port.ask({"in": {"maintenance": "begin"}}) == {"rejected": "busy"}  # S43
    assert port.ask({"end": {}}) == {"ended": {}}
    assert port.ask({"begin": {"trace": "d", "given": None}}) == {"ready": {}}
    assert port.ask({"in": {"dispose": {}}}) == {"outputs": [{"disposed": {}}]}  # S45, idle
    assert port.ask({"in": {"clear": {}}}) == {"rejected": "disposed"}
    assert port.ask({"end": {}}) == {"ended": {}}


def test_delivery_memory_from_given(port: PortProcess) -> None:
    """S52: with `memory` in `given`, a claimed id is rejected already-delivered."""
    m = {"id": "a", "source": {"kind": "user"}, "content": "x"}
    assert port.ask({"begin": {"trace": "m", "given": {"memory": 4}}}) == {"ready": {}}
    port.ask({"in": {"followup": m}})
    assert port.ask({"in": {"followup": m}}) == {"rejected": "already-delivered"}
    assert port.ask({"end": {}}) == {"ended": {}}


def test_s54_s55_s56_a_bound_from_given_and_guarded_sends(port: PortProcess) -> None:
    """S55: `maxPending` in `given` bounds the machine; S54: a guarded send's guard is checked
    after the identity checks and before the bound; S56: a reused id is a conflict."""

    def m(id: str, content: str = "x") -> dict[str, Any]:
        return {"id": id, "source": {"kind": "user"}, "content": content}

    def quiet(id: str, expect: dict[str, int]) -> dict[str, Any]:
        return {"send": {"message": m(id), "target": "next-turn", "wakeup": False, "expect": expect}}

    assert port.ask({"begin": {"trace": "b", "given": {"maxPending": 1}}}) == {"ready": {}}
    assert port.ask({"in": {"inject": m("a")}})["outputs"][1] == {
        "notify": {"type": "agent/inbox/inserted", "message": m("a")}
    }
    assert port.ask({"in": {"inject": m("b")}}) == {"rejected": "full"}
    assert len(port.ask({"in": quiet("c", {"idleAfter": 0})})["outputs"]) == 2
    assert port.ask({"in": quiet("d", {"idleAfter": 1})}) == {"rejected": "turn-mismatch"}
    assert port.ask({"in": quiet("e", {"turn": 0})}) == {"rejected": "turn-mismatch"}
    assert port.ask({"in": quiet("e", {"idleAfter": 0})}) == {"rejected": "full"}
    assert port.ask({"in": {"inject": m("a")}}) == {"rejected": "already-pending"}
    assert port.ask({"in": {"inject": m("a", "changed")}}) == {"rejected": "conflict"}
    assert port.ask({"end": {}}) == {"ended": {}}
    # Unbounded when absent or null; 0, negative or non-integer bounds are errors.
    assert port.ask({"begin": {"trace": "u", "given": {"maxPending": None}}}) == {"ready": {}}
    assert len(port.ask({"in": {"inject": m("a")}})["outputs"]) == 2
    assert len(port.ask({"in": {"inject": m("b")}})["outputs"]) == 2
    for bad in (0, -1, 1.5, "2", True):
        reply = port.ask({"begin": {"trace": "x", "given": {"maxPending": bad}}})
        assert reply == {"error": f"InvalidInput: `maxPending` is not a positive integer: {bad!r}"}
    assert port.ask({"end": {}}) == {"ended": {}}


def test_invalid_log_is_rejected_and_inputs_after_it_are_errors(port: PortProcess) -> None:
    given: dict[str, Any] = {"log": [{"data": {}}]}  # S46: no string `type`
    assert port.ask({"begin": {"trace": "i", "given": given}}) == {"rejected": "invalid-log"}
    assert "error" in port.ask({"in": {"clear": {}}})
    assert port.ask({"end": {}}) == {"ended": {}}


def test_protocol_errors_are_error_replies(port: PortProcess) -> None:
    assert "error" in port.ask({"in": {"clear": {}}})  # after end
    assert "error" in port.ask({"bogus": {}})
    assert "error" in port.ask({"a": 1, "b": 2})
    assert port.ask({"begin": {"trace": "e", "given": None}}) == {"ready": {}}
    assert "error" in port.ask({"in": {"bogus": 1}})  # unknown input shape: not a rejection
    # The machine is still usable after an error reply.
    assert port.ask({"in": {"clear": {}}}) == {"outputs": []}  # S15: clear of empty emits nothing
    assert port.ask({"end": {}}) == {"ended": {}}


def test_a_line_that_is_not_json_gets_an_error_reply() -> None:
    process = PortProcess()
    assert process.proc.stdin is not None and process.proc.stdout is not None
    process.proc.stdin.write("not json\n")
    process.proc.stdin.flush()
    assert "error" in json.loads(process.proc.stdout.readline())
    assert process.ask({"hello": {"protocol": 1}})["hello"]["protocol"] == 1
    assert process.close() == 0


def test_a_changed_trace_fails(tmp_path: Path, port: PortProcess) -> None:
    """The replayer bites: one output changed makes the comparison fail."""
    source = CORPUS[0].read_text(encoding="utf-8")
    changed = tmp_path / "changed.jsonl"
    changed.write_text(source.replace('"turn":1', '"turn":2', 1), encoding="utf-8")
    assert changed.read_text() != source
    with pytest.raises(AssertionError):
        replay(port, changed)
    port.ask({"end": {}})


def test_odd_requests_each_get_exactly_one_reply(port: PortProcess) -> None:
    """Never a crash nor a silent port: every odd request gets one `error` (or its reply)."""
    odd: list[Any] = [
        None, 1, "x", [], {}, {"in": None}, {"in": []}, {"begin": None}, {"begin": {"given": 5}},
        {"begin": {"given": {"log": 3}}}, {"begin": {"given": {"memory": -1}}},
        {"begin": {"given": {"seedLength": True}}}, {"end": None}, {"hello": None},
        {"in": {"followup": {"id": 7}}}, {"in": {"followup": {"id": "big", "content": 2**80}}},
    ]
    for request in odd:
        reply = port.ask(request)
        assert set(reply) <= {"error", "ended", "ready", "hello", "outputs", "rejected"}, reply
    assert "error" in port.ask({"begin": {"given": {"log": 3}}})
    assert port.ask({"begin": {"trace": "ok", "given": {"log": [], "seedLength": 0}}}) == {"ready": {}}
    big = port.ask({"in": {"inject": {"id": "big", "content": 2**80}}})
    assert big["outputs"][0]["event"]["data"]["inserted"][0]["content"] == float(2**80)
    assert port.ask({"end": {}}) == {"ended": {}}
