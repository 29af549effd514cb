"""The errors of an :class:`~coxswain.asyncio.Agent` that are the agent's, not the core's.

Every error a call on an agent raises has ``kind``: the one spelling every language gives it
(``coxswain_session::Failure::kind``): a refusal's kind (``already-pending``, ``id-too-long``,
``too-deep``, ``step-closed``, ...), ``persistence``, ``indeterminate``, ``closed``, ``stopped``
or ``disposed``. The session layer sets it when it makes the error."""

from __future__ import annotations

from .._errors import CoxswainError
from .._filelog import LogError

__all__ = [
    "AgentError", "Closed", "Stopped", "PersistenceError", "StepClosed", "IdTooLong",
    "MessageTooLarge",
]


class AgentError(CoxswainError):
    """A call on an :class:`Agent` failed for a reason of the agent, not the core. ``kind``: the
    error's kind name (the session layer's)."""

    kind: str


class Closed(AgentError):
    """The agent was closed (``kind`` ``closed``)."""


class Stopped(AgentError):
    """The agent stopped (``kind`` ``stopped``): an append failed ``indeterminate`` (its log may
    or may not hold that batch) or ``fenced`` (another writer owns the log). Re-open it from its
    log."""


class PersistenceError(AgentError):
    """Appending the batch of this input failed (``kind`` ``persistence``): it is not in the log,
    and the machine was taken back to before the batch (S5 extended to a failed persistence), so
    it may be sent again. The agent goes on, unless the append failed ``fenced`` (another writer
    owns the log): the agent has then stopped. ``indeterminate`` (``kind`` ``indeterminate``):
    the failed append could not be cut back, so the log may hold it; the agent has then stopped
    (``ending`` is ``"stopped"``, further calls raise :class:`Stopped`) and released its log:
    re-open it. ``log_error`` is the log's own error (a :class:`~coxswain.asyncio.LogReplaced`,
    :class:`~coxswain.asyncio.LogTruncated` or :class:`~coxswain.asyncio.LogTampered`: the file
    was replaced, or lost or gained records behind the agent's back; every append fails until
    it is looked at and re-opened), ``None`` for a batch that could not be encoded."""

    def __init__(self, message: str, kind: str, cause: BaseException | None = None,
                 indeterminate: bool = False) -> None:
        super().__init__(message)
        self.kind = kind
        self.indeterminate = indeterminate
        self.log_error = cause if isinstance(cause, LogError) else None


class StepClosed(AgentError):
    """A host event was recorded outside its step (after the step was answered): ``kind``
    ``step-closed``."""


class IdTooLong(AgentError, ValueError):
    """A message id (or the id a ``remove`` or ``replace`` names) is longer than the agent's
    ``max_id_bytes`` (UTF-8 bytes): refused, nothing changed (``kind`` ``id-too-long``)."""

    def __init__(self, message: str, bytes: int, max: int) -> None:
        super().__init__(message)
        #: Its length, and the limit.
        self.bytes, self.max = bytes, max


class MessageTooLarge(AgentError, ValueError):
    """A message's JSON is larger than the agent's ``max_message_bytes``: refused, nothing
    changed (``kind`` ``message-too-large``)."""

    def __init__(self, message: str, bytes: int, max: int) -> None:
        super().__init__(message)
        #: Its size, and the limit.
        self.bytes, self.max = bytes, max
