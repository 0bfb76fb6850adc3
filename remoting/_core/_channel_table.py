"""The client's channel table (SPEC 6.6): one connection per address, and address failover.

- `get_connection` reuses a live connection, replaces a dead one, and makes concurrent first
  callers share one connect. The connect runs in an endpoint task bounded by
  ``connect_timeout``; each caller waits for it only until its own deadline.
- With an address list (`update_name_server_address_list`), a call with ``addr=None`` uses the
  current address, chosen round-robin from a random start, and fails over to the next address
  on a connect failure, within the call's deadline (RocketMQ's getAndCreateNameserverChannel).
"""

from __future__ import annotations

import random
from typing import TYPE_CHECKING

import trio

from .._errors import (
    RemotingConnectError,
    RemotingError,
    RemotingSendRequestError,
    RemotingTimeoutError,
)
from ._connection import Connection

if TYPE_CHECKING:
    import ssl

    from .._config import ClientConfig, ServerConfig

__all__ = ["ChannelTable", "parse_addr"]


def parse_addr(addr: str) -> tuple[str, int]:
    """Split ``"host:port"`` (or ``"[v6]:port"``) at the last colon.

    Raises:
        RemotingConnectError: the address is not of that form.
    """
    if not isinstance(addr, str):
        raise RemotingConnectError(repr(addr), "address must be a 'host:port' string")
    host, sep, port = addr.rpartition(":")
    if not sep or not host or not port.isdigit():
        raise RemotingConnectError(addr, "address must be 'host:port'")
    return host.strip("[]"), int(port)


class _PendingConnect:
    __slots__ = ("conn", "event", "reason")

    def __init__(self) -> None:
        self.event = trio.Event()
        self.conn: Connection | None = None
        self.reason = ""


class ChannelTable:
    """Mixin for `Endpoint`: connections by address."""

    config: ClientConfig | ServerConfig
    role: str
    closed: bool
    _nursery: trio.Nursery | None
    tls_context: ssl.SSLContext | None

    def _init_channel_table(self) -> None:
        self.channels: dict[str, Connection] = {}
        self._connecting: dict[str, _PendingConnect] = {}
        self.name_servers: list[str] = []
        self._ns_index = 0
        self.current_name_server: str | None = None

    def connection_opened(self, conn: Connection) -> None:  # provided by Endpoint
        raise NotImplementedError

    # ------------------------------------------------------------------ one address

    async def get_connection(self, addr: str, deadline: float, timeout: float) -> Connection:
        """Return the live connection to ``addr``, connecting once for concurrent callers.

        Raises:
            RemotingConnectError: the connect failed or took longer than connect_timeout.
            RemotingTimeoutError: the call's own deadline passed while connecting.
        """
        conn = self.channels.get(addr)
        if conn is not None and not conn.closed:
            return conn
        if self._nursery is None or self.closed:
            raise RemotingError(f"the {self.role} is not running", addr)
        pending = self._connecting.get(addr)
        if pending is None:
            host, port = parse_addr(addr)
            pending = _PendingConnect()
            self._connecting[addr] = pending
            self._nursery.start_soon(self._connect, addr, host, port, pending)
        with trio.move_on_at(deadline):
            await pending.event.wait()
        if not pending.event.is_set():
            raise RemotingTimeoutError(addr, timeout, "connect")
        if pending.conn is None:
            raise RemotingConnectError(addr, pending.reason)
        return pending.conn

    async def _connect(self, addr: str, host: str, port: int, pending: _PendingConnect) -> None:
        limit = getattr(self.config, "connect_timeout", 3.0)
        try:
            with trio.fail_after(limit):
                stream = await self._open_stream(host, port)
        except trio.TooSlowError:
            pending.reason = f"no answer within connect_timeout={limit}s"
        except OSError as exc:
            pending.reason = exc.strerror or repr(exc)
        except RemotingError as exc:  # e.g. a failed TLS handshake
            pending.reason = str(exc)
        else:
            conn = Connection(self, stream, addr, addr_key=addr)  # type: ignore[arg-type]
            self.channels[addr] = conn
            self.connection_opened(conn)
            assert self._nursery is not None
            self._nursery.start_soon(conn.run)
            pending.conn = conn
        finally:
            del self._connecting[addr]
            pending.event.set()

    async def _open_stream(self, host: str, port: int) -> trio.abc.Stream:
        stream = await trio.open_tcp_stream(host, port)
        ctx = self.tls_context
        if ctx is None:
            return stream
        from .._security._tls import tls_client_stream

        return await tls_client_stream(stream, ctx, host, self.config,  # type: ignore[arg-type]
                                       f"{host}:{port}")

    def forget_channel(self, conn: Connection) -> None:
        """Stop handing out ``conn`` to new calls (it may still finish what it carries)."""
        if conn.addr_key is not None and self.channels.get(conn.addr_key) is conn:
            del self.channels[conn.addr_key]

    # ------------------------------------------------------------------ address list

    def update_name_server_address_list(self, addrs: list[str]) -> None:
        """Replace the address list used by calls with ``addr=None``."""
        for addr in addrs:
            parse_addr(addr)
        if addrs != self.name_servers:
            self.name_servers = list(addrs)  # replaced, never mutated (read from the loop)
            self._ns_index = random.randrange(len(addrs)) if addrs else 0
            if self.current_name_server not in self.name_servers:
                self.current_name_server = None

    def live_name_server_connection(self) -> Connection | None:
        """Return the connection to the current address if it is alive."""
        addr = self.current_name_server
        if addr is None:
            return None
        conn = self.channels.get(addr)
        return conn if conn is not None and not conn.closed else None

    async def connect_any(self, deadline: float, timeout: float) -> Connection:
        """Connect to the current address, failing over round-robin within the deadline.

        Raises:
            RemotingConnectError: no address is configured, or none could be reached.
            RemotingTimeoutError: the deadline passed while connecting.
        """
        servers = self.name_servers  # one snapshot: a blocking facade may swap the list
        if not servers:
            raise RemotingConnectError(
                None, "no address given and the address list is empty "
                "(call update_name_server_address_list)"
            )
        current = self.current_name_server
        order: list[str] = []
        if current is not None:
            order.append(current)
        n = len(servers)
        for _ in range(n):
            addr = servers[self._ns_index % n]
            self._ns_index += 1
            if addr not in order:
                order.append(addr)
        last: RemotingError | None = None
        for addr in order:
            try:
                conn = await self.get_connection(addr, deadline, timeout)
            except RemotingConnectError as exc:
                last = exc
                continue
            self.current_name_server = addr
            return conn
        assert last is not None
        raise RemotingConnectError(None, f"no address reachable ({last})")

    async def resolve(self, target: str | Connection | None, deadline: float, timeout: float
                      ) -> Connection:
        """Return a live connection for a call's target (address, channel or None)."""
        if isinstance(target, Connection):
            if target.closed:
                raise RemotingSendRequestError(target.remote_addr, "connection is closed")
            return target
        if target is None:
            return await self.connect_any(deadline, timeout)
        return await self.get_connection(target, deadline, timeout)

    def live_connection(self, target: str | Connection | None) -> Connection | None:
        """Return the connection a call could use right now without awaiting, or None."""
        if isinstance(target, Connection):
            conn: Connection | None = target
        elif target is None:
            conn = self.live_name_server_connection()
        else:
            conn = self.channels.get(target)
        if conn is None or conn.closed or conn.queued_bytes > conn.high_water:
            return None
        return conn
