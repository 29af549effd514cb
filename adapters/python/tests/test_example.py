"""The README's example (examples/hello.py) runs and writes the 8-record session log."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "hello.py"


def test_the_readme_example_runs(tmp_path: Path) -> None:
    log = tmp_path / "session.jsonl"
    subprocess.run([sys.executable, str(EXAMPLE), str(log)], check=True, timeout=60)
    records = [json.loads(line) for line in log.read_text().splitlines()]
    assert [(r["seq"], r["type"]) for r in records] == [
        (1, "agent/inbox/spliced"),
        (2, "turn/start"),
        (3, "agent/inbox/spliced"),
        (4, "step/start"),
        (5, "user/message"),
        (6, "model/output"),
        (7, "step/end"),
        (8, "turn/end"),
    ]
    assert records[4]["data"] == {"id": "m1", "source": {"kind": "user"}, "content": "hi"}
