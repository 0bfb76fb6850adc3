"""A callback that blocks holds up its own callback thread only: answers are still read (the
thread that read an answer never runs its callback), other calls still end, and the
callbacks queued behind it run, once each, when it returns."""

from __future__ import annotations

import threading

from remoting import ClientConfig, RemotingClient, RemotingServer, ResponseFuture

from ..factories import req
from .conftest import ASYNC_ECHO

WAIT = 5.0


def test_answers_are_still_read_while_the_only_callback_thread_is_blocked(
    blocking_server: RemotingServer,
) -> None:
    addr = blocking_server.addr
    gate, entered = threading.Event(), threading.Event()
    ran: list[tuple[bytes, str]] = []
    lock = threading.Lock()
    all_ran = threading.Event()

    def blocked(_: ResponseFuture) -> None:
        entered.set()
        gate.wait(WAIT * 2)

    def note(fut: ResponseFuture) -> None:
        with lock:
            ran.append((fut.result(0).body or b"", threading.current_thread().name))
            if len(ran) == 20:
                all_ran.set()

    with RemotingClient(ClientConfig(callback_executor_threads=1)) as client:
        client.invoke_async(addr, req(ASYNC_ECHO, b"first"), WAIT, blocked)
        try:
            assert entered.wait(WAIT)
            futures = [client.invoke_async(addr, req(ASYNC_ECHO, b"%d" % i), WAIT, note)
                       for i in range(20)]
            # the answers are read and their futures done, though no callback can run
            assert [f.result(WAIT).body for f in futures] == [b"%d" % i for i in range(20)]
            assert client.invoke_sync(addr, req(ASYNC_ECHO, b"sync"), WAIT).body == b"sync"
            assert ran == []
        finally:
            gate.set()
        assert all_ran.wait(WAIT)
    assert sorted(body for body, _ in ran) == sorted(b"%d" % i for i in range(20))
    assert {name for _, name in ran} == {"remoting-client-callback_0"}
