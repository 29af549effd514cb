"""Hostile input (issue 49): what the binding gets that it cannot carry, or must not trust, is
refused with a coxswain error naming what was wrong, at once, changing nothing.

A ``str`` holding a lone surrogate (what ``surrogateescape`` makes of undecodable bytes) is no
UTF-8 text: :class:`~coxswain.UnrepresentableValue` at every entry point that takes strings,
never Python's ``UnicodeEncodeError``. A log path naming a FIFO, a directory or a socket:
:class:`~coxswain.NotRegularFile` at open, before anything is read (a FIFO never blocks). A log
line longer than ``MAX_LINE_BYTES``: :class:`~coxswain.LineTooLong`, naming the path and the
line. Too deep for a log record: :class:`~coxswain.TooDeep`, with the Rust ``TooDeep``'s text.
A 1 MiB id is never printed whole in an exception's message.
"""

from __future__ import annotations

import asyncio
import os
import socket
import threading
import time
from pathlib import Path
from typing import Any, Awaitable, Callable

import pytest

import coxswain
from coxswain import (
    CorruptLog,
    EncodeError,
    Fail,
    ErrorInfo,
    LineTooLong,
    Machine,
    Message,
    NotRegularFile,
    StepAnswer,
    TooDeep,
    UnrepresentableValue,
    _native,
)
from coxswain.asyncio import Agent, Host, IdTooLong, MemoryLog, StepContext
from coxswain.log import FileLog, LogError, encode

BAD = "a\udc80b"
#: The text every lone-surrogate refusal of ``BAD`` gives.
SURROGATE = "a str holding a lone surrogate (U+DC80 at index 1) is not UTF-8 text"


def run(main: Callable[[], Awaitable[None]]) -> None:
    asyncio.run(asyncio.wait_for(main(), 20))


class Idle(Host):
    """A host whose steps complete at once."""

    async def step(self, cx: StepContext) -> StepAnswer:
        return "completed"


def nested(levels: int) -> object:
    """A value nesting ``levels`` arrays."""
    value: object = 0
    for _ in range(levels):
        value = [value]
    return value


# ----- 1. lone surrogates -----

#: A message holding ``BAD`` in each place a string goes.
BAD_MESSAGES = {
    "id": Message(BAD, "hi"),
    "content": Message("m", BAD),
    "source": Message("m", "hi", {"kind": BAD}),
    "extra": Message("m", "hi", extra={"meta": [BAD]}),
    "a key": Message("m", {BAD: 1}),
}


@pytest.mark.parametrize("where", BAD_MESSAGES)
def test_a_lone_surrogate_in_a_message_is_unrepresentable_at_every_machine_delivery(
    where: str,
) -> None:
    message = BAD_MESSAGES[where]
    m = Machine(delivery_memory=4)
    m.followup(Message("p", "pending")).persisted()
    before = (m.pending("next-turn"), m.pending("next-step"), m.phase, m.last_turn)
    deliveries: list[Callable[[], object]] = [
        lambda: m.followup(message),
        lambda: m.steer(message),
        lambda: m.inject(message),
        lambda: m.send(message, "next-turn", True),
        lambda: m.prepend("next-turn", message),
        lambda: m.replace("p", message),
        lambda: m.handle({"followup": message.to_json()}),
    ]
    for deliver in deliveries:
        with pytest.raises(UnrepresentableValue) as raised:
            deliver()
        assert str(raised.value) == SURROGATE, where
        assert isinstance(raised.value, coxswain.CoxswainError)
        assert (m.pending("next-turn"), m.pending("next-step"), m.phase, m.last_turn) == before
    assert m.inject(Message("next", "fine")).persisted()  # not left undrained


def test_a_lone_surrogate_in_an_id_or_a_target_argument_is_unrepresentable() -> None:
    m = Machine()
    calls: list[Callable[[], object]] = [
        lambda: m.remove(BAD),
        lambda: m.is_pending(BAD),
        lambda: m.remembers(BAD),
        lambda: m.send(Message("m"), BAD, True),  # type: ignore[arg-type]
    ]
    for call in calls:
        with pytest.raises(UnrepresentableValue) as raised:
            call()
        assert str(raised.value) == SURROGATE
    with pytest.raises(UnrepresentableValue) as raised:
        Machine.restore([{"type": "agent/inbox/spliced", "data": {"id": BAD}}])
    assert str(raised.value) == SURROGATE


def test_a_lone_surrogate_in_an_answer_is_unrepresentable() -> None:
    m = Machine()
    message = Message("m", "hi")
    m.followup(message).persisted()
    m.answer_pre_step(coxswain.Enter((message,))).persisted()
    with pytest.raises(UnrepresentableValue) as raised:
        m.answer_step(Fail(ErrorInfo(BAD, "host-error")))
    assert str(raised.value) == SURROGATE
    with pytest.raises(UnrepresentableValue) as raised:
        m.answer_step(BAD)  # type: ignore[arg-type]
    assert str(raised.value) == SURROGATE
    assert m.answer_step("completed").persisted()  # still outstanding, nothing changed


def test_a_lone_surrogate_in_a_record_to_write_is_unrepresentable(tmp_path: Path) -> None:
    for record in ({"type": "x/y", "data": BAD}, {"type": BAD, "data": 1}):
        with pytest.raises(UnrepresentableValue) as raised:
            encode([record])
        assert str(raised.value) == SURROGATE
    log, _ = FileLog.open(tmp_path / "s.jsonl", 0, None, 0)
    try:
        with pytest.raises(UnrepresentableValue):
            log.append([{"type": "x/y", "data": {"text": BAD}}])
        assert log.append([{"type": "x/y", "data": 1}]) == [1]  # nothing was written before
    finally:
        log.close()
    assert (tmp_path / "s.jsonl").read_bytes() == b'{"seq":1,"type":"x/y","data":1}\n'


class Answers(Host):
    """Records host events (keeping what each raised), then answers each step with the next of
    ``answers``."""

    def __init__(self, answers: list[Any]) -> None:
        self.answers = answers
        self.raised: list[BaseException] = []

    async def step(self, cx: StepContext) -> StepAnswer:
        try:
            await cx.record("model/output", {"text": BAD})
        except Exception as error:
            self.raised.append(error)
        answer: StepAnswer = self.answers.pop(0)
        return answer


def test_a_lone_surrogate_at_the_agent_is_refused_and_the_agent_goes_on() -> None:
    # Deliveries raise; a record raises to the host; an answer holding one (a word, a failure's
    # message) fails the turn as an invalid answer: no call stays outstanding (no hang).
    host = Answers([BAD, Fail(ErrorInfo(BAD, "host-error")), "completed"])
    log = MemoryLog()

    async def main() -> None:
        agent, _ = await Agent.open(host, log)
        for where, message in BAD_MESSAGES.items():
            for deliver in (agent.followup, agent.steer, agent.inject):
                with pytest.raises(UnrepresentableValue) as raised:
                    await deliver(message)
                assert str(raised.value) == SURROGATE, where
            with pytest.raises(UnrepresentableValue):
                await agent.send(message, "next-turn", True)
        for turn in ("t1", "t2", "t3"):
            await agent.followup(Message(turn, "hi"))
            await agent.when_idle()
        await agent.dispose()

    run(main)
    assert [type(error) for error in host.raised] == [UnrepresentableValue] * 3
    assert all(str(error) == SURROGATE for error in host.raised)
    ends = [r["data"]["reason"] for r in coxswain.log.parse(log.bytes()).records
            if r["type"] == "turn/end"]
    codes = [reason.get("error", {}).get("code") for reason in ends]
    assert codes == ["host-invalid-answer", "host-invalid-answer", None]
    assert SURROGATE in ends[0]["error"]["message"]


# ----- 2. a log path that is not a regular file -----


def opened(path: Path) -> BaseException:
    """What ``FileLog.open`` of ``path`` raises; it must return at once (no hang: it runs on a
    daemon thread the test waits 5 seconds for)."""
    outcome: list[BaseException | None] = []

    def open_it() -> None:
        try:
            log, _ = FileLog.open(path, 0, None, 0)
            log.close()
            outcome.append(None)
        except BaseException as error:
            outcome.append(error)

    start = time.monotonic()
    worker = threading.Thread(target=open_it, daemon=True)
    worker.start()
    worker.join(5)
    assert not worker.is_alive(), f"FileLog.open({path}) hung"
    assert time.monotonic() - start < 5, "returned promptly"
    (error,) = outcome
    assert isinstance(error, LogError), repr(error)
    return error


def test_a_fifo_a_directory_or_a_socket_is_refused_at_open(tmp_path: Path) -> None:
    fifo, directory, sock = tmp_path / "fifo", tmp_path / "dir", tmp_path / "sock"
    os.mkfifo(fifo)
    directory.mkdir()
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(str(sock))
    try:
        for path, kind in ((fifo, "a FIFO"), (directory, "a directory"), (sock, "a socket")):
            error = opened(path)
            assert type(error) is NotRegularFile
            assert str(error) == f"{path}: not a regular file ({kind})"
            # Issue 52: `kind` is the Rust log's kind; what the path names is `file_type`.
            assert (error.path, error.kind, error.file_type) == (str(path), "not-regular", kind)
            assert isinstance(error, coxswain.CoxswainError)
    finally:
        listener.close()
    # A symlink to a FIFO is the FIFO; nothing was created or changed.
    link = tmp_path / "link"
    link.symlink_to(fifo)
    assert str(opened(link)) == f"{link}: not a regular file (a FIFO)"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["dir", "fifo", "link", "sock"]


def test_the_agent_refuses_a_fifo_log_at_open(tmp_path: Path) -> None:
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)

    async def main() -> None:
        with pytest.raises(NotRegularFile) as raised:
            await Agent.open(Idle(), fifo)
        assert str(raised.value) == f"{fifo}: not a regular file (a FIFO)"

    run(main)


def test_a_missing_directory_names_the_path(tmp_path: Path) -> None:
    path = tmp_path / "nowhere" / "s.jsonl"
    error = opened(path)
    assert type(error) is LogError and error.kind == "io"
    # Issue 52: the shared Rust log's words, led by the path.
    assert str(error) == f"{path}: log i/o failed: No such file or directory (os error 2)"


# ----- 3. a line longer than the limit -----


def test_the_line_limit_is_the_rust_logs_own() -> None:
    assert _native.MAX_LINE_BYTES == 2 * 1024 * 1024


def test_a_line_longer_than_the_limit_is_refused_naming_the_path_and_line(
    tmp_path: Path,
) -> None:
    limit = _native.MAX_LINE_BYTES
    head = encode([{"type": "x/y", "data": 1}, {"type": "x/y", "data": 2}])
    for tail in (b"a" * (limit + 1), b"a" * (limit + 1) + b"\n", b"a" * (3 * limit)):
        path = tmp_path / "long.jsonl"
        path.write_bytes(head + tail)
        with pytest.raises(LineTooLong) as raised:
            FileLog.open(path, 0, None, 0)
        assert str(raised.value) == (
            f"{path}: line 3 is longer than {limit} bytes (the longest record a session writes)"
        )
        assert (raised.value.line, raised.value.path, raised.value.max) == (3, str(path), limit)
        assert isinstance(raised.value, CorruptLog)
        assert path.read_bytes() == head + tail, "a refused log is left as it was"
    # Exactly the limit is read (and refused as the line it is, not for its length); a first
    # line past it is line 1.
    path.write_bytes(b"a" * limit + b"\n")
    with pytest.raises(CorruptLog) as exact:
        FileLog.open(path, 0, None, 0)
    assert type(exact.value) is CorruptLog and exact.value.line == 1
    path.write_bytes(b" " * (limit + 1))
    with pytest.raises(LineTooLong) as first:
        FileLog.open(path, 0, None, 0)
    assert first.value.line == 1


def test_a_record_of_the_limit_reads_back(tmp_path: Path) -> None:
    limit = _native.MAX_LINE_BYTES
    envelope = len(b'{"seq":1,"type":"model/output","data":""}')
    line = encode([{"type": "model/output", "data": "a" * (limit - envelope)}])
    assert len(line) == limit + 1
    path = tmp_path / "s.jsonl"
    path.write_bytes(line)
    log, resumed = FileLog.open(path, 0, None, 0)
    log.close()
    assert resumed.records == 1


# ----- 4. too deep: one name, the Rust text -----


def deep_message(depth: int) -> Message:
    """A message nesting ``depth`` levels, its own object included."""
    return Message("deep", nested(depth - 1))


def test_the_agent_refuses_a_message_one_past_the_log_depth_with_too_deep() -> None:
    async def main() -> None:
        agent, _ = await Agent.open(Idle(), MemoryLog())
        await agent.inject(deep_message(124))  # MAX_MESSAGE_DEPTH: accepted
        with pytest.raises(TooDeep) as raised:
            await agent.inject(Message("deeper", nested(124)))
        assert str(raised.value) == (
            "the value nests 125 levels deep; at most 124 fit in a log record"
        )
        assert (raised.value.depth, raised.value.max) == (125, 124)
        assert isinstance(raised.value, EncodeError) and isinstance(raised.value, ValueError)
        await agent.close()

    run(main)


def test_a_bare_machine_takes_any_depth_and_the_log_refuses_what_it_cannot_hold() -> None:
    """Decision 8 (issue 51): a bare ``Machine`` has no depth limit in any binding; the limit is
    the log's. A message deeper than a log record holds is delivered (its events carry it), and
    writing those events is what is refused, with the Rust ``TooDeep``'s text."""
    m = Machine()
    deeper: list[Callable[[], Any]] = [
        lambda: m.followup(deep_message(125)),
        lambda: m.steer(Message("s", nested(124))),
        lambda: m.send(Message("t", nested(124)), "next-step", False),
        lambda: m.prepend("next-turn", Message("p", nested(124))),
        lambda: m.handle({"inject": Message("h", nested(124)).to_json()}),
    ]
    for deliver in deeper:
        transition = deliver()
        if hasattr(transition, "persisted"):
            records = [{"type": e.type, "data": e.data} for e in transition.events]
            transition.persisted()
        else:  # `handle`'s trace form: (events, outputs)
            records = [{"type": e["type"], "data": e["data"]} for e in transition[0]]
        with pytest.raises(TooDeep) as raised:
            encode(records)
        assert str(raised.value).startswith("the value nests ")
        assert str(raised.value).endswith(" levels deep; at most 127 fit in a log record")
    # Any depth the binding carries (257 levels), not a recursion limit, is taken.
    m.inject(deep_message(257)).persisted()
    # Past that the value is not followed (a cycle): refused as unrepresentable.
    with pytest.raises(UnrepresentableValue) as unrepresentable:
        m.inject(deep_message(258))
    assert str(unrepresentable.value) == "a value nests deeper than 256 levels"


def test_a_record_too_deep_is_too_deep_everywhere_it_is_written() -> None:
    assert encode([{"type": "x/y", "data": nested(126)}])  # MAX_DATA_DEPTH fits
    text = "the value nests 127 levels deep; at most 126 fit in a log record"
    with pytest.raises(TooDeep) as raised:
        encode([{"type": "x/y", "data": nested(127)}])
    assert str(raised.value) == "the value nests 128 levels deep; at most 127 fit in a log record"
    host_raised: list[BaseException] = []

    class Deep(Host):
        async def step(self, cx: StepContext) -> StepAnswer:
            await cx.record("x/y", nested(126))
            try:
                await cx.record("x/y", nested(127))
            except TooDeep as error:
                host_raised.append(error)
            return "completed"

    async def main() -> None:
        agent, _ = await Agent.open(Deep(), MemoryLog())
        await agent.followup(Message("m", "go"))
        await agent.when_idle()
        await agent.close()

    run(main)
    assert [str(error) for error in host_raised] == [text]


# ----- 7. a long id is not printed whole -----


def test_a_1_mib_id_is_not_printed_whole() -> None:
    long = "i" * (1 << 20)
    m = Machine()
    m.inject(Message(long, "a")).persisted()
    with pytest.raises(coxswain.AlreadyPending) as pending:
        m.inject(Message(long, "a"))
    with pytest.raises(coxswain.Conflict) as conflict:
        m.inject(Message(long, "b"))
    for error in (pending.value, conflict.value):
        assert len(str(error)) < 300 and long not in str(error)
        assert error.id == long  # the attribute keeps it whole

    async def main() -> None:
        agent, _ = await Agent.open(Idle(), MemoryLog())
        with pytest.raises(IdTooLong) as raised:
            await agent.inject(Message(long, "a"))
        assert str(raised.value) == "the id is 1048576 bytes long; at most 256 are admitted"
        await agent.close()

    run(main)
