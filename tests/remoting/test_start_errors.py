"""A server that cannot listen raises RemotingStartError (also an OSError), never a group."""

from __future__ import annotations

import socket
from collections.abc import Iterator

import pytest

from remoting import RemotingServer, RemotingStartError, ServerConfig, open_server


@pytest.fixture
def taken_port() -> Iterator[int]:
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", 0))
        holder.listen()
        yield holder.getsockname()[1]


def bad_configs(port: int) -> list[tuple[ServerConfig, str]]:
    return [
        (ServerConfig(listen_port=port), "already in use"),
        (ServerConfig(listen_port=70000), "0-65535"),
        (ServerConfig(listen_port=-5), "0-65535"),
        (ServerConfig(bind_address="nosuch.invalid"), "does not resolve"),
    ]


async def test_open_server_raises_start_error_not_a_group(taken_port: int) -> None:
    for config, words in bad_configs(taken_port):
        with pytest.raises(RemotingStartError, match=words) as info:
            async with open_server(config):
                pytest.fail("the server should not have started")
        assert isinstance(info.value, OSError)
        assert info.value.addr is not None


def test_blocking_server_start_raises_start_error(taken_port: int) -> None:
    for config, words in bad_configs(taken_port):
        server = RemotingServer(config)
        try:
            with pytest.raises(RemotingStartError, match=words):
                server.start()
        finally:
            server.shutdown()
