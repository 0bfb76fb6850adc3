"""`Acceptor`: a server's accepting side. Admission limits, the TLS mode, a connection per peer."""

from __future__ import annotations

from typing import TYPE_CHECKING

import trio

from .._log import log
from .._security._tls import server_context, tls_server_stream

if TYPE_CHECKING:
    from .._config import ServerConfig
    from ._endpoint import Endpoint

__all__ = ["Acceptor", "Admission"]


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


class Acceptor:
    """Accepts connections on a server's listeners and hands each to the endpoint."""

    def __init__(self, endpoint: Endpoint, config: ServerConfig) -> None:
        self._endpoint = endpoint
        self._config = config
        self._tls = server_context(config)
        self._admission = Admission(config.max_connections, config.max_connections_per_ip)

    @property
    def admitted(self) -> int:
        """Sockets accepted and not yet released (see `Admission`)."""
        return self._admission.total

    async def handle(self, stream: trio.SocketStream) -> None:
        """Serve one accepted connection until it closes (a `trio.serve_listeners` handler)."""
        try:
            host, port = stream.socket.getpeername()[:2]
        except OSError:
            await stream.aclose()
            return
        peer = f"{host}:{port}"
        refusal = self._admission.admit(host)
        try:
            if refusal is not None:
                log.warning("connection.refused", peer=peer, reason=refusal)
                await stream.aclose()
                return
            try:
                served = await self._tls_mode(stream)
            except OSError:  # the peer is gone: this connection only, never the acceptor
                served = None
            if served is None:
                log.warning("connection.refused", peer=peer,
                            reason=f"TLS handshake failed (tls_mode={self._config.tls_mode})")
                await stream.aclose()
                return
            await self._endpoint.adopt(served, peer).run()
        finally:
            self._admission.release(host)

    async def _tls_mode(self, stream: trio.SocketStream) -> trio.abc.Stream | None:
        if self._tls is None:
            return stream
        with trio.move_on_after(self._config.tls_handshake_timeout):
            return await tls_server_stream(stream, self._tls, self._config.tls_mode)
        return None
