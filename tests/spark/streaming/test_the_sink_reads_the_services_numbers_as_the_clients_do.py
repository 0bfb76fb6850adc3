"""The sink's publish (`QueueCalls.publish`, on an executor) reads the offset and count a
service answers as the queue clients do (`answered_int`, codec's `header_int`): a number
that is not ASCII digits (``"\\u0663"``, which Python's ``int()`` takes as 3) is a broken
service, a `QueueError` that says so, never an offset made up. A real server on 127.0.0.1
answers the publish; no Spark."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from codec import RemotingCommand, ResponseCode
from processors import AsyncRequestProcessor, RequestContext
from remoting import RemotingServer, ServerConfig
from remoting.queue import QueueCode, QueueError
from remoting.spark._streaming._calls import QueueCalls
from remoting.spark._streaming._options import QueueOptions

pytestmark = pytest.mark.default_io  # the executor's one client, as Spark makes it


class Answers(AsyncRequestProcessor):
    """Answers every publish SUCCESS with the given offset and count."""

    def __init__(self, offset: str, count: str) -> None:
        self.fields = {"offset": offset, "count": count}

    async def process_request(self, ctx: RequestContext, request: RemotingCommand
                              ) -> RemotingCommand:
        response = RemotingCommand.create_response(ResponseCode.SUCCESS)
        response.ext_fields = dict(self.fields)
        return response


def publishing(offset: str, count: str) -> Iterator[QueueCalls]:
    with RemotingServer(ServerConfig()) as server:
        server.register_processor(QueueCode.PUBLISH, Answers(offset, count))
        yield QueueCalls(QueueOptions(addresses=(server.addr,), topic="t", timeout=5.0,
                                      reconnect_timeout=0.0))


def test_an_answer_in_ascii_digits_is_read() -> None:
    for calls in publishing("41", "2"):
        published = calls.publish([(b"a", {}), (b"b", {})], "batch-1")
        assert (published.first, published.count, published.duplicate) == (41, 2, False)


@pytest.mark.parametrize(("offset", "count"), [("\u0663", "1"), ("1", "\u00b2"),
                                               ("+1", "1"), ("1_0", "1")])
def test_a_number_python_would_take_but_java_never_writes_is_refused(offset: str,
                                                                    count: str) -> None:
    for calls in publishing(offset, count):
        with pytest.raises(QueueError, match="the service answered a bad (offset|count)"):
            calls.publish([(b"a", {})], "batch-1")
