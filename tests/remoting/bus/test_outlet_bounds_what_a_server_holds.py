"""`Outlet` (sans-I/O, injected clock): a remote consumer gets at most its window of
messages before it credits them back; the server queues a bounded number more, in order,
and refuses the rest; a message whose deadline passed is never pushed."""

from __future__ import annotations

import hypothesis.strategies as st
from hypothesis import given

from remoting._bus._outlet import Outlet


def test_the_window_then_the_queue_then_refusal() -> None:
    outlet: Outlet[int] = Outlet(window=2, max_queued=3)
    offers = [outlet.offer(i, None, now=0.0) for i in range(7)]
    assert offers == ["push", "push", "queued", "queued", "queued", "full", "full"]
    assert outlet.outstanding == 2 and outlet.queued == 3


def test_credit_admits_the_oldest_queued_first() -> None:
    outlet: Outlet[int] = Outlet(window=2, max_queued=10)
    for i in range(6):
        outlet.offer(i, None, now=0.0)
    assert outlet.credit(1, now=0.0) == ([2], [])
    assert outlet.credit(2, now=0.0) == ([3, 4], [])
    assert outlet.credit(5, now=0.0) == ([5], [])  # more credit than pushed: clamped
    assert outlet.outstanding == 1 and outlet.queued == 0


def test_a_new_message_waits_behind_the_queue_even_with_room() -> None:
    outlet: Outlet[int] = Outlet(window=1, max_queued=10)
    outlet.offer(0, None, now=0.0)
    outlet.offer(1, None, now=0.0)
    outlet.outstanding = 0  # as if credited without draining: order still holds
    assert outlet.offer(2, None, now=0.0) == "queued"


def test_expired_messages_are_not_pushed_and_make_room() -> None:
    outlet: Outlet[str] = Outlet(window=1, max_queued=2)
    outlet.offer("pushed", None, now=0.0)
    outlet.offer("late", 5.0, now=0.0)
    outlet.offer("forever", None, now=0.0)
    assert outlet.offer("refused", None, now=1.0) == "full"
    assert outlet.offer("fits", None, now=6.0) == "queued"  # "late" expired: its room is free
    assert outlet.credit(1, now=6.0) == (["forever"], [])
    assert outlet.clear() == ["fits"]


def test_credit_returns_what_expired_while_queued() -> None:
    outlet: Outlet[str] = Outlet(window=1, max_queued=5)
    outlet.offer("a", None, now=0.0)
    outlet.offer("b", 2.0, now=0.0)
    outlet.offer("c", 9.0, now=0.0)
    assert outlet.credit(1, now=3.0) == (["c"], ["b"])


@given(st.lists(st.one_of(st.just("offer"), st.integers(1, 4)), max_size=80),
       st.integers(1, 4), st.integers(0, 4))
def test_never_more_than_the_window_out_nor_the_bound_queued(
        steps: list[str | int], window: int, max_queued: int) -> None:
    outlet: Outlet[int] = Outlet(window, max_queued)
    out = 0
    for n, step in enumerate(steps):
        if step == "offer":
            out += outlet.offer(n, None, now=0.0) == "push"
        else:
            out = max(0, out - step)  # type: ignore[operator]
            pushed, expired = outlet.credit(step, now=0.0)  # type: ignore[arg-type]
            out += len(pushed)
            assert not expired
        assert 0 <= outlet.outstanding <= window
        assert outlet.queued <= max_queued
        assert outlet.outstanding == out
