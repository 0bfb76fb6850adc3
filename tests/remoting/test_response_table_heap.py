"""The deadline heap must not keep completed calls (and their bodies) alive."""

from __future__ import annotations

import sys

from codec import RemotingCommand
from remoting._core._calling._future import ResponseFuture
from remoting._core._sansio._response_table import ResponseTable


def test_a_completed_call_is_not_kept_alive_by_the_deadline_heap() -> None:
    """The heap holds (deadline, opaque): a finished call's bodies are freed with the call."""
    table: ResponseTable[ResponseFuture] = ResponseTable()
    fut = ResponseFuture(RemotingCommand.create_request(1, body=b"x" * (1 << 20)), "p", 60)
    fut.deadline = 60.0
    before = sys.getrefcount(fut)
    table.register(fut)
    assert table.pop_for(fut.opaque, fut.conn) is fut
    assert sys.getrefcount(fut) == before
    assert table.next_deadline() is None
    assert table.expire(100.0) == []


def test_a_batch_registers_in_order_and_copies_an_opaque_already_pending() -> None:
    """`register_all` is `register` for many, in one pass: a request whose opaque is pending
    goes out as a copy with its own (its index is returned: its frame is encoded again), and
    their deadlines expire as registered."""
    table: ResponseTable[ResponseFuture] = ResponseTable()
    futs = [ResponseFuture(RemotingCommand.create_request(1), "p", 1) for _ in range(4)]
    for i, fut in enumerate(futs):
        fut.deadline = float(i)
    early = ResponseFuture(futs[2].request, "p", 1)
    early.deadline = 9.0
    table.register(early)
    assert table.register_all(futs) == [2]  # futs[2]'s opaque was pending (early's)
    assert futs[2].opaque != early.opaque and futs[2].request.opaque == futs[2].opaque
    assert len(table) == 5
    assert table.expire(1.5) == [futs[0], futs[1]]
    assert table.next_deadline() == 2.0
