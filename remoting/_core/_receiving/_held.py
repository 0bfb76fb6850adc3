"""`HeldRequests`: requests parked until notified or their deadline (RocketMQ's
``PullRequestHoldService``), for long polling.

Theory of operation:
- A processor that has nothing to answer yet calls `HeldRequests.hold` and returns None; the
  request then costs one entry of a `HoldTable` (`_messaging/_holds.py`): no task, no thread,
  no ``max_requests_per_connection`` slot.
- `notify(key)` (from any thread, or a task of the loop) wakes every request held under
  ``key``: its ``wake(ctx, request, False)`` runs on the loop and returns the answer, or None
  to keep it held until its deadline (what it waits for is not there yet). At the deadline,
  ``wake(ctx, request, True)`` returns the final answer (RocketMQ answers the held pull
  once more, without suspending it again).
- One timer task per `HeldRequests`, in the endpoint's nursery, sleeps until the earliest
  deadline; a hold with an earlier one moves it. The holds of a connection that closes are
  dropped at once (the endpoint tells its `Endpoint.close_watchers`): nobody is left to
  answer, so a client that connects, holds and leaves again cannot pile them up.
- A connection holds at most ``max_per_connection`` requests; one more is answered
  ``POLLING_FULL`` at once (RocketMQ's answer when its long-polling queue is full).
- All table changes happen on the loop thread: `hold` and `notify` called elsewhere go
  through the endpoint's inbox (the one door).
"""

from __future__ import annotations

import math
import threading
import time
from typing import TYPE_CHECKING, Final, Protocol, cast

import trio

from codec import RemotingCommand, ResponseCode

from ... import _checks
from ..._log import log
from ..._messaging._holds import HoldTable
from ._channel_handle import ChannelHandle
from ._replies import failure

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable, Hashable

    from processors import RequestContext

__all__ = ["DEFAULT_MAX_HELD_PER_CONNECTION", "HeldRequests", "Host"]

# Requests one connection may have held at once: enough for a client pulling on thousands of
# topics at once, far below what would let one peer make the server keep without bound
# (a held request costs about a kilobyte).
DEFAULT_MAX_HELD_PER_CONNECTION: Final = 16_384


class Host(Protocol):
    """What held requests use of the endpoint whose processors hold them (an `Endpoint`)."""

    loop_thread_id: int | None
    close_watchers: list[Callable[[ChannelHandle], object]]

    def call_on_loop(self, fn: Callable[[], object]) -> bool: ...

    def run_in_background(self, fn: Callable[[], Awaitable[object]]) -> None: ...


class _Held:
    __slots__ = ("ctx", "request", "wake")

    def __init__(self, ctx: RequestContext, request: RemotingCommand,
                 wake: Callable[[RequestContext, RemotingCommand, bool], RemotingCommand | None]
                 ) -> None:
        self.ctx = ctx
        self.request = request
        self.wake = wake


class HeldRequests:
    """Requests held by processors until notified or their deadline (long polling).

    Use one per service, on one server. A request is held with `hold` by its processor, which
    then returns None; `notify` wakes the requests held under a key.

    Args:
        max_per_connection: requests one connection may have held at once; one more is
            answered ``POLLING_FULL`` at once (the client should wait for its held requests'
            answers before it sends more).

    Raises:
        TypeError, ValueError: ``max_per_connection`` is not an int >= 1.
    """

    def __init__(self, *, max_per_connection: int = DEFAULT_MAX_HELD_PER_CONNECTION) -> None:
        if isinstance(max_per_connection, bool) or not isinstance(max_per_connection, int):
            raise TypeError(f"max_per_connection must be an int, got {max_per_connection!r}")
        if max_per_connection < 1:
            raise ValueError(f"max_per_connection must be >= 1, got {max_per_connection}")
        self.max_per_connection = max_per_connection
        self._table: HoldTable[_Held] = HoldTable()
        self._endpoint: Host | None = None
        self._listening = False
        self._scope: trio.CancelScope | None = None
        self._armed = math.inf
        self.answered = 0  # answers sent after a wake or at a deadline
        self.expired = 0  # holds that reached their deadline
        self.refused = 0  # answered POLLING_FULL: their connection held too many
        self._refused_on: dict[Hashable, int] = {}  # per connection, for the log's pace
        self.dropped = 0  # their connection closed while they were held

    def __len__(self) -> int:
        return len(self._table)

    def held(self, key: Hashable) -> int:
        """Return how many requests are held under ``key`` (on the loop thread)."""
        return self._table.held(key)

    def hold(self, ctx: RequestContext, request: RemotingCommand, *, key: Hashable,
             timeout: float,
             wake: Callable[[RequestContext, RemotingCommand, bool], RemotingCommand | None]
             ) -> None:
        """Hold ``request`` under ``key`` for at most ``timeout`` seconds; the processor then
        returns None.

        ``wake(ctx, request, expired)`` runs on the event loop: after a `notify` of ``key``
        (``expired`` False: return the answer, or None to hold on) and at the deadline
        (``expired`` True: return the answer; None sends none). What it raises becomes a
        SYSTEM_ERROR answer, logged once as ``processor.failed``.

        Raises:
            TypeError, ValueError: ``timeout`` is not a number of seconds >= 0, or ``ctx``
                is not a processor's context.
            RuntimeError: this object already holds requests of another server.
        """
        timeout = _checks.seconds("timeout", timeout)
        endpoint = self._bind(ctx)
        held = _Held(ctx, request, wake)
        if threading.get_ident() == endpoint.loop_thread_id:
            self._add(key, timeout, held)
        elif not endpoint.call_on_loop(lambda: self._add(key, timeout, held)):
            raise RuntimeError("the server is shut down")

    def notify(self, key: Hashable) -> None:
        """Wake the requests held under ``key`` (from any thread, or a task of the loop).

        Does nothing when no request was ever held, or once the server has stopped.
        """
        endpoint = self._endpoint
        if endpoint is None:
            return
        if threading.get_ident() == endpoint.loop_thread_id:
            self._wake_key(key)
        else:
            endpoint.call_on_loop(lambda: self._wake_key(key))

    # ------------------------------------------------------------------ the loop's side

    def _bind(self, ctx: RequestContext) -> Host:
        host = getattr(getattr(ctx, "channel", None), "_host", None)
        if host is None:
            raise TypeError(f"ctx must be the RequestContext a processor received, got "
                            f"{type(ctx).__name__}")
        if self._endpoint is None:
            self._endpoint = host
        elif self._endpoint is not host:
            raise RuntimeError("a HeldRequests holds the requests of one server only")
        return host

    def _add(self, key: Hashable, timeout: float, held: _Held) -> None:
        channel = held.ctx.channel
        owner = cast("Hashable", channel)  # a connection's one handle: hashed by identity
        if not channel.is_active:
            self.dropped += 1
            return  # its connection closed meanwhile (held from another thread)
        if not self._listening:
            assert self._endpoint is not None
            endpoint = self._endpoint
            endpoint.close_watchers = [*endpoint.close_watchers, self._connection_lost]
            self._listening = True
        if self._table.held_by(owner) >= self.max_per_connection:
            self.refused += 1
            refused = self._refused_on[owner] = self._refused_on.get(owner, 0) + 1
            if refused & (refused - 1) == 0:  # 1, 2, 4, 8...: a peer cannot flood the log
                log.warning("held.refused", peer=channel.remote_addr,
                            held=self.max_per_connection, refused_on_connection=refused)
            self._answer(held, RemotingCommand.create_response(
                ResponseCode.POLLING_FULL,
                f"{self.max_per_connection} requests are held on this connection already: "
                "wait for their answers before sending more"))
            return
        deadline = trio.current_time() + timeout
        self._table.add(key, deadline, held, owner)
        if self._scope is None:
            self._scope = trio.CancelScope(deadline=deadline)
            self._armed = deadline
            assert self._endpoint is not None
            self._endpoint.run_in_background(self._timer)
        elif deadline < self._armed:
            self._armed = self._scope.deadline = deadline

    def _wake_key(self, key: Hashable) -> None:
        table = self._table
        holds = table.notify(key)
        if not holds:
            return
        started = time.perf_counter()
        answered = 0
        # `_wake` and `_answer` inlined: a publish may release thousands of pulls at once
        for hold in holds:
            held = hold.item
            ctx = held.ctx
            channel = ctx.channel
            if not channel.is_active:
                continue  # its connection closed: nobody to answer
            request = held.request
            try:
                answer = held.wake(ctx, request, False)
            except Exception as exc:  # the service's wake is a processor's code
                answer = failure(request, exc)
            if answer is None:  # hold on, same deadline: no re-arm needed
                table.add(key, hold.deadline, held, hold.owner)
                continue
            answered += 1
            if type(channel) is ChannelHandle:  # on the loop already: no hand-off needed
                channel._host.dispatcher.write_response(channel._conn, request, answer)
            else:
                ctx.write_response(request, answer)
        self.answered += answered
        log.debug("held.woken", held=len(holds), answered=answered,
                  seconds=round(time.perf_counter() - started, 6))

    def _wake(self, held: _Held, expired: bool) -> object:
        ctx = held.ctx
        if not ctx.channel.is_active:
            return None  # its connection closed: nobody to answer
        try:
            answer = held.wake(ctx, held.request, expired)
        except Exception as exc:  # the service's wake is a processor's code
            answer = failure(held.request, exc)
        if answer is None:
            return None if expired else _HOLD_ON
        self.answered += 1
        self._answer(held, answer)
        return None

    def _answer(self, held: _Held, answer: RemotingCommand) -> None:
        channel = held.ctx.channel
        if isinstance(channel, ChannelHandle):  # on the loop already: no hand-off needed
            channel._host.dispatcher.write_response(channel._conn, held.request, answer)
        else:
            held.ctx.write_response(held.request, answer)

    def _connection_lost(self, channel: ChannelHandle) -> None:
        self._refused_on.pop(cast("Hashable", channel), None)
        dropped = len(self._table.remove_owner(cast("Hashable", channel)))
        if dropped:
            self.dropped += dropped
            log.debug("held.dropped", held=dropped, reason="their connection closed")

    async def _timer(self) -> None:
        scope = self._scope
        assert scope is not None
        try:
            while True:
                with scope:
                    self._armed = scope.deadline
                    await trio.sleep_forever()
                now = trio.current_time()
                for hold in self._table.expire(now):
                    self.expired += 1
                    self._wake(hold.item, True)
                deadline = self._table.next_deadline()
                self._scope = scope = trio.CancelScope(
                    deadline=math.inf if deadline is None else deadline)
        finally:
            self._scope = None
            dropped = len(self._table)
            if dropped:
                log.debug("held.dropped", held=dropped, reason="the server stopped")
            self._table = HoldTable()


_HOLD_ON = object()
