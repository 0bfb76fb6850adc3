"""Credits (sans-I/O): a sender never sends beyond what its receiver granted, and automatic
grants give back what the application took, in batches of half the window."""

from __future__ import annotations

from collections import deque

import pytest
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule

from remoting._messaging._credits import MAX_CREDITS, CreditGrants, CreditWindow, credits_of


@pytest.mark.parametrize("bad", [0, -1, MAX_CREDITS + 1])
def test_a_window_refuses_a_grant_out_of_range(bad: int) -> None:
    with pytest.raises(ValueError, match=f"from 1 to {MAX_CREDITS}"):
        CreditWindow(bad)
    window = CreditWindow(1)
    with pytest.raises(ValueError, match=f"from 1 to {MAX_CREDITS}"):
        window.grant(bad)
    assert window.available == 1 and window.granted == 1


@pytest.mark.parametrize("bad", [1.5, "3", True, None])
def test_credits_must_be_an_int(bad: object) -> None:
    with pytest.raises(TypeError, match="must be an int"):
        credits_of(bad)


def test_a_grant_that_would_pass_the_maximum_is_refused_and_changes_nothing() -> None:
    window = CreditWindow(MAX_CREDITS - 1)
    with pytest.raises(ValueError, match="over"):
        window.grant(2)
    assert window.available == MAX_CREDITS - 1
    window.grant(1)
    assert window.available == MAX_CREDITS


def test_an_item_costing_more_than_is_available_is_refused() -> None:
    window = CreditWindow(3)
    window.use(2)
    with pytest.raises(ValueError, match="does not fit"):
        window.use(2)
    with pytest.raises(ValueError, match="does not fit"):
        window.use(-1)
    assert (window.available, window.used) == (1, 2)


def test_grants_come_back_in_batches_of_half_the_window() -> None:
    grants = CreditGrants(64)
    assert [grants.consumed(1) for _ in range(31)] == [0] * 31
    assert grants.consumed(1) == 32
    assert grants.consumed(40) == 40  # one costly item pays at once
    assert CreditGrants(1).consumed(1) == 1


class SenderAndReceiver(RuleBasedStateMachine):
    """A sender with a window, a pipe of items in each direction, a receiver granting
    automatically: the items outstanding never exceed the first grant."""

    @initialize(first=st.integers(1, 300))
    def open(self, first: int) -> None:
        self.first = first
        self.window = CreditWindow(first)
        self.grants = CreditGrants(first)
        self.to_receiver: deque[int] = deque()  # items (their cost) on the wire
        self.received: deque[int] = deque()  # delivered, not yet consumed by the application
        self.to_sender: deque[int] = deque()  # grants on the wire

    @rule(data=st.data())
    def send(self, data: st.DataObject) -> None:
        if self.window.available == 0:
            with pytest.raises(ValueError, match="does not fit"):
                self.window.use(1)
            return
        cost = data.draw(st.integers(0, self.window.available))
        self.window.use(cost)
        self.to_receiver.append(cost)

    @precondition(lambda self: bool(self.to_receiver))
    @rule()
    def deliver(self) -> None:
        self.received.append(self.to_receiver.popleft())

    @precondition(lambda self: bool(self.received))
    @rule()
    def consume(self) -> None:
        grant = self.grants.consumed(self.received.popleft())
        if grant:
            self.to_sender.append(grant)

    @precondition(lambda self: bool(self.to_sender))
    @rule()
    def grant(self) -> None:
        self.window.grant(self.to_sender.popleft())

    @invariant()
    def outstanding_never_exceed_the_first_grant(self) -> None:
        outstanding = sum(self.to_receiver) + sum(self.received)
        assert 0 <= self.window.available
        assert (self.window.available + outstanding + self.grants.owed
                + sum(self.to_sender)) == self.first


TestSenderAndReceiver = SenderAndReceiver.TestCase


def test_a_starved_receiver_gives_back_all_it_owes() -> None:
    grants = CreditGrants(10)
    assert grants.consumed(3) == 0
    assert grants.starved() == 3 and grants.starved() == 0
