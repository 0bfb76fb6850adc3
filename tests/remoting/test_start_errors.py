"""A server that cannot listen raises RemotingStartError (also an OSError), never a group."""

from __future__ import annotations

import errno
import socket
from collections.abc import Iterator

import pytest

from remoting import RemotingServer, RemotingStartError, ServerConfig, open_server
from remoting._errors import Files, translate


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


def test_a_taken_port_is_said_in_full(taken_port: int) -> None:
    server = RemotingServer(ServerConfig(listen_port=taken_port))
    try:
        with pytest.raises(RemotingStartError) as info:
            server.start()
    finally:
        server.shutdown()
    assert str(info.value) == (
        f"cannot listen on 127.0.0.1:{taken_port}: the port is already in use by another "
        "process; stop it or choose another port (0 picks a free one)")
    assert isinstance(info.value.__cause__, OSError)
    assert info.value.__cause__.errno == errno.EADDRINUSE


@pytest.mark.parametrize(("exc", "addr", "files", "message"), [
    (OSError(errno.EACCES, "Permission denied"), "0.0.0.0:80", None,
     "cannot listen on 0.0.0.0:80: permission denied (ports below 1024 need privileges)"),
    (OSError(errno.EADDRNOTAVAIL, "Cannot assign"), "10.9.9.9:6", None,
     "cannot listen on 10.9.9.9:6: that address is not one of this machine's"),
    (OSError(errno.EMFILE, "Too many open files"), "0.0.0.0:6", None,
     "cannot listen on 0.0.0.0:6: Too many open files"),
    (socket.gaierror(socket.EAI_NONAME, "Name or service not known"), "nosuch.invalid:6", None,
     "cannot listen on nosuch.invalid:6: the bind address 'nosuch.invalid' does not resolve "
     "(Name or service not known); use an IP address of this machine, 127.0.0.1 or 0.0.0.0"),
    (FileNotFoundError(errno.ENOENT, "No such file or directory"), None,
     Files("tls_ca_file", ("/no/ca.pem",)),
     "cannot start: tls_ca_file '/no/ca.pem': No such file or directory; check the path"),
    (PermissionError(errno.EACCES, "Permission denied"), None,
     Files("ClientConfig.tls_properties_file", ("/etc/tls.properties",), parsed=False),
     "cannot start: cannot read ClientConfig.tls_properties_file '/etc/tls.properties': "
     "Permission denied; check the path"),
])
def test_the_one_map_turns_start_failures_into_start_errors(
        exc: OSError, addr: str | None, files: Files | None, message: str) -> None:
    error = translate(exc, "start", addr, files=files)
    assert type(error) is RemotingStartError
    assert (str(error), error.addr, error.__cause__) == (message, addr, exc)
