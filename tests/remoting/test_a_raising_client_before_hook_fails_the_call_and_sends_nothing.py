"""A client before-hook that raises fails the call with its own exception, on every face, and
sends nothing; the client stays usable (no permit or table entry is left behind). As an
exception from a grpc interceptor or an httpx event hook, the hook's exception reaches the
caller as it is: it is the application's own code and its own class."""

from __future__ import annotations

import threading
from collections.abc import Iterator

import pytest

from codec import RemotingCommand, ResponseCode
from processors import RequestContext, RequestProcessor
from remoting import ClientConfig, RemotingClient, RemotingServer, open_client

CODE = 7
CALLS = 40  # more than the permits below: a leaked permit would make later calls fail


class HookRefused(Exception):
    pass


class Gate:
    """Refuses requests while ``closed``."""

    def __init__(self) -> None:
        self.closed = True

    def do_before_request(self, remote_addr: str, request: RemotingCommand) -> None:
        if self.closed:
            raise HookRefused("not now")

    def do_after_response(self, remote_addr: str, request: RemotingCommand,
                          response: RemotingCommand | None) -> None:
        return None


class Counting(RequestProcessor):
    def __init__(self) -> None:
        self.seen = 0
        self._lock = threading.Lock()

    def process_request(self, ctx: RequestContext, request: RemotingCommand) -> RemotingCommand:
        with self._lock:
            self.seen += 1
        return RemotingCommand.create_response(ResponseCode.SUCCESS)


@pytest.fixture
def counted() -> Iterator[tuple[RemotingServer, Counting]]:
    processor = Counting()
    server = RemotingServer()
    server.register_processor(CODE, processor)
    server.start()
    try:
        yield server, processor
    finally:
        server.shutdown()


SMALL = ClientConfig(client_async_semaphore_value=8, client_oneway_semaphore_value=8)


def test_blocking_faces(counted: tuple[RemotingServer, Counting]) -> None:
    server, processor = counted
    gate = Gate()
    with RemotingClient(SMALL) as client:
        client.register_rpc_hook(gate)
        for _ in range(CALLS):
            with pytest.raises(HookRefused):
                client.invoke_sync(server.addr, RemotingCommand.create_request(CODE), 5)
            with pytest.raises(HookRefused):
                client.invoke_oneway(server.addr, RemotingCommand.create_request(CODE), 5)
            with pytest.raises(HookRefused):  # at the call: no future is made
                client.invoke_async(server.addr, RemotingCommand.create_request(CODE), 5)
            with pytest.raises(HookRefused):
                client.invoke_many(server.addr, [RemotingCommand.create_request(CODE)] * 3, 5)
        gate.closed = False
        response = client.invoke_sync(server.addr, RemotingCommand.create_request(CODE), 5)
        many = client.invoke_many(server.addr, [RemotingCommand.create_request(CODE)
                                                for _ in range(20)], 5)
    assert response.code == ResponseCode.SUCCESS
    assert all(r.code == ResponseCode.SUCCESS for r in many)  # type: ignore[union-attr]
    assert processor.seen == 21  # only what was sent after the gate opened


async def test_trio_face(counted: tuple[RemotingServer, Counting]) -> None:
    server, processor = counted
    gate = Gate()
    async with open_client(SMALL) as client:
        client.register_rpc_hook(gate)
        for _ in range(CALLS):
            with pytest.raises(HookRefused):
                await client.invoke_sync(server.addr, RemotingCommand.create_request(CODE), 5)
            with pytest.raises(HookRefused):
                await client.invoke_oneway(server.addr, RemotingCommand.create_request(CODE), 5)
            with pytest.raises(HookRefused):  # at the call: no future is made
                await client.invoke_async(server.addr, RemotingCommand.create_request(CODE), 5)
            with pytest.raises(HookRefused):
                await client.invoke_many(server.addr,
                                         [RemotingCommand.create_request(CODE)] * 3, 5)
        gate.closed = False
        response = await client.invoke_sync(server.addr, RemotingCommand.create_request(CODE), 5)
    assert response.code == ResponseCode.SUCCESS
    assert processor.seen == 1
