"""Deferred messages (sans-I/O): offsets published with a ``defer`` are held back until due,
a pull stops at the first one not due, and the cost of each question does not grow with how
many are deferred (a million deferred messages made every pull and every second of the
service's housekeeping scan them all)."""

from __future__ import annotations

import time

from hypothesis import given
from hypothesis import strategies as st

from remoting._messaging._deferred import DeferredOffsets
from remoting.queue._store import TopicStore
from remoting.queue._topic import Topic


def test_offsets_are_held_until_due_then_released_in_due_order() -> None:
    deferred = DeferredOffsets()
    deferred.add(10, 3, due=5.0)
    deferred.add(13, 1, due=2.0)
    assert deferred.get(11) == 5.0 and deferred.get(9) is None and len(deferred) == 4
    assert deferred.next_due() == 2.0
    assert deferred.first_pending(1.0) == 10
    assert deferred.release(1.0) == 0
    assert deferred.release(2.0) == 1 and deferred.get(13) is None
    assert deferred.first_pending(4.0) == 10 and deferred.next_due() == 5.0
    assert deferred.release(5.0) == 3 and not deferred
    assert deferred.first_pending(5.0) is None and deferred.next_due() is None


def test_a_later_batch_with_an_earlier_due_does_not_hide_the_first_pending() -> None:
    deferred = DeferredOffsets()
    deferred.add(0, 1, due=100.0)
    deferred.add(1, 1, due=1.0)
    assert deferred.first_pending(0.5) == 0
    assert deferred.first_pending(50.0) == 0  # offset 1 is due, offset 0 is not
    assert deferred.first_pending(100.0) is None


def test_a_pull_s_visible_end_costs_the_same_with_many_deferred() -> None:
    topic = Topic("t", TopicStore(1_000_000, None), msg_timeout=30.0, max_attempts=0,
                  dedup_window=60.0)
    topic.append([b"\x00\x00now"], now=0.0, now_ms=0, defer=0.0, key=None)
    for _ in range(200):
        topic.append([b"\x00\x00later"] * 1000, now=0.0, now_ms=0, defer=3600.0, key=None)
    assert topic.visible_end(1.0) == 1
    started = time.thread_time()  # CPU time: other processes do not change it
    for _ in range(1000):
        assert topic.visible_end(1.0) == 1
        assert topic.deferred.next_due() == 3600.0
    cpu = time.thread_time() - started
    assert cpu < 0.5, f"{cpu:.3f} s of CPU for 1,000 calls"  # scanning 200,000: ~7 ms a call
    assert topic.deferred.release(3600.0) == 200_000 and topic.visible_end(3600.0) == 200_001


@given(batches=st.lists(st.tuples(st.integers(1, 5), st.floats(0.0, 10.0)), max_size=12),
       releases=st.lists(st.floats(0.0, 10.0), max_size=4),
       now=st.floats(0.0, 10.0), start=st.integers(0, 70))
def test_the_first_pending_from_an_offset_skips_what_lies_before_it(
        batches: list[tuple[int, float]], releases: list[float], now: float,
        start: int) -> None:
    """A pull from ``start`` (a reader by offsets) stops at the first offset from ``start``
    on that is not due: a batch before ``start`` still pending does not hold it back."""
    deferred = DeferredOffsets()
    due_of: dict[int, float] = {}
    first = 0
    for count, due in batches:
        deferred.add(first, count, due)
        due_of.update(dict.fromkeys(range(first, first + count), due))
        first += count + 1  # a message between batches is not deferred
    released_until = 0.0
    for at in sorted(releases):
        deferred.release(at)
        released_until = at
    now = max(now, released_until)  # time does not go back
    expected = min((o for o, due in due_of.items() if o >= start and due > now), default=None)
    assert deferred.first_pending(now, start) == expected
