"""The README's example (examples/hello.py): it runs, writes the 8-record session log, and runs
again in the same directory, resuming the session with the follow-up's retry refused as already
delivered (S52) and treated as success; docs/python.md shows it verbatim, the README an excerpt."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import coxswain

from conftest import ROOT

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "hello.py"

RECORDS = [
    (1, "agent/inbox/spliced"),
    (2, "turn/start"),
    (3, "agent/inbox/spliced"),
    (4, "step/start"),
    (5, "user/message"),
    (6, "model/output"),
    (7, "step/end"),
    (8, "turn/end"),
]


def run_example(cwd: Path) -> str:
    """Runs the example as the README says (`python .../hello.py`, its log `session.jsonl` in
    the working directory); its stdout."""
    done = subprocess.run(
        [sys.executable, str(EXAMPLE)], cwd=cwd, check=True, timeout=60, capture_output=True, text=True
    )
    assert done.stderr == ""
    return done.stdout


def records(log: Path) -> list[dict[str, object]]:
    return [json.loads(line) for line in log.read_text().splitlines()]


def test_the_readme_example_runs(tmp_path: Path) -> None:
    log = tmp_path / "session.jsonl"
    subprocess.run([sys.executable, str(EXAMPLE), str(log)], check=True, timeout=60)
    written = records(log)
    assert [(r["seq"], r["type"]) for r in written] == RECORDS
    assert written[4]["data"] == {"id": "m1", "source": {"kind": "user"}, "content": "hi"}


FIRST = "opened: 0 records\nm1: delivered\nidle; steps run: 1\n"
SECOND = "opened: 8 records\nm1: already delivered, nothing runs twice\nidle; steps run: 0\n"


def test_the_example_runs_twice_in_the_same_directory(tmp_path: Path) -> None:
    assert run_example(tmp_path) == FIRST
    log = (tmp_path / "session.jsonl").read_bytes()
    assert run_example(tmp_path) == SECOND
    # The retry was refused before anything was written: the log is the first run's.
    assert (tmp_path / "session.jsonl").read_bytes() == log
    assert [(r["seq"], r["type"]) for r in records(tmp_path / "session.jsonl")] == RECORDS


def python_blocks(markdown: str) -> list[str]:
    """The bodies of the ```python blocks of a markdown text."""
    return [block.split("```", 1)[0] for block in markdown.split("```python\n")[1:]]


def test_the_docs_show_the_example_verbatim_and_the_readme_an_excerpt_of_it() -> None:
    example = EXAMPLE.read_text()
    guide = (ROOT / "docs" / "python.md").read_text()
    assert example in guide, "docs/python.md must contain examples/hello.py verbatim"
    blocks = python_blocks((ROOT / "README.md").read_text())
    assert len(blocks) == 1, "README.md shows one Python example"
    (excerpt,) = blocks
    assert len(excerpt.splitlines()) >= 20, "the excerpt is the example's agent, not a fragment"
    assert excerpt in example, "README.md's Python block must be a verbatim excerpt of examples/hello.py"


def test_this_packages_readme_shows_the_command_and_both_runs_output() -> None:
    readme = (ROOT / "adapters" / "python" / "README.md").read_text()
    assert "python adapters/python/examples/hello.py\n" in readme
    assert f"```text\n{FIRST}```" in readme
    assert f"```text\n{SECOND}```" in readme


def test_was_delivered_is_true_for_already_delivered_and_already_pending_only() -> None:
    assert coxswain.AlreadyDelivered("m1 was already delivered", "m1").was_delivered is True
    assert coxswain.AlreadyPending("m1 is pending", "m1").was_delivered is True
    for error in (
        coxswain.Rejected("x"),
        coxswain.Busy("x"),
        coxswain.Disposed("x"),
        coxswain.Undrained("x"),
        coxswain.UnexpectedCompletion("x"),
    ):
        assert error.was_delivered is False, error


HARNESS = Path(__file__).resolve().parents[1] / "examples" / "harness.py"
HARNESS_OUTPUT = (
    "append refused: rolled back\nm1 pending: False, remembered: False\n"
    "idle after turn 1; 10 events in the log\n"
)


def test_the_harness_example_rolls_a_refused_append_back_and_goes_on(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, str(HARNESS)], cwd=tmp_path, check=True, timeout=60, capture_output=True, text=True
    )
    assert done.stderr == ""
    assert done.stdout == HARNESS_OUTPUT


def test_this_package_s_readme_shows_the_harness_example_whole_with_its_output() -> None:
    readme = (HARNESS.parents[1] / "README.md").read_text(encoding="utf-8")
    example = HARNESS.read_text(encoding="utf-8")
    assert len(example.rstrip().splitlines()) <= 42, "a 30-line example, its docstring and imports aside"
    assert "```python\n" + example + "```" in readme
    assert "```text\n" + HARNESS_OUTPUT + "```" in readme
