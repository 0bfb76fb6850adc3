"""The deadline heap must not keep completed calls (and their bodies) alive."""

from __future__ import annotations

import sys

from codec import RemotingCommand
from remoting._core._calling._future import ResponseFuture
from remoting._core._calling._response_table import ResponseTable


def test_a_completed_call_is_not_kept_alive_by_the_deadline_heap() -> None:
    """The heap holds (deadline, opaque): a finished call's bodies are freed with the call."""
    table = ResponseTable()
    fut = ResponseFuture(RemotingCommand.create_request(1, body=b"x" * (1 << 20)), "p", 60)
    fut.deadline = 60.0
    before = sys.getrefcount(fut)
    table.add(fut)
    assert table.pop_for(fut.opaque, fut.conn) is fut
    assert sys.getrefcount(fut) == before
    assert table.next_deadline() is None
    assert table.expire(100.0) == []
