"""Races between callers' threads and the loop (found in review), driven with a tiny thread
switch interval so that they show within seconds: calls from threads must never be lost.

Each test runs a few seconds in the default suite and longer with ``-m slow``.
"""

from __future__ import annotations

import sys
import threading
import time
from collections import Counter
from collections.abc import Iterator

import pytest

from codec import RemotingCommand
from processors import AsyncRequestProcessor, RequestContext
from remoting import (
    ClientConfig,
    RemotingClient,
    RemotingServer,
    RemotingTimeoutError,
    ServerConfig,
)
from tests.remoting.conftest import ASYNC_ECHO, install_standard_processors

SILENT = 77
DURATIONS = [pytest.param(4.0, id="short"), pytest.param(30.0, id="long", marks=pytest.mark.slow)]


class Silent(AsyncRequestProcessor):
    async def process_request(self, ctx: RequestContext, request: RemotingCommand) -> None:
        return None  # never answers


@pytest.fixture
def pair() -> Iterator[tuple[RemotingServer, RemotingClient]]:
    server = RemotingServer(ServerConfig())
    install_standard_processors(server)
    server.register_processor(SILENT, Silent())
    server.start()
    client = RemotingClient(ClientConfig(close_socket_if_timeout=False)).start()
    old = sys.getswitchinterval()
    sys.setswitchinterval(1e-5)  # many more thread switches: the races show quickly
    try:
        client.invoke_sync(server.addr, RemotingCommand.create_request(ASYNC_ECHO), 5)
        yield server, client
    finally:
        sys.setswitchinterval(old)
        client.shutdown()
        server.shutdown()


@pytest.mark.parametrize("seconds", DURATIONS)
def test_short_timeouts_expire_on_time_among_long_ones(
    pair: tuple[RemotingServer, RemotingClient], seconds: float,
) -> None:
    """A deadline pushed by a thread must not be popped from the heap by the loop's cleanup
    of dead entries (the call would then only end by its thread's fallback, 5 s late)."""
    server, client = pair
    stop = threading.Event()

    def filler() -> None:  # answered calls leave late-deadline dead entries in the heap
        while not stop.is_set():
            client.invoke_sync(server.addr, RemotingCommand.create_request(ASYNC_ECHO), 100)

    fillers = [threading.Thread(target=filler) for _ in range(2)]
    for t in fillers:
        t.start()
    late: list[float] = []
    calls = 0
    try:
        end = time.monotonic() + seconds
        while time.monotonic() < end and not late:
            calls += 1
            start = time.monotonic()
            with pytest.raises(RemotingTimeoutError):
                client.invoke_sync(server.addr, RemotingCommand.create_request(SILENT), 0.02)
            if time.monotonic() - start > 2.0:  # not expired by the loop's timer
                late.append(time.monotonic() - start)
    finally:
        stop.set()
        for t in fillers:
            t.join(10)
    assert not late, f"call {calls} expired after {late[0]:.1f}s"
    assert client.statistics().in_flight == 0


@pytest.mark.parametrize("seconds", DURATIONS)
def test_one_command_from_many_threads_is_never_lost(
    pair: tuple[RemotingServer, RemotingClient], seconds: float,
) -> None:
    """Threads sending the same command object race for its opaque (the thread path and the
    loop's path both register it); every call must still be sent and answered."""
    server, client = pair
    same = RemotingCommand.create_request(ASYNC_ECHO, body=b"same")
    outcomes: Counter[str] = Counter()
    lock = threading.Lock()
    end = time.monotonic() + seconds

    def work() -> None:
        while time.monotonic() < end:
            try:
                assert client.invoke_sync(server.addr, same, 1.0).body == b"same"
                kind = "ok"
            except RemotingTimeoutError as exc:
                kind = f"timeout ({exc.phase})"
            with lock:
                outcomes[kind] += 1

    threads = [threading.Thread(target=work) for _ in range(12)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(seconds + 30)
    assert set(outcomes) == {"ok"}, dict(outcomes)
    assert client.statistics().in_flight == 0
