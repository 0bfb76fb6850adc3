"""Large frames over TLS: pieces sent with send_all (no sendmsg), chunked receive, byte-exact."""

from __future__ import annotations

import random

import pytest
import trio

from codec import LARGE_BODY_BYTES, RemotingCommand, SerializeType
from processors import AsyncEchoProcessor, EchoProcessor
from remoting import ClientConfig, ServerConfig, TrioRemotingClient, TrioRemotingServer

from .conftest import Pki

ECHO, ASYNC_ECHO = 1, 2


@pytest.mark.parametrize("st", list(SerializeType))
async def test_large_frames_round_trip_over_tls(nursery: trio.Nursery, pki: Pki,
                                                st: SerializeType) -> None:
    server = TrioRemotingServer(ServerConfig(tls_mode="enforcing", tls_cert_file=pki.server_cert,
                                             tls_key_file=pki.server_key))
    server.register_processor(ECHO, EchoProcessor())
    server.register_processor(ASYNC_ECHO, AsyncEchoProcessor())
    await nursery.start(server.serve)
    client = TrioRemotingClient(ClientConfig(use_tls=True, tls_ca_file=pki.ca_file))
    await nursery.start(client.serve)
    addr = f"127.0.0.1:{server.port}"
    rng = random.Random(5)
    # under the 4 MiB high water mark in flight (see tests/remoting/test_large_frames.py)
    sizes = [LARGE_BODY_BYTES - 1, LARGE_BODY_BYTES, 1 << 20, 10]
    bodies = [rng.randbytes(n) for n in sizes]

    async def call(i: int, body: bytes) -> None:
        cmd = RemotingCommand.create_request(ECHO if i % 2 else ASYNC_ECHO, body=body)
        cmd.serialize_type = st
        assert (await client.invoke_sync(addr, cmd, 20)).body == body

    async with trio.open_nursery() as calls:  # concurrently: pieces of frames interleave
        for i, body in enumerate(bodies):
            calls.start_soon(call, i, body)
    await call(1, rng.randbytes(4 << 20))
    [channel] = server.channels()
    assert channel.tls_version is not None  # the TLS path (a trio.SSLStream), not sendmsg
