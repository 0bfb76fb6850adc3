"""Listening sockets, with SO_REUSEPORT so several worker processes can share one port."""

from __future__ import annotations

import socket
from typing import TYPE_CHECKING

import trio

from .._errors import RemotingStartError, translate

if TYPE_CHECKING:
    from .._config import ServerConfig

__all__ = ["bind_listeners", "reserve_port", "trio_listeners"]


def _bound_socket(host: str, port: int, reuse_port: bool) -> socket.socket:
    """Return a TCP socket bound to ``host:port``.

    Raises:
        RemotingStartError: the port is out of range or taken, or ``host`` does not resolve.
    """
    addr = f"{host}:{port}"
    if not 0 <= port <= 65535:  # socket.bind's OverflowError would not say which setting
        raise RemotingStartError(addr, f"the port must be 0-65535 (0 picks a free one), "
                                       f"got {port}")
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    except socket.gaierror as exc:
        raise translate(exc, "start", addr) from exc
    family, _, _, _, sockaddr = infos[0]
    sock = socket.socket(family, socket.SOCK_STREAM)
    try:
        # SO_REUSEADDR: a restarted server binds its port while the last one's connections
        # are in TIME_WAIT (Netty's ServerBootstrap sets it for RocketMQ's NettyRemotingServer)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        if reuse_port:
            if not hasattr(socket, "SO_REUSEPORT"):
                raise RemotingStartError(addr, "SO_REUSEPORT (several workers on one port) "
                                               "is not available on this platform")
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
        sock.bind(sockaddr)
    except OSError as exc:
        sock.close()
        if isinstance(exc, RemotingStartError):
            raise
        raise translate(exc, "start", addr) from exc
    except BaseException:
        sock.close()
        raise
    return sock


def bind_listeners(config: ServerConfig) -> list[socket.socket]:
    """Bind and listen on ``bind_address:listen_port`` (sync, any thread).

    Raises:
        RemotingStartError: the address cannot be bound (see `_bound_socket`).
    """
    sock = _bound_socket(config.bind_address, config.listen_port, config.reuse_port)
    try:
        sock.listen(config.backlog)
        sock.setblocking(False)
    except OSError as exc:
        sock.close()
        raise translate(exc, "start", f"{config.bind_address}:{config.listen_port}") from exc
    return [sock]


def trio_listeners(socks: list[socket.socket]) -> list[trio.SocketListener]:
    """Wrap bound, listening sockets for ``trio.serve_listeners`` (TCP_NODELAY set by trio)."""
    return [trio.SocketListener(trio.socket.from_stdlib_socket(sock)) for sock in socks]


def reserve_port(host: str, port: int) -> socket.socket:
    """Bind (without listening) a SO_REUSEPORT socket to pick and hold a port for workers.

    Raises:
        RemotingStartError: the address cannot be bound.
    """
    return _bound_socket(host, port, reuse_port=True)
