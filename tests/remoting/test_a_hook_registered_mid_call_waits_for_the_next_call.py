"""An RPC hook registered while a call is in flight is not that call's: it sees neither its
request nor its response (an after-hook without its before-hook was possible: the hooks'
list was read once before the call and again after it), and it sees the next calls whole.
Sync and async calls of the blocking face (both io settings, by conftest), and the trio face."""

from __future__ import annotations

import threading

from codec import RemotingCommand, ResponseCode
from processors import AsyncRequestProcessor, RequestContext, RequestProcessor
from remoting import RemotingClient, RemotingServer, TrioRemotingClient, TrioRemotingServer

from .conftest import addr_of

CODE = 77


class Seen:
    def __init__(self) -> None:
        self.before: list[int] = []
        self.after: list[int] = []

    def do_before_request(self, remote_addr: str, request: RemotingCommand) -> None:
        self.before.append(request.opaque)

    def do_after_response(self, remote_addr: str, request: RemotingCommand,
                          response: RemotingCommand | None) -> None:
        self.after.append(request.opaque)


class RegistersOnTheClient(RequestProcessor):
    """Registers ``hook`` on ``client`` while the client's first call waits for its answer."""

    def __init__(self, client: RemotingClient, hook: Seen) -> None:
        self.client, self.hook = client, hook
        self.registered = threading.Event()

    def process_request(self, ctx: RequestContext, request: RemotingCommand) -> RemotingCommand:
        if not self.registered.is_set():
            self.client.register_rpc_hook(self.hook)
            self.registered.set()
        return RemotingCommand.create_response(ResponseCode.SUCCESS)


def test_a_hook_registered_during_a_call_sees_only_the_next_ones() -> None:
    with RemotingServer() as server, RemotingClient() as client:
        client.register_rpc_hook(Seen())  # hooks in use: the calls take the hooked path
        late = Seen()
        server.register_processor(CODE, RegistersOnTheClient(client, late))
        first = RemotingCommand.create_request(CODE)
        assert client.invoke_sync(server.addr, first, 5).code == ResponseCode.SUCCESS
        assert late.before == [] and late.after == []  # registered mid-call: not its hook
        second = RemotingCommand.create_request(CODE)
        assert client.invoke_sync(server.addr, second, 5).code == ResponseCode.SUCCESS
        assert late.before == [second.opaque] and late.after == [second.opaque]


def test_an_async_call_s_after_hooks_are_those_that_saw_its_request() -> None:
    with RemotingServer() as server, RemotingClient() as client:
        client.register_rpc_hook(Seen())
        late = Seen()
        server.register_processor(CODE, RegistersOnTheClient(client, late))
        done = threading.Event()
        fut = client.invoke_async(server.addr, RemotingCommand.create_request(CODE), 5,
                                  lambda f: done.set())
        assert done.wait(10) and fut.result(5).code == ResponseCode.SUCCESS
        assert late.before == [] and late.after == []


async def test_the_trio_face_too(server: TrioRemotingServer, client: TrioRemotingClient) -> None:
    client.register_rpc_hook(Seen())
    late = Seen()

    class Registers(AsyncRequestProcessor):
        async def process_request(self, ctx: RequestContext, request: RemotingCommand
                                  ) -> RemotingCommand:
            client.register_rpc_hook(late)
            return RemotingCommand.create_response(ResponseCode.SUCCESS)

    server.register_processor(CODE, Registers())
    first = RemotingCommand.create_request(CODE)
    assert (await client.invoke_sync(addr_of(server), first, 5)).code == ResponseCode.SUCCESS
    assert late.before == [] and late.after == []
    second = RemotingCommand.create_request(CODE)
    assert (await client.invoke_sync(addr_of(server), second, 5)).code == ResponseCode.SUCCESS
    assert late.before == [second.opaque] and late.after == [second.opaque]
