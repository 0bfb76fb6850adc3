"""A blocking ``invoke_sync`` with an opaque outside int32 fails the same way whether the loop
sends it (no connection yet) or the calling thread does (a live, idle connection). The
thread's path used to replace it with a fresh opaque silently, so the same call raised or
not depending on the connection's state."""

from __future__ import annotations

import pytest

from codec import RemotingCommand, ResponseCode
from remoting import RemotingClient, RemotingError, RemotingServer

from .conftest import ECHO


@pytest.mark.parametrize("opaque", [2**40, -(2**31) - 1, "7", 1.0])
def test_both_paths_refuse_it_alike(blocking_server: RemotingServer, opaque: object) -> None:
    def bad() -> RemotingCommand:
        request = RemotingCommand.create_request(ECHO, body=b"x")
        request.opaque = opaque  # type: ignore[assignment]
        return request

    with RemotingClient() as client:
        with pytest.raises(RemotingError) as by_loop:  # no connection yet: the loop sends
            client.invoke_sync(blocking_server.addr, bad(), 5)
        warm = client.invoke_sync(blocking_server.addr, RemotingCommand.create_request(ECHO), 5)
        assert warm.code == ResponseCode.SUCCESS  # now live and idle: the thread would send
        with pytest.raises(RemotingError) as by_thread:
            client.invoke_sync(blocking_server.addr, bad(), 5)
    assert type(by_thread.value) is type(by_loop.value)
    assert "opaque" in str(by_thread.value)
