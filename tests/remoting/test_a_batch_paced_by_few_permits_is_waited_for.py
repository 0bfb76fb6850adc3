"""A blocking ``invoke_many`` waits for its batch as long as the event loop answers, however
slowly few in-flight permits pace it: it gave up after ``timeout x waves + 30 s`` with "the
event loop did not finish the batch", while the loop went on sending the batch for no one.
(Slow: the batch must outlast that bound.)"""

from __future__ import annotations

import threading

import pytest

from codec import RemotingCommand, ResponseCode
from processors import RequestContext, RequestProcessor
from remoting import ClientConfig, RemotingClient, RemotingServer

CODE = 1
REQUESTS, PAUSE, TIMEOUT, LIMIT = 700, 0.05, 0.2, 64  # ~35 s against a 32.2 s bound


class Paced(RequestProcessor):
    def process_request(self, ctx: RequestContext, request: RemotingCommand) -> RemotingCommand:
        threading.Event().wait(PAUSE)  # the pace under test
        return RemotingCommand.create_response(ResponseCode.SUCCESS)


@pytest.mark.slow
def test_the_whole_batch_is_answered() -> None:
    with RemotingServer() as server, \
            RemotingClient(ClientConfig(client_async_semaphore_value=1)) as client:
        server.register_processor(CODE, Paced())
        results = client.invoke_many(
            server.addr, [RemotingCommand.create_request(CODE) for _ in range(REQUESTS)],
            TIMEOUT, limit=LIMIT)
    assert [getattr(r, "code", r) for r in results] == [ResponseCode.SUCCESS] * REQUESTS
