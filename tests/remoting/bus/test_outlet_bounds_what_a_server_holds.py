"""`Outlet` (sans-I/O, injected clock): a remote consumer gets at most its window of
messages before it credits them back; the server queues a bounded number more, in order,
and refuses the rest; a message whose deadline passed is never pushed. Credits never count
a message not handed to the connection yet (a lying client cannot make the server hold more
than a window), and a window that shrinks takes nothing back."""

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
    outlet.sent(2)
    assert outlet.credit(1, now=0.0) == ([2], [])
    outlet.sent(1)
    assert outlet.credit(2, now=0.0) == ([3, 4], [])
    outlet.sent(2)
    assert outlet.credit(5, now=0.0) == ([5], [])  # more credit than pushed: clamped
    assert outlet.outstanding == 1 and outlet.queued == 0


def test_credits_for_messages_not_sent_yet_admit_nothing() -> None:
    outlet: Outlet[int] = Outlet(window=2, max_queued=10)
    for i in range(5):
        outlet.offer(i, None, now=0.0)
    assert outlet.credit(100, now=0.0) == ([], [])  # the two admitted are not sent yet
    assert (outlet.outstanding, outlet.unsent) == (2, 2)
    outlet.sent(1)
    assert outlet.credit(100, now=0.0) == ([2], [])  # only the one sent came back
    assert (outlet.outstanding, outlet.unsent) == (2, 2)


def test_a_smaller_window_waits_for_credits_a_larger_one_admits_at_once() -> None:
    outlet: Outlet[int] = Outlet(window=4, max_queued=10)
    for i in range(8):
        outlet.offer(i, None, now=0.0)
    outlet.sent(4)
    assert outlet.resize(2, 1, now=0.0) == ([], [])  # 3 still out: over the new window
    assert outlet.credit(1, now=0.0) == ([], [])  # 2 out: at the window
    assert outlet.credit(1, now=0.0) == ([4], [])
    outlet.sent(1)
    assert outlet.resize(5, 0, now=0.0) == ([5, 6, 7], [])
    assert outlet.outstanding == 5


def test_a_new_message_waits_behind_the_queue_even_with_room() -> None:
    outlet: Outlet[int] = Outlet(window=1, max_queued=10)
    outlet.offer(0, None, now=0.0)
    outlet.offer(1, None, now=0.0)
    outlet.outstanding = 0  # as if credited without draining: order still holds
    assert outlet.offer(2, None, now=0.0) == "queued"


def test_expired_messages_are_not_pushed_and_make_room() -> None:
    outlet: Outlet[str] = Outlet(window=1, max_queued=2)
    outlet.offer("pushed", None, now=0.0)
    outlet.sent(1)
    outlet.offer("late", 5.0, now=0.0)
    outlet.offer("forever", None, now=0.0)
    assert outlet.offer("refused", None, now=1.0) == "full"
    assert outlet.offer("fits", None, now=6.0) == "queued"  # "late" expired: its room is free
    assert outlet.credit(1, now=6.0) == (["forever"], [])
    assert outlet.clear() == ["fits"]


def test_credit_returns_what_expired_while_queued() -> None:
    outlet: Outlet[str] = Outlet(window=1, max_queued=5)
    outlet.offer("a", None, now=0.0)
    outlet.sent(1)
    outlet.offer("b", 2.0, now=0.0)
    outlet.offer("c", 9.0, now=0.0)
    assert outlet.credit(1, now=3.0) == (["c"], ["b"])


@given(st.lists(st.one_of(st.just("offer"), st.just("send"), st.integers(1, 4),
                         st.tuples(st.integers(1, 4), st.integers(0, 4))), max_size=80),
       st.integers(1, 4), st.integers(0, 4))
def test_never_more_out_than_the_window_allows_nor_more_queued_than_the_bound(
        steps: list[str | int | tuple[int, int]], window: int, max_queued: int) -> None:
    """A model: ``out`` admitted and not credited, of which ``unsent`` not sent yet."""
    outlet: Outlet[int] = Outlet(window, max_queued)
    out = unsent = 0
    largest = window
    for n, step in enumerate(steps):
        if step == "offer":
            pushed = outlet.offer(n, None, now=0.0) == "push"
            out, unsent = out + pushed, unsent + pushed
        elif step == "send":
            if unsent:
                outlet.sent(1)
                unsent -= 1
        else:
            if isinstance(step, tuple):
                window, credits = step
                largest = max(largest, window)
                pushed_now, expired = outlet.resize(window, credits, now=0.0)
            else:
                assert isinstance(step, int)
                credits = step
                pushed_now, expired = outlet.credit(credits, now=0.0)
            out = max(unsent, out - credits) + len(pushed_now)
            unsent += len(pushed_now)
            assert not expired
            assert out <= window or not pushed_now  # a shrunk window admits nothing
        assert outlet.unsent == unsent <= outlet.outstanding == out <= largest
        assert outlet.queued <= max_queued
