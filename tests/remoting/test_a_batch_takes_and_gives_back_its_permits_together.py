"""In-flight permits (RocketMQ's ``semaphoreAsync``): a thread-driven ``invoke_many`` takes
the permits of its window together and gives back the spare ones together (one lock hold each,
not one per request), and never takes more than are free, one while threads wait for one, or
keeps one once it is done. A batch that finds every permit held by other calls, with nothing
of its own in flight, waits for one within its timeout (as ``invoke_async`` does), on every
face; past it, the rest of the batch fails as too many requests. Unit tests of
`ThreadPermits`, then batches over a real socket sharing few permits."""

from __future__ import annotations

import threading
import time

import trio

from codec import RemotingCommand, ResponseCode
from processors import RequestContext, RequestProcessor
from remoting import (
    ClientConfig,
    RemotingClient,
    RemotingError,
    RemotingServer,
    RemotingTooManyRequestsError,
    TrioRemotingClient,
    TrioRemotingServer,
)
from remoting._core._thread_driver._thread_permits import ThreadPermits

from .conftest import ECHO, addr_of, install_standard_processors

GATED = 79


def test_a_window_takes_what_is_free_at_once_and_nothing_while_threads_wait() -> None:
    permits = ThreadPermits(10)
    assert permits.try_take_many(4) == 4 and permits.free == 6
    assert permits.try_take_many(100) == 6 and permits.free == 0  # no more than are free
    assert permits.try_take_many(1) == 0 and permits.try_take_many(0) == 0
    permits.give_many(3)
    assert permits.free == 3
    permits.give_many(0)
    permits.give_many(-2)  # nothing to give: nothing changes
    assert permits.free == 3
    permits.waiting = 1  # a thread waits in take(): newcomers leave the permits to it
    assert permits.try_take_many(3) == 0 and permits.free == 3
    permits.waiting = 0


def test_permits_given_back_together_wake_as_many_waiting_threads() -> None:
    permits = ThreadPermits(3)
    assert permits.try_take_many(3) == 3
    took: list[bool] = []
    waiting = [threading.Thread(target=lambda: took.append(permits.take(time.monotonic() + 30)))
               for _ in range(3)]
    for thread in waiting:
        thread.start()
    deadline = time.monotonic() + 10
    while permits.waiting < 3:  # all three wait before the permits come back
        assert time.monotonic() < deadline, "the threads never waited"
        threading.Event().wait(0.001)
    permits.give_many(3)
    for thread in waiting:
        thread.join(10)
    assert took == [True, True, True] and permits.free == 0 and permits.waiting == 0


def test_batches_and_async_calls_sharing_few_permits_all_finish_and_give_them_back() -> None:
    server = RemotingServer()
    install_standard_processors(server)
    # 8 permits for 3 windows of 64 and 4 async calls: a batch that finds none free and has
    # nothing in flight waits for one (it used to fail its requests at once); a permit kept
    # or given back twice would show in the count after
    config = ClientConfig(client_async_semaphore_value=8)  # io: both, by conftest
    with server, RemotingClient(config) as client:
        answers: list[list[RemotingCommand | RemotingError]] = []
        futures = [client.invoke_async(server.addr, RemotingCommand.create_request(ECHO), 10)
                   for _ in range(4)]

        def batch() -> None:
            answers.append(client.invoke_many(
                server.addr, [RemotingCommand.create_request(ECHO) for _ in range(200)], 10,
                limit=64))

        threads = [threading.Thread(target=batch) for _ in range(3)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(30)
        assert [f.result(10).code for f in futures] == [ResponseCode.SUCCESS] * 4
        assert [[getattr(r, "code", r) for r in a] for a in answers] == [
            [ResponseCode.SUCCESS] * 200] * 3
        stats = client.statistics()
    assert stats.async_permits_free == 8  # none kept, none given back twice


class Gated(RequestProcessor):
    """Answers once ``gate`` is set."""

    def __init__(self) -> None:
        self.entered = threading.Event()
        self.gate = threading.Event()

    def process_request(self, ctx: RequestContext, request: RemotingCommand) -> RemotingCommand:
        self.entered.set()
        self.gate.wait(30)
        return RemotingCommand.create_response(ResponseCode.SUCCESS)


def test_a_batch_that_gets_no_permit_within_its_timeout_fails_the_rest_then() -> None:
    server = RemotingServer()
    install_standard_processors(server)
    gated = Gated()
    server.register_processor(GATED, gated)
    with server, RemotingClient(ClientConfig(client_async_semaphore_value=1)) as client:
        held = client.invoke_async(server.addr, RemotingCommand.create_request(GATED), 30)
        assert gated.entered.wait(10)  # sent: it holds the only permit
        start = time.monotonic()
        results = client.invoke_many(
            server.addr, [RemotingCommand.create_request(ECHO) for _ in range(3)], 0.3)
        waited = time.monotonic() - start
        gated.gate.set()
        assert held.result(10).code == ResponseCode.SUCCESS
        stats = client.statistics()
    assert [type(r) for r in results] == [RemotingTooManyRequestsError] * 3
    assert "no in-flight permit within 0.3s" in str(results[0])
    assert waited >= 0.25  # wall-clock: a lower bound (it waited for a permit, not failed at once)
    assert stats.async_permits_free == 1


async def test_trio_batches_sharing_few_permits_wait_for_them(
        server: TrioRemotingServer, nursery: trio.Nursery) -> None:
    client = TrioRemotingClient(ClientConfig(client_async_semaphore_value=8))
    await nursery.start(client.serve)
    answers: list[list[RemotingCommand | RemotingError]] = []

    async def batch() -> None:
        answers.append(await client.invoke_many(
            addr_of(server), [RemotingCommand.create_request(ECHO) for _ in range(200)], 10,
            limit=64))

    async with trio.open_nursery() as batches:
        for _ in range(3):
            batches.start_soon(batch)
    assert client.statistics().async_permits_free == 8
    assert [[getattr(r, "code", r) for r in a] for a in answers] == [
        [ResponseCode.SUCCESS] * 200] * 3
