"""What either driver raises when a call gets no in-flight permit (RocketMQ's
``semaphoreAsync.tryAcquire`` failing): one message for each case, whichever driver."""

from __future__ import annotations

from typing import Literal

from ..._errors import RemotingTooManyRequestsError

__all__ = ["batch_got_no_permit", "no_permit"]


def no_permit(kind: Literal["async", "oneway"], role: str, timeout: float, waiting: int,
              addr: str | None) -> RemotingTooManyRequestsError:
    """The error of a ``kind`` call of a ``role`` endpoint that got no in-flight permit
    within ``timeout`` while ``waiting`` calls waited for one."""
    what = "oneway" if kind == "oneway" else "in-flight"
    return RemotingTooManyRequestsError(
        f"no {what} permit within {timeout}s ({waiting} waiting); slow down or raise "
        f"{role}_{kind}_semaphore_value", addr)


def batch_got_no_permit(timeout: float, addr: str | None) -> RemotingTooManyRequestsError:
    """The error of an ``invoke_many``'s requests that got no in-flight permit within
    ``timeout`` (either driver)."""
    return RemotingTooManyRequestsError(
        f"no in-flight permit within {timeout}s for a batch request: other calls hold them "
        "all; slow down or raise client_async_semaphore_value", addr)
