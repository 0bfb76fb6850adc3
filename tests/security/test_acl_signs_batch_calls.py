"""`AclClientRPCHook` signs every request of an ``invoke_many`` batch, on both faces, so a
server with `AclServerRPCHook` serves the batch (before, each request got ``[ACL] no
AccessKey``)."""

from __future__ import annotations

from collections.abc import Iterator, Sequence

import pytest
import trio

from codec import RemotingCommand, ResponseCode
from processors import AsyncEchoProcessor, EchoProcessor
from remoting import (
    AclClientRPCHook,
    AclServerRPCHook,
    ClientCall,
    ClientInterceptor,
    RemotingClient,
    RemotingError,
    RemotingServer,
    TrioRemotingClient,
    TrioRemotingServer,
)

from ..logs import capture_logs

ECHO = 1
N = 20


def batch() -> list[RemotingCommand]:
    return [RemotingCommand.create_request(ECHO, header={"row": str(i)}, body=b"row %d" % i)
            for i in range(N)]


def assert_all_served(results: Sequence[RemotingCommand | RemotingError]) -> None:
    assert [getattr(r, "code", r) for r in results] == [ResponseCode.SUCCESS] * N
    assert [getattr(r, "body", r) for r in results] == [b"row %d" % i for i in range(N)]


async def test_trio_invoke_many_is_signed(nursery: trio.Nursery) -> None:
    server = TrioRemotingServer()
    server.register_processor(ECHO, AsyncEchoProcessor())
    server.register_rpc_hook(AclServerRPCHook({"alice": "alice-secret"}))
    await nursery.start(server.serve)
    client = TrioRemotingClient()
    client.register_rpc_hook(AclClientRPCHook("alice", "alice-secret"))
    await nursery.start(client.serve)
    with capture_logs() as logs:
        results = await client.invoke_many(f"127.0.0.1:{server.port}", batch(), 5, limit=4)
    assert_all_served(results)
    assert not [e for e in logs if e["event"] == "acl.refused"]


@pytest.fixture
def acl_server() -> Iterator[RemotingServer]:
    server = RemotingServer()
    server.register_processor(ECHO, EchoProcessor())
    server.register_rpc_hook(AclServerRPCHook({"alice": "alice-secret"}))
    server.start()
    try:
        yield server
    finally:
        server.shutdown()


class Tagging(ClientInterceptor):
    """Adds an ext field to each request of the batch: the ACL hook, innermost, signs it."""

    def intercept_call(self, call: ClientCall, proceed):  # type: ignore[no-untyped-def]
        for request in call.requests:
            request.ext_fields = {**(request.ext_fields or {}), "tag": "x"}
        return proceed(call)


@pytest.mark.parametrize("intercepted", [False, True])
def test_blocking_invoke_many_is_signed(acl_server: RemotingServer, intercepted: bool) -> None:
    with RemotingClient() as client:
        client.register_rpc_hook(AclClientRPCHook("alice", "alice-secret"))
        if intercepted:
            client.register_interceptor(Tagging())
        assert client.invoke_sync(acl_server.addr, batch()[0], 5).code == ResponseCode.SUCCESS
        assert_all_served(client.invoke_many(acl_server.addr, batch(), 5, limit=4))


def test_a_wrong_secret_still_gets_no_permission_for_each_request(
        acl_server: RemotingServer) -> None:
    with RemotingClient() as client:
        client.register_rpc_hook(AclClientRPCHook("alice", "wrong"))
        results = client.invoke_many(acl_server.addr, batch(), 5)
    assert all(isinstance(r, RemotingCommand) and r.code == ResponseCode.NO_PERMISSION
               and "signature mismatch" in (r.remark or "") for r in results)
