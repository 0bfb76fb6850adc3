"""Calls nobody waits for (`invoke_async`) are read by the background reader. Once their
answers are in, it keeps polling the connection until their deadlines, so the next such call
need not wake it: a window refilled by its callbacks drains to none in flight between reads,
and each refill used to write its wake-up pipe (a wake-up of that thread per call)."""

from __future__ import annotations

import threading

import pytest

import remoting
from remoting._core._thread_driver._background_reader import BackgroundReader

from ..factories import req
from .conftest import ECHO, threads_io

CALLS = 200


def test_async_calls_one_after_another_do_not_wake_the_background_reader_each(
        blocking_server: remoting.RemotingServer, monkeypatch: pytest.MonkeyPatch) -> None:
    addr = blocking_server.addr
    with remoting.RemotingClient(remoting.ClientConfig(io="threads")) as client:
        client.invoke_sync(addr, req(ECHO), 5)  # connected
        assert threads_io(client).driver is not None
        reader: BackgroundReader = threads_io(client).driver.background
        wakes = 0
        wake = reader._wake

        def counted_wake() -> None:
            nonlocal wakes
            wakes += 1
            wake()

        monkeypatch.setattr(reader, "_wake", counted_wake)
        answered = threading.Event()
        codes: list[int] = []

        def on_done(fut: remoting.ResponseFuture) -> None:
            codes.append(fut.result(0).code)
            answered.set()

        for _ in range(CALLS):  # each sent once the one before it was answered
            answered.clear()
            client.invoke_async(addr, req(ECHO), 5, on_done)
            assert answered.wait(5)
    assert codes == [0] * CALLS
    assert wakes < CALLS // 10, f"{wakes} wake-ups of the background reader for {CALLS} calls"
