"""The transport's exceptions; `RemotingError` is their root.

A non-SUCCESS response code is data (returned), never one of these.
"""

from __future__ import annotations

__all__ = [
    "RemotingCommandError",
    "RemotingConnectError",
    "RemotingError",
    "RemotingSendRequestError",
    "RemotingStartError",
    "RemotingTimeoutError",
    "RemotingTooManyRequestsError",
]


class RemotingError(Exception):
    """Root of the transport errors.

    Attributes:
        addr: the peer address involved, or None.
    """

    __module__ = "remoting"

    def __init__(self, message: str, addr: str | None = None) -> None:
        self.addr = addr
        super().__init__(message)


class RemotingConnectError(RemotingError):
    """The connection could not be made (refused, unresolvable, or out of time while connecting).

    Nothing was sent. Safe to retry, possibly on another address.
    """

    __module__ = "remoting"

    def __init__(self, addr: str | None, reason: str = "") -> None:
        super().__init__(f"connect to {addr} failed" + (f": {reason}" if reason else ""), addr)


class RemotingSendRequestError(RemotingError):
    """The request could not be written, or its connection broke before the response.

    The peer may or may not have processed it. The connection is closed; the next call opens a
    new one.
    """

    __module__ = "remoting"

    def __init__(self, addr: str | None, reason: str = "") -> None:
        super().__init__(
            f"send request to {addr} failed" + (f": {reason}" if reason else ""), addr
        )


class RemotingTimeoutError(RemotingError):
    """No response before the deadline.

    Attributes:
        timeout: the call's timeout in seconds.
        phase: where the time ran out (``"permit"``, ``"connect"``, ``"response"``...).

    The connection stays usable (unless ``close_socket_if_timeout``); a late reply is dropped
    and logged as ``response.orphaned``.
    """

    __module__ = "remoting"

    def __init__(self, addr: str | None, timeout: float, phase: str = "response") -> None:
        self.timeout = timeout
        self.phase = phase
        super().__init__(
            f"wait {phase} on the channel {addr} timeout, {timeout * 1000:.0f}(ms)", addr
        )


class RemotingTooManyRequestsError(RemotingError):
    """No in-flight permit could be had (RocketMQ's RemotingTooMuchRequestException).

    Nothing was sent. Slow down, or raise the ``*_semaphore_value`` settings.
    """

    __module__ = "remoting"


class RemotingCommandError(RemotingError):
    """A command could not be encoded or decoded; ``__cause__`` is the `codec.CodecError`."""

    __module__ = "remoting"


class RemotingStartError(RemotingError, OSError):
    """A server could not start listening: the port is taken or invalid, or the bind address
    does not resolve. Nothing was started; fix the address or port and start again.

    Also an `OSError`, so code that caught the bare bind error keeps working.

    Attributes:
        addr: the ``"host:port"`` that could not be bound.
        reason: what went wrong, and what to do about it.
    """

    __module__ = "remoting"

    def __init__(self, addr: str, reason: str) -> None:
        self.reason = reason
        RemotingError.__init__(self, f"cannot listen on {addr}: {reason}", addr)
