"""A server drains (GO_AWAY) while many threads call it over one connection, reading for each
other: every call still succeeds (one answered GO_AWAY is resent once, to the next address),
the draining connection closes once its calls are done, and nothing is left in flight."""

from __future__ import annotations

import threading
import time

from codec import RemotingCommand, ResponseCode
from processors import AsyncRequestProcessor, RequestContext
from remoting import RemotingClient, RemotingError, RemotingServer

from ..factories import req

COUNTED = 81
THREADS = 8


class Counted(AsyncRequestProcessor):
    """Echoes the body and counts what it answered (itself, not GO_AWAY refusals)."""

    def __init__(self) -> None:
        self.answered = 0
        self.some = threading.Event()

    async def process_request(self, ctx: RequestContext, request: RemotingCommand
                              ) -> RemotingCommand:
        self.answered += 1
        if self.answered >= 50:
            self.some.set()
        response = RemotingCommand.create_response(ResponseCode.SUCCESS)
        response.body = request.body
        return response


def test_calls_of_threads_reading_a_draining_connection_all_succeed_elsewhere() -> None:
    first, second = Counted(), Counted()
    a, b = RemotingServer(), RemotingServer()
    a.register_processor(COUNTED, first)
    b.register_processor(COUNTED, second)
    failures: list[BaseException] = []
    wrong: list[bytes] = []
    stop = threading.Event()
    with a, b, RemotingClient() as client:
        client.update_name_server_address_list([a.addr])
        client.invoke_sync(None, req(COUNTED), 5)  # a is the current address
        client.update_name_server_address_list([a.addr, b.addr])

        def work(t: int) -> None:
            i = 0
            while not stop.is_set():
                body = b"%d-%d" % (t, i)
                try:
                    answer = client.invoke_sync(None, req(COUNTED, body), 10)
                except RemotingError as exc:
                    failures.append(exc)
                else:
                    if answer.body != body:
                        wrong.append(body)
                i += 1

        threads = [threading.Thread(target=work, args=(t,)) for t in range(THREADS)]
        for thread in threads:
            thread.start()
        try:
            assert first.some.wait(10)  # calls on a's connection, threads reading it
            a.drain()
            assert second.some.wait(10)  # the calls moved to b
        finally:
            stop.set()
            for thread in threads:
                thread.join(20)
        deadline = time.monotonic() + 10
        while client.statistics().connections > 1 and time.monotonic() < deadline:
            client.invoke_sync(None, req(COUNTED), 5)  # a's connection closes once drained
        stats = client.statistics()
    assert not any(thread.is_alive() for thread in threads)
    assert not failures
    assert not wrong
    assert stats.go_away_received > 0
    assert stats.connections == 1
    assert stats.in_flight == 0
    assert client.current_name_server == b.addr
