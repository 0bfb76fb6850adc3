"""The race hunt: many threads share one client, with random timeouts, while a fault proxy on
127.0.0.1 drops, delays and duplicates the server's answers. Every call ends exactly once (a
sync call returns or raises once, an async call's callback runs once, a batch has one result
per request), an answer only ever goes to its own call, none is lost, and afterwards the
response table is empty and every permit is back.

The default suite runs a short version; ``-m slow`` runs 32 threads x 10,000 calls.
"""

from __future__ import annotations

import random
import threading
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from functools import partial

import pytest

from codec import RemotingCommand, ResponseCode
from processors import AsyncRequestProcessor, RequestContext
from remoting import (
    ClientConfig,
    RemotingClient,
    RemotingError,
    RemotingServer,
    ResponseFuture,
    ServerConfig,
)

from .proxy import Fault, proxy_thread

ECHO_ID = 31
FAULT = Fault(latency=0.0005, jitter=0.002, drop=0.03, duplicate=0.03)


@dataclass(frozen=True)
class Size:
    threads: int
    calls: int  # per thread


SIZES = [pytest.param(Size(8, 150), id="short"),
         pytest.param(Size(32, 10_000), id="32x10000", marks=pytest.mark.slow)]


class EchoId(AsyncRequestProcessor):
    """Answers with the request's body (a unique id)."""

    async def process_request(self, ctx: RequestContext, request: RemotingCommand
                              ) -> RemotingCommand:
        response = RemotingCommand.create_response(ResponseCode.SUCCESS)
        response.body = request.body
        return response


class Tally:
    """How each call ended, by id (thread-safe): a second ending shows as a count of 2."""

    def __init__(self) -> None:
        self.endings: Counter[bytes] = Counter()
        self.kinds: Counter[str] = Counter()
        self.misrouted: list[bytes] = []
        self._ended = threading.Condition()

    def end(self, key: bytes, outcome: RemotingCommand | BaseException | None) -> None:
        with self._ended:
            self._ended.notify_all()
            self.endings[key] += 1
            if isinstance(outcome, RemotingCommand):
                self.kinds["answered"] += 1
                if outcome.body != key:
                    self.misrouted.append(key)
            else:
                self.kinds[type(outcome).__name__] += 1

    def on_done(self, key: bytes, fut: ResponseFuture) -> None:
        """An async call's callback."""
        self.end(key, fut.response_command if fut.cause is None else fut.cause)

    def wait_for(self, calls: int, timeout: float) -> bool:
        """Wait until ``calls`` calls have ended (callbacks run on their own threads)."""
        with self._ended:
            return self._ended.wait_for(lambda: len(self.endings) >= calls, timeout)


@pytest.fixture
def through_proxy() -> Iterator[tuple[str, RemotingServer]]:
    server = RemotingServer(ServerConfig())
    server.register_processor(ECHO_ID, EchoId())
    with server, proxy_thread(server.port, FAULT, seed=7) as proxy:
        yield f"127.0.0.1:{proxy.port}", server


@pytest.mark.parametrize("size", SIZES)
def test_every_call_ends_once_whatever_happens_to_its_answer(
        through_proxy: tuple[str, RemotingServer], size: Size) -> None:
    addr, _ = through_proxy
    tally = Tally()
    config = ClientConfig(close_socket_if_timeout=False, client_async_semaphore_value=4096)
    started: list[bytes] = []
    started_lock = threading.Lock()

    def new_id(t: int, i: int, j: int = 0) -> bytes:
        key = b"%d-%d-%d" % (t, i, j)
        with started_lock:
            started.append(key)
        return key

    def request(key: bytes) -> RemotingCommand:
        return RemotingCommand.create_request(ECHO_ID, body=key)

    with RemotingClient(config) as client:

        def work(t: int) -> None:
            rng = random.Random(t)
            for i in range(size.calls):
                timeout = rng.uniform(0.02, 0.3)
                roll = rng.random()
                if roll < 0.7:  # sync
                    key = new_id(t, i)
                    try:
                        outcome: RemotingCommand | BaseException = client.invoke_sync(
                            addr, request(key), timeout)
                    except RemotingError as exc:
                        outcome = exc
                    tally.end(key, outcome)
                elif roll < 0.9:  # async, with a callback its thread never waits for
                    key = new_id(t, i)
                    client.invoke_async(addr, request(key), timeout, partial(tally.on_done, key))
                else:  # a small batch
                    keys = [new_id(t, i, j) for j in range(4)]
                    results = client.invoke_many(addr, [request(k) for k in keys], timeout,
                                                 limit=2)
                    for key, result in zip(keys, results, strict=True):
                        tally.end(key, result)

        threads = [threading.Thread(target=work, args=(t,)) for t in range(size.threads)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(600)
        assert not any(thread.is_alive() for thread in threads)
        tally.wait_for(len(started), 10)  # the last callbacks: their calls end by deadline
        stats = client.statistics()

    assert set(tally.endings) == set(started), "a call never ended"
    assert max(tally.endings.values()) == 1, "a call ended twice"
    assert not tally.misrouted, "an answer went to another call"
    assert tally.kinds["answered"] > len(started) // 2  # the faults left most calls alone
    assert stats.in_flight == 0
    assert stats.async_permits_free == config.client_async_semaphore_value
