"""`ReplyTable` (sans-I/O, injected clock): whoever removes a reply address completes it,
once; an expired address is never taken; a closed connection takes its entries with it.

A hypothesis state machine drives every way an entry leaves: its answer, its deadline, its
waiter giving up, the connection of its requester or of the consumer holding it closing.
"""

from __future__ import annotations

import hypothesis.strategies as st
from hypothesis.stateful import Bundle, RuleBasedStateMachine, consumes, invariant, rule

from remoting._bus._reply_table import PendingReply, ReplyTable


class Waiter:
    def __init__(self) -> None:
        self.completed = 0


def test_a_reply_address_is_taken_once() -> None:
    table: ReplyTable[Waiter] = ReplyTable()
    entry = table.add(Waiter(), 10.0, address="x")
    assert table.take(entry.reply_address, now=1.0) is entry
    assert table.take(entry.reply_address, now=1.0) is None
    assert len(table) == 0


def test_an_expired_reply_address_is_not_taken_and_expires_once() -> None:
    table: ReplyTable[Waiter] = ReplyTable()
    entry = table.add(Waiter(), 5.0, address="x")
    assert table.take(entry.reply_address, now=5.0) is None  # a reply exactly at the deadline
    assert table.expire(now=5.0) == [entry]
    assert table.expire(now=6.0) == []
    assert not table.remove(entry)


def test_no_deadline_never_expires() -> None:
    table: ReplyTable[Waiter] = ReplyTable()
    entry = table.add(Waiter(), None, address="x")
    assert table.expire(now=1e12) == []
    assert table.take(entry.reply_address, now=1e12) is entry


def test_reply_addresses_are_fresh_and_carry_the_prefix() -> None:
    table: ReplyTable[Waiter] = ReplyTable("local.")
    first = table.add(Waiter(), None, address=None)
    second = table.add(Waiter(), None, address=None)
    assert first.reply_address != second.reply_address
    assert first.reply_address.startswith("local.")


def test_a_closed_connection_takes_its_requests_and_fails_what_its_consumer_held() -> None:
    table: ReplyTable[Waiter] = ReplyTable()
    gone, other = object(), object()
    asked = table.add(Waiter(), None, address="a", requester=gone, holder=other)
    held = table.add(Waiter(), None, address="b", requester=other, holder=gone)
    mine = table.add(Waiter(), None, address="c", requester=None, holder=gone)
    kept = table.add(Waiter(), None, address="d", requester=other, holder=other)
    requested, holding = table.drop_peer(gone)
    assert requested == [asked]
    assert holding == [held, mine]
    assert len(table) == 1 and table.get(kept.reply_address) is kept


class ReplyTableMachine(RuleBasedStateMachine):
    """Each entry is completed at most once, by whoever removed it; expired ones are gone."""

    entries = Bundle("entries")

    def __init__(self) -> None:
        super().__init__()
        self.table: ReplyTable[Waiter] = ReplyTable()
        self.now = 0.0
        self.peers = [object(), object()]
        self.all: list[PendingReply[Waiter]] = []

    @staticmethod
    def _complete(entry: PendingReply[Waiter] | None) -> None:
        if entry is not None:
            entry.waiter.completed += 1

    @rule(target=entries, timeout=st.one_of(st.none(), st.floats(0.01, 10)),
          requester=st.integers(0, 2), holder=st.integers(0, 2))
    def add(self, timeout: float | None, requester: int, holder: int) -> PendingReply[Waiter]:
        peers = [*self.peers, None]
        entry = self.table.add(Waiter(), None if timeout is None else self.now + timeout,
                               address="x", requester=peers[requester], holder=peers[holder])
        self.all.append(entry)
        return entry

    @rule(entry=entries)
    def answer(self, entry: PendingReply[Waiter]) -> None:
        self._complete(self.table.take(entry.reply_address, self.now))

    @rule(entry=consumes(entries))
    def waiter_gives_up(self, entry: PendingReply[Waiter]) -> None:
        if self.table.remove(entry):
            self._complete(entry)

    @rule(dt=st.floats(0, 5))
    def time_passes(self, dt: float) -> None:
        self.now += dt
        for entry in self.table.expire(self.now):
            self._complete(entry)

    @rule(peer=st.integers(0, 1))
    def connection_closes(self, peer: int) -> None:
        requested, held = self.table.drop_peer(self.peers[peer])
        for entry in requested + held:
            self._complete(entry)

    @invariant()
    def completed_at_most_once_and_only_when_gone(self) -> None:
        for entry in self.all:
            present = self.table.get(entry.reply_address) is entry
            assert entry.waiter.completed == (0 if present else entry.waiter.completed)
            assert entry.waiter.completed <= 1

    @invariant()
    def nothing_expired_stays_takeable(self) -> None:
        for entry in self.all:
            if entry.deadline is not None and entry.deadline <= self.now:
                assert self.table.take(entry.reply_address, self.now) is None


TestReplyTableMachine = ReplyTableMachine.TestCase
