"""Issue 30: a log file changed behind its writer's back (cut in place as ``copytruncate`` or
``: > session.jsonl`` do, appended to or overwritten at its end by a writer that ignores the
lock, removed or replaced) is detected before anything more is acknowledged, and nothing is
written to a file that is no longer the log's; a cut-back never extends the file and one that
finds it shorter is indeterminate.

Issue 26: a failed append fails only the inputs of its batch (``PersistenceError``), the session
takes the batch back and the agent goes on (the log takes appends again once the failed one was
cut back); only an append that could not be cut back stops the agent, and the error is raised
only once ``ending`` and ``when_idle`` say it stopped."""

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


async def goes_on(agent: Agent, kind: type[LogError]) -> None:
    """The agent did not stop: the failed inject is not pending (the session took it back) and
    every further append fails the same way (the file is still not as the log left it)."""
    assert agent.ending is None
    await agent.when_idle()
    assert [p.message.id for p in (await agent.pending())[1]] == ["b"]
    with pytest.raises(PersistenceError) as again:
        await agent.followup(D)
    assert isinstance(refused(again.value), kind)


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
        await goes_on(agent, LogTruncated)
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
        await goes_on(agent, LogTruncated)
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
        await goes_on(agent, LogTampered)
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
        await goes_on(agent, LogTampered)
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
        await goes_on(agent, LogReplaced)
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
    file, _ = FileLog.open(path, 0, None, 0)
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


def test_a_removed_log_is_refused_before_anything_is_written(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Removed (``rm session.jsonl``) or replaced: the append is refused (``LogReplaced``) before a
    byte is written to the ghost file the log still holds open."""
    path = tmp_path / "s.jsonl"
    file = opened(path)
    writes: list[bytes] = []
    real = FileLog._write_all
    monkeypatch.setattr(FileLog, "_write_all", staticmethod(lambda fd, data: writes.append(data)))
    os.link(path, tmp_path / "kept")  # the log's file, still reachable under another name
    os.unlink(path)
    with pytest.raises(LogReplaced):
        file.append(records(1))
    (tmp_path / "other").write_bytes(b"")
    os.rename(tmp_path / "other", path)
    with pytest.raises(LogReplaced):
        file.append(records(1))
    assert writes == [] and (tmp_path / "kept").stat().st_size == HISTORY
    monkeypatch.setattr(FileLog, "_write_all", staticmethod(real))
    os.replace(tmp_path / "kept", path)  # put back: the log is its file again and takes appends
    assert file.append(records(1)) == [9]
    file.close()


def failing_sync(monkeypatch: pytest.MonkeyPatch, *calls: int) -> None:
    """The log's ``fdatasync`` fails at these calls (1 is the next one), then works."""
    real, count = filelog._sync, [0]

    def sync(fd: int) -> None:
        count[0] += 1
        if count[0] in calls:
            raise OSError("sync failed (injected)")
        real(fd)

    monkeypatch.setattr(filelog, "_sync", sync)


def test_a_log_takes_appends_again_after_a_failed_append_was_cut_back(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "s.jsonl"
    file = opened(path)
    failing_sync(monkeypatch, 1)
    with pytest.raises(LogError) as caught:
        file.append(records(2))
    assert not caught.value.indeterminate and path.stat().st_size == HISTORY
    assert file.append(records(1)) == [9]  # the seq the failed append would have taken
    file.close()
    assert [r["seq"] for r in log.parse(path.read_bytes()).records] == list(range(1, 10))


def test_a_log_refuses_every_append_after_an_indeterminate_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "s.jsonl"
    file = opened(path)
    racing(monkeypatch, 0, 10)
    with pytest.raises(LogError) as first:
        file.append(records(1))
    assert first.value.indeterminate
    with pytest.raises(LogError) as again:
        file.append(records(1))
    # Issue 52: the shared log's `failed` (this append wrote nothing; the earlier one is
    # indeterminate), in its words.
    assert again.value.kind == "failed" and not again.value.indeterminate
    assert str(again.value) == (
        f"{path}: an earlier append may or may not be in the log; re-open the log"
    )
    assert path.read_bytes() == b'{"seq":9,"'


def test_a_failed_append_fails_its_batch_and_the_agent_goes_on(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A sync failing once, cut back: the caller gets PersistenceError, the agent goes on, the
    next send succeeds, and the log holds exactly what was acknowledged."""
    path = tmp_path / "s.jsonl"

    async def main() -> None:
        agent = await history(path)
        failing_sync(monkeypatch, 1)
        with pytest.raises(PersistenceError) as caught:
            await agent.inject(C)
        assert not caught.value.indeterminate and caught.value.log_error is not None
        assert str(caught.value) == f"{path}: log i/o failed: sync failed (injected)"
        assert agent.ending is None and path.stat().st_size == HISTORY
        assert [p.message.id for p in (await agent.pending())[1]] == ["b"]  # taken back (S5)
        await agent.inject(C)  # sent again: accepted (not AlreadyPending), and durable
        await agent.close()

    run(main)
    written = log.parse(path.read_bytes()).records
    assert [r["seq"] for r in written] == list(range(1, 10))
    assert written[-1]["data"]["inserted"][0]["id"] == "c"


def test_an_append_that_cannot_be_cut_back_stops_the_agent(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Indeterminate (the file was cut under the write, so the cut-back finds it shorter): the
    caller gets PersistenceError(indeterminate), the agent has stopped by then and released its
    log, and every later call raises Stopped."""
    path = tmp_path / "s.jsonl"

    async def main() -> None:
        agent = await history(path)
        racing(monkeypatch, 0, 10)
        with pytest.raises(PersistenceError) as caught:
            await agent.inject(C)
        assert caught.value.indeterminate and isinstance(caught.value.log_error, LogError)
        stopped_at_once(agent)
        with pytest.raises(Stopped):
            await agent.followup(D)
        assert await agent.finished() == "stopped"
        FileLog(path).close()  # released: it opens at once
        await agent.close()

    run(main)
