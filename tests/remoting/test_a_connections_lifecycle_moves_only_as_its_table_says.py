"""A connection's lifecycle (`ConnectionState`, shared by both drivers) moves only as its
transition table says: every transition, every refused event, and what each state implies."""

from __future__ import annotations

import itertools
from typing import get_args

import pytest
from hypothesis import given
from hypothesis import strategies as st

from remoting._core._socket._connection_state import (
    TRANSITIONS,
    ConnectionState,
    Event,
    Lifecycle,
)

EVENTS: tuple[Event, ...] = get_args(Event)
# The shortest way to each state from a new connection.
PATH: dict[Lifecycle, list[Event]] = {
    Lifecycle.OPEN: [],
    Lifecycle.GOING_AWAY: ["go_away"],
    Lifecycle.CLOSING: ["close"],
    Lifecycle.CLOSED: ["close", "released"],
}
# What each state implies: (takes new calls, going away, reads and sends, closed)
IMPLIES = {
    Lifecycle.OPEN: (True, False, True, False),
    Lifecycle.GOING_AWAY: (False, True, True, False),
    Lifecycle.CLOSING: (False, False, False, True),
    Lifecycle.CLOSED: (False, False, False, True),
}
ORDER = list(Lifecycle)  # a connection never goes back


def reached(state: Lifecycle) -> ConnectionState:
    conn = ConnectionState()
    for event in PATH[state]:
        assert conn.handle(event, "why")
    assert conn.state is state
    return conn


def implied(conn: ConnectionState) -> tuple[bool, bool, bool, bool]:
    return conn.takes_calls, conn.going_away, conn.usable, conn.closed


def test_the_table_names_every_state_and_only_known_events() -> None:
    assert set(TRANSITIONS) == set(Lifecycle)
    for moves in TRANSITIONS.values():
        assert set(moves) <= set(EVENTS)
    assert TRANSITIONS[Lifecycle.CLOSED] == {}  # the end: nothing moves it


def test_a_new_connection_is_open() -> None:
    conn = ConnectionState()
    assert conn.state is Lifecycle.OPEN
    assert implied(conn) == IMPLIES[Lifecycle.OPEN]
    assert conn.reason is None and not conn.broken


@pytest.mark.parametrize(("state", "event"), list(itertools.product(Lifecycle, EVENTS)),
                         ids=lambda v: getattr(v, "name", v))
def test_each_event_in_each_state_moves_as_the_table_says_or_changes_nothing(
        state: Lifecycle, event: Event) -> None:
    conn = reached(state)
    before = (conn.state, conn.reason, conn.broken, implied(conn))
    target = TRANSITIONS[state].get(event)
    changed = conn.handle(event, "later", broken=True)
    if target is None:  # refused: nothing at all changes
        assert not changed
        assert (conn.state, conn.reason, conn.broken, implied(conn)) == before
    else:
        assert changed
        assert conn.state is target
        assert implied(conn) == IMPLIES[target]
        assert ORDER.index(target) > ORDER.index(state)


@pytest.mark.parametrize("via_go_away", [False, True])
def test_the_first_close_keeps_its_reason_and_whether_it_broke(via_go_away: bool) -> None:
    conn = ConnectionState()
    if via_go_away:
        assert conn.handle("go_away")
    assert conn.handle("close", "read failed", broken=True)
    assert not conn.handle("close", "closed locally")  # a second close is refused
    assert conn.reason == "read failed" and conn.broken
    assert conn.handle("released")
    assert conn.reason == "read failed" and conn.broken


def test_refused_events_are_exactly_those_the_table_lacks() -> None:
    refused = {(s, e) for s in Lifecycle for e in EVENTS if e not in TRANSITIONS[s]}
    assert refused == {
        (Lifecycle.OPEN, "released"),  # released only once closing
        (Lifecycle.GOING_AWAY, "go_away"),  # told once
        (Lifecycle.GOING_AWAY, "released"),
        (Lifecycle.CLOSING, "go_away"),  # a closing connection takes no call anyway
        (Lifecycle.CLOSING, "close"),  # the first close counts
        (Lifecycle.CLOSED, "go_away"),
        (Lifecycle.CLOSED, "close"),
        (Lifecycle.CLOSED, "released"),  # released once
    }


@given(st.lists(st.sampled_from(EVENTS), max_size=12),
       st.lists(st.booleans(), min_size=12, max_size=12))
def test_any_sequence_of_events_only_moves_forward_and_keeps_the_first_close(
        events: list[Event], broken: list[bool]) -> None:
    conn = ConnectionState()
    first_close: tuple[str, bool] | None = None
    for i, event in enumerate(events):
        before = conn.state
        reason = f"close {i}"
        changed = conn.handle(event, reason, broken=broken[i])
        assert changed == (TRANSITIONS[before].get(event) is not None)
        assert ORDER.index(conn.state) >= ORDER.index(before)
        if changed and event == "close":
            assert first_close is None
            first_close = (reason, broken[i])
        assert implied(conn) == IMPLIES[conn.state]
        if conn.state is Lifecycle.CLOSED:
            assert first_close is not None  # released only after a close
    if first_close is None:
        assert conn.reason is None and not conn.broken
    else:
        assert (conn.reason, conn.broken) == first_close
