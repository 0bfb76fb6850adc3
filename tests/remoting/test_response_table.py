"""The central invariant: each opaque completes exactly once and releases its permit once.

A hypothesis state machine drives the sync bookkeeping (`ResponseTable` + `ResponseFuture`)
with an injected clock, through every completion path: response, deadline, scanner sweep,
connection loss, send failure, late response and shutdown.
"""

from __future__ import annotations

import pathlib

import hypothesis.strategies as st
from hypothesis import settings
from hypothesis.stateful import (
    Bundle,
    RuleBasedStateMachine,
    consumes,
    invariant,
    rule,
)

from codec import RemotingCommand
from remoting._core._calling._future import ResponseFuture
from remoting._core._sansio._response_table import ResponseTable
from remoting._core._trio_driver._permits import Permits


class Conn:
    pass


class TableMachine(RuleBasedStateMachine):
    sent = Bundle("sent")

    def __init__(self) -> None:
        super().__init__()
        self.table: ResponseTable[ResponseFuture] = ResponseTable()
        self.now = 0.0
        self.conns = [Conn(), Conn()]
        self.permits = Permits(1_000_000)
        self.completions: dict[int, int] = {}
        self.futures: list[ResponseFuture] = []

    def _complete(self, fut: ResponseFuture | None, how: str) -> None:
        if fut is None:
            return
        if how == "response":
            done = fut._complete(RemotingCommand.create_response(0))
        elif how == "timeout":
            done = fut._fail_timeout()
        else:
            done = fut._fail_send(how)
        if done:
            self.completions[fut.opaque] = self.completions.get(fut.opaque, 0) + 1

    @rule(target=sent, timeout=st.floats(0.01, 10), conn=st.integers(0, 1))
    def send(self, timeout: float, conn: int) -> ResponseFuture:
        fut = ResponseFuture(RemotingCommand.create_request(1), "peer", timeout)
        fut.deadline = self.now + timeout
        fut.conn = self.conns[conn]
        assert self.permits.try_take()
        fut._permits = self.permits  # what the invoker's send does
        self.table.register(fut)
        self.futures.append(fut)
        return fut

    @rule(fut=sent)
    def response_arrives(self, fut: ResponseFuture) -> None:
        # a response for an entry already gone (late, duplicated) must find nothing
        self._complete(self.table.pop_for(fut.opaque, fut.conn), "response")

    @rule(fut=sent)
    def response_on_wrong_connection_is_ignored(self, fut: ResponseFuture) -> None:
        other = self.conns[0] if fut.conn is self.conns[1] else self.conns[1]
        assert self.table.pop_for(fut.opaque, other) is None

    @rule(fut=consumes(sent))
    def send_fails(self, fut: ResponseFuture) -> None:
        self._complete(self.table.pop_for(fut.opaque, fut.conn), "send failed")

    @rule(dt=st.floats(0, 5))
    def time_passes_and_timer_fires(self, dt: float) -> None:
        self.now += dt
        for fut in self.table.expire(self.now):
            assert fut.deadline <= self.now
            self._complete(fut, "timeout")

    @rule(grace=st.floats(0, 2))
    def scanner_sweeps(self, grace: float) -> None:
        for fut in self.table.expire(self.now - grace):
            self._complete(fut, "timeout")

    @rule(conn=st.integers(0, 1))
    def connection_lost(self, conn: int) -> None:
        for fut in self.table.pop_connection(self.conns[conn]):
            self._complete(fut, "connection lost")

    @rule()
    def shutdown(self) -> None:
        for fut in self.table.pop_all():
            self._complete(fut, "shutdown")

    @invariant()
    def each_opaque_completed_at_most_once(self) -> None:
        assert all(n == 1 for n in self.completions.values())

    @invariant()
    def permits_released_exactly_for_completed(self) -> None:
        done = [f for f in self.futures if f.done()]
        in_use = self.permits.total - self.permits.free
        assert in_use == len(self.futures) - len(done)
        assert len(done) == len(self.completions)

    @invariant()
    def table_holds_exactly_the_pending(self) -> None:
        pending = {f.opaque for f in self.futures if not f.done()}
        assert len(self.table) == len(pending)
        assert all(o in self.table for o in pending)
        deadline = self.table.next_deadline()
        if pending:
            assert deadline == min(f.deadline for f in self.futures if not f.done())
        else:
            assert deadline is None

    def teardown(self) -> None:
        self.shutdown()
        assert self.permits.free == self.permits.total
        assert len(self.table) == 0


TableMachine.TestCase.settings = settings(max_examples=150, stateful_step_count=40,
                                          deadline=None)
test_response_table_state_machine = TableMachine.TestCase


def test_heap_is_compacted_when_completed_entries_pile_up() -> None:
    table: ResponseTable[ResponseFuture] = ResponseTable()
    for _ in range(5000):
        fut = ResponseFuture(RemotingCommand.create_request(1), "p", 3600)
        fut.deadline = 3600.0
        table.register(fut)
        assert table.pop_for(fut.opaque, fut.conn) is fut
    assert len(table) == 0
    assert table.deadline_entries <= 2 * 1024 + 2


def test_a_command_registered_while_its_opaque_is_pending_goes_out_as_a_copy() -> None:
    """The same command sent twice at once: the second call gets a copy of it with an opaque
    of its own; the caller's command is never changed, and both are pending."""
    table: ResponseTable[ResponseFuture] = ResponseTable()
    request = RemotingCommand.create_request(1)
    first = ResponseFuture(request, "p", 1)
    second = ResponseFuture(request, "p", 1)
    table.register(first)
    table.register(second)
    assert first.request is request and first.opaque == request.opaque
    assert second.request is not request and second.opaque != request.opaque
    assert second.request.opaque == second.opaque
    assert table.get(first.opaque) is first and table.get(second.opaque) is second
    assert len(table) == 2


def test_one_reads_answers_are_taken_only_by_the_connection_their_calls_went_on() -> None:
    """`take_answers`: each answer's call, in order; None for an orphan, and a call of
    another connection with the same opaque stays pending."""
    table: ResponseTable[ResponseFuture] = ResponseTable()
    mine, other = Conn(), Conn()
    futs = [ResponseFuture(RemotingCommand.create_request(1), "p", 1) for _ in range(3)]
    futs[0].conn = futs[1].conn = mine
    futs[2].conn = other
    for fut in futs:
        table.register(fut)
    answers = [RemotingCommand.create_response(0) for _ in range(4)]
    answers[0].opaque, answers[1].opaque, answers[2].opaque = (
        futs[1].opaque, futs[2].opaque, futs[0].opaque)
    answers[3].opaque = futs[0].opaque  # twice: the second finds nothing
    assert table.take_answers(mine, answers) == [futs[1], None, futs[0], None]
    assert table.on_connection(other) == [futs[2]]
    assert len(table) == 1


def test_nothing_outside_the_table_touches_its_entries() -> None:
    """The table owns its entries: no module of the library reads or changes them but
    through its methods (issue 37: no caller pops an entry and puts it back)."""
    root = pathlib.Path(__file__).resolve().parents[2] / "remoting"
    table = root / "_core" / "_sansio" / "_response_table.py"
    for path in root.rglob("*.py"):
        if path == table:
            continue
        text = path.read_text()
        assert "table.entries" not in text and "table._entries" not in text, path
        assert "_entries" not in text or "ResponseTable" not in text, path
    assert not hasattr(ResponseTable(), "entries")
