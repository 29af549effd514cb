"""Issue 52: the Python ``FileLog`` is the one file log every runtime writes (the Rust crate
``coxswain-file-log``, called with the GIL released). Its sync policies (the Node binding's
words), its error vocabulary (``LogError.kind`` is the Rust kind, ``path`` the file, and the
message names it), a second writer, a full disk, a refused permission and a closed log."""

from __future__ import annotations

import asyncio
import json
import re
import errno
import os
from pathlib import Path
from typing import Any, Awaitable, Callable

import pytest

import coxswain._filelog as filelog
from coxswain import EncodeError, InvalidInput, Message, StepAnswer, log
from coxswain.asyncio import Agent, Host, StepContext
from coxswain.log import (
    FileLog,
    LogError,
    LogLocked,
    LogPermissionDenied,
    LogStorageFull,
    NotRegularFile,
)


class Model(Host):
    async def step(self, cx: StepContext) -> StepAnswer:
        return "completed"


def run(main: Callable[[], Awaitable[None]]) -> None:
    asyncio.run(asyncio.wait_for(main(), 20))


def records(n: int) -> list[dict[str, object]]:
    return [{"type": "model/output", "data": {"n": i}} for i in range(n)]


def counting_syncs(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Every sync the log makes from now on (the real one still made)."""
    real, made = filelog._sync, []

    def sync(fd: int) -> None:
        made.append(fd)
        real(fd)

    monkeypatch.setattr(filelog, "_sync", sync)
    return made


def failing_write(monkeypatch: pytest.MonkeyPatch, error: OSError, *, then: int = 0) -> None:
    """The log's next write writes half its bytes, then (after shortening the file to ``then``
    bytes below where it began, if asked) fails with ``error``; the writes after it work."""
    real = FileLog._write_all

    def write(fd: int, data: bytes) -> None:
        monkeypatch.setattr(FileLog, "_write_all", staticmethod(real))
        start = os.fstat(fd).st_size
        real(fd, data[: len(data) // 2])
        if then:
            os.truncate(fd, start - then)
        raise error

    monkeypatch.setattr(FileLog, "_write_all", staticmethod(write))


# ----- the sync policies -----


@pytest.mark.parametrize(
    "policy, synced", [("every-append", [1, 1]), ("per-turn", [0, 1]), ("never", [0, 0])]
)
def test_each_sync_policy_syncs_as_it_says(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, policy: filelog.SyncPolicy,
    synced: list[int],
) -> None:
    file, _ = FileLog.open(tmp_path / "s.jsonl", 0, None, 0, sync=policy)
    assert file.sync_policy == policy
    syncs = counting_syncs(monkeypatch)
    counts = []
    for ends_turn in (False, True):
        before = len(syncs)
        file.append_encoded(log.encode(records(1), file.next_seq), 1, ends_turn)
        counts.append(len(syncs) - before)
    assert counts == synced
    file.sync()  # an explicit sync always syncs
    assert len(syncs) == sum(synced) + 1
    file.close()
    assert len(syncs) == sum(synced) + 2  # and so does close
    assert [r["seq"] for r in log.parse((tmp_path / "s.jsonl").read_bytes()).records] == [1, 2]


def test_the_default_policy_is_every_append(tmp_path: Path) -> None:
    file = FileLog(tmp_path / "s.jsonl")
    assert file.sync_policy == "every-append"
    file.close()


@pytest.mark.parametrize("policy", ["every-append", "per-turn", "never"])
def test_the_agent_syncs_its_log_as_its_policy_says(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, policy: filelog.SyncPolicy
) -> None:
    """The session says which sealed batch ends a turn (a ``turn/end``): the agent passes it to a
    log syncing per turn, which syncs that batch's append only."""
    syncs = counting_syncs(monkeypatch)
    appends: list[tuple[bytes, tuple[Any, ...]]] = []
    real = FileLog.append_encoded

    def append(self: FileLog, data: bytes, count: int, *ends_turn: bool) -> None:
        before = len(syncs)
        real(self, data, count, *ends_turn)
        appends.append((data, (len(syncs) - before, *ends_turn)))

    monkeypatch.setattr(FileLog, "append_encoded", append)

    async def main() -> None:
        agent, _ = await Agent.open(Model(), tmp_path / "s.jsonl", sync=policy)
        for i in range(2):
            await agent.followup(Message(f"m{i}", "hi"))
            await agent.when_idle()
        await agent.close()

    run(main)
    ending = [b'"type":"turn/end"' in data for data, _ in appends]
    assert ending.count(True) == 2 and len(appends) > 2
    made = [synced for _, synced in appends]
    if policy == "every-append":
        assert made == [(1,)] * len(appends)
    elif policy == "per-turn":  # told which batch ends a turn, and only that one synced
        assert made == [(1, True) if ends else (0, False) for ends in ending]
    else:
        assert made == [(0,)] * len(appends)
    assert len(syncs) == sum(synced[0] for synced in made) + 1  # the agent syncs as it ends


def test_an_unknown_sync_policy_is_refused_naming_it_before_the_path_is_looked_at(
    tmp_path: Path,
) -> None:
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    for bad, shown in (("always", "'always'"), (True, "True"), ("", "''")):
        with pytest.raises(InvalidInput) as raised:
            FileLog.open(fifo, 0, None, 0, sync=bad)  # type: ignore[arg-type]
        assert str(raised.value) == (
            f"unknown sync policy {shown}: it is `every-append`, `per-turn` or `never`"
        )
        assert isinstance(raised.value, ValueError)

    async def main() -> None:
        with pytest.raises(InvalidInput):
            await Agent.open(Model(), fifo, sync="Never")  # type: ignore[arg-type]
        with pytest.raises(NotRegularFile):  # a policy it knows: the path is looked at
            await Agent.open(Model(), fifo, sync="never")

    run(main)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["fifo"]


# ----- the error vocabulary -----


def test_a_second_writer_is_locked_out_naming_the_file(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    first, _ = FileLog.open(path, 0, None, 0)
    with pytest.raises(LogLocked) as raised:
        FileLog.open(path, 0, None, 0)
    error = raised.value
    assert (error.kind, error.path, error.indeterminate) == ("locked", str(path), False)
    assert str(error) == f"the log {path} is locked by another writer"
    assert isinstance(error, LogError)
    first.close()
    again, _ = FileLog.open(path, 0, None, 0)  # released by close
    again.close()


def test_the_agent_is_locked_out_of_a_log_another_writer_holds(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    holder = FileLog(path)

    async def main() -> None:
        with pytest.raises(LogLocked):
            await Agent.open(Model(), path)

    run(main)
    holder.close()


def test_a_full_disk_fails_the_append_cut_back_and_the_log_goes_on(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "s.jsonl"
    file, _ = FileLog.open(path, 0, None, 0)
    assert file.append(records(2)) == [1, 2]
    size = path.stat().st_size
    failing_write(monkeypatch, OSError(errno.ENOSPC, "No space left on device"))
    with pytest.raises(LogStorageFull) as raised:
        file.append(records(3))
    error = raised.value
    assert (error.kind, error.path, error.indeterminate) == ("storage-full", str(path), False)
    assert str(error) == f"the log file {path} cannot grow: no space left on its file system"
    assert path.stat().st_size == size  # cut back
    assert file.append(records(1)) == [3]  # the seq the failed append would have taken
    file.close()


def test_a_refused_permission_at_an_append_is_permission_denied(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "s.jsonl"
    file, _ = FileLog.open(path, 0, None, 0)
    failing_write(monkeypatch, OSError(errno.EACCES, "Permission denied"))
    with pytest.raises(LogPermissionDenied) as raised:
        file.append(records(1))
    assert (raised.value.kind, raised.value.path) == ("permission-denied", str(path))
    assert str(raised.value) == (
        f"the log file {path}: permission denied (Permission denied (os error 13))"
    )
    assert path.read_bytes() == b""
    file.close()


@pytest.mark.skipif(os.geteuid() == 0, reason="root opens a file whatever its mode")
def test_a_file_the_process_may_not_write_is_permission_denied_at_open(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    path.write_bytes(b"")
    path.chmod(0o400)
    with pytest.raises(LogPermissionDenied) as raised:
        FileLog.open(path, 0, None, 0)
    assert (raised.value.kind, raised.value.path) == ("permission-denied", str(path))
    assert str(path) in str(raised.value)


def test_an_indeterminate_append_names_its_kind_and_file_and_close_releases_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Cut under the failing write, the cut-back would extend the file: indeterminate (the
    write's own error its cause, the cut-back's ``undo``); then every append is ``failed``, and
    close releases the file without a last check."""
    path = tmp_path / "s.jsonl"
    file, _ = FileLog.open(path, 0, None, 0)
    file.append(records(2))
    size = path.stat().st_size
    failing_write(monkeypatch, OSError("write failed (injected)"), then=10)
    with pytest.raises(LogError) as raised:
        file.append(records(1))
    error = raised.value
    assert (error.kind, error.path, error.indeterminate) == ("indeterminate", str(path), True)
    assert str(error) == (
        "log i/o failed (write failed (injected)) and undoing the partial write failed too (the "
        f"log file {path} was truncated: it holds {size - 10} bytes where this log wrote "
        f"{size}): the batch may or may not be in the log"
    )
    assert str(error.__cause__) == "write failed (injected)"
    assert isinstance(error.undo, LogError) and error.undo.kind == "truncated"
    with pytest.raises(LogError) as again:
        file.append(records(1))
    assert again.value.kind == "failed"
    file.close()
    FileLog(path).close()  # released


def test_a_closed_log_raises_closed_naming_the_file(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    file, _ = FileLog.open(path, 0, None, 0)
    file.close()
    file.close()  # again: nothing
    for call in (lambda: file.append(records(1)), file.sync):
        with pytest.raises(LogError) as raised:
            call()
        assert (raised.value.kind, raised.value.path) == ("closed", str(path))
        assert str(raised.value) == f"the log file {path} is closed"


def test_an_append_to_a_log_not_yet_read_reads_and_repairs_it_first(tmp_path: Path) -> None:
    """``FileLog(path)`` reads nothing; its first ``append`` reads the log back, drops a torn
    tail (S50) and numbers on from the last record."""
    path = tmp_path / "s.jsonl"
    path.write_bytes(log.encode(records(2)) + b'{"seq":3,"ty')
    file = FileLog(path)
    assert file.append(records(1)) == [3]
    file.close()
    assert [r["seq"] for r in log.parse(path.read_bytes()).records] == [1, 2, 3]


def test_the_log_works_from_a_worker_thread(tmp_path: Path) -> None:
    """What the agent does: every call on a worker thread (the GIL released meanwhile)."""
    path = tmp_path / "s.jsonl"

    async def main() -> None:
        file, _ = await asyncio.to_thread(FileLog.open, path, 0, None, 0)
        data = log.encode(records(3), file.next_seq)
        await asyncio.gather(*(asyncio.to_thread(file.sync) for _ in range(4)))
        await asyncio.to_thread(file.append_encoded, data, 3)
        assert file.next_seq == 4
        await asyncio.to_thread(file.close)

    run(main)
    assert path.read_bytes() == log.encode(records(3))


def test_a_memory_log_names_its_errors_in_the_same_words() -> None:
    from coxswain.log import MemoryLog

    memory = MemoryLog()
    memory.resume(0, None, 0)
    with pytest.raises(LogError) as held:
        memory.resume(0, None, 0)
    assert held.value.kind == "locked"
    assert str(held.value) == "the memory log is held by another agent"
    memory.close()
    with pytest.raises(LogError) as closed:
        memory.append(records(1))
    assert (closed.value.kind, str(closed.value)) == ("closed", "the memory log is closed")


GIL_SCRIPT = r"""
import os, sys, threading, time
from coxswain.log import FileLog, encode

path = sys.argv[1]
file = FileLog(path)
entered, go = threading.Event(), threading.Event()
real = FileLog._write_all

def write(fd, data):
    entered.set()
    go.wait()  # holds the log (its lock) until the main thread says go
    real(fd, data)

FileLog._write_all = staticmethod(write)
a = threading.Thread(target=lambda: file.append_encoded(encode([{"type": "x/y", "data": 1}]), 1))
a.start()
entered.wait()
b = threading.Thread(target=file.sync)  # waits for the log: it must not hold the GIL meanwhile
b.start()
time.sleep(0.2)
go.set()  # needs the GIL
a.join()
b.join()
file.close()
print("released")
"""


def test_a_call_waiting_for_the_log_releases_the_gil(tmp_path: Path) -> None:
    """One thread's append holds the log (its write waits for the main thread); another's sync
    waits for the log with the GIL released, so the main thread runs and lets the append go.
    (A call that held the GIL while it waited would deadlock: the script would time out.)"""
    import subprocess
    import sys

    done = subprocess.run(
        [sys.executable, "-c", GIL_SCRIPT, str(tmp_path / "s.jsonl")], timeout=20,
        capture_output=True, text=True,
    )
    assert (done.returncode, done.stdout, done.stderr) == (0, "released\n", "")
    assert (tmp_path / "s.jsonl").read_bytes() == b'{"seq":1,"type":"x/y","data":1}\n'


def test_a_log_that_cannot_be_resumed_names_its_kind_file_and_line(tmp_path: Path) -> None:
    from coxswain import CorruptLog

    path = tmp_path / "s.jsonl"
    path.write_bytes(b'{"seq":1,"type":"turn/start","data":{}}\n')  # no turn number (S47)
    with pytest.raises(CorruptLog) as invalid:
        FileLog.open(path, 0, None, 0)
    assert (invalid.value.kind, invalid.value.path, invalid.value.line) == ("invalid", str(path), 1)
    assert str(invalid.value).startswith(f"{path}: the log cannot be resumed: line 1: ")
    path.write_bytes(log.encode(records(1)) + b"not json\n" + log.encode(records(1), 2))
    with pytest.raises(CorruptLog) as corrupt:
        FileLog.open(path, 0, None, 0)
    assert (corrupt.value.kind, corrupt.value.path, corrupt.value.line) == ("corrupt", str(path), 2)
    assert str(corrupt.value).startswith(f"{path}: corrupt log: line 2: ")


def test_threads_appending_at_once_never_duplicate_a_seq(tmp_path: Path) -> None:
    """Appends from several threads to one ``FileLog``: each encodes from the ``seq`` it read,
    and the log takes the lines only if that is still its next (checked under its lock); one
    that lost the race is refused (``encode``, nothing written), so the log stays a log."""
    import threading

    path = tmp_path / "s.jsonl"
    file = FileLog(path, sync="never")
    refused: list[str] = []

    def appender() -> None:
        for _ in range(200):
            try:
                file.append(records(1))
            except EncodeError as error:  # the class of the `encode` kind
                refused.append(str(error))

    threads = [threading.Thread(target=appender) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    file.close()
    assert all(re.fullmatch(
        rf"{re.escape(str(file.path))}: cannot encode a record: the lines are numbered from seq "
        r"(\d+), but the log's next record is seq (\d+): nothing written", text) for text in refused)
    seqs = [json.loads(line)["seq"] for line in path.read_text().splitlines()]
    assert seqs == list(range(1, 801 - len(refused)))
