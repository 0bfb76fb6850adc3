"""A thread-driven client's read that brings one answer (the usual read of calls made one at
a time) takes its call out of the table alone (`PendingCalls.answered_one`: nothing to
group): the answer completes its call, reaches its batch, or is counted as an orphan, as in a
read of several."""

from __future__ import annotations

import socket
import threading

import pytest

from codec import FrameDecoder, RemotingCommand, ResponseCode, encode_frame
from remoting import ClientConfig, RemotingClient, RemotingServer, RemotingTimeoutError

from ..factories import req
from .conftest import ECHO


def test_a_batch_answered_one_answer_a_read_gets_every_result(
    blocking_server: RemotingServer, blocking_client: RemotingClient,
) -> None:
    addr = f"127.0.0.1:{blocking_server.port}"
    requests = [req(ECHO, bytes([i])) for i in range(20)]
    # one request in flight at a time: each read brings the batch one answer
    results = blocking_client.invoke_many(addr, requests, 10.0, limit=1)
    assert [r.body for r in results] == [bytes([i]) for i in range(20)]  # type: ignore[union-attr]
    stats = blocking_client.statistics()
    assert stats.in_flight == 0 and stats.orphaned_responses == 0


def _next_request(peer: socket.socket, decoder: FrameDecoder) -> RemotingCommand:
    """Receive from ``peer`` until ``decoder`` has a whole command."""
    while (cmd := decoder.next_command()) is None:
        data = peer.recv(65536)
        assert data, "the client closed the connection"
        decoder.feed(data)
    return cmd


def test_a_late_answer_read_alone_is_counted_as_an_orphan_and_the_next_call_answered() -> None:
    listener = socket.create_server(("127.0.0.1", 0))
    addr = f"127.0.0.1:{listener.getsockname()[1]}"
    client = RemotingClient(ClientConfig(close_socket_if_timeout=False)).start()
    peer: socket.socket | None = None
    try:
        with pytest.raises(RemotingTimeoutError):  # the peer does not answer in time
            client.invoke_sync(addr, req(ECHO, b"first"), 0.2)
        peer, _ = listener.accept()
        decoder = FrameDecoder(16 * 1024 * 1024, 64 * 1024)
        first = _next_request(peer, decoder)
        late = RemotingCommand.create_response(ResponseCode.SUCCESS)
        late.opaque = first.opaque
        peer.sendall(encode_frame(late))  # in the client's socket before the next call

        def answer_next() -> None:
            assert peer is not None
            request = _next_request(peer, decoder)
            response = RemotingCommand.create_response(ResponseCode.SUCCESS)
            response.opaque = request.opaque
            response.body = request.body
            peer.sendall(encode_frame(response))

        responder = threading.Thread(target=answer_next)
        responder.start()
        # the call looks at the connection first (nothing read from it lately): the late
        # answer is that read's one answer, matching no call
        response = client.invoke_sync(addr, req(ECHO, b"second"), 10.0)
        responder.join(10)
        assert response.body == b"second"
        stats = client.statistics()
        assert stats.orphaned_responses == 1 and stats.in_flight == 0 and stats.connections == 1
    finally:
        client.shutdown()
        if peer is not None:
            peer.close()
        listener.close()
