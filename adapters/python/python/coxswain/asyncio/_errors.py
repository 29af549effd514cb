"""The errors of an :class:`~coxswain.asyncio.Agent` that are the agent's, not the core's."""

from __future__ import annotations

from .._errors import CoxswainError
from .._filelog import LogError

__all__ = [
    "AgentError", "Closed", "Stopped", "PersistenceError", "StepClosed", "IdTooLong",
    "MessageTooLarge",
]


class AgentError(CoxswainError):
    """A call on an :class:`Agent` failed for a reason of the agent, not the core."""


class Closed(AgentError):
    """The agent was closed."""


class Stopped(AgentError):
    """The agent stopped: an append failed and cutting it back failed too, so its log may or may
    not hold that batch. Re-open it from its log."""


class PersistenceError(AgentError):
    """Appending the batch of this input failed: it is not in the log, and the machine was taken
    back to before the batch (S5 extended to a failed persistence), so it may be sent again. The
    agent goes on. ``indeterminate``: the failed append could not be cut back, so the log may
    hold it; the agent has then stopped (``ending`` is ``"stopped"``, further calls raise
    :class:`Stopped`) and released its log: re-open it. ``log_error`` is the log's own error (a
    :class:`~coxswain.asyncio.LogReplaced`, :class:`~coxswain.asyncio.LogTruncated` or
    :class:`~coxswain.asyncio.LogTampered`: the file was replaced, or lost or gained records
    behind the agent's back; every append fails until it is looked at and re-opened)."""

    def __init__(
        self,
        message: str,
        *,
        indeterminate: bool = False,
        log_error: "LogError | None" = None,
    ) -> None:
        super().__init__(message)
        self.indeterminate = indeterminate
        self.log_error = log_error


class StepClosed(AgentError):
    """A host event was recorded outside its step (after the step was answered)."""


class IdTooLong(AgentError, ValueError):
    """A message id (or the id a ``remove`` or ``replace`` names) is longer than the agent's
    ``max_id_bytes`` (UTF-8 bytes): refused, nothing changed."""

    def __init__(self, message: str, bytes: int, max: int) -> None:
        super().__init__(message)
        #: Its length, and the limit.
        self.bytes, self.max = bytes, max


class MessageTooLarge(AgentError, ValueError):
    """A message's JSON is larger than the agent's ``max_message_bytes``: refused, nothing
    changed."""

    def __init__(self, message: str, bytes: int, max: int) -> None:
        super().__init__(message)
        #: Its size, and the limit.
        self.bytes, self.max = bytes, max
