"""The library never changes a command handed to it, whichever path sends it: the same command
in flight several times at once (each goes out as a copy with an opaque of its own), a
SYSTEM_BUSY retry, a resend after GO_AWAY, a batch that repeats it, a oneway send. (RPC hooks
are the application's code and may amend the command: see docs/user-guide.md.)"""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor

import trio

from codec import RemotingCommand, ResponseCode
from processors import AsyncEchoProcessor, AsyncRequestProcessor, RequestContext
from remoting import RemotingClient, RemotingServer, TrioRemotingClient, TrioRemotingServer

from ..factories import command_fields, req
from .conftest import addr_of

ECHO = 91
BUSY_ONCE = 92


class BusyOnce(AsyncRequestProcessor):
    """Answers SYSTEM_BUSY to every other request: each call is retried once."""

    def __init__(self) -> None:
        self.calls = 0

    async def process_request(self, ctx: RequestContext, request: RemotingCommand
                              ) -> RemotingCommand:
        self.calls += 1
        if self.calls % 2:
            return RemotingCommand.create_response(ResponseCode.SYSTEM_BUSY, "busy")
        return RemotingCommand.create_response(ResponseCode.SUCCESS)


def _command() -> RemotingCommand:
    return req(ECHO, b"body", topic="t")


def test_no_blocking_path_changes_the_callers_command() -> None:
    same, busy = _command(), req(BUSY_ONCE)
    before, busy_before = command_fields(same), command_fields(busy)
    a, b = RemotingServer(), RemotingServer()
    for server in (a, b):
        server.register_processor(ECHO, AsyncEchoProcessor())
        server.register_processor(BUSY_ONCE, BusyOnce())
    with a, b, RemotingClient() as client:
        with ThreadPoolExecutor(8) as pool:  # in flight many times at once
            assert set(pool.map(lambda _: client.invoke_sync(a.addr, same, 5).body,
                                range(200))) == {b"body"}
        futures = [client.invoke_async(a.addr, same, 5) for _ in range(20)]
        assert {fut.result(5).body for fut in futures} == {b"body"}
        assert {fut.opaque for fut in futures} | {same.opaque} != {same.opaque}
        assert all(isinstance(r, RemotingCommand) and r.body == b"body"
                   for r in client.invoke_many(a.addr, [same] * 20, 5, limit=4))
        client.invoke_oneway(a.addr, same, 5)
        assert client.invoke_sync(a.addr, busy, 5, retry_busy=True).code == 0
        client.update_name_server_address_list([a.addr])
        client.invoke_sync(None, same, 5)
        client.update_name_server_address_list([a.addr, b.addr])
        a.drain()  # the next call is answered GO_AWAY and resent to b
        assert client.invoke_sync(None, same, 5).body == b"body"
        assert client.statistics().go_away_received >= 1
    assert command_fields(same) == before
    assert command_fields(busy) == busy_before


async def test_no_trio_path_changes_the_callers_command(nursery: trio.Nursery) -> None:
    same, busy = _command(), req(BUSY_ONCE)
    before, busy_before = command_fields(same), command_fields(busy)
    server = TrioRemotingServer()
    server.register_processor(ECHO, AsyncEchoProcessor())
    server.register_processor(BUSY_ONCE, BusyOnce())
    await nursery.start(server.serve)
    client = TrioRemotingClient()
    await nursery.start(client.serve)
    addr = addr_of(server)
    answers: list[bytes | None] = []

    async def call() -> None:
        answers.append((await client.invoke_sync(addr, same, 5)).body)

    async with trio.open_nursery() as calls:  # in flight many times at once
        for _ in range(50):
            calls.start_soon(call)
    assert answers == [b"body"] * 50
    futures = [await client.invoke_async(addr, same, 5) for _ in range(20)]
    assert {(await fut.wait()).body for fut in futures} == {b"body"}
    assert len(await client.invoke_many(addr, [same] * 20, 5, limit=4)) == 20
    await client.invoke_oneway(addr, same, 5)
    assert (await client.invoke_sync(addr, busy, 5, retry_busy=True)).code == 0
    assert command_fields(same) == before
    assert command_fields(busy) == busy_before


def test_threads_see_the_same_command_unchanged_while_it_is_sent() -> None:
    """A thread reading the command while others send it never sees another opaque."""
    same = _command()
    opaque = same.opaque
    changed = threading.Event()
    stop = threading.Event()

    def watch() -> None:
        while not stop.is_set():
            if same.opaque != opaque:
                changed.set()

    server = RemotingServer()
    server.register_processor(ECHO, AsyncEchoProcessor())
    with server, RemotingClient() as client:
        watcher = threading.Thread(target=watch)
        watcher.start()
        try:
            with ThreadPoolExecutor(8) as pool:
                list(pool.map(lambda _: client.invoke_sync(server.addr, same, 5), range(200)))
        finally:
            stop.set()
            watcher.join(5)
    assert not changed.is_set()
