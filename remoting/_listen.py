"""Listening sockets, with SO_REUSEPORT so several worker processes can share one port."""

from __future__ import annotations

import socket
from typing import TYPE_CHECKING

import trio

if TYPE_CHECKING:
    from ._config import ServerConfig

__all__ = ["open_listeners", "reserve_port"]


def _bound_socket(host: str, port: int, reuse_port: bool) -> socket.socket:
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        if reuse_port:
            if not hasattr(socket, "SO_REUSEPORT"):
                raise OSError("SO_REUSEPORT is not available on this platform")
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
        sock.bind((host, port))
    except BaseException:
        sock.close()
        raise
    return sock


def open_listeners(config: ServerConfig) -> list[trio.SocketListener]:
    """Bind and listen on ``bind_address:listen_port`` (TCP_NODELAY is set by trio)."""
    sock = _bound_socket(config.bind_address, config.listen_port, config.reuse_port)
    try:
        sock.listen(config.backlog)
        sock.setblocking(False)
        return [trio.SocketListener(trio.socket.from_stdlib_socket(sock))]
    except BaseException:
        sock.close()
        raise


def reserve_port(host: str, port: int) -> socket.socket:
    """Bind (without listening) a SO_REUSEPORT socket to pick and hold a port for workers."""
    return _bound_socket(host, port, reuse_port=True)
