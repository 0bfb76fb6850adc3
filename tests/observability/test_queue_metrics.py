"""The queue service's OpenTelemetry metrics, collected by the real SDK's in-memory reader:
per topic and channel, read from the service when the SDK collects."""

from __future__ import annotations

from remoting import RemotingClient, RemotingServer
from remoting.queue import QueueClient, QueueService

from .conftest import Telemetry


def by_attributes(points: list[object]) -> dict[tuple[str, ...], int]:
    return {tuple(sorted(p.attributes.values())): p.value for p in points}  # type: ignore[attr-defined]


def test_queue_metrics_per_topic_channel_and_group(otel: Telemetry) -> None:
    service = QueueService()
    with RemotingServer(otel.server_config()) as server:
        service.attach(server)
        with RemotingClient() as client:
            q = QueueClient(client)
            q.publish_many(server.addr, "orders", [b"a", b"b", b"c", b"d"])
            q.commit(server.addr, "orders", "reports", 1)
            with q.subscribe(server.addr, "orders", "billing", credits=3) as sub:
                assert all(sub.receive(5) is not None for _ in range(3))  # its credits
                metrics = {name: by_attributes(otel.points(f"remoting.queue.{name}"))
                           for name in ("depth", "in_flight", "published", "delivered",
                                        "group.lag", "held", "requeued")}
    assert metrics["depth"] == {("billing", "orders"): 1}  # 4 published, 3 delivered
    assert metrics["in_flight"] == {("billing", "orders"): 3}
    assert metrics["published"] == {("orders",): 4}
    assert metrics["delivered"] == {("billing", "orders"): 3}
    assert metrics["group.lag"] == {("orders", "reports"): 3}
    assert metrics["held"] == {("orders",): 4}
    assert metrics["requeued"] == {("billing", "orders"): 0}


def test_connections_at_the_in_flight_bound_are_a_gauge_and_a_count(otel: Telemetry) -> None:
    service = QueueService(max_in_flight_per_connection=2)
    with RemotingServer(otel.server_config()) as server:
        service.attach(server)
        with RemotingClient() as client:
            q = QueueClient(client)
            q.publish_many(server.addr, "orders", [b"a", b"b", b"c"])
            # credits 4: acknowledgements go in groups of 2, so both end at once
            with q.subscribe(server.addr, "orders", "billing", credits=4) as sub:
                held = [sub.receive(5) for _ in range(2)]  # the bound, not its credits
                at_bound = otel.points("remoting.queue.connections_at_bound")
                times = otel.points("remoting.queue.times_at_bound")
                for msg in held:
                    assert msg is not None
                    msg.ack()
                sub.flush()
                assert sub.receive(5) is not None  # the third, once the two ended
                q.statistics(server.addr)  # answered after the ACK: applied by then
                after = otel.points("remoting.queue.connections_at_bound")
    assert [p.value for p in at_bound] == [1]
    assert [p.value for p in times] == [1]
    assert [p.value for p in after] == [0]
