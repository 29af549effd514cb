"""What the asyncio agent takes from the session layer (``coxswain-session``) instead of deciding
itself: the host-failure codes, the resume, and a random seed for the id indexes."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from coxswain import InvalidInput, Machine, StepAnswer
from coxswain._native import host_failure
from coxswain.asyncio import Agent, Host, StepContext


def test_one_code_per_host_failure() -> None:
    codes = {
        name: host_failure(name, "step", "")[1]
        for name in ("panicked", "raised", "cancelled", "abandoned", "invalid-answer")
    }
    assert codes == {
        "panicked": "host-panicked",
        "raised": "host-raised",
        "cancelled": "host-cancelled",
        "abandoned": "host-abandoned",
        "invalid-answer": "host-invalid-answer",
    }
    assert host_failure("raised", "preStep", "ValueError('x')") == (
        "the host's preStep call raised: ValueError('x')",
        "host-raised",
    )
    with pytest.raises(InvalidInput):
        host_failure("exploded", "step", "")
    with pytest.raises(InvalidInput):
        host_failure("raised", "lunch", "")


def test_a_machine_keeps_its_seed_and_every_agent_draws_its_own(tmp_path: Path) -> None:
    assert Machine().hash_seed == 0
    assert Machine(hash_seed=7).hash_seed == 7

    class Defaults(Host):
        async def step(self, cx: StepContext) -> StepAnswer:
            return "completed"

    async def seed(name: str) -> int:
        agent, _ = await Agent.open(Defaults(), tmp_path / name)
        seed: int = agent._machine.hash_seed
        await agent.close()
        return seed

    seeds = [asyncio.run(seed(f"s{i}.jsonl")) for i in range(3)]
    assert len(set(seeds)) == 3, seeds
