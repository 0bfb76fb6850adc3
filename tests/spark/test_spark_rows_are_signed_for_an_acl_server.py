"""`remoting.spark` sends its rows through `RemotingClient.invoke_many`: with an
`AclClientRPCHook` on the client, every row is signed, also a row that fails over to the next
address (signed again there). Drives `call_bodies` directly, no SparkSession."""

from __future__ import annotations

import os
import socket
from collections.abc import Iterator

import pytest

from codec import RemotingCommand, ResponseCode
from processors import EchoProcessor
from remoting import AclClientRPCHook, AclServerRPCHook, RemotingClient, RemotingServer
from remoting.spark._calls import CallSpec, call_bodies
from remoting.spark._fleet import Cooldowns

ECHO = 1
ROWS = 300  # several growing chunks of 16


@pytest.fixture
def acl_server() -> Iterator[RemotingServer]:
    server = RemotingServer()
    server.register_processor(ECHO, EchoProcessor())
    server.register_rpc_hook(AclServerRPCHook({"spark": "spark-secret"}))
    server.start()
    try:
        yield server
    finally:
        server.shutdown()


@pytest.fixture
def dead() -> str:
    with socket.create_server(("127.0.0.1", 0)) as s:  # closed again: nothing listens there
        return f"127.0.0.1:{s.getsockname()[1]}"


def test_every_row_is_signed_and_served(acl_server: RemotingServer, dead: str) -> None:
    bodies: list[bytes | None] = [b"row-%d" % i for i in range(ROWS)]
    bodies[7] = None  # a null row sends nothing
    spec = CallSpec(addresses=(dead, acl_server.addr), code=ECHO, timeout=5.0,
                    max_in_flight=16, header=(("topic", "T"),))
    first_is_dead = (0 - os.getpid()) % 2
    with RemotingClient() as client:
        client.register_rpc_hook(AclClientRPCHook("spark", "spark-secret"))
        outcomes = call_bodies(client, spec, bodies, first_is_dead, cooldowns=Cooldowns())
    for body, outcome in zip(bodies, outcomes, strict=True):
        if body is None:
            assert outcome is None
        else:
            assert isinstance(outcome, RemotingCommand), outcome
            assert (outcome.code, outcome.body) == (ResponseCode.SUCCESS, body)
