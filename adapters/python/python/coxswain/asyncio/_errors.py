"""The errors of an :class:`~coxswain.asyncio.Agent` that are the agent's, not the core's."""

from __future__ import annotations

from .._errors import CoxswainError
from .._filelog import LogError

__all__ = ["AgentError", "Closed", "Stopped", "PersistenceError", "StepClosed"]


class AgentError(CoxswainError):
    """A call on an :class:`Agent` failed for a reason of the agent, not the core."""


class Closed(AgentError):
    """The agent was closed."""


class Stopped(AgentError):
    """The agent stopped after a persistence failure: re-open it from its log."""


class PersistenceError(AgentError):
    """Appending this input's events failed: it is not in the log (``indeterminate``: it may
    be). The agent stopped: re-open it from its log. By the time this is raised the agent has
    ended (``ending`` is ``"stopped"``, ``when_idle`` raises :class:`Stopped`) and released its
    log. ``log_error`` is the log's own error (a :class:`~coxswain.asyncio.LogTruncated` or
    :class:`~coxswain.asyncio.LogTampered`: the file lost or gained records behind the agent's
    back; look at it before re-opening)."""

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
    """A host event was recorded after its step was answered."""
