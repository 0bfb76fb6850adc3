"""The transport's exceptions, and the one table that maps other failures onto them.

A non-SUCCESS response code is data (returned), never one of these. Every failure a caller
can see goes through `translate` (or `map_exceptions` around a block), which turns what trio,
the socket, TLS or the codec raised into the documented error of the call's phase, the most
specific match first (httpcore's ``map_exceptions``).
"""

from __future__ import annotations

import ssl
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, Literal

import trio

from codec import CodecError

if TYPE_CHECKING:
    from collections.abc import Iterator

__all__ = [
    "Phase",
    "RemotingCommandError",
    "RemotingConnectError",
    "RemotingError",
    "RemotingSendRequestError",
    "RemotingStartError",
    "RemotingStreamError",
    "RemotingTimeoutError",
    "RemotingTooManyRequestsError",
    "map_exceptions",
    "rebuild_error",
    "translate",
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

    def __reduce__(self) -> tuple[Any, ...]:
        # Subclasses take other arguments than their message: rebuild from the message and
        # the attributes, not through __init__, so that every one survives pickling
        # (process pools, multiprocessing) with its message and attributes.
        return rebuild_error, (type(self), self.args), self.__dict__


def rebuild_error(cls: type[BaseException], args: tuple[Any, ...]) -> BaseException:
    """Unpickle an error of ``cls`` from its ``args`` (its attributes are set after)."""
    error = cls.__new__(cls, *args)
    error.args = args  # OSError's __new__ leaves them to __init__
    return error


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

    Attributes:
        connection_lost: True if the connection closed while the call waited for its response
            (after its request was queued), False if the request could not be sent.
    """

    __module__ = "remoting"

    def __init__(self, addr: str | None, reason: str = "", *,
                 connection_lost: bool = False) -> None:
        self.connection_lost = connection_lost
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
    """A server or client could not start: the port is taken or invalid, the bind address
    does not resolve, or a TLS certificate, key or CA file cannot be loaded. Nothing was
    started; fix the configuration and start again.

    Also an `OSError`, so code that caught the bare bind or file error keeps working.

    Attributes:
        addr: the ``"host:port"`` a server could not listen on, or None when the address is
            not the problem (a client's TLS files).
        reason: what went wrong, and what to do about it.
    """

    __module__ = "remoting"

    def __init__(self, addr: str | None, reason: str) -> None:
        self.reason = reason
        where = f"cannot listen on {addr}" if addr else "cannot start"
        RemotingError.__init__(self, f"{where}: {reason}", addr)


class RemotingStreamError(RemotingError):
    """A stream could not be opened, or ended with an error.

    The server refused the opening request or its processor failed (``code`` is the response
    code, ``remark`` its reason: SYSTEM_ERROR names the processor's exception, GO_AWAY says
    the server is draining: open it again elsewhere), or the stream's connection was lost
    (``code`` is None). The items received before the error were all delivered; the stream is
    over and holds nothing.

    Attributes:
        code: the response code the server ended or refused the stream with, or None.
        remark: the server's reason, or what happened locally.
    """

    __module__ = "remoting"

    def __init__(self, addr: str | None, code: int | None, remark: str | None) -> None:
        self.code = code
        self.remark = remark
        why = "its connection was lost" if code is None else f"code {code}"
        super().__init__(f"stream from {addr} ended ({why}): {remark or 'no reason given'}",
                         addr)


Phase = Literal["connect", "encode", "send", "call"]


def translate(exc: BaseException, phase: Phase, addr: str | None) -> RemotingError:
    """Return the error a caller sees for ``exc``, raised during ``phase`` of a call to
    ``addr``; its ``__cause__`` is ``exc``.

    The table, most specific first:

    ============  =========================================  ================================
    phase         raised                                     becomes
    ============  =========================================  ================================
    any           `RemotingError`                             itself
    connect       `trio.TooSlowError`                         `RemotingConnectError` (timeout)
    connect       `ssl.SSLError`, `trio.BrokenResourceError`  `RemotingConnectError` (TLS)
    connect       `OSError`                                   `RemotingConnectError`
    encode        `CodecError`, `TypeError`, `ValueError`     `RemotingCommandError`
    send          `trio.BrokenResourceError`,                 `RemotingSendRequestError`
                  `trio.ClosedResourceError`, `OSError`
    any           another `Exception` (a bug)                 `RemotingError` naming it
    any           a `BaseException` (cancelled: shutdown)     `RemotingError` (shut down)
    ============  =========================================  ================================
    """
    if isinstance(exc, RemotingError):
        return exc
    err: RemotingError
    if phase == "connect" and isinstance(exc, trio.TooSlowError):
        err = RemotingConnectError(addr, str(exc) or "no answer within connect_timeout")
    elif phase == "connect" and isinstance(exc, ssl.SSLError | trio.BrokenResourceError):
        cause = exc.__cause__ or exc
        err = RemotingConnectError(addr, f"TLS handshake failed: {cause} (does the server have "
                                         "TLS on, and is its certificate trusted by "
                                         "tls_ca_file?)")
    elif phase == "connect" and isinstance(exc, OSError):
        err = RemotingConnectError(addr, _os_reason(exc))
    elif phase == "encode" and isinstance(exc, CodecError | TypeError | ValueError):
        err = RemotingCommandError(f"request cannot be encoded: {exc}", addr)
    elif phase == "send" and isinstance(exc, trio.BrokenResourceError | trio.ClosedResourceError
                                        | OSError):
        err = RemotingSendRequestError(addr, str(exc) or repr(exc))
    elif isinstance(exc, Exception):
        err = RemotingError(f"the call failed unexpectedly: {exc!r}", addr)
    else:
        err = RemotingError("the endpoint shut down before the call completed", addr)
    err.__cause__ = exc
    return err


def _os_reason(exc: OSError) -> str:
    """Say why a connect failed: trio reports every attempt in an exception group under a
    generic OSError; the attempts' own errors ("Connection refused") say more."""
    cause = exc.__cause__
    if exc.strerror is None and isinstance(cause, BaseExceptionGroup):
        reasons = sorted({e.strerror for e in cause.exceptions
                          if isinstance(e, OSError) and e.strerror})
        if reasons:
            return "; ".join(reasons)
    return exc.strerror or str(exc) or repr(exc)


@contextmanager
def map_exceptions(phase: Phase, addr: str | None) -> Iterator[None]:
    """Raise `translate` of whatever the block raises (cancellation passes through)."""
    try:
        yield
    except Exception as exc:
        raise translate(exc, phase, addr) from exc
