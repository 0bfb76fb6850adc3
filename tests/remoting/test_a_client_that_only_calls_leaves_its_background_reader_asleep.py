"""A thread-driven client that only calls (no processor, no open stream) reads its answers
in the calling threads: its background reader is not woken for each call, as it is when the
server's requests may come at any time. The transport's own stream handlers, which every
client has, do not count as processors here."""

from __future__ import annotations

import os
import threading

import pytest

import remoting
from processors import EchoProcessor

from ..factories import req
from .conftest import ECHO, threads_io

CALLS = 200


def _voluntary_switches(thread: threading.Thread) -> int:
    with open(f"/proc/self/task/{thread.native_id}/status") as f:
        for line in f:
            if line.startswith("voluntary_ctxt_switches"):
                return int(line.split()[1])
    raise AssertionError("no voluntary_ctxt_switches line")


def _reader_of(client: remoting.RemotingClient) -> threading.Thread:
    assert threads_io(client).driver is not None
    thread = threads_io(client).driver.background.thread
    assert thread is not None, "the background reader starts with the first connection"
    return thread


def test_a_client_serves_requests_only_once_a_processor_is_registered() -> None:
    with remoting.RemotingClient(remoting.ClientConfig(io="threads")) as client:
        requests = threads_io(client).requests
        assert requests is not None
        assert not requests.serves()  # the stream handlers alone
        client.register_processor(ECHO, EchoProcessor())
        assert requests.serves()
    with remoting.RemotingClient(remoting.ClientConfig(io="threads")) as client:
        assert threads_io(client).requests is not None
        client.register_default_processor(EchoProcessor())
        assert threads_io(client).requests.serves()


@pytest.mark.skipif(not os.path.isdir("/proc/self/task"), reason="reads Linux's /proc")
def test_sequential_calls_do_not_wake_the_background_reader(
        blocking_server: remoting.RemotingServer) -> None:
    addr = blocking_server.addr
    with remoting.RemotingClient(remoting.ClientConfig(io="threads")) as client:
        client.invoke_sync(addr, req(ECHO), 5)  # connected: the reader runs
        reader = _reader_of(client)
        before = _voluntary_switches(reader)
        for _ in range(CALLS):
            assert client.invoke_sync(addr, req(ECHO), 5).code == 0
        woken = _voluntary_switches(reader) - before
    # its own timers wake it about once a second; one wake per call was the old cost
    assert woken < CALLS // 10
