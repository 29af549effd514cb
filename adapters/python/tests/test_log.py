"""``coxswain.log``: the record format of ``coxswain-log`` from Python."""

from __future__ import annotations

import pytest

import coxswain
from coxswain import Event, log


def test_encode_numbers_records_and_parse_reads_them_back() -> None:
    data = log.encode(
        [{"type": "turn/start", "data": {"turn": 1}}, {"type": "model/output", "data": {"t": "x"}}],
        first_seq=4,
    )
    assert data == (
        b'{"seq":4,"type":"turn/start","data":{"turn":1}}\n'
        b'{"seq":5,"type":"model/output","data":{"t":"x"}}\n'
    )
    read = log.parse(data + b'{"seq":6,"ty')
    assert [r["seq"] for r in read.records] == [4, 5]
    assert read.torn == (3, 12) and read.complete_len == len(data) and read.next_seq == 6


def test_records_the_reader_would_refuse_are_not_encoded() -> None:
    with pytest.raises(coxswain.EncodeError):  # a host event may not take the machine's types
        log.encode([{"type": "turn/start", "data": {"nope": 1}}])
    deep: object = 1
    for _ in range(200):
        deep = [deep]
    with pytest.raises(coxswain.EncodeError):  # deeper than the reader accepts
        log.encode([{"type": "host/x", "data": deep}])


def test_corruption_names_its_line() -> None:
    with pytest.raises(coxswain.CorruptLog) as caught:
        log.parse(b'{"seq":1,"type":"a","data":1}\nnot json\n{"seq":3,"type":"a","data":1}\n')
    assert caught.value.line == 2
    with pytest.raises(coxswain.CorruptLog):  # a gap in seq: a lost record
        log.parse(b'{"seq":1,"type":"a","data":1}\n{"seq":3,"type":"a","data":1}\n')


def test_restore_closes_an_interrupted_turn() -> None:
    """S50: step/end, then turn/end interrupted."""
    records = [
        {"seq": 1, "type": "turn/start", "data": {"turn": 3}},
        {"seq": 2, "type": "step/start", "data": {"turn": 3, "step": 1}},
    ]
    restored = log.restore(records)
    assert restored.interrupted_turn == 3
    assert restored.closers == (
        Event("step/end", {"turn": 3, "step": 1}),
        Event("turn/end", {"turn": 3, "reason": {"kind": "interrupted"}}),
    )
    assert restored.machine.last_turn == 3 and restored.machine.phase == "idle"


def test_integers_within_64_bits_survive_the_log_and_restore_exactly() -> None:
    """An event's integers beyond 2**53 are written, read back and restored as the same ``int``;
    one beyond 64 bits is refused before anything is encoded."""
    exact = {"max": 2**64 - 1, "min": -(2**63), "odd": 2**53 + 1}
    message = {"id": "exact", "source": {"kind": "user"}, "content": exact}
    spliced = {"target": "next-turn", "start": 0, "inserted": [message], "wakeup": True}
    data = log.encode([{"type": "agent/inbox/spliced", "data": spliced}])
    assert b'"max":18446744073709551615,"min":-9223372036854775808,"odd":9007199254740993' in data
    (record,) = log.parse(data).records
    assert record["data"] == spliced
    restored = log.restore(log.parse(data).records)
    (pending,) = restored.machine.pending("next-turn")
    assert pending.message.content == exact
    with pytest.raises(ValueError, match="beyond 64 bits"):
        log.encode([{"type": "host/x", "data": {"n": 2**64}}])
