"""`Deadlines`: when calls run out of time (loop thread).

- A timer task sleeps until the earliest deadline in the response table and expires what is
  due, so a call fails at its deadline (``precise_timeouts``, on by default; RocketMQ relies on
  the scan alone). Sending a call whose deadline comes first re-arms it (`arm`).
- RocketMQ's periodic ``scanResponseTable`` (``scan_*`` settings, with its grace) runs too,
  as a safety net; with ``precise_timeouts=False`` it is the only mechanism.
- An expired call fails with `RemotingTimeoutError`; its connection counts it as given up (a
  late answer is expected) and, for ``invoke_sync`` with ``close_socket_if_timeout``, closes.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

import trio

from ..._log import log

if TYPE_CHECKING:
    from collections.abc import Callable

    from ..._config import ClientConfig, ServerConfig
    from ..._observability._statistics import Counters
    from .._calling._future import ResponseFuture
    from .._sansio._response_table import ResponseTable

__all__ = ["Deadlines"]

class Deadlines:
    """The deadline timer and scanner of one invoker's response table."""

    def __init__(self, table: ResponseTable[ResponseFuture], counters: Counters,
                 config: ClientConfig | ServerConfig,
                 on_going_away: Callable[[ResponseFuture], None]) -> None:
        self._table = table
        self._on_going_away = on_going_away  # a call on a connection told GO_AWAY ended
        self._counters = counters
        self._config = config
        self._scope: trio.CancelScope | None = None
        # the deadline the timer sleeps until; -inf while no timer runs (nothing to re-arm)
        self.armed = -math.inf

    async def run(self, *, task_status: Any = trio.TASK_STATUS_IGNORED) -> None:
        """Run the timer and the scanner until cancelled."""
        async with trio.open_nursery() as nursery:
            if self._config.precise_timeouts:
                nursery.start_soon(self._timer)
            nursery.start_soon(self._scanner)
            task_status.started()

    def arm(self, deadline: float) -> None:
        """Wake the timer at ``deadline`` if that comes before what it sleeps until."""
        scope = self._scope
        if scope is not None and deadline < self.armed:
            self.armed = scope.deadline = deadline

    async def _timer(self) -> None:
        while True:
            deadline = self._table.next_deadline()
            self.armed = math.inf if deadline is None else deadline
            with trio.CancelScope(deadline=self.armed) as scope:
                self._scope = scope
                await trio.sleep_forever()
            self._scope = None
            self.armed = -math.inf
            self.expire(trio.current_time())

    async def _scanner(self) -> None:
        cfg = self._config
        await trio.sleep(cfg.scan_initial_delay)
        while True:  # RocketMQ's scanResponseTable: a safety net, with its grace
            self.expire(trio.current_time() - cfg.scan_grace)
            await trio.sleep(cfg.scan_period)

    def expire(self, now: float) -> None:
        """Fail every call whose deadline is at or before ``now``."""
        for fut in self._table.expire(now):
            self.timed_out(fut)

    def timed_out(self, fut: ResponseFuture) -> None:
        """Fail ``fut`` (already removed from the table) for its deadline."""
        self._counters.timeouts += 1
        # debug: the caller gets the RemotingTimeoutError (raised, or in its future); the
        # ``timeouts`` counter is what operators watch
        log.debug("request.timed_out", opaque=fut.opaque, addr=fut.addr, timeout=fut.timeout)
        conn = fut.conn
        if conn is not None:
            conn.abandoned += 1
        fut._fail_timeout()
        if conn is not None and conn.going_away:
            self._on_going_away(fut)
        if fut.close_on_timeout and conn is not None:
            conn.close("invoke_sync timed out (close_socket_if_timeout)")
