"""``remoting queue`` says at start where it keeps messages (memory only, or a data directory
and what it recovered there), its bounds and its TLS, and at stop what it held; it logs a line
per connection at its default level (info, as ``--help`` says), and serves Prometheus metrics
with ``--metrics-port``."""

from __future__ import annotations

import re
import urllib.request
from pathlib import Path

import pytest

from remoting import RemotingClient
from remoting.queue import QueueClient

from .service_process import QueueProcess

pytestmark = pytest.mark.default_io  # clients here only feed the service its messages


def lines_before_serving(service: QueueProcess) -> list[str]:
    return service.proc.seen[:-1]


def test_a_memory_only_service_says_so_its_bounds_and_that_its_messages_go() -> None:
    service = QueueProcess("--memory-messages", "1_000", "--max-topics", "5",
                           "--msg-timeout", "2.5")
    with RemotingClient() as client:
        QueueClient(client).publish_many(service.addr, "t", [b"x"] * 3)
    stderr = service.stop()
    storage, limits, tls = lines_before_serving(service)
    assert storage.startswith("queue storage: in memory only: messages are lost")
    assert "per topic 1,000 messages and 256 MiB in memory, 1 GiB in all" in limits
    assert "; 5 topics;" in limits and "2.5 s to acknowledge" in limits
    assert tls == "queue tls: off (plaintext only)\n"
    assert service.proc.expect(r"queue stopped: .*").group(0) == (
        "queue stopped: 1 topic, 3 messages published since start; its messages are gone "
        "(in memory only)")
    # info by default: a line per connection, as the --log-level help says
    assert "connection.opened" in stderr and "connection.closed" in stderr


def test_a_service_with_a_data_dir_says_what_it_recovered(tmp_path: Path) -> None:
    data = tmp_path / "queue"
    first = QueueProcess("--data-dir", str(data), "--fsync", "always")
    with RemotingClient() as client:
        q = QueueClient(client)
        q.publish(first.addr, "a", b"x")
        q.publish(first.addr, "b", b"y")
    first.stop()
    assert lines_before_serving(first)[0] == (
        f"queue storage: {data} (0 topics recovered, 0 problems; fsync always)\n")
    assert first.proc.expect(r"queue stopped: .*").group(0) == (
        "queue stopped: 2 topics, 2 messages published since start; offsets saved, files "
        "closed")
    again = QueueProcess("--data-dir", str(data), log_level="warning")
    stderr = again.stop()
    assert lines_before_serving(again)[0] == (
        f"queue storage: {data} (2 topics recovered, 0 problems; fsync interval every 1 s)\n")
    assert "connection." not in stderr  # --log-level warning: no line per connection


def test_the_metrics_port_serves_the_queues_gauges_and_counters() -> None:
    service = QueueProcess("--metrics-port", "0", "--service-name", "orders-queue")
    try:
        url = service.proc.expect(r"metrics on (http://127\.0\.0\.1:\d+/metrics)").group(1)
        with RemotingClient() as client:
            q = QueueClient(client)
            q.publish_many(service.addr, "orders", [b"x"] * 4)
            with q.subscribe(service.addr, "orders", "billing", credits=1) as sub:
                assert sub.receive(10) is not None
                with urllib.request.urlopen(url, timeout=10) as reply:
                    text = reply.read().decode()
    finally:
        service.stop()
    published = re.search(r'^remoting_queue_published_total\{'
                          r'[^}]*messaging_destination_name="orders"[^}]*\} (\S+)$', text, re.M)
    assert published is not None and float(published.group(1)) == 4.0, text
    in_flight = re.search(r'^remoting_queue_in_flight[a-z_]*\{'
                          r'[^}]*messaging_consumer_group_name="billing"[^}]*\} (\S+)$',
                          text, re.M)
    assert in_flight is not None and float(in_flight.group(1)) == 1.0, text
    assert re.search(r'^target_info\{[^}]*service_name="orders-queue"', text, re.M), text
