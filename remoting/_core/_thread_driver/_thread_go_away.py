"""`ThreadGoAway`: what a thread-driven client does when a draining server answers GO_AWAY (a
cold path; the trio driver's is `GoAway`).

Theory of operation, as gRPC on a GOAWAY frame and RocketMQ's ``enableReconnectForGoAway``:
- The connection that brought GO_AWAY takes no new call: its state says so (GOING_AWAY, so a
  call about to be registered there goes elsewhere: `PendingCalls.send`), the channels forget
  it, and with the address list the draining address stops being the current one.
- The calls already on it finish there; it is closed once none is left, none of the
  server's requests on it is in processing and its queue has left (`settle`, run after each
  call on it ends, as its processing ends, and by the background reader's sweep).
- The call answered GO_AWAY is resent once, within its own deadline, by a job on the
  callback executor (it may have to connect), as a call nobody waits for: the thread waiting
  for it is woken by its completion. A second GO_AWAY fails it with
  `RemotingSendRequestError` (as NettyRemotingClient).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

from codec import next_opaque

from ..._errors import RemotingSendRequestError
from ..._log import log

if TYPE_CHECKING:
    from ..._observability._statistics import Counters
    from .._calling._future import ResponseFuture
    from .._doors._threads import CallbackRunner
    from ._background_reader import BackgroundReader
    from ._pending_calls import PendingCalls, ThreadCall
    from ._thread_channels import ThreadChannels, ThreadTarget
    from ._thread_connection import ThreadConnection

__all__ = ["Resender", "ThreadGoAway"]


class Resender(Protocol):
    """What a resend needs from the thread driver."""

    @property
    def closed(self) -> bool: ...

    def connection_with_room(self, target: ThreadTarget, deadline: float, timeout: float
                             ) -> ThreadConnection: ...

    def fail_unsent(self, fut: ResponseFuture, exc: BaseException) -> None: ...


class ThreadGoAway:
    """GO_AWAY replies of one thread-driven client (see the module docstring)."""

    def __init__(self, driver: Resender, pending: PendingCalls, channels: ThreadChannels,
                 background: BackgroundReader, callbacks: CallbackRunner, counters: Counters,
                 *, retry: bool) -> None:
        self._driver = driver
        self._pending = pending
        self._channels = channels
        self._background = background
        self._callbacks = callbacks
        self._counters = counters
        self._retry = retry  # RocketMQ's enableReconnectForGoAway

    def received(self, fut: ThreadCall, conn: ThreadConnection) -> bool:
        """Handle a GO_AWAY reply to ``fut`` (already out of the table); True if handled
        (to be resent, or failed), False if it is returned as data (resending disabled)."""
        with self._pending.lock:
            self._counters.go_away += 1
        self._retire(conn)
        if not self._retry:
            return False
        target = fut.retry_target
        if fut.resent or isinstance(target, bool) or self._driver.closed:
            fut._fail(RemotingSendRequestError(
                fut.addr, "the peer is shutting down (GO_AWAY)"
                + (", also after one resend" if fut.resent else ""), going_away=True))
            return True
        fut.resent = True
        fut.conn = None  # in transit: the resend job owns it now
        self._callbacks.submit(self._resend, target, fut)
        return True

    def _resend(self, target: ThreadTarget, fut: ThreadCall) -> None:
        """Resend ``fut`` on a new connection within its deadline (the callback executor)."""
        driver = self._driver
        try:
            conn = driver.connection_with_room(target, fut.deadline, fut.timeout)
        except Exception as exc:
            driver.fail_unsent(fut, exc)
            return
        fut.request = fut.request.with_opaque(next_opaque())  # never the caller's command
        log.info("request.resent", reason="go_away", opaque=fut.request.opaque,
                 peer=conn.remote_addr)
        while not self._pending.send(conn, fut, fut._permits, unattended=True, elsewhere=True):
            try:  # told GO_AWAY too since it was taken
                conn = driver.connection_with_room(target, fut.deadline, fut.timeout)
            except Exception as exc:
                driver.fail_unsent(fut, exc)
                return

    def _retire(self, conn: ThreadConnection) -> None:
        """``conn`` answered GO_AWAY: no new call goes there; it closes once drained."""
        if not conn.go_away():
            return
        self._channels.forget(conn)
        self._channels.move_off(conn.addr_key)
        conn.on_idle = self.settle
        self._background.start()  # its sweep closes it if nothing else does

    def settle(self, conn: ThreadConnection) -> None:
        """Close ``conn`` (told GO_AWAY) once no call is left on it, none of the server's
        requests is in processing and its queue has left."""
        if not conn.state.going_away or conn.processing or conn.outbound:
            return  # (closed already, or calls and work still on it)
        if self._pending.has_calls_on(conn):
            return
        conn.close("the peer is shutting down (GO_AWAY) and no call is left on it")
