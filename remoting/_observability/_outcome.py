"""How a call ended, in a few words: the ``remoting.outcome`` attribute of telemetry."""

from __future__ import annotations

from typing import Final, Literal

from codec import ResponseCode

from .._errors import (
    RemotingSendRequestError,
    RemotingTimeoutError,
    RemotingTooManyRequestsError,
)

__all__ = ["Outcome", "outcome_of_error", "outcome_of_response"]

Outcome = Literal["success", "error_reply", "busy", "timeout", "send_failure",
                  "connection_lost"]

_SUCCESS: Final = int(ResponseCode.SUCCESS)
_BUSY: Final = int(ResponseCode.SYSTEM_BUSY)


def outcome_of_response(code: int) -> Outcome:
    """Return the outcome of a call answered with ``code``."""
    if code == _SUCCESS:
        return "success"
    if code == _BUSY:
        return "busy"
    return "error_reply"


def outcome_of_error(exc: BaseException) -> Outcome:
    """Return the outcome of a call that ended with ``exc`` (no response)."""
    if isinstance(exc, RemotingTimeoutError):
        return "timeout"
    if isinstance(exc, RemotingSendRequestError) and exc.connection_lost:
        return "connection_lost"
    if isinstance(exc, RemotingTooManyRequestsError):
        return "busy"  # no permit, or a peer that does not read: local back-pressure
    return "send_failure"  # not connected, not encodable, not written, cancelled
