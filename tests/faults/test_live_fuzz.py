"""Live fuzz: random and mutated frames over many raw connections to a running server.

Each of `workers` tasks opens a raw trio socket stream to 127.0.0.1, writes a random number of
frames (valid, mutated, or random bytes; each cut into random chunks), reads whatever comes
back, then closes the stream (gracefully, abruptly, or with a RST); when the server drops the
connection (a codec error) it opens a new one. Afterwards the server must still answer a normal
client correctly, have nothing in flight, nothing processing, and only that client connected.
Everything the server sent back must decode as responses.

The default suite sends 3,000 frames over 30 concurrent connections; ``-m slow`` sends 10,000
over 50 (seeded: a failure reproduces with the same seed).
"""

from __future__ import annotations

import random
import socket
import struct
from dataclasses import dataclass, field

import pytest
import trio
import trio.testing

from codec import CodecError, FrameDecoder, RemotingCommand, SerializeType, encode_frame
from processors import AsyncEchoProcessor, EchoProcessor, RequestContext, RequestProcessor
from remoting import ClientConfig, ServerConfig, TrioRemotingClient, TrioRemotingServer
from tests.fuzz.mutations import chunking, mutate, seed_frames

from ..logs import capture_logs

ECHO = 1
ASYNC_ECHO = 2
RAISES = 4


class Boom(RequestProcessor):
    def process_request(self, ctx: RequestContext, request: RemotingCommand) -> RemotingCommand:
        raise ValueError("boom")


def served_frames() -> list[bytes]:
    """Frames for the codes the server serves (both serializations, request/oneway/response)."""
    frames = []
    for st in SerializeType:
        for code in (ECHO, ASYNC_ECHO, RAISES, 999):
            for flag in (0, 2, 1):
                frames.append(encode_frame(RemotingCommand(
                    code=code, flag=flag, opaque=code * 10 + flag, serialize_type=st,
                    ext_fields={"k": "v"}, body=b"payload")))
    return frames


@dataclass
class Tally:
    target: int
    frames: int = 0  # frames written completely
    connections: int = 0
    dropped_by_server: int = 0
    responses: int = 0
    seeds: list[bytes] = field(default_factory=list)


async def read_responses(stream: trio.SocketStream, tally: Tally) -> None:
    """Read until EOF; everything the server sends must decode as responses."""
    decoder = FrameDecoder()
    while True:
        try:
            data = await stream.receive_some(65536)
        except (trio.BrokenResourceError, trio.ClosedResourceError):
            return
        if not data:
            return
        decoder.feed(data)
        try:
            while (cmd := decoder.next_command()) is not None:
                assert cmd.is_response, cmd
                tally.responses += 1
        except CodecError as exc:  # pragma: no cover - a server bug
            raise AssertionError(f"the server sent bytes that do not decode: {exc}") from exc


def next_frame(rng: random.Random, tally: Tally) -> bytes:
    roll = rng.random()
    if roll < 0.1:
        return rng.randbytes(rng.randint(1, 40))
    frame = rng.choice(tally.seeds)
    if roll < 0.45:
        return frame
    return mutate(rng, frame, tally.seeds)


async def one_connection(port: int, rng: random.Random, tally: Tally) -> None:
    stream = await trio.open_tcp_stream("127.0.0.1", port)
    tally.connections += 1
    async with trio.open_nursery() as nursery:
        nursery.start_soon(read_responses, stream, tally)
        try:
            for _ in range(rng.randint(1, 20)):
                if tally.frames >= tally.target:
                    break
                for chunk in chunking(rng, next_frame(rng, tally)):
                    await stream.send_all(chunk)
                tally.frames += 1
            ending = rng.random()
            if ending < 0.2:  # abort: RST
                stream.socket.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER,
                                         struct.pack("ii", 1, 0))
            elif ending < 0.6:  # half-close, let the server finish and close
                await stream.send_eof()
                with trio.move_on_after(5):
                    while nursery.child_tasks:
                        await trio.testing.wait_all_tasks_blocked()
        except (trio.BrokenResourceError, trio.ClosedResourceError):
            tally.dropped_by_server += 1
        nursery.cancel_scope.cancel()
    await stream.aclose()


async def worker(port: int, seed: int, tally: Tally) -> None:
    rng = random.Random(seed)
    while tally.frames < tally.target:
        await one_connection(port, rng, tally)


@pytest.mark.parametrize(
    ("frames", "workers"),
    [(3_000, 30), pytest.param(10_000, 50, marks=pytest.mark.slow)],
)
async def test_server_survives_live_fuzz(nursery: trio.Nursery, frames: int, workers: int
                                         ) -> None:
    server = TrioRemotingServer(ServerConfig())
    server.register_processor(ECHO, EchoProcessor())
    server.register_processor(ASYNC_ECHO, AsyncEchoProcessor())
    server.register_processor(RAISES, Boom())
    await nursery.start(server.serve)
    tally = Tally(target=frames, seeds=seed_frames() + served_frames())
    start = trio.current_time()
    with capture_logs() as logs, trio.fail_after(120):
        async with trio.open_nursery() as fuzzers:
            for i in range(workers):
                fuzzers.start_soon(worker, server.port, 1000 + i, tally)
    elapsed = trio.current_time() - start
    broken = sum(1 for e in logs if e["event"] == "connection.broken")
    print(f"\nlive fuzz: {tally.frames} frames over {tally.connections} connections "
          f"({workers} at a time) in {elapsed:.1f} s; {broken} closed for bad input, "
          f"{tally.responses} responses read")
    assert tally.frames >= frames
    assert broken > tally.connections // 10  # the garbage did reach the decoder

    # the server is healthy: a normal client is answered correctly...
    client = TrioRemotingClient(ClientConfig())
    await nursery.start(client.serve)
    addr = f"127.0.0.1:{server.port}"
    for code in (ECHO, ASYNC_ECHO):
        for st in SerializeType:
            request = RemotingCommand.create_request(code, body=b"after the storm")
            request.serialize_type = st
            response = await client.invoke_sync(addr, request, 5)
            assert (response.code, response.body) == (0, b"after the storm")
    # ...and nothing is left behind: only that client's connection, no request in flight
    with trio.fail_after(10):
        while (server.statistics().connections != 1 or server.statistics().processing
               or server.statistics().admitted != 1):
            await trio.testing.wait_all_tasks_blocked()
    stats = server.statistics()
    assert stats.in_flight == 0
    assert stats.processor_queue.get(ECHO, 0) == 0
    assert len(server.channels()) == 1
