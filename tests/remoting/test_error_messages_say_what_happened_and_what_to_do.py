"""The messages a user reads: what happened, in plain words, said once, and what to do."""

from __future__ import annotations

import math
import re

import pytest

from codec import ResponseCode
from remoting import (
    RemotingConnectError,
    RemotingTimeoutError,
    TrioRemotingClient,
    TrioRemotingServer,
)

from ..factories import req
from ..logs import capture_logs
from .conftest import GATED_ASYNC, AsyncGate, addr_of
from .test_lifecycle import dead_port


def nested_parentheses(text: str) -> bool:
    depth = 0
    for char in text:
        depth += {"(": 1, ")": -1}.get(char, 0)
        if depth > 1:
            return True
    return False


async def test_a_timeout_says_which_server_did_not_answer_in_how_long_and_what_to_do(
        server: TrioRemotingServer, client: TrioRemotingClient) -> None:
    gate = AsyncGate()
    server.register_processor(GATED_ASYNC, gate)
    with capture_logs() as logs, pytest.raises(RemotingTimeoutError) as caught:
        await client.invoke_sync(addr_of(server), req(GATED_ASYNC), timeout=0.25)
    gate.event.set()
    message = str(caught.value)
    assert message == (f"no response from {addr_of(server)} within 0.25 s: raise the timeout, "
                       f"or see how busy the server is (remoting stats {addr_of(server)})")
    # the caller has the exception: the log says it only at debug level
    timed_out = [e for e in logs if e["event"] == "request.timed_out"]
    assert [e["log_level"] for e in timed_out] == ["debug"]


async def test_a_timeout_of_0_says_nothing_was_sent(server: TrioRemotingServer,
                                                   client: TrioRemotingClient) -> None:
    with pytest.raises(RemotingTimeoutError, match=r"left no time: nothing was sent"):
        await client.invoke_sync(addr_of(server), req(1), timeout=0)


@pytest.mark.parametrize("timeout", [-1, -0.001, -math.inf])
async def test_a_negative_timeout_is_a_value_error_at_the_call(
        server: TrioRemotingServer, client: TrioRemotingClient, timeout: float) -> None:
    with pytest.raises(ValueError, match=r"timeout must be a number of seconds >= 0"):
        await client.invoke_sync(addr_of(server), req(1), timeout=timeout)


async def test_a_refused_connect_says_so_once_and_asks_if_a_server_listens(
        client: TrioRemotingClient) -> None:
    addr = f"127.0.0.1:{await dead_port()}"
    with pytest.raises(RemotingConnectError) as caught:
        await client.invoke_sync(addr, req(1), timeout=5)
    assert str(caught.value) == (f"connect to {addr} failed: connection refused "
                                 "(is a server listening there?)")


async def test_an_unknown_code_s_remark_has_no_leading_space(
        server: TrioRemotingServer, client: TrioRemotingClient) -> None:
    response = await client.invoke_sync(addr_of(server), req(999), timeout=5)
    assert response.code == ResponseCode.REQUEST_CODE_NOT_SUPPORTED
    assert response.remark == "request type 999 not supported"


def test_no_message_nests_parentheses() -> None:
    assert nested_parentheses("a (b (c))") and not nested_parentheses("a (b) c (d)")
    error = RemotingTimeoutError("h:1", 2.0, "response (loop stalled)")
    assert not nested_parentheses(str(error)), str(error)
    assert not re.search(r"\(ms\)|on the channel", str(error))
