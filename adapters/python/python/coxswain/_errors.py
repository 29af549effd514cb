"""The exceptions of coxswain: one class per rejection kind, under one base.

A rejected input changed nothing and emitted nothing (SPEC S5). ``kind`` is the rejection kind of
the conformance trace format (FORMAT.md).
"""

from __future__ import annotations

from typing import ClassVar

__all__ = [
    "CoxswainError",
    "Rejected",
    "AlreadyPending",
    "AlreadyDelivered",
    "UnexpectedCompletion",
    "Busy",
    "Disposed",
    "AfterDisposal",
    "Undrained",
    "InvalidLog",
    "InvalidInput",
    "CorruptLog",
    "EncodeError",
]


class CoxswainError(Exception):
    """The base of every error coxswain raises."""


class Rejected(CoxswainError):
    """The machine rejected an input: nothing changed (S5)."""

    kind: ClassVar[str] = "rejected"

    def __init__(self, message: str, id: str | None = None) -> None:
        super().__init__(message)
        #: The message id the rejection is about (``AlreadyPending``, ``AlreadyDelivered``).
        self.id = id

    @property
    def was_delivered(self) -> bool:
        """Whether the rejection says this very message was delivered already (a retry may
        stop): true for :class:`AlreadyPending` and :class:`AlreadyDelivered` only."""
        return False


class AlreadyPending(Rejected):
    """The id is already pending in NT or NS (S9, S13)."""

    kind = "already-pending"

    @property
    def was_delivered(self) -> bool:
        return True


class AlreadyDelivered(Rejected):
    """The delivery memory holds the id: a retry of a delivery already made (S51, S52)."""

    kind = "already-delivered"

    @property
    def was_delivered(self) -> bool:
        return True


class UnexpectedCompletion(Rejected):
    """An answer to a request that is not outstanding, or ``end_maintenance`` with none (S4)."""

    kind = "unexpected-completion"


class Busy(Rejected):
    """``begin_maintenance`` while not idle (S43)."""

    kind = "busy"


class Disposed(Rejected):
    """The machine is disposed and accepts no input (S45)."""

    kind = "disposed"


#: The core's name for :class:`Disposed`.
AfterDisposal = Disposed


class Undrained(Rejected):
    """The previous transition was neither persisted nor drained (``Machine.drain`` hands it
    out again). A host error, never part of a conformance trace."""

    kind = "undrained"


class InvalidLog(CoxswainError):
    """A log the machine cannot be restored from (S46, S47); nothing was restored."""

    def __init__(self, message: str, index: int) -> None:
        super().__init__(message)
        #: The 0-based position of the offending event.
        self.index = index


class InvalidInput(CoxswainError, ValueError):
    """An input that is not one of FORMAT.md's shapes (not a rejection: nothing was applied)."""


class CorruptLog(CoxswainError):
    """A stored log that cannot be read back or restored; names the 1-based line."""

    def __init__(self, message: str, line: int) -> None:
        super().__init__(message)
        self.line = line


class EncodeError(CoxswainError, ValueError):
    """A record the log reader would refuse (too deep, a reserved type…); nothing was written."""
