"""The transport's exceptions, and the one table that maps other failures onto them.

A non-SUCCESS response code is data (returned), never one of these. Every failure of
another library a caller can see goes through `translate`, which turns what trio, the
socket, TLS, a file or the codec raised into the documented error of the phase it happened
in (starting, connecting, encoding, a call), the most specific match first
(httpcore's ``map_exceptions``). What our own checks find (a port out of range, a call
refused for want of a permit, a deadline passed) is raised as its error directly.
"""

from __future__ import annotations

import errno
import os
import socket
import ssl
import sys
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final, Literal

from codec import CodecError, ResponseCode

if TYPE_CHECKING:
    from collections.abc import Container

    from codec import RemotingCommand

__all__ = [
    "Files",
    "Phase",
    "RemotingCommandError",
    "RemotingConnectError",
    "RemotingError",
    "RemotingResponseError",
    "RemotingSendRequestError",
    "RemotingStartError",
    "RemotingStreamError",
    "RemotingTimeoutError",
    "RemotingTooManyRequestsError",
    "raise_for_code",
    "rebuild_error",
    "translate",
]


class RemotingError(Exception):
    """Root of the transport errors.

    Attributes:
        addr: the peer address involved, or None.
    """

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

    def __init__(self, addr: str | None, reason: str = "") -> None:
        super().__init__(f"connect to {addr} failed" + (f": {reason}" if reason else ""), addr)


class RemotingSendRequestError(RemotingError):
    """The request could not be written, or its connection broke before the response.

    The peer may or may not have processed it, unless ``going_away``. The connection is
    closed; the next call opens a new one.

    Attributes:
        connection_lost: True if the connection closed while the call waited for its response
            (after its request was queued), False if the request could not be sent.
        going_away: True if the peer is shutting down and answered GO_AWAY, again after the
            one resend: it did not process the request, which is safe to send elsewhere.
    """

    def __init__(self, addr: str | None, reason: str = "", *,
                 connection_lost: bool = False, going_away: bool = False) -> None:
        self.connection_lost = connection_lost
        self.going_away = going_away
        what = (f"the connection to {addr} closed before the response" if connection_lost
                else f"send request to {addr} failed")
        super().__init__(what + (f": {reason}" if reason else ""), addr)


class RemotingTimeoutError(RemotingError):
    """No response before the deadline.

    Attributes:
        timeout: the call's timeout in seconds.
        phase: where the time ran out (``"permit"``, ``"connect"``, ``"response"``...).

    The connection stays usable (unless ``close_socket_if_timeout``); a late reply is dropped
    and logged as ``response.orphaned``.
    """

    def __init__(self, addr: str | None, timeout: float, phase: str = "response") -> None:
        self.timeout = timeout
        self.phase = phase
        super().__init__(_timeout_message(addr, timeout, phase), addr)


# What ran out of time in each phase, and what to do about it.
_TIMED_OUT: Final = {
    "response": ("no response from {addr}",
                 "raise the timeout, or see how busy the server is (remoting stats {addr})"),
    "connect": ("could not connect to {addr}",
                "is the server up and reachable from here? (or raise the timeout)"),
    "send": ("could not send to {addr}",
             "the peer reads too slowly to take the request; raise the timeout"),
    "permit": ("no in-flight permit for a call to {addr}",
               "too many calls are waiting: slow down, or raise the timeout"),
}


def _timeout_message(addr: str | None, timeout: float, phase: str) -> str:
    """Say in plain words what ran out of time, and what to do (RocketMQ's Java phrasing,
    ``wait response on the channel ... timeout, 1(ms)``, said neither)."""
    base, _, note = phase.partition(" (")  # "response (loop stalled)": a phase and a note
    if timeout <= 0:
        return (f"the call's timeout ({timeout:g} s) left no time: nothing was sent to {addr}")
    what, hint = _TIMED_OUT.get(base, (f"timed out waiting for {base} from {{addr}}",
                                          "raise the timeout"))
    note = f" ({note}" if note else ""
    return f"{what.format(addr=addr)} within {timeout:g} s{note}: {hint.format(addr=addr)}"


class RemotingTooManyRequestsError(RemotingError):
    """No in-flight permit could be had (RocketMQ's RemotingTooMuchRequestException).

    Nothing was sent. Slow down, or raise the ``*_semaphore_value`` settings.
    """



class RemotingCommandError(RemotingError):
    """A command could not be encoded or decoded; ``__cause__`` is the `codec.CodecError`."""



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

    def __init__(self, addr: str | None, reason: str) -> None:
        self.reason = reason
        where = f"cannot listen on {addr}" if addr else "cannot start"
        RemotingError.__init__(self, f"{where}: {reason}", addr)


class RemotingResponseError(RemotingError):
    """A response's code is not one the caller accepts: raised by `raise_for_code` only (a
    call returns whatever code the peer answered: it is data).

    Attributes:
        code: the response's code.
        remark: the response's remark (the peer's reason), or None.
        response: the response itself (its ``ext_fields`` and ``body`` too).
        addr: who answered, when the caller said (``raise_for_code(..., addr=...)``).
    """

    def __init__(self, response: RemotingCommand, addr: str | None = None) -> None:
        self.response = response
        self.code = response.code
        self.remark = response.remark
        name = ResponseCode.name_of(response.code)
        said = f"{response.code} ({name})" if name else f"{response.code}"
        super().__init__(f"{addr or 'the peer'} answered code {said}"
                         + (f": {response.remark}" if response.remark else ""), addr)


def raise_for_code(response: RemotingCommand, ok: Container[int] = (ResponseCode.SUCCESS,),
                   *, addr: str | None = None) -> RemotingCommand:
    """Return ``response`` if its code is in ``ok`` (default: SUCCESS alone); else raise.

    For code that treats any other answer as a failure, as httpx's ``raise_for_status``:
    ``reply = raise_for_code(client.invoke_sync(addr, request), addr=addr)``.

    Raises:
        RemotingResponseError: the code is not in ``ok``; it names the code and the remark.
    """
    if response.code in ok:
        return response
    raise RemotingResponseError(response, addr)


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

    def __init__(self, addr: str | None, code: int | None, remark: str | None) -> None:
        self.code = code
        self.remark = remark
        why = "its connection was lost" if code is None else f"code {code}"
        super().__init__(f"stream from {addr} ended ({why}): {remark or 'no reason given'}",
                         addr)


Phase = Literal["start", "connect", "encode", "call"]


@dataclass(frozen=True, slots=True)
class Files:
    """The files a start was reading when it failed, for the ``start`` phase's message.

    Attributes:
        setting: the setting that names them (``"tls_ca_file"``).
        paths: the files (None: not given).
        parsed: True if they were parsed too (a bad content is possible: TLS material),
            False if only read.
    """

    setting: str
    paths: tuple[str | None, ...]
    parsed: bool = True


def translate(exc: BaseException, phase: Phase, addr: str | None, *,
              files: Files | None = None) -> RemotingError:
    """Return the error a caller sees for ``exc``, raised during ``phase`` of a call to
    ``addr`` (``start``: of starting a server on ``addr``, or, with ``files``, of reading
    them); its ``__cause__`` is ``exc``.

    The table, most specific first:

    ============  =========================================  ================================
    phase         raised                                     becomes
    ============  =========================================  ================================
    any           `RemotingError`                             itself
    start         `OSError` reading ``files``                 `RemotingStartError` naming them
    start         `socket.gaierror`                           `RemotingStartError` (bind address)
    start         `OSError`                                   `RemotingStartError` (by errno)
    connect       `trio.TooSlowError`                         `RemotingConnectError` (timeout)
    connect       `ssl.SSLError`, `trio.BrokenResourceError`  `RemotingConnectError` (TLS)
    connect       `OSError`                                   `RemotingConnectError`
    encode        `CodecError`, `TypeError`, `ValueError`     `RemotingCommandError`
    any           another `Exception` (a bug)                 `RemotingError` naming it
    any           a `BaseException` (cancelled: shutdown)     `RemotingError` (shut down)
    ============  =========================================  ================================

    A failed send has no row: whatever the socket raised closes the connection, and the
    connection's close fails its calls with `RemotingSendRequestError` (RocketMQ's
    ``failFast``); a call finding its connection closed raises it directly.
    """
    if isinstance(exc, RemotingError):
        return exc
    err: RemotingError
    if phase == "start" and isinstance(exc, OSError):
        err = RemotingStartError(addr, _start_reason(exc, addr, files))
    elif phase == "connect" and _is_trio(exc, "TooSlowError"):
        err = RemotingConnectError(addr, str(exc) or "no answer within connect_timeout")
    elif phase == "connect" and (isinstance(exc, ssl.SSLError)
                                 or _is_trio(exc, "BrokenResourceError")):
        cause = exc.__cause__ or exc
        err = RemotingConnectError(addr, f"TLS handshake failed: {cause} (does the server have "
                                         "TLS on, and is its certificate trusted by "
                                         "tls_ca_file?)")
    elif phase == "connect" and isinstance(exc, OSError):
        err = RemotingConnectError(addr, _os_reason(exc))
    elif phase == "encode" and isinstance(exc, CodecError | TypeError | ValueError):
        err = RemotingCommandError(f"request cannot be encoded: {exc}", addr)
    elif isinstance(exc, Exception):
        err = RemotingError(f"the call failed unexpectedly: {exc!r}", addr)
    else:
        err = RemotingError("the endpoint shut down before the call completed", addr)
    err.__cause__ = exc
    return err


def _is_trio(exc: BaseException, name: str) -> bool:
    """True if ``exc`` is trio's exception ``name``. trio is looked up, not imported: not
    imported, it raised nothing (and the sans-I/O core, which raises our errors, loads no
    trio)."""
    trio = sys.modules.get("trio")
    return trio is not None and isinstance(exc, getattr(trio, name))


# What a failed bind or listen means, by errno (the rest say their strerror).
_START_REASONS: Final = {
    errno.EADDRINUSE: ("the port is already in use by another process; stop it or choose "
                       "another port (0 picks a free one)"),
    errno.EADDRNOTAVAIL: "that address is not one of this machine's",
    errno.EACCES: "permission denied (ports below 1024 need privileges)",
}


def _start_reason(exc: OSError, addr: str | None, files: Files | None) -> str:
    """Say why a start failed and what to do: which file of which setting could not be read
    or loaded, else why ``addr`` cannot be listened on."""
    if files is not None:
        if not files.parsed:
            named = ", ".join(repr(f) for f in files.paths if f)
            return f"cannot read {files.setting} {named}: {exc.strerror or exc}; check the path"
        # FileNotFoundError from ssl does not name the file: look for the missing one
        missing = [f for f in files.paths if f and not os.path.exists(f)]
        if isinstance(exc, FileNotFoundError) and missing:
            named = ", ".join(repr(f) for f in missing)
            return f"{files.setting} {named}: No such file or directory; check the path"
        named = ", ".join(repr(f) for f in files.paths if f)
        why = (f"not PEM, or the key does not match the certificate ({exc.reason or exc})"
               if isinstance(exc, ssl.SSLError) else exc.strerror or str(exc))
        return f"cannot load {files.setting} {named}: {why}; check the path and the contents"
    if isinstance(exc, socket.gaierror):
        host = (addr or "").rpartition(":")[0]
        return (f"the bind address {host!r} does not resolve ({exc.strerror}); use an IP "
                "address of this machine, 127.0.0.1 or 0.0.0.0")
    return _START_REASONS.get(exc.errno or 0) or exc.strerror or repr(exc)


# What to check after a failed connect, by errno.
_CONNECT_HINTS: Final = {
    errno.ECONNREFUSED: "is a server listening there?",
    errno.ETIMEDOUT: "is the host up, and the port open in its firewall?",
    errno.EHOSTUNREACH: "is the address right, and the host up?",
    errno.ENETUNREACH: "is the address right, and the network up?",
}


def _os_reason(exc: OSError) -> str:
    """Say why a connect failed, once and in words, with what to check. trio reports every
    attempt in an exception group under a generic OSError; each attempt's own error repeats
    the address (``Error connecting to ('127.0.0.1', 1): Connection refused``): its errno is
    what counts."""
    if isinstance(exc, socket.gaierror):
        return f"the host name does not resolve ({exc.strerror or exc}); is it spelt right?"
    errors: list[OSError] = [exc]
    cause = exc.__cause__
    if exc.errno is None and isinstance(cause, BaseExceptionGroup):
        errors = [e for e in cause.exceptions if isinstance(e, OSError)] or errors
    reasons = []
    for error in errors:
        if error.errno is None:
            reason = error.strerror or str(error) or repr(error)
        else:
            reason = os.strerror(error.errno).lower()
            hint = _CONNECT_HINTS.get(error.errno)
            reason += f" ({hint})" if hint else ""
        if reason not in reasons:
            reasons.append(reason)
    return "; ".join(reasons)
