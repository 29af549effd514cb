"""coxswain: the sans-IO delivery state machine for LLM agent loops (Python binding).

``Machine`` is the Rust core's contract (feed an input, persist the transition's events, then act
on its effects); ``coxswain.asyncio`` drives it with an asyncio host on a JSON-lines log file;
``python -m coxswain.port`` speaks the ports protocol (docs/PORTS.md).
"""

from ._errors import (
    AfterDisposal,
    AlreadyDelivered,
    AlreadyPending,
    BatchError,
    Busy,
    Conflict,
    CorruptLog,
    CoxswainError,
    Disposed,
    EncodeError,
    Full,
    InvalidInput,
    InvalidLog,
    InvalidRedelivery,
    LineTooLong,
    Rejected,
    TooDeep,
    TurnMismatch,
    Undrained,
    UnexpectedCompletion,
    UnrepresentableValue,
)
from ._filelog import NotRegularFile
from ._machine import Machine, Outstanding, Pending, Phase, Repaired, Transition
from ._native import VERSION as __version__
from ._types import (
    JSON,
    Abort,
    Begin,
    CancelCause,
    Claimed,
    DeliveryMemory,
    Discarded,
    Effect,
    Enter,
    ErrorInfo,
    Event,
    Expect,
    Fail,
    Fate,
    Inserted,
    Message,
    Notification,
    Output,
    PreStepAnswer,
    PreStepRequest,
    Reject,
    Request,
    Status,
    StatusChanged,
    StepAnswer,
    StepRequest,
    Target,
    TurnEndKind,
    TurnFailed,
    TurnStoppingAnswer,
    TurnStoppingRequest,
    output_from_json,
)
from ._types import Disposed as DisposedOutput

__all__ = [
    "Abort", "AfterDisposal", "AlreadyDelivered", "AlreadyPending", "BatchError", "Begin", "Busy",
    "CancelCause", "Claimed", "Conflict", "CorruptLog", "CoxswainError", "DeliveryMemory",
    "Discarded", "Disposed", "DisposedOutput", "Effect", "EncodeError", "Enter", "ErrorInfo",
    "Event", "Expect", "Fail", "Fate", "Full", "Inserted", "InvalidInput", "InvalidLog",
    "InvalidRedelivery", "JSON", "LineTooLong", "Machine", "Message",
    "NotRegularFile", "Notification", "Outstanding", "Output", "Pending", "Phase",
    "PreStepAnswer", "PreStepRequest", "Reject", "Rejected", "Repaired", "Request", "Status",
    "StatusChanged", "StepAnswer", "StepRequest", "Target", "TooDeep", "Transition",
    "TurnEndKind", "TurnFailed", "TurnMismatch", "TurnStoppingAnswer", "TurnStoppingRequest",
    "Undrained",
    "UnexpectedCompletion", "UnrepresentableValue",
    "__version__",
    "output_from_json",
]
