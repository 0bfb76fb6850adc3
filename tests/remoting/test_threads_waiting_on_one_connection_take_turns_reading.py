"""Threads waiting for calls on one connection: one reads for all (the read role) and hands
each answer to its own waiter; a reader whose call ended hands reading on to a thread still
waiting, also when its call ended by its deadline. On ``io="loop"`` the loop reads, and the
same outcomes hold."""

from __future__ import annotations

import random
import sys
import threading
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest
import trio

from codec import RemotingCommand, ResponseCode
from processors import AsyncRequestProcessor, RequestContext
from remoting import ClientConfig, RemotingClient, RemotingServer, RemotingTimeoutError
from remoting._core._calling._future import ThreadWaiter
from remoting._core._thread_driver import _thread_connection, _thread_driver

from ..factories import req
from ..hangs import HANG_SECONDS
from .conftest import threads_io

SCRAMBLED = 61  # answers after a random pause: they come back in another order
SILENT = 62  # never answers
DELAYED = 63  # answers after the delay in its body (seconds)
THREADS = 32


class Scrambled(AsyncRequestProcessor):
    async def process_request(self, ctx: RequestContext, request: RemotingCommand
                              ) -> RemotingCommand:
        await trio.sleep(random.uniform(0, 0.02))
        response = RemotingCommand.create_response(ResponseCode.SUCCESS)
        response.body = request.body
        return response


class Silent(AsyncRequestProcessor):
    def __init__(self) -> None:
        self.entered = threading.Event()

    async def process_request(self, ctx: RequestContext, request: RemotingCommand) -> None:
        self.entered.set()
        return None


class Delayed(AsyncRequestProcessor):
    async def process_request(self, ctx: RequestContext, request: RemotingCommand
                              ) -> RemotingCommand:
        await trio.sleep(float(request.body or b"0"))
        return RemotingCommand.create_response(ResponseCode.SUCCESS, "late")



def gather_in_rounds(client: RemotingClient, addr: str) -> None:
    """`ROUNDS` rounds of `GATHER` threads calling at once, each answered only once all
    of its round have arrived (`Gathered`): one read then answers many waiting threads."""
    with ThreadPoolExecutor(GATHER) as pool:
        for _ in range(ROUNDS):
            codes = list(pool.map(lambda _: client.invoke_sync(addr, req(GATHERED), 10).code,
                                  range(GATHER)))
            assert codes == [ResponseCode.SUCCESS] * GATHER

def _server() -> RemotingServer:
    server = RemotingServer()
    server.register_processor(SCRAMBLED, Scrambled())
    server.register_processor(DELAYED, Delayed())
    return server


def test_many_threads_on_one_connection_each_get_their_own_answer() -> None:
    with _server() as server, RemotingClient() as client:
        client.invoke_sync(server.addr, req(SCRAMBLED), 5)  # one connection, made

        def calls(t: int) -> list[bytes | None]:
            return [client.invoke_sync(server.addr, req(SCRAMBLED, b"%d-%d" % (t, i)), 10).body
                    for i in range(20)]

        with ThreadPoolExecutor(THREADS) as pool:
            bodies = list(pool.map(calls, range(THREADS)))
        stats = client.statistics()
    assert bodies == [[b"%d-%d" % (t, i) for i in range(20)] for t in range(THREADS)]
    assert stats.connections == 1
    assert stats.in_flight == 0
    assert stats.orphaned_responses == 0


@pytest.fixture
def no_sweep(monkeypatch: pytest.MonkeyPatch) -> None:
    """The background reader of a thread-driven client looks at idle connections once a
    minute only: what a test sees read was read by a waiting thread."""
    monkeypatch.setattr(_thread_driver, "SWEEP_SECONDS", 60.0)


@pytest.mark.usefixtures("no_sweep")
def test_a_reader_whose_call_times_out_hands_reading_to_a_waiting_thread() -> None:
    silent = Silent()
    config = ClientConfig(close_socket_if_timeout=False)  # the connection outlives the timeout
    with _server() as server, RemotingClient(config) as client:
        server.register_processor(SILENT, silent)
        client.invoke_sync(server.addr, req(SCRAMBLED), 5)
        outcome: dict[str, object] = {}

        def short_call() -> None:  # waits first: it reads, until its deadline
            try:
                client.invoke_sync(server.addr, req(SILENT), 0.3)
            except RemotingTimeoutError as exc:
                outcome["short"] = exc

        short = threading.Thread(target=short_call)
        short.start()
        assert silent.entered.wait(5)  # its request is out: it is waiting, reading
        # answered 0.6 s from now, after the first thread's deadline: only a thread that took
        # over reading sees it before its own deadline, 20 s away (else RemotingTimeoutError)
        answer = client.invoke_sync(server.addr, req(DELAYED, b"0.6"), 20)
        short.join(5)
    assert isinstance(outcome["short"], RemotingTimeoutError)
    assert answer.remark == "late"


@pytest.mark.usefixtures("no_sweep")
def test_a_reader_whose_call_is_answered_hands_reading_on() -> None:
    with _server() as server, RemotingClient() as client:
        client.invoke_sync(server.addr, req(SCRAMBLED), 5)
        results: dict[str, str | None] = {}

        def call(name: str, delay: bytes) -> None:
            # a deadline of two minutes: a call that waited for it would hang
            results[name] = client.invoke_sync(server.addr, req(DELAYED, delay), 120).remark

        first = threading.Thread(target=call, args=("first", b"0.2"))
        first.start()
        second = threading.Thread(target=call, args=("second", b"0.5"))
        second.start()
        first.join(HANG_SECONDS)
        second.join(HANG_SECONDS)
    assert results == {"first": "late", "second": "late"}  # neither waited for its deadline


GATHERED = 64  # answers once GATHER requests wait, all together
GATHER = 32
ROUNDS = 6


class Gathered(AsyncRequestProcessor):
    def __init__(self) -> None:
        self.waiting = 0
        self.all_in: trio.Event | None = None

    async def process_request(self, ctx: RequestContext, request: RemotingCommand
                              ) -> RemotingCommand:
        if self.all_in is None:
            self.all_in = trio.Event()
        all_in = self.all_in
        self.waiting += 1
        if self.waiting == GATHER:  # this round is in: answer it; the next gathers anew
            self.waiting = 0
            self.all_in = None
            all_in.set()
        await all_in.wait()
        return RemotingCommand.create_response(ResponseCode.SUCCESS)


@pytest.mark.usefixtures("no_sweep")
def test_a_reader_hands_reading_only_to_a_thread_whose_answer_it_did_not_read(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Answers read together wake their threads; a reader leaving hands the read role to a
    thread still waiting, never down the line of threads it answered (each would only pass
    it on, one thread switch each, while nobody reads)."""
    handed: list[object] = []
    leave = _thread_connection.ThreadConnection._leave

    def counted_leave(conn: _thread_connection.ThreadConnection) -> None:
        leave(conn)
        if isinstance(conn._read.holder, ThreadWaiter):
            handed.append(conn._read.holder)

    monkeypatch.setattr(_thread_connection.ThreadConnection, "_leave", counted_leave)
    with _server() as server, RemotingClient(ClientConfig(io="threads")) as client:
        server.register_processor(GATHERED, Gathered())
        client.invoke_sync(server.addr, req(SCRAMBLED), 5)
        gather_in_rounds(client, server.addr)
    # a round's answers come in one read or a few: a hand-over per read at most, not one per
    # thread it answered (that handed it on 2 to 8 times a round)
    assert len(handed) < 2 * ROUNDS, f"the read role was handed on {len(handed)} times"


class _CountingLock:
    """A connection's mutex that counts the holds taken from one method (the same lock
    underneath: its condition still works)."""

    def __init__(self, lock: threading.Lock, method: str) -> None:
        self._lock = lock
        self._method = method
        self.holds = 0

    def __enter__(self) -> bool:
        if sys._getframe(1).f_code.co_name == self._method:
            self.holds += 1
        return self._lock.__enter__()

    def __exit__(self, *exc: Any) -> None:
        self._lock.__exit__(*exc)


@pytest.mark.usefixtures("no_sweep")
def test_threads_one_read_answered_stop_following_without_the_connections_mutex() -> None:
    """The threads one read answered wake together; each leaves the queue of followers
    without the connection's mutex (they queued up on it, each losing the GIL while it
    held it). Only a follower the role was handed to looks under the mutex."""
    with _server() as server, RemotingClient(ClientConfig(io="threads")) as client:
        server.register_processor(GATHERED, Gathered())
        client.invoke_sync(server.addr, req(SCRAMBLED), 5)
        assert threads_io(client).driver is not None
        (conn,) = threads_io(client).driver.connections
        counting = _CountingLock(conn._read._mutex, "stop_following")
        conn._read._mutex = counting  # type: ignore[assignment]
        gather_in_rounds(client, server.addr)
        stats = client.statistics()
    assert stats.in_flight == 0 and stats.orphaned_responses == 0
    # before: one hold per follower woken (about GATHER - 1 a round); now one per hand-over
    assert counting.holds < 2 * ROUNDS, f"{counting.holds} holds to stop following"
