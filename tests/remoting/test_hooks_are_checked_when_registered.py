"""An RPC hook without both methods is refused where it is registered, on every face.

Before, ``register_rpc_hook(5)`` was accepted and every later call failed with a bare
``AttributeError`` (client) or a SYSTEM_ERROR reply (server)."""

from __future__ import annotations

import pytest

from codec import RemotingCommand, ResponseCode
from remoting import RemotingClient, RemotingServer

from .conftest import ECHO


class BeforeOnly:
    def do_before_request(self, remote_addr: str, request: RemotingCommand) -> None:
        return None


class AfterNotCallable(BeforeOnly):
    do_after_response = "not a method"


NOT_HOOKS = [
    (5, "do_before_request"),
    ("hook", "do_before_request"),
    (BeforeOnly(), "do_after_response"),
    (AfterNotCallable(), "do_after_response"),
]


@pytest.mark.parametrize(("hook", "missing"), NOT_HOOKS)
def test_client_refuses_and_keeps_working(blocking_server: RemotingServer, hook: object,
                                          missing: str) -> None:
    with RemotingClient() as client:
        with pytest.raises(TypeError, match=f"RPC hook .* has no {missing}"):
            client.register_rpc_hook(hook)  # type: ignore[arg-type]
        response = client.invoke_sync(blocking_server.addr,
                                      RemotingCommand.create_request(ECHO, body=b"a"), 5)
    assert (response.code, response.body) == (ResponseCode.SUCCESS, b"a")


@pytest.mark.parametrize(("hook", "missing"), NOT_HOOKS)
def test_server_refuses_and_keeps_serving(blocking_server: RemotingServer, hook: object,
                                          missing: str) -> None:
    with pytest.raises(TypeError, match=f"RPC hook .* has no {missing}"):
        blocking_server.register_rpc_hook(hook)  # type: ignore[arg-type]
    with RemotingClient() as client:
        response = client.invoke_sync(blocking_server.addr,
                                      RemotingCommand.create_request(ECHO, body=b"b"), 5)
    assert (response.code, response.body) == (ResponseCode.SUCCESS, b"b")


async def test_trio_faces_refuse_too() -> None:
    from remoting import TrioRemotingClient, TrioRemotingServer

    for face in (TrioRemotingClient(), TrioRemotingServer()):
        with pytest.raises(TypeError, match="has no do_after_response"):
            face.register_rpc_hook(BeforeOnly())  # type: ignore[arg-type]
