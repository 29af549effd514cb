"""``python -m coxswain.port``: the Rust core behind docs/PORTS.md's line protocol.

One JSON object per line in both directions; every request gets exactly one reply, flushed; end
of stdin ends the session with status 0. Inputs and outputs pass through as the trace format's
JSON values (the core's ``into_outputs`` wire order), so nothing is re-encoded on the way.
"""

from __future__ import annotations

import json
import sys
from typing import IO, Any

from . import _native
from ._errors import InvalidInput, InvalidLog, Rejected
from ._machine import Machine
from ._types import DeliveryMemory

PROTOCOL = 1
NAME = "coxswain-python"

__all__ = ["Port", "main", "PROTOCOL", "NAME"]


def _count(given: dict[str, Any], key: str) -> int:
    value = given.get(key, 0)
    if value is None:
        return 0
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise InvalidInput(f"`{key}` is not a non-negative integer: {value!r}")
    return value


def _memory(given: dict[str, Any]) -> DeliveryMemory:
    """``given.memory`` (S51, S58): a non-negative integer (default 0) or ``"unbounded"``."""
    if given.get("memory") == "unbounded":
        return "unbounded"
    return _count(given, "memory")


def _repair(given: dict[str, Any]) -> int | None:
    """``given.repair`` (S50, S59): ``{"redeliver": A}``, its allowance checked as every log
    open checks it (``InvalidRedelivery``); ``None`` when absent."""
    repair = given.get("repair")
    if repair is None:
        return None
    if not isinstance(repair, dict) or set(repair) != {"redeliver"}:
        raise InvalidInput(f"`repair` is not {{\"redeliver\": A}}: {repair!r}")
    return _native.check_redelivery(repair["redeliver"])


def _bound(given: dict[str, Any]) -> int | None:
    """``given.maxPending`` (S55): a positive integer, or absent/``null`` for unbounded."""
    value = given.get("maxPending")
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise InvalidInput(f"`maxPending` is not a positive integer: {value!r}")
    return value


class Port:
    """One port session: answers requests, one at a time."""

    def __init__(self) -> None:
        self.machine: _native.Machine | None = None

    def reply(self, request: Any) -> dict[str, Any]:
        """The reply to one request (already parsed from its line)."""
        if not isinstance(request, dict) or len(request) != 1:
            return {"error": "a request is a JSON object with exactly one key"}
        ((key, body),) = request.items()
        try:
            if key == "hello":
                return {"hello": {"protocol": PROTOCOL, "name": NAME, "version": _native.VERSION}}
            if key == "begin":
                return self.begin(body)
            if key == "in":
                return self.input(body)
            if key == "fate":
                return self.fate(body)
            if key == "end":
                self.machine = None
                return {"ended": {}}
            return {"error": f"unknown request `{key}`"}
        except Exception as error:  # a bug or a shape the port cannot serve: never a crash
            return {"error": f"{type(error).__name__}: {error}"}

    def begin(self, body: Any) -> dict[str, Any]:
        self.machine = None
        given = body.get("given") if isinstance(body, dict) else None
        if given is None:
            self.machine = _native.Machine(0)
            return {"ready": {}}
        if not isinstance(given, dict):
            return {"error": "`given` is an object or null"}
        log = given.get("log", [])
        if log is None:
            log = []
        if not isinstance(log, list):
            return {"error": "`given.log` is not an array"}
        seed_length = _count(given, "seedLength")
        memory = _memory(given)
        max_pending = _bound(given)
        allowance = _repair(given)
        try:
            if allowance is None:
                self.machine = Machine.restore(
                    log, seed_length=seed_length, delivery_memory=memory,
                    max_pending=max_pending,
                )._native
                return {"ready": {}}
            repaired = Machine.repair(
                log, redelivery=allowance, seed_length=seed_length,
                delivery_memory=memory, max_pending=max_pending,
            )
        except InvalidLog:
            return {"rejected": "invalid-log"}
        self.machine = repaired.machine._native
        return {"ready": {"repaired": [event.to_json() for event in repaired.appended]}}

    def fate(self, body: Any) -> dict[str, Any]:
        """``{"fate": {"id": "a"}}`` (S58): ``{"fate": F}``, F the core's spelling."""
        if self.machine is None:
            return {"error": "a fate request before `begin` (or after `end`)"}
        if not isinstance(body, dict) or set(body) != {"id"} or not isinstance(body["id"], str):
            return {"error": "a fate request is {\"id\": string}"}
        return {"fate": self.machine.fate(body["id"])}

    def input(self, body: Any) -> dict[str, Any]:
        if self.machine is None:
            return {"error": "an input before `begin` (or after `end`)"}
        try:
            _found, outputs = self.machine.handle(body)
        except Rejected as rejection:
            return {"rejected": rejection.kind}
        except InvalidInput as error:
            return {"error": str(error)}
        return {"outputs": outputs}


def _json_int(text: str) -> int | float:
    """An integer of a request line as the Rust core reads JSON text (serde_json): exact within
    64 bits, a float beyond (the binding's API refuses such an ``int``; a trace's text is read
    as every port reads it, so the ports agree)."""
    n = int(text)
    return n if -(2**63) <= n < 2**64 else float(text)


def serve(requests: IO[bytes], replies: IO[str]) -> None:
    """Answers every line of ``requests`` on ``replies`` until end of input."""
    port = Port()
    for raw in requests:
        try:
            line = raw.decode("utf-8").strip()
        except UnicodeDecodeError as error:
            reply: dict[str, Any] = {"error": f"not UTF-8: {error}"}
        else:
            if not line:
                continue
            try:
                request = json.loads(line, parse_int=_json_int)
            except ValueError as error:
                reply = {"error": f"not JSON: {error}"}
            else:
                reply = port.reply(request)
        replies.write(json.dumps(reply, separators=(",", ":"), ensure_ascii=False))
        replies.write("\n")
        replies.flush()


def main() -> int:
    """Serves stdin/stdout; returns 0 at end of input."""
    out = open(sys.stdout.fileno(), "w", encoding="utf-8", closefd=False, newline="\n")
    serve(sys.stdin.buffer, out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
