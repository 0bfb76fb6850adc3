"""Listening sockets, with SO_REUSEPORT so several worker processes can share one port."""

from __future__ import annotations

import socket
from typing import TYPE_CHECKING

import trio

if TYPE_CHECKING:
    from .._config import ServerConfig

__all__ = ["Admission", "open_listeners", "reserve_port"]


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


class Admission:
    """Counts connections per server and per remote IP; refuses beyond the limits."""

    def __init__(self, max_total: int, max_per_ip: int) -> None:
        self.max_total = max_total
        self.max_per_ip = max_per_ip
        self.total = 0
        self.per_ip: dict[str, int] = {}

    def admit(self, ip: str) -> str | None:
        """Count a new connection from ``ip``; return why it is refused, or None.

        A refused connection is still counted: call `release` for every `admit`.
        """
        self.total += 1
        n = self.per_ip[ip] = self.per_ip.get(ip, 0) + 1
        if self.max_total and self.total > self.max_total:
            return f"server has {self.max_total} connections (max_connections)"
        if self.max_per_ip and n > self.max_per_ip:
            return f"{ip} has {self.max_per_ip} connections (max_connections_per_ip)"
        return None

    def release(self, ip: str) -> None:
        """Forget one connection from ``ip``."""
        self.total -= 1
        n = self.per_ip[ip] - 1
        if n:
            self.per_ip[ip] = n
        else:
            del self.per_ip[ip]
