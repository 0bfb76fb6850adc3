"""RPC hooks on both sides: order, and RocketMQ's semantics for failures (SPEC 6.1, 6.8)."""

from __future__ import annotations

import pytest

from codec import RemotingCommand, ResponseCode
from processors import RequestContext, RequestProcessor
from remoting import AbortProcessError, RemotingConnectError, TrioRemotingClient, TrioRemotingServer

from .conftest import ECHO, addr_of


class Recording:
    def __init__(self, name: str, log: list[str], fail_before: bool = False,
                 fail_after: bool = False, abort: bool = False) -> None:
        self.name, self.log = name, log
        self.fail_before, self.fail_after, self.abort = fail_before, fail_after, abort

    def do_before_request(self, remote_addr: str, request: RemotingCommand) -> None:
        self.log.append(f"{self.name}.before")
        if self.abort:
            raise AbortProcessError(ResponseCode.NO_PERMISSION, "go away")
        if self.fail_before:
            raise RuntimeError(f"{self.name} refuses")

    def do_after_response(self, remote_addr: str, request: RemotingCommand,
                          response: RemotingCommand | None) -> None:
        self.log.append(f"{self.name}.after:{None if response is None else response.code}")
        if self.fail_after:
            raise RuntimeError(f"{self.name} after fails")


class Counting(RequestProcessor):
    def __init__(self, log: list[str]) -> None:
        self.log = log

    def process_request(self, ctx: RequestContext, request: RemotingCommand) -> RemotingCommand:
        self.log.append("processor")
        return RemotingCommand.create_response(ResponseCode.SUCCESS)


async def test_client_hooks_run_in_order_and_after_only_on_success(
    server: TrioRemotingServer, client: TrioRemotingClient,
) -> None:
    log: list[str] = []
    client.register_rpc_hook(Recording("a", log))
    client.register_rpc_hook(Recording("b", log))
    await client.invoke_sync(addr_of(server), RemotingCommand.create_request(ECHO), timeout=5)
    assert log == ["a.before", "b.before", "a.after:0", "b.after:0"]
    log.clear()
    with pytest.raises(RemotingConnectError):
        await client.invoke_sync("127.0.0.1:1", RemotingCommand.create_request(ECHO), timeout=2)
    assert log == ["a.before", "b.before"]
    log.clear()
    await client.invoke_oneway(addr_of(server), RemotingCommand.create_request(ECHO), timeout=5)
    assert log == ["a.before", "b.before"]


async def test_client_hook_can_amend_the_request(
    server: TrioRemotingServer, client: TrioRemotingClient,
) -> None:
    class Stamp:
        def do_before_request(self, remote_addr: str, request: RemotingCommand) -> None:
            request.add_ext_field("stamp", remote_addr)

        def do_after_response(self, *args: object) -> None:
            pass

    client.register_rpc_hook(Stamp())
    response = await client.invoke_sync(addr_of(server), RemotingCommand.create_request(ECHO),
                                        timeout=5)
    assert response.ext_fields == {"stamp": addr_of(server)}


async def test_server_hooks_wrap_the_processor(
    server: TrioRemotingServer, client: TrioRemotingClient,
) -> None:
    log: list[str] = []
    server.register_processor(50, Counting(log))
    server.register_rpc_hook(Recording("s1", log))
    server.register_rpc_hook(Recording("s2", log))
    response = await client.invoke_sync(addr_of(server), RemotingCommand.create_request(50),
                                        timeout=5)
    assert response.code == ResponseCode.SUCCESS
    assert log == ["s1.before", "s2.before", "processor", "s1.after:0", "s2.after:0"]


async def test_failing_before_hook_skips_the_processor_and_replies_system_error(
    server: TrioRemotingServer, client: TrioRemotingClient,
) -> None:
    log: list[str] = []
    server.register_processor(50, Counting(log))
    server.register_rpc_hook(Recording("s1", log, fail_before=True))
    response = await client.invoke_sync(addr_of(server), RemotingCommand.create_request(50),
                                        timeout=5)
    assert response.code == ResponseCode.SYSTEM_ERROR
    assert response.remark is not None and "s1 refuses" in response.remark
    assert log == ["s1.before", "s1.after:1"]  # after-hooks still run, with the placeholder


async def test_failing_after_hook_discards_the_response(
    server: TrioRemotingServer, client: TrioRemotingClient,
) -> None:
    log: list[str] = []
    server.register_processor(50, Counting(log))
    server.register_rpc_hook(Recording("s1", log, fail_after=True))
    response = await client.invoke_sync(addr_of(server), RemotingCommand.create_request(50),
                                        timeout=5)
    assert response.code == ResponseCode.SYSTEM_ERROR
    assert response.remark is not None and "s1 after fails" in response.remark
    assert log == ["s1.before", "processor", "s1.after:0"]


async def test_abort_from_a_hook_replies_with_its_code(
    server: TrioRemotingServer, client: TrioRemotingClient,
) -> None:
    log: list[str] = []
    server.register_processor(50, Counting(log))
    server.register_rpc_hook(Recording("acl", log, abort=True))
    response = await client.invoke_sync(addr_of(server), RemotingCommand.create_request(50),
                                        timeout=5)
    assert response.code == ResponseCode.NO_PERMISSION
    assert response.remark == "go away"
    assert "processor" not in log


async def test_registering_a_hook_twice_keeps_one(
    server: TrioRemotingServer, client: TrioRemotingClient,
) -> None:
    log: list[str] = []
    hook = Recording("a", log)
    client.register_rpc_hook(hook)
    client.register_rpc_hook(hook)
    await client.invoke_sync(addr_of(server), RemotingCommand.create_request(ECHO), timeout=5)
    assert log == ["a.before", "a.after:0"]
