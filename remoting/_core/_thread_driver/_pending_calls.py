"""`PendingCalls`: how the thread driver's calls are registered, sent and found again by their
answers (`ThreadCall`: one such call).

Theory of operation:
- A call is registered in the `ResponseTable` under the driver's lock (``lock``, shared with
  the rest of `ThreadDriver`) before its first byte leaves (`send`; `send_batch` for a
  batch's group: encoded outside the lock, registered under one hold of it, handed to the
  socket together). The lock also guards what is counted with the table: each connection's
  calls and calls nobody waits for (``unattended``: the background reader reads their
  answers), and the calling side's counters (sent, latency, orphans, timeouts). It is held
  around bookkeeping only, never around I/O or a completion.
- Whoever removes a call from the table completes it, outside the lock, exactly once: the
  thread that read its answer (`answered` takes one read's answers at once), the thread that
  found it past its deadline (`expire`, `remove`), the release of its connection
  (`connection_lost`), a failed send, shutdown (`pop_all`).
- One shortcut: a read of one answer (the usual read of calls made one at a time) has
  nothing to group, so `answered_one` takes its call with the table's own `pop_for`, and
  builds no `Answered` for the driver to loop over.
- A connection told GO_AWAY takes no new call: a call that may go elsewhere is registered on
  it only if it still takes calls, decided under the lock, which `ThreadGoAway` takes too
  before it counts the calls left there (`has_calls_on`): a call is either counted there (it
  finishes there) or goes elsewhere, never sent on a connection closing under it.
"""

from __future__ import annotations

import math
import select
import threading
from typing import TYPE_CHECKING, Any, Final, Protocol

from codec import ResponseCode, encode_frame_parts

from ..._errors import translate
from ..._observability._histogram import LatencyHistogram
from .._calling._future import ResponseFuture
from .._sansio._response_table import ResponseTable

if TYPE_CHECKING:
    from collections.abc import Iterable

    from codec import EncodedFrame, RemotingCommand

    from ..._observability._statistics import Counters
    from .._calling._future import GivesBack
    from ._background_reader import BackgroundReader
    from ._thread_connection import ThreadConnection

__all__ = ["Answered", "Batch", "PendingCalls", "ThreadCall"]

_GO_AWAY: Final = int(ResponseCode.GO_AWAY)


class ThreadCall(ResponseFuture):
    """A call of the thread driver: a `ResponseFuture` that knows whether a thread waits for
    it (``unattended``: none does, so the background reader reads for it) and the batch it
    belongs to, if any (``batch``: the answers of one read go to their batch together)."""

    __slots__ = ("batch", "unattended")

    def __init__(self, request: RemotingCommand, addr: str | None, timeout: float,
                 driver: Any) -> None:
        super().__init__(request, addr, timeout, driver, driver=driver)
        self.unattended = False
        self.batch: Any = None


class Batch(Protocol):
    """A batch a call belongs to (`ThreadBatch`): what one read's answers to it do."""

    def answered(self, futs: list[Any], answers: list[RemotingCommand]) -> None: ...


class Answered:
    """What one read's answers were to (`PendingCalls.answered`), to complete outside the
    lock: single calls (and batch requests answered GO_AWAY), each batch's together, and the
    answers nobody asked for."""

    __slots__ = ("batches", "orphans", "singles")

    def __init__(self) -> None:
        self.singles: list[tuple[ThreadCall, RemotingCommand]] = []
        self.batches: dict[Batch, tuple[list[ThreadCall], list[RemotingCommand]]] = {}
        self.orphans: list[RemotingCommand] = []


class PendingCalls:
    """The thread driver's calls in flight (see the module docstring)."""

    def __init__(self, counters: Counters, background: BackgroundReader, *,
                 max_frame: int, max_header: int, grace: float) -> None:
        self.lock = threading.Lock()  # the driver's one lock (see the module docstring)
        self.table: ResponseTable[ThreadCall] = ResponseTable()
        self._counters = counters
        self._sent = counters.sent
        self._latency = counters.latency
        self._background = background
        self._max_frame = max_frame
        self._max_header = max_header  # the peer's too, as RocketMQ assumes
        self._grace = grace  # how long after its deadline a call nobody waits for ends

    def __len__(self) -> int:
        return len(self.table)

    # ------------------------------------------------------------------ in

    def send(self, conn: ThreadConnection, fut: ThreadCall, permits: GivesBack | None, *,
             unattended: bool, elsewhere: bool = False) -> bool:
        """Register ``fut`` and send its request on ``conn``; a failure ends it. Its permit
        (held by the call, or by its batch when None) comes back at its completion.

        ``elsewhere``: the call may go to another connection. Then, if ``conn`` was told
        GO_AWAY since the caller took it, nothing is registered and False is returned (the
        caller takes another)."""
        table = self.table
        with self.lock:
            if elsewhere and not conn.state.takes_calls:
                return False
            fut._permits = permits
            fut.conn = conn
            fut.addr = conn.remote_addr
            table.register(fut)  # (a copy with an opaque of its own if its opaque is in flight)
            request = fut.request
            try:
                frame = encode_frame_parts(request, self._max_frame, self._max_header)
            except Exception as exc:
                table.pop_for(fut.opaque, conn)
                error: BaseException | None = exc
            else:
                error = None
                conn.calls += 1
                code = request.code
                self._sent[code] = self._sent.get(code, 0) + 1
                if unattended:
                    fut.unattended = True
                    conn.unattended += 1
                    if fut.deadline > conn.unattended_until:
                        conn.unattended_until = fut.deadline
        if error is not None:
            fut._fail(translate(error, "encode", fut.addr))
            return True
        if not conn.send(frame, defer=True):
            if self.remove(fut, conn):
                fut._fail_send("connection is closed")
            return True
        if unattended:
            background = self._background
            if not conn.background_events & select.POLLIN and conn.read_free:
                background.want(conn)
            background.arm(fut.deadline + self._grace)
        return True

    def send_batch(self, conn: ThreadConnection, futs: list[ThreadCall], *, elsewhere: bool
                   ) -> bool:
        """Register ``futs`` (requests of one batch made for ``conn``, whose permits the
        batch holds) and send them on ``conn`` together: encoded first, registered under one
        hold of the lock, queued and handed to the socket at once. A request that cannot be
        encoded fails alone; otherwise as `send` (``elsewhere``: False, nothing done, if
        ``conn`` was told GO_AWAY since the caller took it)."""
        max_frame, max_header = self._max_frame, self._max_header
        addr = conn.remote_addr
        frames: list[EncodedFrame] = []
        failed: list[tuple[ThreadCall, BaseException]] = []
        codes: dict[int, int] = {}
        code = count = 0
        for fut in futs:  # outside the lock: it is held only for the table
            request = fut.request  # (its conn and addr are set: the batch made it for conn)
            try:
                frames.append(encode_frame_parts(request, max_frame, max_header))
            except Exception as exc:
                failed.append((fut, exc))
                continue
            if request.code != code:
                if count:
                    codes[code] = codes.get(code, 0) + count
                code, count = request.code, 0
            count += 1
        if count:
            codes[code] = codes.get(code, 0) + count
        if failed:  # (rare) those go no further
            futs = [fut for fut in futs if all(fut is not f for f, _ in failed)]
        with self.lock:
            if elsewhere and not conn.state.takes_calls:
                return False
            copies = self.table.register_all(futs)  # (copies: their opaque was in flight)
            sent = self._sent
            for code, count in codes.items():
                sent[code] = sent.get(code, 0) + count
            conn.calls += len(futs)
        for fut, cause in failed:
            fut._fail(translate(cause, "encode", addr))
        unsent: list[int] = []
        for i in copies:  # encoded again with their new opaque
            try:
                frames[i] = encode_frame_parts(futs[i].request, max_frame, max_header)
            except Exception as error:  # (its longer opaque crossed the header limit)
                copy = futs[i]
                if self.remove(copy, conn):
                    copy._fail(translate(error, "encode", addr))
                unsent.append(i)
        if unsent:  # (rare) nothing of those is sent
            frames = [f for i, f in enumerate(frames) if i not in unsent]
        if frames and not conn.send_many(frames):
            with self.lock:
                lost = [fut for fut in futs if self._remove_locked(fut, conn)]
            for fut in lost:
                fut._fail_send("connection is closed")
        return True

    def count_oneway(self, code: int) -> None:
        """A oneway request of ``code`` was queued (it has no entry: nothing answers it)."""
        with self.lock:
            self._sent[code] = self._sent.get(code, 0) + 1

    # ------------------------------------------------------------------ answers

    def answered(self, conn: ThreadConnection, responses: list[RemotingCommand]) -> Answered:
        """Take the calls ``responses`` (one read's, from ``conn``) answer out of the table at
        once, under one hold of the lock, and record their round trips: per run of answers
        sent together (a batch's group shares its send time, so its answers in one read share
        one duration), at the time of the read."""
        read_at = conn.last_read
        code = -1
        started = math.nan
        run = 0
        out = Answered()
        singles, orphans, batches = out.singles, out.orphans, out.batches
        batch = None
        futs: list[ThreadCall] = []
        answers: list[RemotingCommand] = []
        with self.lock:
            taken = self.table.take_answers(conn, responses)
            for fut, response in zip(taken, responses, strict=True):
                if fut is None:
                    orphans.append(response)  # counted by the caller, while it is open
                    continue
                if fut.unattended:
                    fut.unattended = False
                    conn.unattended -= 1
                start = fut.deadline - fut.timeout  # (calls of one deadline may differ)
                if start != started or fut.request.code != code:
                    if run:
                        self._record_latency(code, read_at - started, run)
                    code, started, run = fut.request.code, start, 0
                run += 1
                group = fut.batch
                if group is None or response.code == _GO_AWAY:
                    singles.append((fut, response))
                elif group is batch:
                    futs.append(fut)
                    answers.append(response)
                else:
                    batch = group
                    futs, answers = batches.setdefault(batch, ([], []))
                    futs.append(fut)
                    answers.append(response)
            if run:
                self._record_latency(code, read_at - started, run)
            conn.calls -= len(responses) - len(orphans)
        return out

    def answered_one(self, conn: ThreadConnection, response: RemotingCommand
                     ) -> ThreadCall | None:
        """`answered` for a read of one answer (a lone call's, the usual read of calls made
        one at a time): take its call out of the table and record its round trip; return
        it, or None if the answer matches no call sent on ``conn`` (an orphan). Nothing to
        group, so no `Answered` is made: it, its containers and the loops over them cost a
        lone blocking ``invoke_sync`` 7% of its instructions (162,111 against 151,192 a
        call, bench/instructions.py)."""
        with self.lock:
            fut = self.table.pop_for(response.opaque, conn)
            if fut is None:
                return None
            _popped(fut)
            self._record_latency(fut.request.code, conn.last_read - (fut.deadline - fut.timeout),
                                 1)
        return fut

    def count_orphan(self) -> None:
        """An answer matched no call."""
        with self.lock:
            self._counters.orphans += 1

    def _record_latency(self, code: int, seconds: float, calls: int) -> None:
        """Add the round trip of ``calls`` calls of ``code`` to its histogram (lock held)."""
        hist = self._latency.get(code)
        if hist is None:
            hist = self._latency[code] = LatencyHistogram()
        hist.record(seconds, calls)

    # ------------------------------------------------------------------ other ends

    def remove(self, fut: ResponseFuture, conn: object) -> bool:
        """Remove ``fut`` if still pending on ``conn``; True if removed (the caller then
        completes it)."""
        with self.lock:
            return self._remove_locked(fut, conn)

    def _remove_locked(self, fut: ResponseFuture, conn: object) -> bool:
        if self.table.pop_for(fut.opaque, conn) is not fut:
            return False
        _popped(fut)
        return True

    def next_deadline(self) -> float:
        """The earliest deadline of a pending call, grace included (inf: none)."""
        with self.lock:
            deadline = self.table.next_deadline()
        return math.inf if deadline is None else deadline + self._grace

    def expire(self, now: float) -> list[ThreadCall]:
        """Remove and return every call whose deadline (grace included) is at or before
        ``now``, counted as timed out (and as given up on its connection)."""
        with self.lock:
            expired = self.table.expire(now - self._grace)
            for fut in expired:
                _popped(fut)
                self._counted_out(fut)
        return expired

    def timed_out(self, fut: ResponseFuture) -> None:
        """Count ``fut``, removed by its own thread at its deadline, as timed out."""
        with self.lock:
            self._counted_out(fut)

    def _counted_out(self, fut: ResponseFuture) -> None:
        self._counters.timeouts += 1
        if fut.conn is not None:
            fut.conn.abandoned += 1

    def connection_lost(self, conn: ThreadConnection) -> list[ThreadCall]:
        """Remove and return every call pending on ``conn`` (released); lock held."""
        gone = self.table.pop_connection(conn)
        for fut in gone:
            _popped(fut)
        return gone

    def pop_all(self) -> list[ThreadCall]:
        """Remove and return every call (shutdown)."""
        with self.lock:
            gone = self.table.pop_all()
            for fut in gone:
                _popped(fut)
        return gone

    def has_calls_on(self, conn: ThreadConnection) -> bool:
        """True if a call is pending on ``conn``."""
        with self.lock:
            return bool(self.table.on_connection(conn))

    def make_unattended(self, conn: ThreadConnection, futs: Iterable[ResponseFuture]) -> None:
        """Nobody waits for ``futs`` on ``conn`` any more (their batch moved off it): let the
        background reader read their answers and end them at their deadlines."""
        latest = -math.inf
        with self.lock:
            for fut in futs:
                if (isinstance(fut, ThreadCall) and not fut.unattended
                        and self.table.get(fut.opaque) is fut):
                    fut.unattended = True
                    conn.unattended += 1
                    latest = max(latest, fut.deadline)
        if latest > -math.inf:
            self._background.want(conn)
            self._background.arm(latest + self._grace)


def _popped(fut: ThreadCall) -> None:
    """Count ``fut``, just removed from the table, off its connection (lock held)."""
    conn = fut.conn
    conn.calls -= 1
    if fut.unattended:
        fut.unattended = False
        conn.unattended -= 1
