"""A thread-driven ``invoke_many`` sends its window in groups of up to `GROUP_FRAMES`
requests, each registered under one hold of the driver's lock and handed to the socket in
one write: a first window of 64 small requests is one write, not one per 16."""

from __future__ import annotations

import pytest

from processors import EchoProcessor
from remoting import ClientConfig, RemotingClient, RemotingServer
from remoting._core._thread_driver._thread_batch import GROUP_FRAMES

from ..factories import req

ECHO = 71


@pytest.mark.default_io
def test_a_first_window_of_64_leaves_in_one_write() -> None:
    assert GROUP_FRAMES >= 64
    server = RemotingServer()
    server.register_processor(ECHO, EchoProcessor())
    with server, RemotingClient(ClientConfig(io="threads")) as client:
        client.invoke_sync(server.addr, req(ECHO), 5)  # (connects)
        before = client.statistics().writes
        results = client.invoke_many(server.addr, [req(ECHO, b"%d" % i) for i in range(64)],
                                     5, limit=64)
        assert [r.body for r in results] == [b"%d" % i for i in range(64)]  # type: ignore[union-attr]
        assert client.statistics().writes - before == 1
