"""Fixtures: the real OpenTelemetry SDK, in memory, given to endpoints through their configs."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from remoting import ClientConfig, ServerConfig


@dataclass
class Telemetry:
    """An SDK set: spans and metrics of the endpoints made with `client_config` and
    `server_config`."""

    tracer_provider: TracerProvider
    meter_provider: MeterProvider
    spans: InMemorySpanExporter
    metrics: InMemoryMetricReader

    def client_config(self, **values: Any) -> ClientConfig:
        return ClientConfig(**{"tracer_provider": self.tracer_provider,
                               "meter_provider": self.meter_provider, **values})

    def server_config(self, **values: Any) -> ServerConfig:
        return ServerConfig(**{"tracer_provider": self.tracer_provider,
                               "meter_provider": self.meter_provider, **values})

    def finished(self, kind: str | None = None) -> list[ReadableSpan]:
        """Return the finished spans (of ``kind``: "CLIENT", "SERVER", "INTERNAL")."""
        spans = list(self.spans.get_finished_spans())
        return [s for s in spans if kind is None or s.kind.name == kind]

    def points(self, name: str) -> list[Any]:
        """Return the data points of metric ``name`` collected now."""
        data = self.metrics.get_metrics_data()
        found: list[Any] = []
        for resource in data.resource_metrics if data else []:
            for scope in resource.scope_metrics:
                for metric in scope.metrics:
                    if metric.name == name:
                        found.extend(metric.data.data_points)
        return found


@pytest.fixture
def otel() -> Iterator[Telemetry]:
    spans = InMemorySpanExporter()
    tracer_provider = TracerProvider()
    tracer_provider.add_span_processor(SimpleSpanProcessor(spans))
    reader = InMemoryMetricReader()
    meter_provider = MeterProvider(metric_readers=[reader])
    yield Telemetry(tracer_provider, meter_provider, spans, reader)
    tracer_provider.shutdown()
    meter_provider.shutdown()
