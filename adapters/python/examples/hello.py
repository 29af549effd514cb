"""The README's example: an asyncio agent on a log file, one follow-up, one step. Run it again
in the same directory and it resumes the session: the follow-up's retry is refused as already
delivered (S52), which is success, and nothing runs twice."""

import asyncio
import sys

from coxswain import Message, Rejected, StepAnswer
from coxswain.asyncio import Agent, Host, StepContext


class Model(Host):
    steps = 0

    async def step(self, cx: StepContext) -> StepAnswer:
        # Call the model here (cancelling the turn cancels this task); log its output in the step.
        await cx.record("model/output", {"text": "hello"})
        self.steps += 1
        return "completed"


async def main(path: str) -> None:
    model = Model()
    agent, recovery = await Agent.open(model, path)  # a new session, or resume: the same call
    print(f"opened: {recovery.records} records")
    try:
        await agent.followup(Message("m1", "hi"))  # returns once durable
        print("m1: delivered")
    except Rejected as error:
        if not error.was_delivered:
            raise  # not delivered: retry later with the same id
        print("m1: already delivered, nothing runs twice")  # a retry (S52): success
    await agent.when_idle()
    await agent.dispose()
    print(f"idle; steps run: {model.steps}")


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1] if len(sys.argv) > 1 else "session.jsonl"))
