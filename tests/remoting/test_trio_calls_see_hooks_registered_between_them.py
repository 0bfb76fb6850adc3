"""A trio client's sync, async and oneway calls that nothing sees skip the `ClientCall` (the
`Caller`'s one shortcut); an RPC hook registered between two calls still sees the second,
and a wrong argument is still refused at the call, on either path."""

from __future__ import annotations

import pytest

from codec import RemotingCommand
from remoting import TrioRemotingClient, TrioRemotingServer

from ..factories import req
from .conftest import ASYNC_ECHO, addr_of


class Seen:
    def __init__(self) -> None:
        self.before: list[int] = []
        self.after: list[int] = []

    def do_before_request(self, remote_addr: str, request: RemotingCommand) -> None:
        self.before.append(request.code)

    def do_after_response(self, remote_addr: str, request: RemotingCommand,
                          response: RemotingCommand | None) -> None:
        self.after.append(request.code)


async def test_a_hook_registered_between_calls_sees_the_next_ones(
        server: TrioRemotingServer, client: TrioRemotingClient) -> None:
    addr = addr_of(server)
    assert (await client.invoke_sync(addr, req(ASYNC_ECHO), 5)).body == b"x"
    seen = Seen()
    client.register_rpc_hook(seen)
    assert (await client.invoke_sync(addr, req(ASYNC_ECHO), 5)).body == b"x"
    fut = await client.invoke_async(addr, req(ASYNC_ECHO), 5)
    assert (await fut.wait()).body == b"x"
    await client.invoke_oneway(addr, req(ASYNC_ECHO), 5)
    assert seen.before == [ASYNC_ECHO] * 3
    assert seen.after[:2] == [ASYNC_ECHO] * 2


@pytest.mark.parametrize("hooked", [False, True])
async def test_wrong_arguments_are_refused_at_the_call_on_either_path(
        server: TrioRemotingServer, client: TrioRemotingClient, hooked: bool) -> None:
    addr = addr_of(server)
    if hooked:
        client.register_rpc_hook(Seen())
    with pytest.raises(TypeError):
        await client.invoke_sync(addr, b"not a command", 5)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="timeout"):
        await client.invoke_sync(addr, req(ASYNC_ECHO), -1)
    with pytest.raises(TypeError):
        await client.invoke_async(addr, req(ASYNC_ECHO), 5, "not callable")  # type: ignore[arg-type]
    response = await client.invoke_sync(addr, req(ASYNC_ECHO), 5)
    with pytest.raises(ValueError, match="respon"):
        await client.invoke_oneway(addr, response, 5)  # a response is no request
