"""A connection's deliveries in flight against its bound (sans-I/O, ``now`` injected): it is
never handed more than its room; every way a delivery ends gives its room back; the count
always equals the `InFlight` entries its subscriptions hold, whatever the interleaving."""

from __future__ import annotations

import pytest
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, rule

from remoting._messaging._channel_queue import ChannelQueue, Outcome
from remoting._messaging._connection_deliveries import ConnectionDeliveries
from remoting._messaging._deferred import DeferredOffsets

TIMEOUT = 10.0


def test_the_room_is_the_bound_less_what_is_held() -> None:
    deliveries = ConnectionDeliveries(5)
    assert deliveries.room == 5
    assert deliveries.taken(3) is False
    assert (deliveries.held, deliveries.room) == (3, 2)
    assert deliveries.taken(2) is True  # reached the bound
    assert deliveries.room == 0 and deliveries.times_at_bound == 1
    deliveries.ended(4)
    assert deliveries.room == 4


def test_more_than_the_room_is_refused_and_changes_nothing() -> None:
    deliveries = ConnectionDeliveries(2)
    deliveries.taken(1)
    with pytest.raises(ValueError, match="do not fit the connection's room for 1"):
        deliveries.taken(2)
    with pytest.raises(ValueError, match="the connection holds 1"):
        deliveries.ended(2)
    with pytest.raises(ValueError, match="do not fit"):
        deliveries.taken(-1)
    assert (deliveries.held, deliveries.times_at_bound) == (1, 0)


def test_each_time_the_bound_is_reached_counts_once() -> None:
    deliveries = ConnectionDeliveries(1)
    reached = []
    for _ in range(5):
        reached.append(deliveries.taken(1))
        assert deliveries.taken(0) is False  # nothing handed: not reached again
        deliveries.ended(1)
    assert reached == [True] * 5 and deliveries.times_at_bound == 5


@pytest.mark.parametrize("limit", [0, -3])
def test_a_bound_below_one_is_refused(limit: int) -> None:
    with pytest.raises(ValueError, match="must be >= 1"):
        ConnectionDeliveries(limit)


class OneConnection(RuleBasedStateMachine):
    """Subscriptions of one connection on two channels, driven as the queue service drives
    them: each take is bounded by its credits and the connection's room; each delivery that
    ends (finish, requeue, timeout, its subscription's end, skipped) gives its room back."""

    @initialize(limit=st.integers(1, 12))
    def start(self, limit: int) -> None:
        self.deliveries = ConnectionDeliveries(limit)
        self.queues = [ChannelQueue(0, msg_timeout=TIMEOUT) for _ in range(2)]
        self.end = 0  # messages published (on both channels' topic)
        self.now = 0.0
        self.subscriptions: dict[int, ChannelQueue] = {}
        self.next_id = 0

    @rule(count=st.integers(1, 20))
    def publish(self, count: int) -> None:
        self.end += count

    @rule(channel=st.integers(0, 1))
    def subscribe(self, channel: int) -> None:
        self.subscriptions[self.next_id] = self.queues[channel]
        self.next_id += 1

    @rule(data=st.data(), credits=st.integers(1, 50))
    def take(self, data: st.DataObject, credits: int) -> None:
        if not self.subscriptions:
            return
        cid = data.draw(st.sampled_from(sorted(self.subscriptions)))
        room = self.deliveries.room
        if not room:
            return  # paused at the bound
        taken = self.subscriptions[cid].take(cid, min(credits, room), self.now, self.end,
                                               DeferredOffsets())
        self.deliveries.taken(len(taken))

    @rule(data=st.data(), requeue=st.booleans())
    def acknowledge(self, data: st.DataObject, requeue: bool) -> None:
        held = [(cid, offset) for cid, queue in self.subscriptions.items()
                for offset, entry in queue.in_flight.entries.items() if entry.consumer == cid]
        if not held:
            return
        cid, offset = data.draw(st.sampled_from(held))
        queue = self.subscriptions[cid]
        if requeue:
            outcome = queue.requeue(offset, cid, 0.0, self.now)
        else:
            outcome = queue.finish(offset, cid)
        assert outcome is Outcome.DONE
        self.deliveries.ended(1)

    @rule(data=st.data())
    def skip(self, data: st.DataObject) -> None:
        held = [(queue, offset, entry.consumer) for queue in self.queues
                for offset, entry in queue.in_flight.entries.items()]
        if held:
            queue, offset, cid = data.draw(st.sampled_from(held))
            assert not queue.skip(offset, object())  # another's delivery: left alone
            assert queue.skip(offset, cid)
            self.deliveries.ended(1)

    @rule(seconds=st.floats(0.0, 2 * TIMEOUT))
    def time_passes(self, seconds: float) -> None:
        self.now += seconds
        for queue in self.queues:
            self.deliveries.ended(len(queue.expire(self.now)))

    @rule(data=st.data())
    def unsubscribe(self, data: st.DataObject) -> None:
        if self.subscriptions:
            cid = data.draw(st.sampled_from(sorted(self.subscriptions)))
            queue = self.subscriptions.pop(cid)
            self.deliveries.ended(len(queue.consumer_gone(cid)))

    @invariant()
    def held_is_what_the_subscriptions_hold_and_within_the_bound(self) -> None:
        in_flight = sum(len(queue.in_flight) for queue in self.queues)
        assert self.deliveries.held == in_flight <= self.deliveries.limit


TestOneConnection = OneConnection.TestCase
