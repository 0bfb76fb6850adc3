"""`ChannelTable`: a client's connections by address, and address-list failover (SPEC 6.6).

Loop thread only, but for the address list: `set_addresses` may run on any thread (a
blocking face's caller), so the list, the round-robin position and the current address
change together under ``_list_lock``, a lock no hot path takes (`live` reads ``current``, one
reference, without it). An address taken from the list is made current only if the list
still holds it once it is connected: one removed meanwhile is never current again.
- `resolve` reuses a live connection, replaces a dead one, and makes concurrent first callers
  share one connect. The connect runs in an endpoint task bounded by ``connect_timeout``; each
  caller waits for it only until its own deadline.
- With an address list (`set_addresses`), a call with ``addr=None`` uses the current address,
  chosen round-robin from a random start, and fails over to the next address on a connect
  failure, within the call's deadline (RocketMQ's ``getAndCreateNameserverChannel``), and
  moves to the next address when the current one answers GO_AWAY (`move_off`).
- A call's target is a ``"host:port"``, None (the address list), or a `Connection` (server
  push, and calls back over a channel).
"""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING

import trio

from ..._errors import (
    RemotingConnectError,
    RemotingError,
    RemotingSendRequestError,
    RemotingTimeoutError,
    translate,
)
from .._sansio._addresses import NO_ADDRESS, AddressList, parse_addr
from ._connection import Connection

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable

__all__ = ["ChannelTable", "Target", "target_addr"]

Target = str | Connection | None
def target_addr(target: Target) -> str | None:
    """Return the address a call goes to, as far as known before connecting."""
    return target.remote_addr if isinstance(target, Connection) else target


class _PendingConnect:
    __slots__ = ("conn", "error", "event")

    def __init__(self) -> None:
        self.event = trio.Event()
        self.conn: Connection | None = None
        self.error: RemotingError | None = None


class ChannelTable:
    """Connections by dialled address, and the address list for ``addr=None`` calls."""

    def __init__(self, role: str, connect_timeout: float,
                 dial: Callable[[str, str, int], Awaitable[Connection]]) -> None:
        self._role = role
        self._connect_timeout = connect_timeout
        self._dial = dial
        self._nursery: trio.Nursery | None = None
        self.by_addr: dict[str, Connection] = {}
        self._connecting: dict[str, _PendingConnect] = {}
        # the address list, changed (any thread: set_addresses) only under _list_lock
        self._list_lock = threading.Lock()
        self.address_list = AddressList()

    @property
    def addresses(self) -> list[str]:
        """The address list (replaced, never mutated: a facade reads it anywhere)."""
        return self.address_list.addresses

    @property
    def current(self) -> str | None:
        """The address ``addr=None`` calls use now (None: not chosen yet)."""
        return self.address_list.current

    def open(self, nursery: trio.Nursery) -> None:
        """Start connecting in ``nursery`` (the endpoint's)."""
        self._nursery = nursery

    def close(self) -> None:
        """Connect no more."""
        self._nursery = None

    # ------------------------------------------------------------------ one call's connection

    def live(self, target: Target) -> Connection | None:
        """Return the connection a call could use right now without awaiting, or None."""
        if type(target) is str:
            conn = self.by_addr.get(target)
        elif target is None:
            conn = None if self.current is None else self.by_addr.get(self.current)
        elif isinstance(target, Connection):
            conn = target
        else:  # not an address: `resolve` says so
            return None
        # over the high water mark: not live, so the call takes the awaiting path and waits
        # for room within its own deadline (back-pressure) instead of queueing more
        if conn is None or conn.closed or conn.queued_bytes > conn.high_water:
            return None
        return conn

    async def resolve(self, target: Target, deadline: float, timeout: float) -> Connection:
        """Return a live connection for a call's target, connecting if needed.

        Raises:
            RemotingConnectError: no connection could be made (or no address is configured).
            RemotingTimeoutError: the call's deadline passed while connecting.
            RemotingSendRequestError: the target is a connection that has closed.
        """
        if isinstance(target, Connection):
            if target.closed:
                raise RemotingSendRequestError(target.remote_addr, "connection is closed")
            return target
        if target is None:
            return await self._connect_any(deadline, timeout)
        return await self._connect(target, deadline, timeout)

    async def _connect(self, addr: str, deadline: float, timeout: float) -> Connection:
        conn = self.by_addr.get(addr)
        if conn is not None and not conn.closed:
            return conn
        nursery = self._nursery
        if nursery is None:
            raise RemotingError(f"the {self._role} is not running", addr)
        # One connect per address, shared by every caller that wants it, as RocketMQ's
        # NettyRemotingClient.createChannel shares one ChannelFuture per address. It runs in
        # the endpoint's nursery, not the caller's task: a caller whose deadline passes, or
        # who is cancelled, leaves it to finish for the next one.
        pending = self._connecting.get(addr)
        if pending is None:
            host, port = parse_addr(addr)
            pending = self._connecting[addr] = _PendingConnect()
            nursery.start_soon(self._dial_once, addr, host, port, pending)
        with trio.move_on_at(deadline):
            await pending.event.wait()
        if not pending.event.is_set():
            raise RemotingTimeoutError(addr, timeout, "connect")
        if pending.conn is None:
            assert pending.error is not None
            raise pending.error
        return pending.conn

    async def _dial_once(self, addr: str, host: str, port: int,
                         pending: _PendingConnect) -> None:
        # bounded by connect_timeout (RocketMQ's connectTimeoutMillis), not by any caller's
        # deadline: the connect is shared, and its callers wait only as long as each may
        limit = self._connect_timeout
        try:
            conn = None
            with trio.move_on_after(limit):
                conn = await self._dial(addr, host, port)
            if conn is None:
                raise trio.TooSlowError(f"no answer within connect_timeout={limit}s")
        except Exception as exc:
            pending.error = translate(exc, "connect", addr)
        else:
            self.by_addr[addr] = conn
            pending.conn = conn
        finally:
            del self._connecting[addr]
            pending.event.set()

    @property
    def connecting(self) -> int:
        """Connects in progress."""
        return len(self._connecting)

    def forget(self, conn: Connection) -> None:
        """Stop handing out ``conn`` to new calls (it may still finish what it carries)."""
        if conn.addr_key is not None and self.by_addr.get(conn.addr_key) is conn:
            del self.by_addr[conn.addr_key]

    # ------------------------------------------------------------------ address list

    def move_off(self, addr: str | None) -> None:
        """``addr`` is draining (GO_AWAY): ``addr=None`` calls go to the next address."""
        with self._list_lock:
            self.address_list.move_off(addr)

    def set_addresses(self, addrs: list[str]) -> None:
        """Replace the address list used by calls with ``addr=None`` (any thread)."""
        for addr in addrs:
            parse_addr(addr)
        with self._list_lock:
            self.address_list.set(addrs)

    async def _connect_any(self, deadline: float, timeout: float) -> Connection:
        with self._list_lock:
            order = self.address_list.order()
        if not order:
            raise RemotingConnectError(None, NO_ADDRESS)
        # Each address once, from the current one on, within the call's deadline (RocketMQ's
        # getAndCreateNameserverChannel walks the list from namesrvIndex). Only connect errors
        # move on: a timeout means the deadline is spent, and other errors are the call's.
        last: RemotingError | None = None
        for addr in order:
            try:
                conn = await self._connect(addr, deadline, timeout)
            except RemotingConnectError as exc:
                last = exc
                continue
            with self._list_lock:
                self.address_list.chose(addr)
            return conn
        raise RemotingConnectError(None, f"no address reachable ({last})")
