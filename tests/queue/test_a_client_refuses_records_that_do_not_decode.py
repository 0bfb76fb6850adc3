"""A queue client talking to a peer that answers pulls with records that do not decode (a
broken or hostile service) raises `QueueError` saying so, not the decoder's own
``ValueError``, and returns none of them."""

from __future__ import annotations

from typing import Any

import pytest
import trio

from codec import RemotingCommand, ResponseCode
from processors import AsyncRequestProcessor, RequestContext
from remoting import ServerConfig, TrioRemotingClient, TrioRemotingServer
from remoting.queue import QueueClient, QueueError
from remoting.queue._wire import QueueCode


class Garbage(AsyncRequestProcessor):
    """Answers every request SUCCESS with a body that is not whole records."""

    async def process_request(self, ctx: RequestContext, request: RemotingCommand
                              ) -> RemotingCommand:
        response = RemotingCommand.create_response(ResponseCode.SUCCESS)
        response.body = b"\x00\x00\x00\x40" + b"\xff" * 20  # a record of 64 bytes, cut short
        return response


@pytest.mark.parametrize("where", [{"offset": 0}, {"group": "g"}])
async def test_a_pull_answered_with_broken_records_raises_queue_error(
        nursery: trio.Nursery, where: dict[str, Any]) -> None:
    server = TrioRemotingServer(ServerConfig())
    server.register_processor(QueueCode.PULL, Garbage())
    port = await nursery.start(server.serve)
    client = TrioRemotingClient()
    await nursery.start(client.serve)
    q = QueueClient(client)
    with pytest.raises(QueueError, match="records that are not well-formed") as raised:
        await q.pull(f"127.0.0.1:{port}", "t", max_wait=0, **where)
    assert raised.value.code is None
    pulled = await q.pull_records(f"127.0.0.1:{port}", "t", max_wait=0, **where)
    with pytest.raises(ValueError, match="a record at byte 0"):  # the bulk API's documented error
        pulled.fields()
