"""OpenTelemetry metrics of the event bus (imported only when OpenTelemetry is installed).

As for calls (`remoting._observability._otel_metrics`): one `BusInstruments` per meter
provider, shared by every bus that reports to it. The counters and gauges are read from the
buses' own counters when the SDK collects (nothing is done per message for them), summed by
``remoting.role`` (``server``: an `EventBus`; ``client``: a bus client); counters keep the
totals of buses that are gone, so they never go down. The one instrument recorded per message
is ``messaging.process.duration``: each handler run of this process's consumers.
"""

from __future__ import annotations

import threading
import weakref
from typing import TYPE_CHECKING, Any, Final, Protocol

from opentelemetry import metrics
from opentelemetry.metrics import CallbackOptions, Observation

from .._observability._otel_metrics import DURATION_BUCKETS
from .._version import __version__

if TYPE_CHECKING:
    from collections.abc import Callable, Iterable

    from opentelemetry.metrics import Histogram

    from ._statistics import BusCounters, BusStatistics

__all__ = ["SYSTEM", "BusInstruments", "ReportedBus", "bus_instruments"]

SYSTEM: Final = "remoting.bus"  # messaging.system

_lock = threading.Lock()
_by_provider: weakref.WeakKeyDictionary[Any, BusInstruments] = weakref.WeakKeyDictionary()
_global: BusInstruments | None = None

# messaging.operation.name -> the counter of a bus that counts what it sent of that kind
_SENT: Final[dict[str, Callable[[BusCounters], int]]] = {
    "send": lambda c: c.sent, "publish": lambda c: c.published,
    "request": lambda c: c.requests, "reply": lambda c: c.replies}
_FAILURES: Final[dict[str, Callable[[BusCounters], int]]] = {
    "NO_HANDLERS": lambda c: c.no_handlers, "TIMEOUT": lambda c: c.timeouts,
    "RECIPIENT_FAILURE": lambda c: c.recipient_failures}
_LOST: Final[dict[str, Callable[[BusCounters], int]]] = {
    "unrouted": lambda c: c.unrouted_publishes, "dropped": lambda c: c.dropped,
    "discarded": lambda c: c.discarded}


class ReportedBus(Protocol):
    """What the instruments read of a bus (a `BusNode`)."""

    @property
    def counters(self) -> BusCounters: ...

    def statistics(self) -> BusStatistics: ...


def bus_instruments(meter_provider: Any) -> BusInstruments:
    """Return the bus instruments of ``meter_provider`` (None: the global one), made once."""
    global _global
    with _lock:
        if meter_provider is None:
            if _global is None:
                _global = BusInstruments(None)
            return _global
        found = _by_provider.get(meter_provider)
        if found is None:
            found = _by_provider[meter_provider] = BusInstruments(meter_provider)
        return found


class BusInstruments:
    """The bus's instruments of one meter provider, and the buses they observe."""

    def __init__(self, meter_provider: Any) -> None:
        meter = metrics.get_meter("remoting.bus", __version__, meter_provider)
        self.process_duration: Histogram = meter.create_histogram(
            "messaging.process.duration", unit="s",
            description="Time a handler of this process's consumers spent on a message.",
            explicit_bucket_boundaries_advisory=DURATION_BUCKETS)
        self._buses: weakref.WeakKeyDictionary[ReportedBus, str] = weakref.WeakKeyDictionary()
        # every bus's counters, kept after it is gone (a few hundred bytes each)
        self._tallies: list[tuple[str, BusCounters]] = []
        meter.create_observable_counter(
            "messaging.client.sent.messages", [self._by(_SENT, "messaging.operation.name")],
            "{message}", "Messages a bus sent, by kind (reply: replies and failures).")
        meter.create_observable_counter(
            "messaging.client.consumed.messages", [self._total(lambda c: c.delivered)],
            "{message}", "Messages handed to this process's consumers.")
        meter.create_observable_counter(
            "remoting.bus.failures", [self._by(_FAILURES, "remoting.bus.failure")],
            "{message}", "Messages of a bus that failed, by ReplyFailure kind.")
        meter.create_observable_counter(
            "remoting.bus.messages.lost", [self._by(_LOST, "remoting.bus.reason")],
            "{message}", "Publishes that reached no consumer (unrouted), publishes a server "
            "dropped for a full remote consumer (dropped), messages a full consumer "
            "discarded (discarded).")
        meter.create_observable_counter(
            "remoting.bus.handler_failures", [self._total(lambda c: c.handler_failures)],
            "{message}", "Handlers (or inbound interceptors) that raised.")
        meter.create_observable_counter(
            "remoting.bus.replies.expired", [self._total(lambda c: c.expired_replies)],
            "{reply}", "Answers that came for a reply address no longer waited on.")
        gauges: list[tuple[str, str, str, Callable[[BusStatistics], int]]] = [
            ("remoting.bus.consumers", "{consumer}",
             "Consumers registered on a bus (of a bus server: its own and its clients').",
             lambda s: s.consumers + s.remote_consumers),
            ("remoting.bus.replies.pending", "{reply}", "Reply addresses waited on.",
             lambda s: s.pending_replies),
            ("remoting.bus.queued", "{message}",
             "Messages a bus server holds for remote consumers whose window is full.",
             lambda s: s.queued),
        ]
        for name, unit, description, read in gauges:
            meter.create_observable_gauge(name, [self._gauge(read)], unit, description)

    def observe(self, node: ReportedBus, role: str) -> None:
        """Report ``node`` (a bus, ``role`` ``server`` or ``client``) from now on."""
        with _lock:
            if node not in self._buses:
                self._buses[node] = role
                self._tallies.append((role, node.counters))

    def _total(self, read: Callable[[BusCounters], int]
               ) -> Callable[[CallbackOptions], Iterable[Observation]]:
        def observe(options: CallbackOptions) -> Iterable[Observation]:
            totals: dict[str, int] = {}
            for role, counters in list(self._tallies):
                totals[role] = totals.get(role, 0) + read(counters)
            return [Observation(v, {"messaging.system": SYSTEM, "remoting.role": role})
                    for role, v in totals.items()]
        return observe

    def _by(self, reads: dict[str, Callable[[BusCounters], int]], attribute: str
            ) -> Callable[[CallbackOptions], Iterable[Observation]]:
        def observe(options: CallbackOptions) -> Iterable[Observation]:
            totals: dict[tuple[str, str], int] = {}
            for role, counters in list(self._tallies):
                for value, read in reads.items():
                    totals[role, value] = totals.get((role, value), 0) + read(counters)
            return [Observation(v, {"messaging.system": SYSTEM, "remoting.role": role,
                                    attribute: value})
                    for (role, value), v in totals.items()]
        return observe

    def _gauge(self, read: Callable[[BusStatistics], int]
               ) -> Callable[[CallbackOptions], Iterable[Observation]]:
        def observe(options: CallbackOptions) -> Iterable[Observation]:
            totals: dict[str, int] = {}
            for node, role in list(self._buses.items()):
                totals[role] = totals.get(role, 0) + read(node.statistics())
            return [Observation(v, {"messaging.system": SYSTEM, "remoting.role": role})
                    for role, v in totals.items()]
        return observe
