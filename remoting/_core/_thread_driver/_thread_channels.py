"""`ThreadChannels`: a thread-driven client's connections by address, and its address list.

As `ChannelTable` for the trio driver, with threads:
- `live` returns the connection a call can use now (a dict read, no lock).
- `get` connects when needed: the first thread that needs an address dials it, within
  ``connect_timeout`` and its own deadline, while others needing it wait for that connect
  until their own deadlines; one whose wait outlived the dialling thread's deadline tries
  again itself.
- ``addr=None`` calls use the `AddressList` (round-robin, failover on a connect failure,
  move-off after GO_AWAY), as the trio driver does.
- ``_lock`` guards the table, the connects in progress and the address list; nothing slow
  (a connect) happens under it.
"""

from __future__ import annotations

import threading
from time import monotonic
from typing import TYPE_CHECKING

from ..._errors import (
    RemotingConnectError,
    RemotingError,
    RemotingSendRequestError,
    RemotingTimeoutError,
    translate,
)
from .._sansio._addresses import NO_ADDRESS, AddressList, parse_addr
from ._thread_connection import ThreadConnection

if TYPE_CHECKING:
    from collections.abc import Callable

__all__ = ["ThreadChannels", "ThreadTarget"]

ThreadTarget = str | ThreadConnection | None


class _Connect:
    """One connect in progress, which other threads may wait for."""

    __slots__ = ("conn", "done", "error")

    def __init__(self) -> None:
        self.done = threading.Event()
        self.conn: ThreadConnection | None = None
        self.error: RemotingError | None = None


class ThreadChannels:
    """Connections by dialled address, and the address list of ``addr=None`` calls."""

    def __init__(self, connect_timeout: float,
                 open_connection: Callable[[str, str, int, float], ThreadConnection]) -> None:
        self._connect_timeout = connect_timeout
        self._open = open_connection  # (addr, host, port, deadline) -> a live connection
        self._lock = threading.Lock()
        self.by_addr: dict[str, ThreadConnection] = {}
        self._connecting: dict[str, _Connect] = {}
        self.address_list = AddressList()
        self.closed = False

    @property
    def connecting(self) -> int:
        """Connects in progress."""
        return len(self._connecting)

    def live(self, target: ThreadTarget) -> ThreadConnection | None:
        """Return the connection a call could use right now without connecting, or None."""
        if type(target) is str:
            conn = self.by_addr.get(target)
        elif target is None:
            current = self.address_list.current
            conn = None if current is None else self.by_addr.get(current)
        elif isinstance(target, ThreadConnection):
            return target if target.state.usable else None
        else:  # not an address: `get` says so
            return None
        if conn is None or not conn.state.takes_calls:
            return None
        return conn

    def get(self, target: ThreadTarget, deadline: float, timeout: float) -> ThreadConnection:
        """Return a live connection for a call's target, connecting if needed.

        Raises:
            RemotingConnectError: no connection could be made (or no address is configured).
            RemotingTimeoutError: the call's deadline passed while connecting.
            RemotingSendRequestError: the target is a connection that has closed.
            RemotingError: the client is shut down.
        """
        if isinstance(target, ThreadConnection):
            if not target.state.usable:
                raise RemotingSendRequestError(target.remote_addr, "connection is closed")
            return target
        if target is None:
            return self._connect_any(deadline, timeout)
        return self._connect(target, deadline, timeout)

    def _connect(self, addr: str, deadline: float, timeout: float) -> ThreadConnection:
        while True:
            with self._lock:
                if self.closed:
                    raise RemotingError("the client is shut down", addr)
                conn = self.by_addr.get(addr)
                if conn is not None and conn.state.takes_calls:
                    return conn
                pending = self._connecting.get(addr)
                mine = pending is None
                if mine:
                    host, port = parse_addr(addr)
                    pending = self._connecting[addr] = _Connect()
            assert pending is not None
            if mine:
                self._dial(addr, host, port, pending, deadline, timeout)
            elif not pending.done.wait(min(max(0.0, deadline - monotonic()),
                                           threading.TIMEOUT_MAX)):
                raise RemotingTimeoutError(addr, timeout, "connect")
            if pending.conn is not None:
                return pending.conn
            error = pending.error
            assert error is not None
            if (not mine and isinstance(error, RemotingTimeoutError)
                    and monotonic() < deadline):
                continue  # the dialling thread ran out of its own time, not of ours
            raise error

    def _dial(self, addr: str, host: str, port: int, pending: _Connect, deadline: float,
              timeout: float) -> None:
        limit = min(monotonic() + self._connect_timeout, deadline)
        try:
            conn = self._open(addr, host, port, limit)
        except Exception as exc:
            if isinstance(exc, TimeoutError) and limit == deadline:
                pending.error = RemotingTimeoutError(addr, timeout, "connect")
            elif isinstance(exc, TimeoutError):
                pending.error = RemotingConnectError(
                    addr, f"no answer within connect_timeout={self._connect_timeout}s")
            else:
                pending.error = translate(exc, "connect", addr)
            pending.error.__cause__ = exc
        else:
            with self._lock:
                if not self.closed:
                    self.by_addr[addr] = conn
                    pending.conn = conn
            if pending.conn is None:  # shut down while connecting
                conn.close("the client shut down")
                pending.error = RemotingError("the client is shut down", addr)
        finally:
            if pending.conn is None and pending.error is None:  # interrupted (BaseException)
                pending.error = RemotingConnectError(addr, "the connect was interrupted")
            with self._lock:
                del self._connecting[addr]
            pending.done.set()

    def _connect_any(self, deadline: float, timeout: float) -> ThreadConnection:
        with self._lock:
            order = self.address_list.order()
        if not order:
            raise RemotingConnectError(None, NO_ADDRESS)
        last: RemotingError | None = None
        for addr in order:
            try:
                conn = self._connect(addr, deadline, timeout)
            except RemotingConnectError as exc:
                last = exc
                continue
            with self._lock:
                self.address_list.chose(addr)
            return conn
        raise RemotingConnectError(None, f"no address reachable ({last})")

    def forget(self, conn: ThreadConnection) -> None:
        """Stop handing out ``conn`` to new calls."""
        with self._lock:
            if conn.addr_key is not None and self.by_addr.get(conn.addr_key) is conn:
                del self.by_addr[conn.addr_key]

    def move_off(self, addr: str | None) -> None:
        """``addr`` is draining (GO_AWAY): ``addr=None`` calls go to the next address."""
        with self._lock:
            self.address_list.move_off(addr)

    def set_addresses(self, addrs: list[str]) -> None:
        """Replace the address list (any thread).

        Raises:
            RemotingConnectError: an address is not ``"host:port"``.
        """
        for addr in addrs:
            parse_addr(addr)
        with self._lock:
            self.address_list.set(addrs)

    def close(self) -> None:
        """Connect no more (shutdown)."""
        with self._lock:
            self.closed = True
            self.by_addr.clear()
