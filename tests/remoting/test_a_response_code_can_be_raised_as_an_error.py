"""Responses stay data, and are friendlier to read: ``raise_for_code`` turns a code the caller
does not accept into an error of ours naming the code and the remark, and a response's repr
names its code."""

from __future__ import annotations

import pickle

import pytest

from codec import RemotingCommand, ResponseCode
from remoting import (
    RemotingError,
    RemotingResponseError,
    TrioRemotingClient,
    TrioRemotingServer,
    raise_for_code,
)

from ..factories import req
from .conftest import ECHO, addr_of


async def test_an_unsupported_code_raises_naming_the_code_and_the_remark(
        server: TrioRemotingServer, client: TrioRemotingClient) -> None:
    addr = addr_of(server)
    response = await client.invoke_sync(addr, req(999), 5)  # still data: returned
    with pytest.raises(RemotingResponseError) as caught:
        raise_for_code(response, addr=addr)
    error = caught.value
    assert str(error) == (f"{addr} answered code 3 (REQUEST_CODE_NOT_SUPPORTED): "
                          "request type 999 not supported")
    assert (error.code, error.remark, error.addr) == (3, "request type 999 not supported", addr)
    assert error.response is response and isinstance(error, RemotingError)


async def test_an_accepted_code_returns_the_response(
        server: TrioRemotingServer, client: TrioRemotingClient) -> None:
    response = await client.invoke_sync(addr_of(server), req(ECHO, b"x"), 5)
    assert raise_for_code(response) is response
    not_found = RemotingCommand.create_response(ResponseCode.QUERY_NOT_FOUND)
    assert raise_for_code(not_found, ok={ResponseCode.SUCCESS, ResponseCode.QUERY_NOT_FOUND}) \
        is not_found


def test_a_code_of_the_service_s_own_is_named_by_its_number() -> None:
    with pytest.raises(RemotingResponseError, match=r"^the peer answered code 4711$"):
        raise_for_code(RemotingCommand.create_response(4711))


def test_the_error_survives_pickling_with_its_response() -> None:
    error = RemotingResponseError(RemotingCommand.create_response(16, "no permission"), "h:1")
    again = pickle.loads(pickle.dumps(error))
    assert str(again) == str(error) and again.response == error.response
    assert (again.code, again.remark, again.addr) == (16, "no permission", "h:1")


def test_a_response_s_repr_names_its_code_a_request_s_does_not() -> None:
    response = RemotingCommand.create_response(ResponseCode.REQUEST_CODE_NOT_SUPPORTED)
    assert "code=3 (REQUEST_CODE_NOT_SUPPORTED)," in repr(response)
    assert "code=4711," in repr(RemotingCommand.create_response(4711))
    assert "code=3," in repr(RemotingCommand.create_request(3))  # a service's own request code
