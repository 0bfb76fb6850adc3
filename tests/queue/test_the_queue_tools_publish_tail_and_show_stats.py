"""``remoting queue pub``, ``tail`` and ``stats`` against a real ``remoting queue`` process:
pub publishes an argument or each line of stdin, tail prints a topic's messages (from an
offset, or as a channel's consumer that acknowledges them), stats shows topics, channels and
groups with depth, in flight, lag and rates; ``remoting stats`` shows the topics too.

The command line makes its one client on the default io on purpose (``default_io``): both
drivers under the queue client are covered by the queue's own tests."""

from __future__ import annotations

import io
import json
import re
import signal
import socket
import sys
import time
from collections.abc import Callable, Iterator

import pytest

from codec import RemotingCommand
from remoting import STATS_REQUEST_CODE, RemotingClient
from remoting.cli import main
from remoting.cli._queue_tools import queue_table
from remoting.queue import BlockingQueueClient, ChannelStatistics, QueueClient
from remoting.queue._wire import QueueCode

from ..processes import Proc
from .service_process import QueueProcess

pytestmark = pytest.mark.default_io


@pytest.fixture(scope="module")
def service() -> Iterator[QueueProcess]:
    service = QueueProcess()
    yield service
    service.stop()


@pytest.fixture
def q() -> Iterator[BlockingQueueClient]:
    with RemotingClient() as client:
        yield QueueClient(client)


def table_rows(out: str) -> list[list[str]]:
    """The rows of a stats table after its header line, cells split on 2+ spaces."""
    lines = out.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("TOPIC"))
    return [re.split(r"\s{2,}", line.strip()) for line in lines[start + 1:]
            if not line.startswith("(")]


def offsets_requests(addr: str) -> int:
    """The offsets requests the service has received (its stats processor's count)."""
    with RemotingClient() as client:
        reply = client.invoke_sync(addr, RemotingCommand.create_request(STATS_REQUEST_CODE), 10)
    received = json.loads(reply.body or b"{}")["requests_received"]
    return int(received.get(str(int(QueueCode.OFFSETS)), 0))


def wait_until(done: Callable[[], bool], tail: Proc) -> None:
    """A bounded wait for the service to show what the tail process did."""
    deadline = time.monotonic() + 60
    while not done():
        assert time.monotonic() < deadline and tail.popen.poll() is None
        time.sleep(0.05)


def test_pub_publishes_its_argument_with_headers(service: QueueProcess, q: BlockingQueueClient,
                                                 capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["queue", "pub", service.addr, "pub-arg", "héllo wörld",
                 "--header", "kind=greeting"]) == 0
    assert capsys.readouterr().out == "published pub-arg@0\n"
    [message] = q.pull(service.addr, "pub-arg", offset=0, max_wait=0)
    assert message.body == "héllo wörld".encode()
    assert message.headers == {"kind": "greeting"}


def test_pub_publishes_each_line_of_stdin(service: QueueProcess, q: BlockingQueueClient,
                                          monkeypatch: pytest.MonkeyPatch,
                                          capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(b"one\ntwo\r\n\nfour")))
    assert main(["queue", "pub", service.addr, "pub-lines"]) == 0
    assert capsys.readouterr().out == "published 4 messages to pub-lines (offsets 0 to 3)\n"
    bodies = [m.body for m in q.pull(service.addr, "pub-lines", offset=0, max_wait=0)]
    assert bodies == [b"one", b"two", b"", b"four"]


def test_pub_with_a_key_twice_appends_once(service: QueueProcess, q: BlockingQueueClient,
                                           capsys: pytest.CaptureFixture[str]) -> None:
    for _ in range(2):
        assert main(["queue", "pub", service.addr, "pub-key", "x", "--key", "order-1"]) == 0
    assert capsys.readouterr().out == "published pub-key@0\n" * 2
    assert q.offsets(service.addr, "pub-key").end == 1


def test_pub_refused_or_unreachable_says_why_in_one_line(
        service: QueueProcess, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["queue", "pub", service.addr, "bad topic!", "x"]) == 1
    err = capsys.readouterr().err
    assert err.startswith("remoting queue pub: ") and err.count("\n") == 1
    with socket.socket() as closed:  # bound, never listening: the connection is refused
        closed.bind(("127.0.0.1", 0))
        port = closed.getsockname()[1]
        assert main(["queue", "pub", f"127.0.0.1:{port}", "t", "x", "--timeout", "2"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("remoting queue pub: ") and "Traceback" not in err


def test_tail_from_earliest_prints_each_message_once(service: QueueProcess, q: BlockingQueueClient,
                                                    capsys: pytest.CaptureFixture[str]) -> None:
    q.publish_many(service.addr, "tail-early",
                   [b"a", (b"b", {"h": "1"}), b"\x00\xff", "é\n".encode()])
    assert main(["queue", "tail", service.addr, "tail-early", "--from", "earliest",
                 "-n", "4"]) == 0
    assert capsys.readouterr().out.splitlines() == [  # one line each, whatever the body
        "tail-early@0 a", 'tail-early@1 {"h": "1"} b', "tail-early@2 \\x00\\xff",
        "tail-early@3 é\\n"]
    assert main(["queue", "tail", service.addr, "tail-early", "--from", "1", "-n", "2",
                 "--json"]) == 0
    shown = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert [(m["offset"], m["headers"], m.get("body"), m.get("body_hex")) for m in shown] == [
        (1, {"h": "1"}, "b", None), (2, {}, None, "00ff")]
    # a tail from offsets reads without a channel or a group: it leaves nothing behind
    stats = q.statistics(service.addr, "tail-early").topics["tail-early"]
    assert (stats.channels, stats.groups) == ({}, {})


def test_tail_prints_what_is_published_after_it_starts(service: QueueProcess,
                                                       q: BlockingQueueClient) -> None:
    q.publish(service.addr, "tail-new", b"before")
    tail = Proc("queue", "tail", service.addr, "tail-new", "-n", "2")
    try:
        wait_until(lambda: q.statistics(service.addr).held_pulls > 0, tail)
        q.publish_many(service.addr, "tail-new", [b"after 1", b"after 2"])
        assert [m.group(0) for m in tail.expect_all(r"tail-new@\d+ .*", 2)] == [
            "tail-new@1 after 1", "tail-new@2 after 2"]
        assert tail.popen.wait(30) == 0
    finally:
        tail.stop()
    assert "Traceback" not in tail.stderr


def test_tail_waits_for_a_topic_and_reads_it_from_its_start(service: QueueProcess,
                                                             q: BlockingQueueClient) -> None:
    asked = offsets_requests(service.addr)
    tail = Proc("queue", "tail", service.addr, "tail-later", "-n", "2")
    try:
        wait_until(lambda: offsets_requests(service.addr) > asked, tail)  # found none
        q.publish_many(service.addr, "tail-later", [b"first", b"second"])
        assert [m.group(0) for m in tail.expect_all(r"tail-later@\d+ .*", 2)] == [
            "tail-later@0 first", "tail-later@1 second"]
        assert tail.popen.wait(30) == 0
    finally:
        tail.stop()
    assert "waiting for topic 'tail-later' to exist" in tail.stderr


def test_ctrl_c_ends_a_tail_quietly(service: QueueProcess, q: BlockingQueueClient) -> None:
    q.create_topic(service.addr, "tail-int")
    tail = Proc("queue", "tail", service.addr, "tail-int")
    try:
        wait_until(lambda: q.statistics(service.addr).held_pulls > 0, tail)
        tail.popen.send_signal(signal.SIGINT)
        assert tail.popen.wait(30) == 0
    finally:
        tail.stop()
    assert "Traceback" not in tail.stderr


def test_tail_with_a_channel_acknowledges_what_it_prints(
        service: QueueProcess, q: BlockingQueueClient, capsys: pytest.CaptureFixture[str]) -> None:
    q.publish_many(service.addr, "tail-chan", [b"1", b"2", b"3"])
    assert main(["queue", "tail", service.addr, "tail-chan", "--channel", "c", "-n", "2"]) == 0
    assert capsys.readouterr().out.splitlines() == ["tail-chan@0 1", "tail-chan@1 2"]
    def channel() -> ChannelStatistics:
        return q.statistics(service.addr, "tail-chan").topics["tail-chan"].channels["c"]

    assert channel().finished == 2  # its acknowledgements were answered before it ended
    # the third delivery goes back once the service has seen the subscription end
    deadline = time.monotonic() + 60
    while channel().in_flight:
        assert time.monotonic() < deadline
        time.sleep(0.05)
    assert (channel().finished, channel().depth) == (2, 1)


def test_stats_shows_depth_in_flight_consumers_and_lag(
        service: QueueProcess, q: BlockingQueueClient, capsys: pytest.CaptureFixture[str]) -> None:
    q.publish_many(service.addr, "a-stats", [b"m"] * 5)
    q.publish(service.addr, "b-stats", b"m")  # one more topic, whichever tests ran before
    with q.subscribe(service.addr, "a-stats", "c", credits=2) as sub:
        assert all(sub.receive(10) is not None for _ in range(2))  # left unacknowledged
        # committed once channel c needs offset 0: alone, the group's 2 would let the
        # service's housekeeping drop offsets 0 and 1 (it did, under load)
        q.commit(service.addr, "a-stats", "g", 2)
        assert main(["queue", "stats", service.addr, "a-stats", "--interval", "0"]) == 0
        out = capsys.readouterr().out
        assert main(["queue", "stats", service.addr, "--interval", "0", "--topics", "1"]) == 0
        paged = capsys.readouterr().out
        assert main(["queue", "stats", service.addr, "a-stats", "--json"]) == 0
        as_json = json.loads(capsys.readouterr().out)
        assert main(["stats", service.addr]) == 0  # the stats processor's view
        general = capsys.readouterr().out
    assert out.startswith(f"queue at {service.addr}: ")
    assert table_rows(out) == [["a-stats", "(topic: 0 to 5)", "5"],
                               ["a-stats", "channel c", "3", "2", "1"],
                               ["a-stats", "group g", "3"]]
    topics = q.statistics(service.addr).topic_count
    assert paged.splitlines()[-1] == f"(1 of {topics} topics shown)"
    assert as_json["topics"]["a-stats"]["channels"]["c"]["in_flight"] == 2
    assert as_json["topics"]["a-stats"]["groups"]["g"] == {"offset": 2, "lag": 3}
    # the first topics in name order, "a-stats" among them, with their channels and groups
    assert f"queue service: {topics} topics" in general
    assert re.search(r"^a-stats +channel c +3 +2 +1$", general, re.M)
    assert re.search(r"^a-stats +group g +3$", general, re.M)


def test_stats_rates_are_the_difference_over_the_interval(service: QueueProcess,
                                                          q: BlockingQueueClient) -> None:
    q.publish(service.addr, "stats-rate", b"x")
    q.commit(service.addr, "stats-rate", "g", 0)
    before = q.statistics(service.addr, "stats-rate")
    q.publish_many(service.addr, "stats-rate", [b"x"] * 8)
    q.commit(service.addr, "stats-rate", "g", 4)
    now = q.statistics(service.addr, "stats-rate")
    rows = table_rows("\n".join(queue_table(now, before, 2.0, "t")))
    assert rows == [["stats-rate", "(topic: 0 to 9)", "9", "4.0"],
                    ["stats-rate", "group g", "5", "2.0"]]


def test_stats_of_a_topic_that_does_not_exist_fails(service: QueueProcess,
                                                    capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["queue", "stats", service.addr, "no-such-topic", "--interval", "0"]) == 1
    assert "no-such-topic" in capsys.readouterr().err
