"""The queue's exceptions: a refusal by the service, with its code and what to do."""

from __future__ import annotations

from codec import ResponseCode

from .._errors import RemotingError

__all__ = ["QueueError", "QueueFullError", "malformed_records", "refusal_error"]


class QueueError(RemotingError):
    """The queue service refused a request, or a subscription was used wrongly.

    The message says what to do. The connection and the service are unchanged: nothing of
    the refused request was done.

    Attributes:
        code: the service's response code (``TOPIC_NOT_EXIST``, ``INVALID_PARAMETER``,
            ``MESSAGE_ILLEGAL``, ``SUBSCRIPTION_NOT_EXIST``...), or None for a local misuse
            (a message acknowledged twice, a closed subscription).
        remark: the service's reason.
    """

    def __init__(self, addr: str | None, code: int | None, remark: str | None) -> None:
        self.code = code
        self.remark = remark
        where = "" if code is None else f" (code {code})"
        super().__init__(f"queue at {addr}: {remark or 'refused'}{where}", addr)


class QueueFullError(QueueError):
    """A publish was refused with SYSTEM_BUSY: the topic holds ``memory_messages``, or
    ``memory_bytes`` of them, or the service's topics ``total_memory_bytes``, and the service
    has no data directory. Nothing of it was appended; what was acknowledged before is kept.
    Retry once consumers have caught up, or run the service with a data directory."""



def malformed_records(addr: str | None, error: ValueError) -> QueueError:
    """The service answered with records that do not decode (a broken or hostile service)."""
    return QueueError(addr, None, (
        f"the service sent records that are not well-formed ({error}): it is broken or not "
        "a queue service; none of them was taken"))


def refusal_error(addr: str | None, code: int, remark: str | None) -> QueueError:
    """Return the error for a reply with a non-SUCCESS ``code``."""
    cls = QueueFullError if code == ResponseCode.SYSTEM_BUSY else QueueError
    return cls(addr, code, remark)
