"""A started `RemotingClient` collected without `shutdown()` ends its threads (its loop, or
its background reader), with a ResourceWarning, as an unclosed file does."""

from __future__ import annotations

import gc
import threading

import pytest

from codec import ResponseCode
from remoting import RemotingClient, RemotingServer

from ..factories import req
from .conftest import ECHO, core_thread_of


def _start_call_and_drop(server: RemotingServer) -> threading.Thread:
    """Start a client, make one call, drop it; return the thread running its core."""
    client = RemotingClient().start()
    assert client.invoke_sync(server.addr, req(ECHO), 5).code == ResponseCode.SUCCESS
    return core_thread_of(client)


def test_a_dropped_client_is_shut_down_with_a_resource_warning(
    blocking_server: RemotingServer,
) -> None:
    # no cycle holds a client: the last reference going is enough, no gc.collect() needed
    with pytest.warns(ResourceWarning, match="without shutdown"):
        thread = _start_call_and_drop(blocking_server)
    thread.join(10)
    assert not thread.is_alive()


def test_a_client_shut_down_before_it_is_dropped_gives_no_warning(
    blocking_server: RemotingServer, recwarn: pytest.WarningsRecorder,
) -> None:
    client = RemotingClient().start()
    client.invoke_sync(blocking_server.addr, req(ECHO), 5)
    client.shutdown()
    del client
    gc.collect()
    assert not [w for w in recwarn if issubclass(w.category, ResourceWarning)]
