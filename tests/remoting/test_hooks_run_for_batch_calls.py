"""A client's RPC hooks run for every request of an ``invoke_many`` batch, as for one call:
the before-hooks on each request before any is sent, the after-hooks on each response (a
failed request runs none, a raising after-hook is logged and changes no outcome); a
before-hook that raises fails the whole call and sends nothing. A server runs its hooks for
every request of a pipelined batch."""

from __future__ import annotations

import pytest
import trio

from codec import RemotingCommand, ResponseCode
from remoting import RemotingClient, RemotingServer, TrioRemotingClient, TrioRemotingServer

from ..logs import capture_logs
from .conftest import ECHO, addr_of

N = 5


class Recording:
    """Records ``before:<row>`` / ``after:<row>:<code>``; may raise on one row."""

    def __init__(self, fail_before_row: str | None = None, fail_after: bool = False) -> None:
        self.log: list[str] = []
        self.fail_before_row, self.fail_after = fail_before_row, fail_after

    def do_before_request(self, remote_addr: str, request: RemotingCommand) -> None:
        row = (request.ext_fields or {}).get("row")
        self.log.append(f"before:{row}")
        if row == self.fail_before_row:
            raise RuntimeError(f"refuses row {row}")

    def do_after_response(self, remote_addr: str, request: RemotingCommand,
                          response: RemotingCommand | None) -> None:
        row = (request.ext_fields or {}).get("row")
        self.log.append(f"after:{row}:{None if response is None else response.code}")
        if self.fail_after:
            raise RuntimeError("after fails")


def batch(n: int = N) -> list[RemotingCommand]:
    return [RemotingCommand.create_request(ECHO, header={"row": str(i)}) for i in range(n)]


BEFORE_THEN_AFTER = ([f"before:{i}" for i in range(N)]
                     + [f"after:{i}:{ResponseCode.SUCCESS}" for i in range(N)])


async def test_trio_client_and_server_hooks_see_each_request(
        server: TrioRemotingServer, client: TrioRemotingClient) -> None:
    client_hook, server_hook = Recording(), Recording()
    client.register_rpc_hook(client_hook)
    server.register_rpc_hook(server_hook)
    results = await client.invoke_many(addr_of(server), batch(), 5, limit=2)
    assert [r.code for r in results] == [ResponseCode.SUCCESS] * N  # type: ignore[union-attr]
    assert client_hook.log == BEFORE_THEN_AFTER
    # the server runs before and after around each request of the pipelined batch
    assert sorted(server_hook.log) == sorted(BEFORE_THEN_AFTER)


def test_blocking_client_hooks_see_each_request(blocking_server: RemotingServer,
                                                blocking_client: RemotingClient) -> None:
    hook = Recording()
    blocking_client.register_rpc_hook(hook)
    results = blocking_client.invoke_many(blocking_server.addr, batch(), 5, limit=2)
    assert [r.code for r in results] == [ResponseCode.SUCCESS] * N  # type: ignore[union-attr]
    assert hook.log == BEFORE_THEN_AFTER


async def test_a_failed_request_runs_no_after_hook(client: TrioRemotingClient) -> None:
    hook = Recording()
    client.register_rpc_hook(hook)
    with trio.fail_after(10):
        results = await client.invoke_many("127.0.0.1:1", batch(2), 2)
    assert all(not isinstance(r, RemotingCommand) for r in results)
    assert hook.log == ["before:0", "before:1"]


async def test_a_raising_before_hook_fails_the_call_and_sends_nothing(
        server: TrioRemotingServer, client: TrioRemotingClient) -> None:
    server_hook = Recording()
    server.register_rpc_hook(server_hook)
    client.register_rpc_hook(Recording(fail_before_row="2"))
    with pytest.raises(RuntimeError, match="refuses row 2"):
        await client.invoke_many(addr_of(server), batch(), 5)
    assert await client.invoke_sync(addr_of(server), batch(1)[0], 5)
    assert server_hook.log == ["before:0", f"after:0:{ResponseCode.SUCCESS}"]  # only that call


def test_a_raising_before_hook_fails_the_blocking_call_too(
        blocking_server: RemotingServer, blocking_client: RemotingClient) -> None:
    blocking_client.register_rpc_hook(Recording(fail_before_row="0"))
    with pytest.raises(RuntimeError, match="refuses row 0"):
        blocking_client.invoke_many(blocking_server.addr, batch(), 5)


def test_a_raising_after_hook_is_logged_and_changes_no_result(
        blocking_server: RemotingServer, blocking_client: RemotingClient) -> None:
    first, second = Recording(fail_after=True), Recording()
    blocking_client.register_rpc_hook(first)
    blocking_client.register_rpc_hook(second)
    with capture_logs() as logs:
        results = blocking_client.invoke_many(blocking_server.addr, batch(), 5)
    assert [r.code for r in results] == [ResponseCode.SUCCESS] * N  # type: ignore[union-attr]
    assert second.log == BEFORE_THEN_AFTER
    failures = [e for e in logs if e["event"] == "hook.failed"]
    assert len(failures) == N
    assert all(e["method"] == "do_after_response" for e in failures)
