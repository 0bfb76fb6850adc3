"""``remoting serve --metrics-port / --otlp-endpoint``: the OpenTelemetry SDK for the server the
command runs (an application: it chooses the SDK and the exporters, as the library does not).

Prometheus: a scrape endpoint on ``bind:port`` (OpenTelemetry's Prometheus reader behind
prometheus_client's HTTP server). OTLP/HTTP: traces and metrics pushed to a collector.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Final
from urllib.parse import urlsplit

if TYPE_CHECKING:
    from collections.abc import Callable

__all__ = ["Exporters", "TelemetryOptions", "TelemetrySetupError", "start_exporters"]

INSTALL_HINT: Final = "pip install 'trio-remoting[otel-export]'"


@dataclass(frozen=True)
class TelemetryOptions:
    """What ``--metrics-port``, ``--otlp-endpoint`` and ``--service-name`` asked for."""

    metrics_port: int | None = None
    otlp_endpoint: str | None = None
    service_name: str = "remoting-serve"

    @property
    def wanted(self) -> bool:
        """True if anything is to be exported."""
        return self.metrics_port is not None or self.otlp_endpoint is not None

    def worker_argv(self, worker: int) -> list[str]:
        """The options of worker number ``worker`` (its own metrics port)."""
        argv = ["--service-name", self.service_name]
        if self.metrics_port is not None:
            argv += ["--metrics-port", str(self.metrics_port + worker if self.metrics_port
                                           else 0)]
        if self.otlp_endpoint is not None:
            argv += ["--otlp-endpoint", self.otlp_endpoint]
        return argv


class TelemetrySetupError(Exception):
    """The exporters cannot start (a missing package, a port in use, a bad URL)."""


@dataclass
class Exporters:
    """What `start_exporters` started; `shutdown` flushes and stops it all."""

    metrics_url: str | None = None
    _stops: list[Callable[[], object]] = field(default_factory=list)

    def shutdown(self) -> None:
        """Flush what is buffered (spans, a last metrics push) and stop the HTTP server."""
        for stop in reversed(self._stops):
            stop()
        self._stops.clear()


def _signal_url(base: str, signal: str) -> str:
    """``http://host:4318`` -> ``http://host:4318/v1/<signal>``; a URL with a path is kept."""
    parts = urlsplit(base)
    if parts.scheme not in ("http", "https") or not parts.netloc:
        raise TelemetrySetupError(f"--otlp-endpoint must be an http(s) URL, got {base!r}")
    if parts.path.strip("/"):
        return base
    return base.rstrip("/") + f"/v1/{signal}"


def start_exporters(*, metrics_port: int | None, metrics_bind: str, otlp_endpoint: str | None,
                    service_name: str) -> Exporters:
    """Configure the global tracer and meter providers with the exporters asked for.

    Raises:
        TelemetrySetupError: with a message that says what to do.
    """
    try:
        from opentelemetry import metrics, trace
        from opentelemetry.sdk.metrics import MeterProvider
        from opentelemetry.sdk.resources import Resource
        from opentelemetry.sdk.trace import TracerProvider
    except ImportError as exc:
        raise TelemetrySetupError(
            f"exporting telemetry needs the OpenTelemetry SDK: {INSTALL_HINT}") from exc
    exporters = Exporters()
    resource = Resource.create({"service.name": os.environ.get("OTEL_SERVICE_NAME",
                                                                service_name)})
    readers: list[Any] = []
    if metrics_port is not None:
        readers.append(_prometheus(exporters, metrics_bind, metrics_port))
    if otlp_endpoint is not None:
        readers.append(_otlp_metrics(otlp_endpoint))
        tracer_provider = TracerProvider(resource=resource)
        tracer_provider.add_span_processor(_otlp_spans(otlp_endpoint))
        trace.set_tracer_provider(tracer_provider)
        exporters._stops.append(tracer_provider.shutdown)
    meter_provider = MeterProvider(resource=resource, metric_readers=readers)
    metrics.set_meter_provider(meter_provider)
    exporters._stops.insert(0, meter_provider.shutdown)  # after the HTTP server stopped
    return exporters


def _prometheus(exporters: Exporters, bind: str, port: int) -> Any:
    try:
        from opentelemetry.exporter.prometheus import PrometheusMetricReader
        from prometheus_client import start_http_server
    except ImportError as exc:
        raise TelemetrySetupError(
            f"--metrics-port needs OpenTelemetry's Prometheus exporter: {INSTALL_HINT}"
        ) from exc
    reader = PrometheusMetricReader()
    try:
        server, thread = start_http_server(port, addr=bind)
    except OSError as exc:
        raise TelemetrySetupError(f"cannot serve metrics on {bind}:{port}: {exc.strerror}"
                                  ) from exc
    exporters.metrics_url = f"http://{bind}:{server.server_port}/metrics"

    def stop() -> None:
        server.shutdown()
        server.server_close()
        thread.join(5)

    exporters._stops.append(stop)
    return reader


def _otlp_metrics(endpoint: str) -> Any:
    try:
        from opentelemetry.exporter.otlp.proto.http.metric_exporter import OTLPMetricExporter
        from opentelemetry.sdk.metrics.export import PeriodicExportingMetricReader
    except ImportError as exc:
        raise TelemetrySetupError(
            f"--otlp-endpoint needs OpenTelemetry's OTLP/HTTP exporter: {INSTALL_HINT}"
        ) from exc
    # every OTEL_METRIC_EXPORT_INTERVAL ms (the SDK's default: 60 s), and once at shutdown
    return PeriodicExportingMetricReader(
        OTLPMetricExporter(endpoint=_signal_url(endpoint, "metrics")))


def _otlp_spans(endpoint: str) -> Any:
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
    from opentelemetry.sdk.trace.export import BatchSpanProcessor

    return BatchSpanProcessor(OTLPSpanExporter(endpoint=_signal_url(endpoint, "traces")))
