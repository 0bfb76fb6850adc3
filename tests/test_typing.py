"""The public API is typed: `mypy --strict` accepts a program that uses it well and reports
one that misspells a method or passes a wrongly typed argument."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

GOOD = '''
import trio

from codec import RemotingCommand, ResponseCode
from processors import RequestContext, RequestProcessor
from remoting import (ClientConfig, RemotingClient, RemotingServer, ResponseFuture,
                      ServerConfig, open_client, open_server)
from remoting.queue import Message, QueueClient
from remoting.spark import RemoteUDF, remote_udf


class Greeter(RequestProcessor):
    def process_request(self, ctx: RequestContext, request: RemotingCommand) -> RemotingCommand:
        response = RemotingCommand.create_response(ResponseCode.SUCCESS)
        response.body = b"hello " + (request.body or b"")
        return response


def blocking() -> bytes | None:
    with RemotingServer(ServerConfig()) as server:
        server.register_processor(100, Greeter())
        with RemotingClient(ClientConfig(connect_timeout=2.0)) as client:
            reply = client.invoke_sync(server.addr, RemotingCommand.create_request(100), 3.0)
            fut: ResponseFuture = client.invoke_async(server.addr,
                                                      RemotingCommand.create_request(100))
            assert fut.result().code == reply.code
            return reply.body


async def native() -> int:
    async with open_server() as server, open_client() as client:
        server.register_processor(100, Greeter())
        reply = await client.invoke_sync(f"127.0.0.1:{server.port}",
                                         RemotingCommand.create_request(100))
        return reply.code


udf: RemoteUDF = remote_udf("127.0.0.1:9876", 100, return_type="string")


def bus(server: RemotingServer, client: RemotingClient) -> bytes:
    from remoting.bus import BusClient, EventBus, Message, ReplyFailure

    event_bus = EventBus()
    event_bus.attach(server)
    with BusClient(client, server.addr) as bus_client:
        def handler(message: Message) -> None:
            message.reply(message.body, {"k": "v"})

        bus_client.consumer("echo", handler, max_buffered=10).pause()
        try:
            reply: Message = bus_client.request("echo", b"x", timeout=1.0)
        except ReplyFailure as failure:
            return failure.kind.encode()
        return reply.body


def queue(client: RemotingClient) -> list[int]:
    q = QueueClient(client)  # a BlockingQueueClient: plain methods
    with q.subscribe("127.0.0.1:1", "t", "c", credits=8) as sub:
        for msg in sub:
            msg.ack()
    return q.publish_many("127.0.0.1:1", "t", [b"x", (b"y", {"k": "v"})])


async def queue_native() -> list[Message]:
    async with open_client() as client:
        q = QueueClient(client)  # a TrioQueueClient: awaited
        async with q.subscribe("127.0.0.1:1", "t", "c") as sub:
            async for msg in sub:
                await msg.ack()
        return await q.pull("127.0.0.1:1", "t", "g", max_wait=0.0)
'''

BAD = GOOD + '''

def mistakes() -> None:
    with RemotingClient() as client:
        client.invoke_synk("127.0.0.1:1", RemotingCommand.create_request(1))
        client.invoke_sync("127.0.0.1:1", RemotingCommand.create_request(1), timeout="3s")
        QueueClient(client).publish("127.0.0.1:1", "t", "not bytes")
    from remoting.bus import BusClient
    BusClient(client, "127.0.0.1:1").request("x", "not bytes")
'''


def mypy(tmp_path: Path, **programs: str) -> str:
    for name, text in programs.items():
        (tmp_path / f"{name}.py").write_text(text)
    result = subprocess.run(
        [sys.executable, "-m", "mypy", "--strict", "--no-error-summary", "--cache-dir",
         str(tmp_path / ".mypy_cache"), *(f"{name}.py" for name in programs)],
        cwd=tmp_path, capture_output=True, text=True, timeout=300,
        env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"})
    assert result.stderr == "", result.stderr
    return result.stdout


def test_mypy_strict_accepts_good_use_and_reports_mistakes(tmp_path: Path) -> None:
    out = mypy(tmp_path, good=GOOD, bad=BAD)
    good = [line for line in out.splitlines() if line.startswith("good.py")]
    bad = [line for line in out.splitlines() if line.startswith("bad.py")]
    assert good == []
    assert any('"RemotingClient" has no attribute "invoke_synk"' in line for line in bad), bad
    assert any('Argument "timeout"' in line and '"str"' in line and '"float"' in line
               for line in bad), bad
    assert any('"request" of "BusClient"' in line and '"str"' in line for line in bad), bad
    assert any('"publish" of "BlockingQueueClient"' in line and '"bytes"' in line
               for line in bad), bad
