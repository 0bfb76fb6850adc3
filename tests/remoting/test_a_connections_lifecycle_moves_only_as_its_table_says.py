"""A connection's lifecycle (`ConnectionState`, shared by both drivers) moves only as its
transition table says: every transition, every event a state takes and stays, every
impossible one raising `ConnectionStateError` (a driver's bug, h11's LocalProtocolError)
with nothing changed, and what each state implies; a trio connection (real sockets) moves
through it as its close, GO_AWAY and end say."""

from __future__ import annotations

import itertools
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from functools import partial
from typing import get_args

import pytest
import trio
import trio.testing
from hypothesis import given
from hypothesis import strategies as st

from codec import RemotingCommand, ResponseCode
from remoting import ClientConfig, RemotingClient, RemotingServer, ServerConfig
from remoting._core._sansio._connection_state import (
    TRANSITIONS,
    ConnectionState,
    ConnectionStateError,
    Event,
    Lifecycle,
)
from remoting._core._trio_driver._connection import Connection
from remoting._core._trio_driver._transport import transport_for
from remoting._observability._statistics import Counters

from ..factories import req
from .conftest import ECHO, install_standard_processors, threads_io

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
    # the end: nothing moves it (a close asked for again stays)
    assert TRANSITIONS[Lifecycle.CLOSED] == {"close": Lifecycle.CLOSED}


def test_a_new_connection_is_open() -> None:
    conn = ConnectionState()
    assert conn.state is Lifecycle.OPEN
    assert implied(conn) == IMPLIES[Lifecycle.OPEN]
    assert conn.reason is None and not conn.broken


@pytest.mark.parametrize(("state", "event"), list(itertools.product(Lifecycle, EVENTS)),
                         ids=lambda v: getattr(v, "name", v))
def test_each_event_in_each_state_moves_as_the_table_says_stays_or_raises(
        state: Lifecycle, event: Event) -> None:
    conn = reached(state)
    before = (conn.state, conn.reason, conn.broken, conn.told_go_away, implied(conn))
    target = TRANSITIONS[state].get(event)
    if target is None:  # impossible: a driver's bug, said loudly; nothing at all changes
        with pytest.raises(ConnectionStateError, match=repr(event)) as caught:
            conn.handle(event, "later", broken=True)
        assert (caught.value.state, caught.value.event) == (state, event)
        assert (conn.state, conn.reason, conn.broken, conn.told_go_away,
                implied(conn)) == before
        return
    changed = conn.handle(event, "later", broken=True)
    if target is state:  # taken, and it stays: nothing at all changes
        assert not changed
        assert (conn.state, conn.reason, conn.broken, conn.told_go_away,
                implied(conn)) == before
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
    assert not conn.handle("close", "closed locally")  # a second close changes nothing
    assert conn.reason == "read failed" and conn.broken
    assert conn.handle("released")
    assert conn.reason == "read failed" and conn.broken


def test_the_events_a_state_takes_and_stays_and_the_impossible_ones() -> None:
    stays = {(s, e) for s in Lifecycle for e, t in TRANSITIONS[s].items() if t is s}
    assert stays == {
        (Lifecycle.GOING_AWAY, "go_away"),  # told once: another answer of the same read
        (Lifecycle.CLOSING, "go_away"),  # read as another thread closed it
        (Lifecycle.CLOSING, "close"),  # the first close counts
        (Lifecycle.CLOSED, "close"),  # a handle closed again once it is gone
    }
    impossible = {(s, e) for s in Lifecycle for e in EVENTS if e not in TRANSITIONS[s]}
    assert impossible == {
        (Lifecycle.OPEN, "released"),  # released only once closing
        (Lifecycle.GOING_AWAY, "released"),
        (Lifecycle.CLOSED, "released"),  # released once
        (Lifecycle.CLOSED, "go_away"),  # nothing is read once released
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
        target = TRANSITIONS[before].get(event)
        if target is None:
            with pytest.raises(ConnectionStateError):
                conn.handle(event, reason, broken=broken[i])
            assert conn.state is before
            continue
        changed = conn.handle(event, reason, broken=broken[i])
        assert changed == (target is not before)
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
    # told GO_AWAY exactly when a go_away was taken (open then), and it stays so
    taken = ConnectionState()
    told = False
    for event in events:
        before = taken.state
        if TRANSITIONS[before].get(event) is None:
            continue  # (it raises: checked above)
        if taken.handle(event) and event == "go_away":
            told = True
            assert before is Lifecycle.OPEN
        assert taken.told_go_away == told


def test_a_go_away_before_the_close_is_remembered_after_it() -> None:
    conn = reached(Lifecycle.GOING_AWAY)
    assert conn.told_go_away
    assert conn.handle("close", "drained")
    assert conn.told_go_away and not conn.going_away
    assert not reached(Lifecycle.CLOSING).told_go_away


# ------------------------------------------------------------------ a trio connection


class Owner:
    """Notes only that the connection closed."""

    def __init__(self) -> None:
        self.closed = trio.Event()

    def request_received(self, conn: Connection, request: RemotingCommand) -> None:
        pass

    def response_received(self, conn: Connection, response: RemotingCommand) -> None:
        pass

    def read_done(self, conn: Connection) -> None:
        pass

    def reader_started(self) -> None:
        pass

    def connection_closed(self, conn: Connection) -> None:
        assert conn.state.state is Lifecycle.CLOSED  # released before the owner is told
        self.closed.set()


@asynccontextmanager
async def trio_connection(peer_sends: bytes = b""
                          ) -> AsyncIterator[tuple[Connection, Owner, trio.CancelScope]]:
    """A client connection to a peer that sends ``peer_sends``, then only reads; with the
    cancel scope its `Connection.run` runs in (as an endpoint's shutdown cancels it)."""
    async def peer(stream: trio.SocketStream) -> None:
        await stream.send_all(peer_sends) if peer_sends else None
        while await stream.receive_some(1 << 16):
            pass

    async with trio.open_nursery() as nursery:
        listeners = await nursery.start(partial(trio.serve_tcp, peer, 0, host="127.0.0.1"))
        stream = await trio.open_tcp_stream("127.0.0.1", listeners[0].socket.getsockname()[1])
        owner = Owner()
        conn = Connection(transport_for(stream), "peer", owner, ServerConfig(), Counters(),
                          role="client")
        run_scope = trio.CancelScope()

        async def run() -> None:
            with run_scope:
                await conn.run()

        nursery.start_soon(run)
        with trio.fail_after(10):
            yield conn, owner, run_scope
        nursery.cancel_scope.cancel()


async def test_a_trio_connection_goes_away_closes_once_and_is_released() -> None:
    async with trio_connection() as (conn, owner, _):
        assert conn.state.state is Lifecycle.OPEN and not conn.closed
        conn.go_away()
        # mypy keeps the narrowing to OPEN across go_away(), which changes the state
        assert conn.state.state is Lifecycle.GOING_AWAY and conn.going_away  # type: ignore[comparison-overlap]
        assert not conn.sender.takes_calls  # a thread's call is refused too
        conn.go_away()  # told once: nothing changes
        conn.close("drained")
        conn.close("closed again")
        assert conn.state.state is Lifecycle.CLOSING and conn.closed
        assert conn.close_reason == "drained" and not conn.broken
        assert conn.sender.closed  # no thread sends any more
        await owner.closed.wait()
        assert conn.state.state is Lifecycle.CLOSED
        assert conn.going_away  # its calls, cut off, still go elsewhere


def test_a_thread_driven_connection_told_go_away_stays_so_once_closed() -> None:
    server = RemotingServer()
    install_standard_processors(server)
    with server, RemotingClient(ClientConfig(io="threads")) as client:
        assert client.invoke_sync(server.addr, req(ECHO), 5).code == ResponseCode.SUCCESS
        conn = threads_io(client).driver.channels.live(server.addr)
        assert conn is not None and not conn.going_away
        assert conn.go_away() and conn.going_away and not conn.state.takes_calls
        conn.close("drained")
        assert conn.closed and conn.close_reason == "drained"
        assert conn.going_away  # as the trio face's: a call waiting for room goes elsewhere


async def test_a_trio_connection_ended_by_shutdown_closes_with_no_reason() -> None:
    async with trio_connection() as (conn, owner, run_scope):
        await trio.testing.wait_all_tasks_blocked()  # it runs
        assert conn.state.state is Lifecycle.OPEN
        run_scope.cancel()  # as an endpoint's shutdown cancels its connections
        await owner.closed.wait()
        assert conn.state.state is Lifecycle.CLOSED  # type: ignore[comparison-overlap]  # (as above)
        assert conn.close_reason is None and not conn.broken and not conn.going_away


async def test_a_trio_connection_closed_by_a_codec_error_is_broken() -> None:
    async with trio_connection(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n") as (conn, owner, _):
        await owner.closed.wait()
        assert conn.state.state is Lifecycle.CLOSED and conn.broken
        assert conn.close_reason is not None and "protocol" in conn.close_reason
        conn.close("later")  # refused: the first close counts
        assert conn.broken and "protocol" in conn.close_reason
