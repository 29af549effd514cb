"""The errors of an :class:`~coxswain.asyncio.Agent` that are the agent's, not the core's."""

from __future__ import annotations

from .._errors import CoxswainError

__all__ = ["AgentError", "Closed", "Stopped", "PersistenceError", "StepClosed"]


class AgentError(CoxswainError):
    """A call on an :class:`Agent` failed for a reason of the agent, not the core."""


class Closed(AgentError):
    """The agent was closed."""


class Stopped(AgentError):
    """The agent stopped after a persistence failure: re-open it from its log."""


class PersistenceError(AgentError):
    """Appending this input's events failed: it is not in the log (``indeterminate``: it may
    be). The agent stopped: re-open it from its log."""

    def __init__(self, message: str, *, indeterminate: bool = False) -> None:
        super().__init__(message)
        self.indeterminate = indeterminate


class StepClosed(AgentError):
    """A host event was recorded after its step was answered."""
