"""Issue 30: a log file changed behind its writer's back (cut in place as ``copytruncate`` or
``: > session.jsonl`` do, appended to or overwritten at its end by a writer that ignores the
lock, removed or replaced) is detected before anything more is acknowledged; a cut-back never
extends the file and one that finds it shorter is indeterminate; the error that stopped an agent
is raised only once ``ending`` and ``when_idle`` say it stopped."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path
from typing import Any, Awaitable, Callable, Coroutine

import pytest

import coxswain._filelog as filelog
from coxswain import CorruptLog, Message, StepAnswer, log
from coxswain.asyncio import (
    Agent,
    FileLog,
    Host,
    LogError,
    LogReplaced,
    LogTampered,
    LogTruncated,
    PersistenceError,
    StepContext,
    Stopped,
)

A, B, C, D = (Message(i, "hi") for i in "abcd")

#: The history's length: ``followup(a)``'s turn (7 records) and ``inject(b)``.
HISTORY = 736


class Model(Host):
    async def step(self, cx: StepContext) -> StepAnswer:
        return "completed"


def run(main: Callable[[], Awaitable[None]]) -> None:
    asyncio.run(asyncio.wait_for(main(), 20))


async def history(path: Path) -> Agent:
    """The issue's steps 1 and 2: ``followup(a)``, ``when_idle()``, ``inject(b)``."""
    agent, _ = await Agent.open(Model(), path)
    await agent.followup(A)
    await agent.when_idle()
    await agent.inject(B)
    assert path.stat().st_size == HISTORY
    return agent


def stopped_at_once(agent: Agent) -> None:
    """``ending`` says ``stopped`` and ``when_idle`` raises ``Stopped`` without waiting."""
    assert agent.ending == "stopped"
    waiting: Coroutine[Any, Any, None] = agent.when_idle()
    with pytest.raises(Stopped):
        waiting.send(None)


def refused(error: BaseException) -> LogError:
    """The log error of a ``PersistenceError`` that is not indeterminate."""
    assert isinstance(error, PersistenceError) and not error.indeterminate, repr(error)
    assert error.log_error is not None
    return error.log_error


def test_a_log_truncated_to_0_acknowledges_nothing_more(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"

    async def main() -> None:
        agent = await history(path)
        os.truncate(path, 0)  # another handle: the same inode
        with pytest.raises(PersistenceError) as caught:
            await agent.inject(C)
        error = refused(caught.value)
        assert isinstance(error, LogTruncated)
        assert (error.path, error.expected, error.found) == (str(path), HISTORY, 0)
        assert str(caught.value) == (
            f"the log file {path} was truncated: it holds 0 bytes where this log wrote {HISTORY}"
        )
        stopped_at_once(agent)
        with pytest.raises(Stopped):
            await agent.followup(D)
        with pytest.raises(LogTruncated) as closed:
            await agent.close()
        assert (closed.value.expected, closed.value.found) == (HISTORY, 0)

    run(main)
    assert path.read_bytes() == b""


def test_a_log_truncated_to_300_bytes_acknowledges_nothing_more(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"

    async def main() -> None:
        agent = await history(path)
        os.truncate(path, 300)
        with pytest.raises(PersistenceError) as caught:
            await agent.inject(C)
        error = refused(caught.value)
        assert isinstance(error, LogTruncated) and (error.expected, error.found) == (HISTORY, 300)
        stopped_at_once(agent)
        with pytest.raises(LogTruncated):
            await agent.close()

    run(main)
    assert path.stat().st_size == 300


def test_a_log_appended_to_by_another_writer_acknowledges_nothing_more(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"

    async def main() -> None:
        agent = await history(path)
        with open(path, "ab") as other:  # echo hello >> s.jsonl
            other.write(b"hello\n")
        with pytest.raises(PersistenceError) as caught:
            await agent.inject(C)
        error = refused(caught.value)
        assert isinstance(error, LogTampered)
        assert (error.expected, error.found) == (HISTORY, HISTORY + 6)
        assert str(error) == (
            f"the log file {path} was written by another writer: it holds {HISTORY + 6} bytes "
            f"where this log wrote {HISTORY}"
        )
        stopped_at_once(agent)
        with pytest.raises(LogTampered):
            await agent.close()

    run(main)
    assert path.read_bytes().endswith(b"}\nhello\n") and path.stat().st_size == HISTORY + 6


def test_a_log_overwritten_at_its_end_acknowledges_nothing_more(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"

    async def main() -> None:
        agent = await history(path)
        fd = os.open(path, os.O_WRONLY)
        os.pwrite(fd, b"XX", HISTORY - 4)
        os.close(fd)
        with pytest.raises(PersistenceError) as caught:
            await agent.inject(C)
        error = refused(caught.value)
        assert isinstance(error, LogTampered) and (error.expected, error.found) == (HISTORY, HISTORY)
        assert "its last bytes are not the ones this log wrote" in str(error)
        stopped_at_once(agent)
        with pytest.raises(LogTampered):
            await agent.close()

    run(main)


def test_a_replaced_log_acknowledges_nothing_more(tmp_path: Path) -> None:
    """Removed, renamed or replaced (as the Rust FileLog detects): ``LogReplaced``."""
    path = tmp_path / "s.jsonl"

    async def main() -> None:
        agent = await history(path)
        (tmp_path / "other").write_bytes(b"")
        os.rename(tmp_path / "other", path)
        with pytest.raises(PersistenceError) as caught:
            await agent.inject(C)
        error = refused(caught.value)
        assert isinstance(error, LogReplaced) and error.path == str(path)
        stopped_at_once(agent)
        with pytest.raises(LogReplaced):
            await agent.close()

    run(main)
    assert path.read_bytes() == b""


def test_an_overwrite_in_the_middle_is_not_detected(tmp_path: Path) -> None:
    """What the check does not see: bytes overwritten before the last 32 the log wrote."""
    path = tmp_path / "s.jsonl"

    async def main() -> None:
        agent = await history(path)
        fd = os.open(path, os.O_WRONLY)
        os.pwrite(fd, b"XX", 0)
        os.close(fd)
        await agent.inject(C)
        await agent.close()

    run(main)
    with pytest.raises(CorruptLog) as caught:
        log.parse(path.read_bytes())
    assert caught.value.line == 1


# A write that another writer races (the log's own write, patched) --------------------------------


def opened(path: Path) -> FileLog:
    """A FileLog holding the history, read back and repaired, as an agent opens it."""
    run(lambda: history_closed(path))
    file = FileLog(path)
    file.repair_tail(file.read_back())
    return file


async def history_closed(path: Path) -> None:
    agent = await history(path)
    await agent.close()


def racing(monkeypatch: pytest.MonkeyPatch, size: int, budget: int | None) -> None:
    """The log's next write first sets the file to ``size`` bytes (another writer's truncation
    or append landing after the log's check), then writes ``budget`` bytes and fails (``None``:
    writes all)."""
    real = FileLog._write_all

    def write(fd: int, data: bytes) -> None:
        monkeypatch.setattr(FileLog, "_write_all", staticmethod(real))
        os.truncate(fd, size)
        if budget is None:
            real(fd, data)
            return
        real(fd, data[:budget])
        raise OSError("write failed (injected)")

    monkeypatch.setattr(FileLog, "_write_all", staticmethod(write))


def records(n: int) -> list[dict[str, object]]:
    return [{"type": "model/output", "data": {"n": i}} for i in range(n)]


def test_the_issue_step_5_a_failing_append_after_a_truncation_writes_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Truncated to 0, then an append whose write would fail: found before the write, so
    nothing is written and nothing cut back; the file is not extended."""
    path = tmp_path / "s.jsonl"
    file = opened(path)
    os.truncate(path, 0)
    racing(monkeypatch, 0, 10)
    with pytest.raises(LogTruncated) as caught:
        file.append(records(1))
    assert (caught.value.expected, caught.value.found) == (HISTORY, 0)
    assert path.read_bytes() == b""
    assert FileLog._write_all.__name__ == "write"  # never called


def test_a_cut_back_after_a_truncation_is_indeterminate_and_never_extends_the_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "s.jsonl"
    file = opened(path)
    racing(monkeypatch, 0, 10)
    with pytest.raises(LogError) as caught:
        file.append(records(1))
    error = caught.value
    assert error.indeterminate and str(error.__cause__) == "write failed (injected)"
    assert isinstance(error.undo, LogTruncated)
    assert (error.undo.expected, error.undo.found) == (HISTORY, 10)
    assert path.read_bytes() == b'{"seq":9,"'


def test_a_truncation_during_an_append_is_found_before_it_is_acknowledged(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "s.jsonl"
    file = opened(path)
    racing(monkeypatch, 0, None)
    with pytest.raises(LogError) as caught:
        file.append(records(1))
    error = caught.value
    written = path.stat().st_size
    assert written == 47
    assert error.indeterminate and isinstance(error.__cause__, LogTruncated)
    assert (error.__cause__.expected, error.__cause__.found) == (HISTORY + written, written)
    assert isinstance(error.undo, LogTruncated)
    assert (error.undo.expected, error.undo.found) == (HISTORY, written)


def test_another_writer_racing_an_append_is_cut_back_with_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "s.jsonl"
    file = opened(path)
    before = path.read_bytes()
    racing(monkeypatch, HISTORY + 5, None)
    with pytest.raises(LogTampered) as caught:
        file.append(records(1))
    assert not caught.value.indeterminate
    assert (caught.value.expected, caught.value.found) == (HISTORY + 47, HISTORY + 52)
    assert path.read_bytes() == before
    file.close()


def test_ending_and_when_idle_say_stopped_as_soon_as_the_error_is_raised(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """After an ordinary persistence failure (a sync failing once, cut back): stopped at once,
    and the log released, so it re-opens at once."""
    path = tmp_path / "s.jsonl"
    real = filelog._sync
    failures = [OSError("sync failed (injected)")]

    def sync(fd: int) -> None:
        if failures:
            raise failures.pop()
        real(fd)

    async def main() -> None:
        agent = await history(path)
        monkeypatch.setattr(filelog, "_sync", sync)
        with pytest.raises(PersistenceError) as caught:
            await agent.inject(C)
        assert not caught.value.indeterminate
        assert str(caught.value) == "append failed: sync failed (injected)"
        stopped_at_once(agent)
        FileLog(path).close()
        await agent.close()

    run(main)
    assert path.stat().st_size == HISTORY
