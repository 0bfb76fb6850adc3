"""The OpenTelemetry instruments: two call-duration histograms recorded per call, and gauges
and counters read from the endpoints' own counters when the SDK collects (no cost per call).

One `Instruments` per meter provider, shared by every endpoint that reports to it: the
observable ones sum over the endpoints of each role (gauges over the running ones; counters
over all that ever reported, so that they never go down). Their callbacks run on the SDK's
collecting thread and only read numbers (and copies of containers) the loop maintains.
"""

from __future__ import annotations

import threading
import weakref
from typing import TYPE_CHECKING, Any, Final, Generic, TypeVar

from opentelemetry import metrics
from opentelemetry.metrics import CallbackOptions, Observation

from .._version import __version__

if TYPE_CHECKING:
    from collections.abc import Callable, Iterable

    from .._core._endpoint import Endpoint
    from ._statistics import Counters

__all__ = ["DURATION_BUCKETS", "Instruments", "PerProvider", "instruments_for"]

# seconds: 50 µs (a local call) to 10 s (a long timeout); OpenTelemetry's default buckets start
# at 5 ms, where every call of a healthy service would land in the first one
DURATION_BUCKETS: Final = (0.00005, 0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025,
                           0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)

T = TypeVar("T")


class PerProvider(Generic[T]):
    """Instruments made once per meter provider (None: the global one) by ``make``, for
    instruments other than the transport's; a provider that is garbage-collected takes
    its instruments with it."""

    def __init__(self, make: Callable[[Any], T]) -> None:
        self._make = make
        self._lock = threading.Lock()
        self._by_provider: weakref.WeakKeyDictionary[Any, T] = weakref.WeakKeyDictionary()
        self._global: T | None = None

    def get(self, meter_provider: Any) -> T:
        """Return the instruments of ``meter_provider``, made on first use."""
        with self._lock:
            if meter_provider is None:
                if self._global is None:
                    self._global = self._make(None)
                return self._global
            found = self._by_provider.get(meter_provider)
            if found is None:
                found = self._by_provider[meter_provider] = self._make(meter_provider)
            return found


_lock = threading.Lock()
_by_provider: weakref.WeakKeyDictionary[Any, Instruments] = weakref.WeakKeyDictionary()
_global: Instruments | None = None


def instruments_for(meter_provider: Any) -> Instruments:
    """Return the instruments of ``meter_provider`` (None: the global one), made once."""
    global _global
    with _lock:
        if meter_provider is None:
            if _global is None:
                _global = Instruments(None)
            return _global
        found = _by_provider.get(meter_provider)
        if found is None:
            found = _by_provider[meter_provider] = Instruments(meter_provider)
        return found


class Instruments:
    """The instruments of one meter provider, and the endpoints they observe."""

    def __init__(self, meter_provider: Any) -> None:
        meter = metrics.get_meter("remoting", __version__, meter_provider)
        self.client_duration = meter.create_histogram(
            "rpc.client.call.duration", unit="s",
            description="Time from the call to its outcome, as the caller saw it.",
            explicit_bucket_boundaries_advisory=DURATION_BUCKETS)
        self.server_duration = meter.create_histogram(
            "rpc.server.call.duration", unit="s",
            description="Time a request spent being processed: interceptors, hooks, processor.",
            explicit_bucket_boundaries_advisory=DURATION_BUCKETS)
        self._endpoints: weakref.WeakSet[Endpoint] = weakref.WeakSet()
        # every endpoint's counters, kept after it is gone (a few hundred bytes each)
        self._tallies: list[tuple[str, Counters, weakref.ref[Endpoint]]] = []
        gauges: list[tuple[str, str, str, Callable[[Endpoint], int]]] = [
            ("remoting.calls.in_flight", "{call}",
             "Calls sent and waiting for their response.", lambda e: e.in_flight()),
            ("remoting.requests.processing", "{request}",
             "Requests handed to processors and not finished.",
             lambda e: e.dispatcher.processing),
            ("remoting.connections", "{connection}", "Open connections.",
             lambda e: len(e.live_connections())),
            ("remoting.queued_bytes", "By", "Bytes waiting to be sent.",
             lambda e: sum(c.queued_bytes for c in e.live_connections())),
        ]
        for name, unit, description, read_endpoint in gauges:
            meter.create_observable_gauge(name, [self._sum(read_endpoint)], unit, description)
        counters: list[tuple[str, str, str, Callable[[Counters], int]]] = [
            ("remoting.go_away.received", "{reply}",
             "GO_AWAY replies received from draining servers.", lambda c: c.go_away),
            ("remoting.responses.orphaned", "{response}",
             "Responses that matched no pending call.", lambda c: c.orphans),
            ("remoting.timeouts", "{call}", "Calls that expired without a response.",
             lambda c: c.timeouts),
        ]
        for name, unit, description, read in counters:
            meter.create_observable_counter(name, [self._total(read)], unit, description)
        meter.create_observable_counter(
            "remoting.io", [self._io], "By",
            "Bytes received from and handed to sockets (network.io.direction).")
        meter.create_observable_gauge(
            "remoting.processor.queue_depth", [self._queue_depths], "{request}",
            "Requests queued or running on a sync processor's pool, by request code.")

    def observe(self, endpoint: Endpoint) -> None:
        """Report ``endpoint`` in the observable instruments."""
        with _lock:
            if endpoint not in self._endpoints:
                self._endpoints.add(endpoint)
                self._tallies.append((endpoint.role, endpoint.counters, weakref.ref(endpoint)))

    def _total(self, read: Callable[[Counters], int]
               ) -> Callable[[CallbackOptions], Iterable[Observation]]:
        def observe(options: CallbackOptions) -> Iterable[Observation]:
            totals: dict[str, int] = {}
            for role, counters, _ in list(self._tallies):
                totals[role] = totals.get(role, 0) + read(counters)
            return [Observation(value, {"remoting.role": role}) for role, value in totals.items()]
        return observe

    def _io(self, options: CallbackOptions) -> Iterable[Observation]:
        totals: dict[tuple[str, str], int] = {}
        for role, counters, ref in list(self._tallies):
            received, sent = counters.bytes_read, counters.bytes_written
            endpoint = ref()
            if endpoint is not None:  # what threads moved on live connections (folded at close)
                received += endpoint.unfolded_bytes_read()
                sent += endpoint.unfolded_bytes_written()
            for direction, value in (("receive", received), ("transmit", sent)):
                totals[role, direction] = totals.get((role, direction), 0) + value
        return [Observation(value, {"remoting.role": role, "network.io.direction": direction})
                for (role, direction), value in totals.items()]

    def _sum(self, read: Callable[[Endpoint], int]
             ) -> Callable[[CallbackOptions], Iterable[Observation]]:
        def observe(options: CallbackOptions) -> Iterable[Observation]:
            totals: dict[str, int] = {}
            for endpoint in list(self._endpoints):
                if not endpoint.closed:
                    totals[endpoint.role] = totals.get(endpoint.role, 0) + read(endpoint)
            return [Observation(value, {"remoting.role": role}) for role, value in totals.items()]
        return observe

    def _queue_depths(self, options: CallbackOptions) -> Iterable[Observation]:
        totals: dict[tuple[str, int], int] = {}
        for endpoint in list(self._endpoints):
            if endpoint.closed:
                continue
            for code, depth in endpoint.dispatcher.queue_depths().items():
                key = (endpoint.role, code)
                totals[key] = totals.get(key, 0) + depth
        return [Observation(depth, {"remoting.role": role, "rpc.method": str(code)})
                for (role, code), depth in totals.items()]
