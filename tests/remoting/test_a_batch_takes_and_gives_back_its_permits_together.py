"""In-flight permits of the thread driver (RocketMQ's ``semaphoreAsync``): a blocking
``invoke_many`` takes the permits of its window together and gives back the spare ones
together (one lock hold each, not one per request), and never takes more than are free, one
while threads wait for one, or keeps one once it is done. Unit tests of `ThreadPermits`, then
batches over a real socket sharing the permits with each other and with ``invoke_async``."""

from __future__ import annotations

import threading
import time

from codec import RemotingCommand, ResponseCode
from remoting import ClientConfig, RemotingClient, RemotingServer
from remoting._core._calling._permits import ThreadPermits

from .conftest import ECHO, install_standard_processors


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


def test_batches_and_async_calls_sharing_the_permits_all_finish_and_give_them_back() -> None:
    server = RemotingServer()
    install_standard_processors(server)
    # exactly enough for 3 windows of 16 and 4 async calls at once: every one is taken at
    # the peak, and a permit kept or given back twice would show in the count after
    config = ClientConfig(client_async_semaphore_value=3 * 16 + 4)  # io: both, by conftest
    with server, RemotingClient(config) as client:
        answers: list[list[object]] = []
        futures = [client.invoke_async(server.addr, RemotingCommand.create_request(ECHO), 10)
                   for _ in range(4)]

        def batch() -> None:
            answers.append(client.invoke_many(
                server.addr, [RemotingCommand.create_request(ECHO) for _ in range(200)], 10,
                limit=16))

        threads = [threading.Thread(target=batch) for _ in range(3)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(30)
        assert [f.result(10).code for f in futures] == [ResponseCode.SUCCESS] * 4
        assert [[getattr(r, "code", r) for r in a] for a in answers] == [
            [ResponseCode.SUCCESS] * 200] * 3
        stats = client.statistics()
    assert stats.async_permits_free == 3 * 16 + 4  # none kept, none given back twice
