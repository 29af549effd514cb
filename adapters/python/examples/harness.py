"""A harness that owns its log and drives ``Machine`` from its own loop: an append is refused,
the batch is rolled back (as if its input was never fed), and the harness goes on.
``python adapters/python/examples/harness.py``"""

from typing import Callable

from coxswain import Enter, Event, Machine, Message, PreStepRequest, StepRequest, Transition
from coxswain import TurnStoppingRequest

log: list[Event] = []  # the harness's own log, which refuses appends while the disk is full
disk_full = False
machine = Machine(delivery_memory=16)


def feed(input: Callable[[], Transition]) -> None:
    """Feeds one input as a batch and answers the requests it makes, or rolls it back."""
    machine.begin_batch()
    transition = input()
    if disk_full:
        machine.roll_back_batch()  # the append failed: the machine is as it was (lists, memory, turn)
        print("append refused: rolled back")
        return
    log.extend(transition.events)  # durable once appended (a real log syncs here)
    effects = transition.persisted()
    machine.commit_batch()
    for effect in effects:  # the agent loop: the model call goes here
        if isinstance(effect, PreStepRequest):
            feed(lambda: machine.answer_pre_step(Enter(effect.messages)))
        elif isinstance(effect, StepRequest):
            feed(lambda: machine.answer_step("completed"))
        elif isinstance(effect, TurnStoppingRequest):
            feed(lambda: machine.answer_turn_stopping("done"))


feed(lambda: machine.inject(Message("c1", "some context")))
disk_full = True
feed(lambda: machine.followup(Message("m1", "hello")))
print(f"m1 pending: {bool(machine.pending('next-turn'))}, remembered: {machine.remembers('m1')}")
disk_full = False
feed(lambda: machine.followup(Message("m1", "hello")))  # the same id again: its turn runs
print(f"{machine.status} after turn {machine.last_turn}; {len(log)} events in the log")
