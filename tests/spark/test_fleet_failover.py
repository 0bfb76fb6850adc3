"""How row calls spread over a fleet of servers: cool-downs, busy servers, idempotent resends.

These drive `call_bodies` (what every Spark UDF runs per Arrow batch) with a real blocking
client against real servers on 127.0.0.1; no SparkSession is needed. A *stalled* server is a
listening socket that never accepts: connections complete in the kernel and requests are
never answered, as with a hung (SIGSTOPped) server process.
"""

from __future__ import annotations

import os
import socket
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import TypeVar

import pytest

from codec import RemotingCommand, ResponseCode
from processors import RequestContext, RequestProcessor
from remoting import RemotingClient, RemotingServer, ServerConfig
from remoting.spark._calls import CallReport, CallSpec, call_bodies
from remoting.spark._fleet import Cooldowns
from tests.logs import capture_logs

from .service import UPPER, ok

ROWS = 300
P = TypeVar("P", bound="Upper")


class Upper(RequestProcessor):
    """UPPER, counting the rows it served."""

    def __init__(self) -> None:
        self.served = 0

    def process_request(self, ctx: RequestContext, request: RemotingCommand) -> RemotingCommand:
        self.served += 1
        return ok((request.body or b"").upper())


class Busy(Upper):
    """Refuses everything with SYSTEM_BUSY ``[REJECTREQUEST]`` (the server's flow control)."""

    def __init__(self) -> None:
        super().__init__()
        self.refused = 0

    def reject_request(self) -> bool:
        self.refused += 1
        return True


def serving(processor: P) -> Iterator[tuple[RemotingServer, P]]:
    server = RemotingServer(ServerConfig(listen_port=0))
    server.register_processor(UPPER, processor)
    server.start()
    try:
        yield server, processor
    finally:
        server.shutdown()


@pytest.fixture
def good() -> Iterator[tuple[RemotingServer, Upper]]:
    yield from serving(Upper())


@pytest.fixture
def busy() -> Iterator[tuple[RemotingServer, Busy]]:
    yield from serving(Busy())


@pytest.fixture
def stalled() -> Iterator[str]:
    listener = socket.create_server(("127.0.0.1", 0), backlog=64)
    try:
        yield f"127.0.0.1:{listener.getsockname()[1]}"
    finally:
        listener.close()


@pytest.fixture
def dead() -> str:
    with socket.create_server(("127.0.0.1", 0)) as s:  # closed again: nothing listens there
        return f"127.0.0.1:{s.getsockname()[1]}"


@pytest.fixture
def client() -> Iterator[RemotingClient]:
    with RemotingClient() as c:
        yield c


def bodies(n: int = ROWS) -> list[bytes | None]:
    return [f"row-{i}".encode() for i in range(n)]


def first_goes_to(index: int, n_addresses: int) -> int:
    """The ``batch_no`` that makes a batch start at ``addresses[index]`` in this process."""
    return (index - os.getpid()) % n_addresses


def spec(*addresses: str, **kw: object) -> CallSpec:
    values: dict[str, object] = {"code": UPPER, "timeout": 3.0, "max_in_flight": 64}
    values.update(kw)
    return CallSpec(addresses=addresses, **values)  # type: ignore[arg-type]


def assert_all_upper(outcomes: Sequence[object]) -> None:
    assert [o.body if isinstance(o, RemotingCommand) else o for o in outcomes] == [
        f"ROW-{i}".encode() for i in range(len(outcomes))]


# ---------------------------------------------------------------- the registry's rules


def test_a_failed_address_is_left_out_until_its_cool_down_ends() -> None:
    c = Cooldowns()
    addrs = ["a:1", "b:2", "c:3"]
    assert c.order(addrs, 1, now=100.0) == ["b:2", "c:3", "a:1"]

    c.failed("b:2", now=100.0, seconds=10.0, reason="RemotingConnectError")

    assert c.order(addrs, 1, now=105.0) == ["c:3", "a:1"]
    assert c.cooling(now=105.0) == ["b:2"]
    assert c.order(addrs, 1, now=110.0) == ["b:2", "c:3", "a:1"]  # tried again after it
    assert c.cooling(now=110.0) == []


def test_when_every_address_cools_down_all_are_tried_anyway() -> None:
    c = Cooldowns()
    for addr in ("a:1", "b:2"):
        c.failed(addr, now=0.0, seconds=10.0, reason="RemotingTimeoutError")
    assert c.order(["a:1", "b:2"], 0, now=1.0) == ["a:1", "b:2"]


def test_an_answer_ends_the_cool_down_and_each_is_logged_once() -> None:
    c = Cooldowns()
    with capture_logs("remoting.spark") as events:
        c.failed("a:1", now=0.0, seconds=10.0, reason="RemotingConnectError")
        c.failed("a:1", now=1.0, seconds=10.0, reason="RemotingConnectError")  # still cooling
        c.answered("a:1")
        c.answered("a:1")  # already healthy: nothing to say
    assert c.order(["a:1", "b:2"], 0, now=2.0) == ["a:1", "b:2"]
    assert [(e["event"], e["addr"]) for e in events] == [
        ("server.cooling_down", "a:1"), ("server.recovered", "a:1")]
    assert events[0]["seconds"] == 10.0 and events[0]["log_level"] == "warning"


def test_cool_down_must_not_be_negative() -> None:
    with pytest.raises(ValueError, match="cooldown"):
        spec("127.0.0.1:1", cooldown=-1)


@pytest.mark.parametrize(("addr", "words"), [
    ("127.0.0.1", "host:port"), ("127.0.0.1:70000", "1-65535"), ("127.0.0.1:0", "1-65535")])
def test_a_bad_address_is_refused_when_the_udf_is_made(addr: str, words: str) -> None:
    with pytest.raises(ValueError, match=words):
        spec("127.0.0.1:1", addr)


# ---------------------------------------------------------------- against real servers


def test_a_refusing_server_is_skipped_by_later_batches(
        client: RemotingClient, good: tuple[RemotingServer, Upper], dead: str) -> None:
    server, processor = good
    cooldowns = Cooldowns()
    s = spec(dead, server.addr)
    with capture_logs("remoting.spark") as events:
        assert_all_upper(call_bodies(client, s, bodies(), first_goes_to(0, 2), cooldowns=cooldowns))
    assert cooldowns.cooling(time.monotonic()) == [dead]
    assert [(e["event"], e["addr"]) for e in events] == [("server.cooling_down", dead)]

    # The server comes back on that port, but this process does not call it until the
    # cool-down ends: the next batch, which would start there, goes to the other one.
    revived = RemotingServer(ServerConfig(listen_port=int(dead.rsplit(":", 1)[1])))
    revived_processor = Upper()
    revived.register_processor(UPPER, revived_processor)
    revived.start()
    try:
        assert_all_upper(call_bodies(client, s, bodies(), first_goes_to(0, 2), cooldowns=cooldowns))
    finally:
        revived.shutdown()
    assert revived_processor.served == 0
    assert processor.served == 2 * ROWS


@pytest.fixture
def other() -> Iterator[tuple[RemotingServer, Upper]]:
    yield from serving(Upper())


def test_successive_batches_of_a_process_start_at_successive_addresses(
        client: RemotingClient, good: tuple[RemotingServer, Upper],
        other: tuple[RemotingServer, Upper]) -> None:
    # A task's batches were numbered from 0, so a worker whose tasks were one batch each
    # sent every one of them to the same server.
    (a, served_a), (b, served_b) = good, other
    s = spec(a.addr, b.addr)
    went_to = []
    for _ in range(4):
        before = (served_a.served, served_b.served)
        assert_all_upper(call_bodies(client, s, bodies(10), cooldowns=Cooldowns()))
        went_to.append("a" if served_a.served > before[0] else "b")
        assert served_a.served + served_b.served == sum(before) + 10  # one address per batch

    assert went_to in (["a", "b", "a", "b"], ["b", "a", "b", "a"])


def test_a_batch_report_names_the_addresses_of_its_udf_cooling_down(
        client: RemotingClient, good: tuple[RemotingServer, Upper], dead: str) -> None:
    server, _ = good
    cooldowns = Cooldowns()
    cooldowns.failed("10.0.0.9:1", time.monotonic(), 60.0, "another UDF's server")
    report = CallReport()

    call_bodies(client, spec(dead, server.addr), bodies(), first_goes_to(0, 2), report,
                cooldowns=cooldowns)

    assert report.cooling == (dead,)  # what on_batch's BatchStats.cooling carries
    report = CallReport()
    call_bodies(client, spec(server.addr), bodies(), 0, report, cooldowns=cooldowns)
    assert report.cooling == ()


def test_a_stalled_server_costs_one_timeout_then_is_skipped(
        client: RemotingClient, good: tuple[RemotingServer, Upper], stalled: str) -> None:
    server, processor = good
    cooldowns = Cooldowns()
    s = spec(stalled, server.addr, timeout=0.5)

    first = call_bodies(client, s, bodies(), first_goes_to(0, 2), cooldowns=cooldowns)
    second = call_bodies(client, s, bodies(), first_goes_to(0, 2), cooldowns=cooldowns)

    # At most once by default: the first window (64 rows) went to the stalled server and
    # failed, and is not resent; the rows never sent there went to the other server.
    assert {type(o).__name__ for o in first[:64]} == {"RemotingTimeoutError"}
    assert [getattr(o, "body", o) for o in first[64:]] == [
        f"ROW-{i}".encode() for i in range(64, ROWS)]
    assert_all_upper(second)  # did not try the stalled server again (it would time out)
    assert processor.served == 2 * ROWS - 64


def test_idempotent_rows_lost_to_a_stalled_server_go_to_the_next(
        client: RemotingClient, good: tuple[RemotingServer, Upper], stalled: str) -> None:
    server, processor = good
    s = spec(stalled, server.addr, timeout=0.5, idempotent=True)

    outcomes = call_bodies(client, s, bodies(), first_goes_to(0, 2), cooldowns=Cooldowns())

    assert_all_upper(outcomes)
    assert processor.served == ROWS


def test_a_busy_server_passes_the_rest_of_the_batch_on(
        client: RemotingClient, good: tuple[RemotingServer, Upper],
        busy: tuple[RemotingServer, Busy]) -> None:
    server, processor = good
    busy_server, busy_processor = busy
    cooldowns = Cooldowns()
    s = spec(busy_server.addr, server.addr, max_in_flight=16)

    outcomes = call_bodies(client, s, bodies(), first_goes_to(0, 2), cooldowns=cooldowns)

    assert_all_upper(outcomes)
    assert processor.served == ROWS
    assert busy_processor.refused == 16  # one window, then the batch moved on
    assert cooldowns.cooling(time.monotonic()) == []  # busy is alive: no cool-down


def test_when_every_server_is_busy_the_batch_backs_off_within_one_timeout(
        client: RemotingClient, busy: tuple[RemotingServer, Busy]) -> None:
    busy_server, busy_processor = busy
    s = spec(busy_server.addr, timeout=0.6, max_in_flight=8)

    started = time.monotonic()
    outcomes = call_bodies(client, s, bodies(8), cooldowns=Cooldowns())
    seconds = time.monotonic() - started

    assert {o.code for o in outcomes if isinstance(o, RemotingCommand)} == {
        ResponseCode.SYSTEM_BUSY}
    assert len(outcomes) == 8
    # rounds at 0, 50 ms, 150 ms, 350 ms: no more fit in the timeout (a loaded machine may
    # fit fewer), and the next would come at 750 ms
    assert 8 <= busy_processor.refused <= 4 * 8
    assert seconds > 0.3  # wall-clock: a lower bound (it backed off, then gave up)


def test_rows_a_draining_server_answered_go_away_move_to_the_next(
        client: RemotingClient, good: tuple[RemotingServer, Upper]) -> None:
    """GO_AWAY means not processed: a draining server (it still accepts connections) costs
    no row. Before, GO_AWAY twice (the client's one resend reached the same server) failed a
    whole window of rows with -1004 though nobody processed them."""
    server, processor = good
    with contextmanager(serving)(Upper()) as (draining, drained):
        draining.drain()
        cooldowns = Cooldowns()
        s = spec(draining.addr, server.addr, max_in_flight=256)

        outcomes = call_bodies(client, s, bodies(2000), first_goes_to(0, 2),
                               cooldowns=cooldowns)

        assert_all_upper(outcomes)
        assert drained.served == 0
        assert processor.served == 2000  # every row, 256 of them moved off the draining one
        assert draining.statistics().requests_received[UPPER] >= 256
        assert cooldowns.cooling(time.monotonic()) == [draining.addr]
