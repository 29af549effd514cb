"""coxswain on asyncio: an :class:`Agent` drives the machine with a :class:`Host` on a JSON-lines
log file (the format of ``adapters/tokio``'s FileLog; ``coxswain verify`` reads it), or on a
:class:`MemoryLog` of the same bytes (nothing durable: tests and benches)."""

from .._errors import LineTooLong
from .._filelog import (
    FileLog, LogError, LogLocked, LogPermissionDenied, LogReplaced, LogStorageFull, LogTampered,
    LogTruncated, NotRegularFile, ReadBack, SyncPolicy,
)
from .._memorylog import MemoryLog
from ._agent import (
    Agent,
    AgentError,
    Closed,
    Ended,
    Ending,
    IdTooLong,
    Lagged,
    MessageTooLarge,
    Notified,
    PersistenceError,
    Recorded,
    Recovery,
    StepClosed,
    Stopped,
    Update,
)
from ._host import Host, PreStepContext, StepContext, TurnStoppingContext

__all__ = [
    "Agent", "AgentError", "Closed", "Ended", "Ending", "FileLog", "Host", "IdTooLong", "Lagged",
    "LineTooLong", "LogError", "LogLocked", "LogPermissionDenied", "LogReplaced",
    "LogStorageFull", "LogTampered", "LogTruncated", "MemoryLog", "MessageTooLarge",
    "NotRegularFile", "Notified",
    "PersistenceError",
    "PreStepContext", "ReadBack", "Recorded", "Recovery", "StepClosed", "StepContext", "Stopped",
    "SyncPolicy",
    "TurnStoppingContext", "Update",
]
