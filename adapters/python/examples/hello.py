"""The README's example: an asyncio agent on a log file, one follow-up, one step."""

import asyncio
import sys

from coxswain import Message, StepAnswer
from coxswain.asyncio import Agent, Host, StepContext


class Model(Host):
    async def step(self, cx: StepContext) -> StepAnswer:
        # Call the model here (cancelling the turn cancels this task); log its output in the step.
        await cx.record("model/output", {"text": "hello"})
        return "completed"


async def main(path: str) -> None:
    agent, recovery = await Agent.open(Model(), path)  # a new session, or resume: the same call
    await agent.followup(Message("m1", "hi"))  # returns once durable
    await agent.when_idle()
    await agent.dispose()


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1] if len(sys.argv) > 1 else "session.jsonl"))
