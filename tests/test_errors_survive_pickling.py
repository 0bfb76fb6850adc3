"""Every public exception crosses a process boundary (pickle) with its message and attributes.

Process pools and multiprocessing pickle an exception raised in a worker; most of ours take
other arguments than their message, so rebuilding one through ``__init__`` used to garble the
message or fail outright (``RemotingTimeoutError`` needs its timeout).
"""

from __future__ import annotations

import multiprocessing
import pickle
from concurrent.futures import ProcessPoolExecutor

import pytest

from codec import (
    CodecError,
    ForeignProtocolError,
    FrameTooLargeError,
    HeaderFieldError,
    InvalidCommandError,
    MalformedFrameError,
    RemotingCommand,
    UnsupportedSerializeTypeError,
)
from remoting import (
    AbortProcessError,
    RemotingCommandError,
    RemotingConnectError,
    RemotingError,
    RemotingResponseError,
    RemotingSendRequestError,
    RemotingStartError,
    RemotingStreamError,
    RemotingTimeoutError,
    RemotingTooManyRequestsError,
)
from remoting.bus import BusPermissionError, ReplyFailure
from remoting.spark import RemoteCallError

ERRORS: list[BaseException] = [
    RemotingError("no route", "10.0.0.1:9876"),
    RemotingConnectError("127.0.0.1:1", "refused"),
    RemotingSendRequestError("127.0.0.1:2", "reset", connection_lost=True),
    RemotingTimeoutError("127.0.0.1:3", 2.5, "connect"),
    RemotingTooManyRequestsError("no permit", "127.0.0.1:4"),
    RemotingCommandError("cannot decode", "127.0.0.1:5"),
    RemotingStartError("127.0.0.1:6", "the port is in use"),
    RemotingStartError(None, "cannot load tls_ca_file '/x.pem': No such file or directory"),
    RemotingResponseError(RemotingCommand.create_response(16, "no permission"), "127.0.0.1:8"),
    RemotingStreamError("127.0.0.1:7", 1, "java.lang.ValueError: broke"),
    RemotingStreamError("127.0.0.1:8", None, "the connection closed mid-stream"),
    RemoteCallError(-1006, "timed out", row=3, failed=2, total=10, request_code=1001),
    AbortProcessError(16, "no permission"),
    ReplyFailure("RECIPIENT_FAILURE", "out of stock", address="orders", code=42),
    ReplyFailure("TIMEOUT", "timed out waiting for a reply"),
    BusPermissionError("[bus] AccessKey 'x' may not consume at address 'price'",
                       "127.0.0.1:9877", address="price"),
    CodecError("bad bytes"),
    FrameTooLargeError(20_000_000, 16_777_216),
    MalformedFrameError("truncated header"),
    ForeignProtocolError("HTTP", "point an HTTP client at the HTTP port"),
    UnsupportedSerializeTypeError(7),
    InvalidCommandError("code out of range"),
    HeaderFieldError("SendMessageRequestHeader", "queueId", "not an int"),
]


def _same(a: BaseException, b: BaseException) -> None:
    assert type(b) is type(a)
    assert str(b) == str(a)
    assert b.args == a.args
    assert vars(b) == vars(a)


@pytest.mark.parametrize("error", ERRORS, ids=lambda e: type(e).__name__)
def test_an_error_keeps_its_message_and_attributes_through_pickle(error: BaseException) -> None:
    for protocol in (2, pickle.HIGHEST_PROTOCOL):
        _same(error, pickle.loads(pickle.dumps(error, protocol)))


def test_a_start_error_stays_an_os_error_after_pickle() -> None:
    error: RemotingStartError = pickle.loads(
        pickle.dumps(RemotingStartError("127.0.0.1:6", "the port is in use")))
    assert isinstance(error, OSError)
    assert error.reason == "the port is in use" and error.addr == "127.0.0.1:6"


def _raise_timeout() -> None:
    raise RemotingTimeoutError("127.0.0.1:7", 1.5)


def test_an_error_raised_in_a_process_pool_reaches_the_caller_intact() -> None:
    context = multiprocessing.get_context("spawn")
    with ProcessPoolExecutor(max_workers=1, mp_context=context) as pool:
        future = pool.submit(_raise_timeout)
        with pytest.raises(RemotingTimeoutError) as caught:
            future.result(timeout=60)
    error = caught.value
    assert (error.addr, error.timeout, error.phase) == ("127.0.0.1:7", 1.5, "response")
    assert str(error).startswith("no response from 127.0.0.1:7 within 1.5 s: ")
