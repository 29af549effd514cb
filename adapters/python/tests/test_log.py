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
