"""A connection refused for a limit (max_connections, max_connections_per_ip) gets an answer
before it is closed: its first request is answered SYSTEM_BUSY with a remark naming the limit,
in the request's serialization, as RocketMQ answers a busy broker. Before, the client was told
only ``connection closed (read failed: ConnectionResetError(104, ...))``. What a refused peer
can cost is bounded (one small frame, one second, 64 answered at once)."""

from __future__ import annotations

import pytest
import trio
import trio.testing

from codec import FrameDecoder, RemotingCommand, ResponseCode, SerializeType, encode_frame
from processors import AsyncEchoProcessor
from remoting import (
    ClientConfig,
    RemotingClient,
    RemotingConnectError,
    RemotingSendRequestError,
    RemotingServer,
    ServerConfig,
    TrioRemotingClient,
    TrioRemotingServer,
)
from remoting._core._acceptor import (
    MAX_REFUSALS_ANSWERED,
    REFUSAL_SECONDS,
    REFUSED_FRAME_BYTES,
    Admission,
    refusal_answers,
)

from ..logs import capture_logs
from .conftest import Pki

ECHO = 1


def test_every_complete_request_gets_an_answer_naming_the_limit() -> None:
    json = RemotingCommand.create_request(ECHO, body=b"a")
    binary = RemotingCommand.create_request(ECHO, header={"k": "v"})
    binary.serialize_type = SerializeType.ROCKETMQ
    oneway = RemotingCommand.create_request(ECHO)
    oneway.mark_oneway()
    decoder = FrameDecoder()
    decoder.feed(b"".join(encode_frame(c) for c in (json, oneway, binary))
                 + encode_frame(json)[:10])  # and the start of one more
    answers = [FrameDecoder() for _ in range(2)]
    got = refusal_answers(decoder, "10.0.0.1 has 2 connections (max_connections_per_ip)")
    assert len(got) == 2  # no answer to the oneway, nor to the partial frame
    for frame, decoder_, request in zip(got, answers, (json, binary), strict=True):
        decoder_.feed(frame)
        answer = decoder_.next_command()
        assert answer is not None and answer.is_response
        assert (answer.opaque, answer.code, answer.serialize_type) == (
            request.opaque, ResponseCode.SYSTEM_BUSY, request.serialize_type)
        assert answer.remark is not None and answer.remark.startswith(
            "[CONNECTION_REFUSED] 10.0.0.1 has 2 connections (max_connections_per_ip)")


def test_at_most_so_many_refusals_are_answered_at_once() -> None:
    admission = Admission(1, 0, max_answering=2)
    assert [admission.start_answer() for _ in range(3)] == [True, True, False]
    admission.answer_done()
    assert admission.start_answer()
    assert Admission(1, 0).max_answering == MAX_REFUSALS_ANSWERED


@pytest.mark.parametrize("limit", ["max_connections", "max_connections_per_ip"])
@pytest.mark.parametrize("serialize_type", [SerializeType.JSON, SerializeType.ROCKETMQ])
async def test_the_refused_client_is_answered_system_busy_naming_the_limit(
        nursery: trio.Nursery, limit: str, serialize_type: SerializeType) -> None:
    server = TrioRemotingServer(ServerConfig(**{limit: 1}))  # type: ignore[arg-type]
    server.register_processor(ECHO, AsyncEchoProcessor())
    await nursery.start(server.serve)
    addr = f"127.0.0.1:{server.port}"
    admitted, refused = TrioRemotingClient(), TrioRemotingClient()
    await nursery.start(admitted.serve)
    await nursery.start(refused.serve)
    assert (await admitted.invoke_sync(addr, RemotingCommand.create_request(ECHO), 5)).code == 0
    request = RemotingCommand.create_request(ECHO, body=b"x")
    request.serialize_type = serialize_type
    with capture_logs() as logs:
        answer = await refused.invoke_sync(addr, request, 5)
    assert answer.code == ResponseCode.SYSTEM_BUSY
    assert answer.remark is not None and f"({limit})" in answer.remark
    assert answer.serialize_type == serialize_type
    assert any(limit in e["reason"] for e in logs if e["event"] == "connection.refused")
    # the admitted connection is untouched, and the refused one is closed
    assert (await admitted.invoke_sync(addr, RemotingCommand.create_request(ECHO), 5)).code == 0
    with trio.fail_after(5):
        while refused.statistics().connections:
            await trio.testing.wait_all_tasks_blocked()


def test_the_blocking_client_is_answered_too() -> None:
    with RemotingServer(ServerConfig(max_connections_per_ip=1)) as server, \
            RemotingClient(ClientConfig()) as admitted, \
            RemotingClient(ClientConfig()) as refused:
        server.register_processor(ECHO, AsyncEchoProcessor())
        assert admitted.invoke_sync(server.addr, RemotingCommand.create_request(ECHO), 5).code == 0
        answer = refused.invoke_sync(server.addr, RemotingCommand.create_request(ECHO), 5)
        assert answer.code == ResponseCode.SYSTEM_BUSY
        assert answer.remark is not None and "max_connections_per_ip" in answer.remark


async def open_admitted_and_raw(nursery: trio.Nursery, **config: object
                                ) -> tuple[TrioRemotingServer, trio.SocketStream]:
    server = TrioRemotingServer(ServerConfig(max_connections=1, **config))  # type: ignore[arg-type]
    server.register_processor(ECHO, AsyncEchoProcessor())
    port = await nursery.start(server.serve)
    kept = await trio.open_tcp_stream("127.0.0.1", port)
    nursery.start_soon(hold, kept)
    with trio.fail_after(5):
        while server.statistics().admitted < 1:
            await trio.testing.wait_all_tasks_blocked()
    return server, await trio.open_tcp_stream("127.0.0.1", port)


async def hold(stream: trio.SocketStream) -> None:
    async with stream:
        await trio.sleep_forever()


async def closed_after(stream: trio.SocketStream) -> float:
    start = trio.current_time()
    with trio.fail_after(10):
        try:
            while await stream.receive_some(1 << 16):
                pass
        except trio.BrokenResourceError:
            pass
    return trio.current_time() - start


async def test_a_silent_refused_peer_is_closed_after_a_second(nursery: trio.Nursery) -> None:
    started = trio.current_time()  # before the server accepts the peer and starts its timer
    _, raw = await open_admitted_and_raw(nursery)
    async with raw:
        await closed_after(raw)  # closed at all: it waited at most 10 s
    waited = trio.current_time() - started
    assert waited >= REFUSAL_SECONDS * 0.9  # wall-clock: a lower bound (it had its second)


async def test_a_large_first_request_is_not_read_to_answer_it(nursery: trio.Nursery) -> None:
    await _large_first_request_closed_after(nursery)


@pytest.mark.slow
async def test_a_large_first_request_is_closed_at_once(nursery: trio.Nursery) -> None:
    assert await _large_first_request_closed_after(nursery) < REFUSAL_SECONDS


async def _large_first_request_closed_after(nursery: trio.Nursery) -> float:
    """Return how long after its prefix a refused peer's large request was closed."""
    _, raw = await open_admitted_and_raw(nursery)
    big = encode_frame(RemotingCommand.create_request(ECHO, body=b"x" * REFUSED_FRAME_BYTES))
    async with raw:
        with trio.fail_after(5):
            try:
                await raw.send_all(big[:16])  # the prefix says more than the acceptor reads
            except trio.BrokenResourceError:
                pass
            return await closed_after(raw)  # closed at once: no answer


async def test_an_enforcing_tls_server_refuses_without_a_handshake(nursery: trio.Nursery,
                                                                   pki: Pki) -> None:
    await _tls_refusal_took(nursery, pki)


@pytest.mark.slow
async def test_an_enforcing_tls_server_refuses_at_once(nursery: trio.Nursery, pki: Pki) -> None:
    assert await _tls_refusal_took(nursery, pki) < REFUSAL_SECONDS


async def _tls_refusal_took(nursery: trio.Nursery, pki: Pki) -> float:
    """Return how long a TLS client refused by an enforcing server took to fail."""
    server = TrioRemotingServer(ServerConfig(max_connections_per_ip=1, tls_mode="enforcing",
                                             tls_cert_file=pki.server_cert,
                                             tls_key_file=pki.server_key))
    server.register_processor(ECHO, AsyncEchoProcessor())
    await nursery.start(server.serve)
    addr = f"127.0.0.1:{server.port}"
    tls = ClientConfig(use_tls=True, tls_ca_file=pki.ca_file)
    admitted, refused = TrioRemotingClient(tls), TrioRemotingClient(tls)
    await nursery.start(admitted.serve)
    await nursery.start(refused.serve)
    assert (await admitted.invoke_sync(addr, RemotingCommand.create_request(ECHO), 5)).code == 0
    start = trio.current_time()
    with pytest.raises((RemotingConnectError, RemotingSendRequestError)):
        await refused.invoke_sync(addr, RemotingCommand.create_request(ECHO), 10)
    return trio.current_time() - start
