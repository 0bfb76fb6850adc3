"""The queue service's OpenTelemetry metrics: observable instruments read from its counters
when the SDK collects (nothing per message), like the transport's (`_observability`).

Their callbacks run on the SDK's collecting thread and only read numbers the loop maintains
(and copies of its containers), as the transport's observable instruments do.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from collections.abc import Callable, Iterable

    from .._core._endpoint import Endpoint
    from ._broker import Broker
    from ._topic import Channel, Topic

__all__ = ["install_metrics"]


def install_metrics(broker: Broker, endpoint: Endpoint) -> bool:
    """Report ``broker`` to the meter provider of ``endpoint``'s config (or the global
    one) if telemetry is on and OpenTelemetry is installed; True if it was."""
    from .._observability._otel_setup import otel_available

    if not endpoint.config.telemetry or not otel_available():
        return False
    from opentelemetry import metrics
    from opentelemetry.metrics import CallbackOptions, Observation

    from .._version import __version__

    meter = metrics.get_meter("remoting.queue", __version__, endpoint.config.meter_provider)

    def per_channel(read: Callable[[Topic, Channel], int]
                    ) -> Callable[[CallbackOptions], Iterable[Observation]]:
        def observe(options: CallbackOptions) -> Iterable[Observation]:
            return [Observation(read(topic, channel), {"messaging.destination.name": topic.name,
                                                       "messaging.consumer.group.name": name})
                    for topic in list(broker.topics.values())
                    for name, channel in list(topic.channels.items())]
        return observe

    def per_topic(read: Callable[[Topic], int]
                  ) -> Callable[[CallbackOptions], Iterable[Observation]]:
        def observe(options: CallbackOptions) -> Iterable[Observation]:
            return [Observation(read(topic), {"messaging.destination.name": topic.name})
                    for topic in list(broker.topics.values())]
        return observe

    def lag(options: CallbackOptions) -> Iterable[Observation]:
        return [Observation(max(0, topic.end - offset),
                            {"messaging.destination.name": topic.name,
                             "messaging.consumer.group.name": group})
                for topic in list(broker.topics.values())
                for group, offset in list(topic.groups.items())]

    def whole(read: Callable[[], int]) -> Callable[[CallbackOptions], Iterable[Observation]]:
        def observe(options: CallbackOptions) -> Iterable[Observation]:
            return [Observation(read())]
        return observe

    gauges: list[tuple[str, str, str, Any]] = [
        ("remoting.queue.depth", "{message}", "Messages of a channel waiting for a delivery.",
         per_channel(lambda t, c: c.queue.depth(t.end, t.deferred))),
        ("remoting.queue.in_flight", "{message}",
         "Deliveries of a channel not yet acknowledged.",
         per_channel(lambda t, c: len(c.queue.in_flight))),
        ("remoting.queue.held", "{message}", "Messages a topic holds (earliest to end).",
         per_topic(lambda t: t.store.retained)),
        ("remoting.queue.group.lag", "{message}",
         "Messages between a group's offset and the end.", lag),
        ("remoting.queue.connections_at_bound", "{connection}",
         "Connections holding max_in_flight_per_connection deliveries (delivery paused).",
         whole(broker.connections_at_bound)),
    ]
    for name, unit, description, callback in gauges:
        meter.create_observable_gauge(name, [callback], unit, description)
    counters: list[tuple[str, str, Any]] = [
        ("remoting.queue.published", "Messages appended to a topic.",
         per_topic(lambda t: t.published)),
        ("remoting.queue.delivered", "Deliveries of a channel (redeliveries included).",
         per_channel(lambda t, c: c.queue.delivered)),
        ("remoting.queue.requeued", "Deliveries requeued by their subscriber.",
         per_channel(lambda t, c: c.queue.requeued)),
        ("remoting.queue.timed_out", "Deliveries not acknowledged in time.",
         per_channel(lambda t, c: c.queue.timed_out)),
        ("remoting.queue.dead_lettered", "Messages given up after max_attempts.",
         per_channel(lambda t, c: c.queue.dead_lettered)),
    ]
    for name, description, callback in counters:
        meter.create_observable_counter(name, [callback], "{message}", description)
    meter.create_observable_counter(
        "remoting.queue.times_at_bound", [whole(lambda: broker.times_at_bound)], "{event}",
        "Times a connection reached max_in_flight_per_connection deliveries in flight.")
    return True
