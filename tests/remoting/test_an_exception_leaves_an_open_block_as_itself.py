"""What the body of ``async with open_client()/open_server()`` (or ``with`` a blocking face)
raises leaves the block as itself, never wrapped in an exception group; several real
exceptions at once stay a group (trio-websocket's rule)."""

from __future__ import annotations

import traceback

import pytest
import trio

import remoting
from remoting import RemotingClient, RemotingConnectError, RemotingServer, ServerConfig
from remoting._faces._one_error import raise_one

from ..factories import req
from .test_lifecycle import dead_port


def raised_in(exc: BaseException, function: str) -> bool:
    return any(frame.name == function for frame in traceback.extract_tb(exc.__traceback__))


def body_raising_key_error() -> None:
    raise KeyError("mine")


async def test_a_key_error_leaves_open_client_as_itself() -> None:
    with pytest.raises(KeyError, match="mine") as caught:
        async with remoting.open_client():
            body_raising_key_error()
    assert raised_in(caught.value, "body_raising_key_error")  # its traceback is intact
    assert caught.value.__context__ is None  # not the group it travelled in


async def test_a_key_error_leaves_open_server_as_itself() -> None:
    with pytest.raises(KeyError, match="mine") as caught:
        async with remoting.open_server(ServerConfig()):
            body_raising_key_error()
    assert raised_in(caught.value, "body_raising_key_error")
    assert caught.value.__context__ is None


async def test_except_remoting_connect_error_around_the_block_catches_a_refused_call() -> None:
    addr = f"127.0.0.1:{await dead_port()}"
    caught = None
    try:
        async with remoting.open_server(ServerConfig()), remoting.open_client() as client:
            await client.invoke_sync(addr, req(1), timeout=5)
    except RemotingConnectError as exc:
        caught = exc
    assert caught is not None and caught.addr == addr


async def test_an_exception_group_of_the_body_leaves_as_that_group() -> None:
    errors = [KeyError(1), ValueError(2)]
    with pytest.raises(ExceptionGroup) as caught:
        async with remoting.open_client():
            raise ExceptionGroup("the body's own", errors)
    # trio's cancel scopes may copy a group on the way out (BaseExceptionGroup.derive)
    assert caught.value.message == "the body's own"
    assert list(caught.value.exceptions) == errors


def test_a_key_error_leaves_the_blocking_faces_as_itself() -> None:
    for face in (RemotingClient(), RemotingServer(ServerConfig())):
        with pytest.raises(KeyError, match="mine") as caught, face:
            body_raising_key_error()
        assert raised_in(caught.value, "body_raising_key_error")


async def group_of(*exceptions: BaseException) -> BaseExceptionGroup[BaseException]:
    """A group as a nursery makes it, of these exceptions."""

    async def raising(exc: BaseException) -> None:
        raise exc

    try:
        async with trio.open_nursery() as nursery:
            for exc in exceptions:
                nursery.start_soon(raising, exc)
    except BaseExceptionGroup as group:
        return group
    raise AssertionError("the nursery raised nothing")


async def a_real_cancelled() -> trio.Cancelled:
    with trio.CancelScope() as scope:
        scope.cancel()
        try:
            await trio.sleep_forever()
        except trio.Cancelled as cancelled:
            return cancelled
    raise AssertionError("not cancelled")


async def test_several_real_exceptions_stay_a_group() -> None:
    group = await group_of(KeyError(1), ValueError(2))
    with pytest.raises(BaseExceptionGroup) as caught:
        raise_one(group)
    assert caught.value is group


async def test_a_cancelled_beside_one_exception_is_dropped() -> None:
    error = KeyError(1)
    group = BaseExceptionGroup("nursery", [await a_real_cancelled(), error])
    with pytest.raises(KeyError) as caught:
        raise_one(group)
    assert caught.value is error
