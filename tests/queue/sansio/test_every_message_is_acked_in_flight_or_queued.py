"""A channel's delivery state (sans-I/O): every message handed to the channel is finished, in
flight with one consumer, ready, waiting for a time, dead-lettered, or let go of by retention
before its delivery, and nothing else; a
consumer never holds more deliveries than its credits; only its holder acknowledges a
delivery."""

from __future__ import annotations

from collections.abc import Hashable

import pytest
from hypothesis import strategies as st
from hypothesis.stateful import (
    Bundle,
    RuleBasedStateMachine,
    consumes,
    initialize,
    invariant,
    rule,
)

from remoting.queue._sansio._channel_queue import ChannelQueue, Outcome
from remoting.queue._sansio._deferred import DeferredOffsets
from remoting.queue._sansio._in_flight import InFlight

TIMEOUT = 10.0


def test_take_hands_out_ready_messages_before_new_ones() -> None:
    queue = ChannelQueue(0, msg_timeout=TIMEOUT)
    assert queue.take("a", 2, 0.0, 5, DeferredOffsets()) == [(0, 1), (1, 1)]
    assert queue.requeue(1, "a", 0.0, 1.0) is Outcome.DONE
    assert queue.take("b", 2, 1.0, 5, DeferredOffsets()) == [(1, 2), (2, 1)]
    assert queue.depth(5) == 2 and len(queue.in_flight) == 3


def test_a_delivery_times_out_and_comes_back_with_one_more_attempt() -> None:
    queue = ChannelQueue(0, msg_timeout=TIMEOUT)
    queue.take("a", 1, 0.0, 1, DeferredOffsets())
    assert queue.next_deadline() == TIMEOUT
    assert queue.expire(TIMEOUT - 0.001) == []
    [returned] = queue.expire(TIMEOUT)
    assert (returned.offset, returned.consumer, returned.attempts, returned.dead) == (
        0, "a", 1, False)
    assert queue.take("b", 1, TIMEOUT, 1, DeferredOffsets()) == [(0, 2)]
    assert queue.timed_out == 1


def test_touch_moves_the_deadline_and_only_the_holder_may_touch() -> None:
    queue = ChannelQueue(0, msg_timeout=TIMEOUT)
    queue.take("a", 1, 0.0, 1, DeferredOffsets())
    assert queue.touch(0, "b", 5.0) is Outcome.FOREIGN
    assert queue.touch(0, "a", 5.0) is Outcome.DONE
    assert queue.expire(TIMEOUT) == []
    assert len(queue.expire(5.0 + TIMEOUT)) == 1


def test_acknowledgements_of_unknown_or_foreign_deliveries_change_nothing() -> None:
    queue = ChannelQueue(0, msg_timeout=TIMEOUT)
    queue.take("a", 1, 0.0, 1, DeferredOffsets())
    assert queue.finish(0, "b") is Outcome.FOREIGN
    assert queue.requeue(0, "b", 0.0, 0.0) is Outcome.FOREIGN
    assert queue.finish(7, "a") is Outcome.UNKNOWN
    assert queue.in_flight.holder(0) == "a"
    assert queue.finish(0, "a") is Outcome.DONE
    assert queue.finish(0, "a") is Outcome.UNKNOWN  # twice: the second is refused


def test_a_requeue_with_a_delay_waits_for_it() -> None:
    queue = ChannelQueue(0, msg_timeout=TIMEOUT)
    queue.take("a", 1, 0.0, 1, DeferredOffsets())
    queue.requeue(0, "a", 3.0, 1.0)
    assert queue.take("a", 1, 3.9, 1, DeferredOffsets()) == []
    assert queue.next_deadline() == 4.0
    assert queue.take("a", 1, 4.0, 1, DeferredOffsets()) == [(0, 2)]


def test_a_deferred_message_does_not_hold_back_the_ones_after_it() -> None:
    queue = ChannelQueue(0, msg_timeout=TIMEOUT)
    deferred = DeferredOffsets()
    deferred.add(1, 1, 50.0)
    assert queue.take("a", 5, 0.0, 3, deferred) == [(0, 1), (2, 1)]
    assert queue.waiting(deferred) == 1 and queue.floor(deferred) == 0
    queue.finish(0, "a")
    queue.finish(2, "a")
    assert queue.floor(deferred) == 1
    assert queue.take("a", 5, 50.0, 3, deferred) == []  # due, but not released yet
    deferred.release_batches(50.0)
    assert queue.take("a", 5, 50.0, 3, deferred) == [(1, 1)]  # its first attempt
    assert queue.floor(deferred) == 1 and queue.depth(3, deferred) == 0


def test_a_channel_keeps_nothing_per_deferred_message_it_passes() -> None:
    """Each channel copied every deferred offset it passed into a heap and a dict of its
    own (128 bytes a message a channel: 550,000 deferred messages and 200 channels held
    336 MB); its cursor now passes a batch in one step and keeps nothing of it."""
    deferred = DeferredOffsets()
    deferred.add(1, 100_000, 3600.0)  # one publish of 100,000 deferred messages
    channels = [ChannelQueue(0, msg_timeout=TIMEOUT) for _ in range(50)]
    for queue in channels:
        assert queue.take("a", 10, 0.0, 100_002, deferred) == [(0, 1), (100_001, 1)]
        assert not queue._later and not queue._attempts and queue.cursor == 100_002
        assert queue.waiting(deferred) == 100_000 and queue.floor(deferred) == 0
        queue.finish(0, "a")
        assert queue.floor(deferred) == 1  # the first deferred one: it is not finished
    late = ChannelQueue(100_002, msg_timeout=TIMEOUT, released_seen=deferred.released_end)
    assert deferred.release_batches(3600.0) == [(1, 100_000)]
    for queue in channels:
        taken = queue.take("a", 60_000, 3600.0, 100_002, deferred)
        assert taken == [(o, 1) for o in range(1, 60_001)]
        assert queue.take("a", 60_000, 3600.0, 100_002, deferred) == [
            (o, 1) for o in range(60_001, 100_001)]
    assert late.take("a", 10, 3600.0, 100_002, deferred) == []  # made after: not its own


def test_a_batch_released_before_the_cursor_reaches_it_is_delivered_once() -> None:
    deferred = DeferredOffsets()
    queue = ChannelQueue(0, msg_timeout=TIMEOUT)
    deferred.add(2, 2, 5.0)
    assert queue.take("a", 1, 0.0, 4, deferred) == [(0, 1)]  # the cursor stops before it
    deferred.release_batches(5.0)
    assert queue.take("a", 10, 5.0, 4, deferred) == [(1, 1), (2, 1), (3, 1)]
    assert queue.take("a", 10, 5.0, 4, deferred) == []


def test_max_attempts_dead_letters_instead_of_requeueing() -> None:
    queue = ChannelQueue(0, msg_timeout=TIMEOUT, max_attempts=2)
    queue.take("a", 1, 0.0, 1, DeferredOffsets())
    assert queue.requeue(0, "a", 0.0, 0.0) is Outcome.DONE
    queue.take("a", 1, 0.0, 1, DeferredOffsets())
    assert queue.requeue(0, "a", 0.0, 0.0) is Outcome.DEAD
    assert queue.depth(1) == 0 and queue.dead_lettered == 1 and queue.floor() == 1


def test_a_gone_consumer_gives_its_deliveries_back_in_offset_order() -> None:
    queue = ChannelQueue(0, msg_timeout=TIMEOUT)
    queue.take("a", 3, 0.0, 3, DeferredOffsets())
    returned = queue.consumer_gone("a")
    assert [r.offset for r in returned] == [0, 1, 2]
    assert queue.take("b", 3, 0.0, 3, DeferredOffsets()) == [(0, 2), (1, 2), (2, 2)]
    assert queue.in_flight.per_consumer == {"b": 3}


def test_the_in_flight_heap_is_rebuilt_when_stale_items_pile_up() -> None:
    table = InFlight()
    table.add(1, "a", 100.0, 1)
    for i in range(5000):
        table.touch(1, "a", 100.0 + i)
    assert len(table._deadlines) <= 2 * len(table) + 1024 + 1
    assert table.next_deadline() == 100.0 + 4999


class Channel(RuleBasedStateMachine):
    """Publishes, deliveries bounded by credits, acknowledgements right and wrong, timeouts,
    delays and consumers leaving, in any order."""

    consumers = Bundle("consumers")

    @initialize(max_attempts=st.integers(0, 3))
    def start(self, max_attempts: int) -> None:
        self.queue = ChannelQueue(0, msg_timeout=TIMEOUT, max_attempts=max_attempts)
        self.now = 0.0
        self.end = 0
        self.deferred = DeferredOffsets()
        self.credits: dict[Hashable, int] = {}
        self.finished: set[int] = set()
        self.dead: set[int] = set()
        self.expired: set[int] = set()
        self.names = 0

    @rule(target=consumers, credits=st.integers(1, 5))
    def join(self, credits: int) -> str:
        self.names += 1
        name = f"c{self.names}"
        self.credits[name] = credits
        return name

    @rule(count=st.integers(1, 4), defer=st.sampled_from([0.0, 0.0, 5.0, 30.0]))
    def publish(self, count: int, defer: float) -> None:
        if defer:
            self.deferred.add(self.end, count, self.now + defer)
        self.end += count

    @rule(consumer=consumers)
    def take(self, consumer: str) -> None:
        if consumer not in self.credits:
            return
        free = self.credits[consumer] - self.queue.in_flight.per_consumer.get(consumer, 0)
        taken = self.queue.take(consumer, free, self.now, self.end, self.deferred)
        assert len(taken) <= free
        for offset, attempt in taken:
            assert offset not in self.finished and offset not in self.dead
            assert attempt >= 1

    @rule(consumer=consumers, data=st.data())
    def finish(self, consumer: str, data: st.DataObject) -> None:
        offset = data.draw(st.integers(0, self.end + 1))
        holder = self.queue.in_flight.holder(offset)
        outcome = self.queue.finish(offset, consumer)
        if holder == consumer:
            assert outcome is Outcome.DONE
            self.finished.add(offset)
        else:
            assert outcome is (Outcome.UNKNOWN if holder is None else Outcome.FOREIGN)

    @rule(consumer=consumers, data=st.data())
    def finish_many(self, consumer: str, data: st.DataObject) -> None:
        offsets = data.draw(st.lists(st.integers(0, self.end + 1), max_size=5, unique=True))
        holders = {offset: self.queue.in_flight.holder(offset) for offset in offsets}
        refused = dict(self.queue.finish_many(offsets, consumer))
        for offset, holder in holders.items():
            if holder == consumer:
                assert offset not in refused
                self.finished.add(offset)
            else:
                assert refused[offset] is (Outcome.UNKNOWN if holder is None
                                           else Outcome.FOREIGN)

    @rule(consumer=consumers, data=st.data(), delay=st.sampled_from([0.0, 2.0]))
    def requeue(self, consumer: str, data: st.DataObject, delay: float) -> None:
        offset = data.draw(st.integers(0, self.end + 1))
        holder = self.queue.in_flight.holder(offset)
        outcome = self.queue.requeue(offset, consumer, delay, self.now)
        if holder != consumer:
            assert outcome in (Outcome.UNKNOWN, Outcome.FOREIGN)
        elif outcome is Outcome.DEAD:
            self.dead.add(offset)

    @rule(consumer=consumers, data=st.data())
    def touch(self, consumer: str, data: st.DataObject) -> None:
        offset = data.draw(st.integers(0, self.end + 1))
        holder = self.queue.in_flight.holder(offset)
        assert (self.queue.touch(offset, consumer, self.now) is Outcome.DONE) == (
            holder == consumer)

    @rule(seconds=st.sampled_from([0.5, 3.0, TIMEOUT, 40.0]))
    def advance(self, seconds: float) -> None:
        self.now += seconds
        self.deferred.release_batches(self.now)
        for returned in self.queue.expire(self.now):
            if returned.dead:
                self.dead.add(returned.offset)

    @rule(data=st.data())
    def retention_lets_go(self, data: st.DataObject) -> None:
        earliest = data.draw(st.integers(0, self.end))
        queue = self.queue
        waiting = ({o for o in queue._ready if o < earliest}
                   | {o for _, o in queue._later if o < earliest}
                   | set(range(queue.cursor, earliest))
                   | {o for o in queue.passed_deferred(self.deferred) if o < earliest})
        assert queue.drop_below(earliest, self.deferred) == len(waiting)
        self.expired |= waiting
        assert queue.expired == len(self.expired)

    @rule(consumer=consumes(consumers))
    def leave(self, consumer: str) -> None:
        self.credits.pop(consumer, None)
        for returned in self.queue.consumer_gone(consumer):
            assert returned.consumer == consumer
            if returned.dead:
                self.dead.add(returned.offset)

    @invariant()
    def every_message_is_in_exactly_one_place(self) -> None:
        queue = self.queue
        places = [set(self.finished), set(self.dead), set(queue.in_flight.entries),
                  set(queue._ready), {offset for _, offset in queue._later}, self.expired,
                  queue.passed_deferred(self.deferred)]
        assert sum(len(p) for p in places) == queue.cursor  # no offset in two places
        assert set().union(*places) == set(range(queue.cursor))
        assert len(queue._ready) == len(set(queue._ready))

    @invariant()
    def no_consumer_holds_more_than_its_credits(self) -> None:
        for consumer, held in self.queue.in_flight.per_consumer.items():
            assert held <= self.credits[consumer]
        assert sum(self.queue.in_flight.per_consumer.values()) == len(self.queue.in_flight)

    @invariant()
    def the_floor_is_the_lowest_offset_not_finished(self) -> None:
        unfinished = set(range(self.queue.cursor)) - self.finished - self.dead - self.expired
        assert self.queue.floor(self.deferred) == min(unfinished, default=self.queue.cursor)


TestChannel = Channel.TestCase


@pytest.mark.parametrize("count", [0, 1, 4])
def test_take_never_hands_out_more_than_asked(count: int) -> None:
    queue = ChannelQueue(0, msg_timeout=TIMEOUT)
    assert len(queue.take("a", count, 0.0, 10, DeferredOffsets())) == count


class _Counted:
    """A consumer whose comparisons are counted: what a search through deliveries costs."""

    compared = 0

    def __eq__(self, other: object) -> bool:
        _Counted.compared += 1
        return self is other

    __hash__ = object.__hash__


def test_a_gone_consumer_costs_what_it_held_not_the_channel_s_whole_table() -> None:
    queue = ChannelQueue(0, msg_timeout=TIMEOUT)
    consumers = [_Counted() for _ in range(256)]
    for consumer in consumers:  # 256 subscriptions of 64 credits: 16,384 in flight
        queue.take(consumer, 64, 0.0, 16_384, DeferredOffsets())
    _Counted.compared = 0
    returned = sum(len(queue.consumer_gone(consumer)) for consumer in consumers)
    assert returned == 16_384 and len(queue.in_flight) == 0
    # each went through its own 64: no comparison with another's 16,384 (a scan compared
    # every entry's consumer with the one that left, 256 times: 4,194,304)
    assert _Counted.compared == 0


def test_a_channel_that_takes_nothing_does_not_make_the_released_log_grow() -> None:
    """The topic's log of released batches keeps what a channel has not read; a channel
    without subscribers takes nothing, so each batch released after it stopped was kept for
    it. Channels read the log as batches are released, keeping only what they passed."""
    deferred = DeferredOffsets()
    idle = ChannelQueue(0, msg_timeout=TIMEOUT)
    busy = ChannelQueue(0, msg_timeout=TIMEOUT)
    deferred.add(0, 1, 1.0)
    assert busy.take("a", 5, 0.0, 2, deferred) == [(1, 1)]  # passed the pending 0
    for i in range(1, 1001):  # 1,000 deferred publishes released one by one
        deferred.add(1 + i, 1, float(i))
        deferred.release_batches(float(i))
        for queue in (idle, busy):
            queue.read_released(deferred)
        deferred.forget_released(min(idle.released_seen, busy.released_seen))
    assert deferred.released_end - deferred.released_base == 0  # the log keeps nothing
    assert busy.waiting(deferred) == 0 and busy.depth(1002, deferred) == 1001  # 0 and the rest
    taken = busy.take("a", 2000, 1000.0, 1002, deferred)
    assert taken[0] == (0, 1) and sorted(o for o, _ in taken) == [0, *range(2, 1002)]
    assert idle.take("a", 2000, 1000.0, 1002, deferred) == [(o, 1) for o in range(1002)]
