"""``remoting serve --metrics-port / --otlp-endpoint``: a real scrape, a real OTLP push."""

from __future__ import annotations

import re
import subprocess
import sys
import threading
import time
import urllib.request
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from opentelemetry.proto.collector.metrics.v1.metrics_service_pb2 import (
    ExportMetricsServiceRequest,
)
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

from codec import RemotingCommand
from remoting import RemotingClient

from ..processes import ROOT, Proc

ECHO = 2  # examples.echo_service's async echo


def call(client: RemotingClient, addr: str, n: int) -> None:
    for i in range(n):
        request = RemotingCommand.create_request(ECHO, body=b"%d" % i)
        assert client.invoke_sync(addr, request, 5).body == b"%d" % i


def test_the_metrics_port_serves_the_call_histogram_to_prometheus() -> None:
    proc = Proc("serve", "examples.echo_service:processors", "--port", "0",
                "--metrics-port", "0")
    try:
        url = proc.expect(r"metrics on (http://127\.0\.0\.1:\d+/metrics)").group(1)
        port = proc.expect(r"serving .* on 127\.0\.0\.1:(\d+)").group(1)
        with RemotingClient() as client:
            call(client, f"127.0.0.1:{port}", 3)
            with urllib.request.urlopen(url, timeout=10) as reply:
                assert reply.status == 200
                text = reply.read().decode()
    finally:
        assert proc.stop() == 0
    count = [line for line in text.splitlines()
             if line.startswith("rpc_server_call_duration_seconds_count")]
    assert len(count) == 1, text
    assert 'rpc_method="2"' in count[0] and 'remoting_outcome="success"' in count[0]
    assert count[0].endswith(" 3.0")
    assert 'rpc_server_call_duration_seconds_bucket{' in text
    assert re.search(r'^remoting_connections\{[^}]*remoting_role="server"[^}]*\} 1\.0$', text,
                     re.M)
    assert re.search(r'^remoting_io_bytes_total\{[^}]*network_io_direction="receive"', text,
                     re.M)


def metric_names(bodies: list[bytes]) -> set[str]:
    return {m.name for body in bodies
            for resource in ExportMetricsServiceRequest.FromString(body).resource_metrics
            for scope in resource.scope_metrics for m in scope.metrics}


class Collector(BaseHTTPRequestHandler):
    """An OTLP/HTTP receiver: keeps what is posted to /v1/traces and /v1/metrics."""

    received: dict[str, list[bytes]]
    arrived: threading.Event

    def do_POST(self) -> None:  # noqa: N802 (the standard library's name)
        body = self.rfile.read(int(self.headers["Content-Length"]))
        self.received.setdefault(self.path, []).append(body)
        self.arrived.set()
        self.send_response(200)
        self.send_header("Content-Type", "application/x-protobuf")
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, format: str, *args: object) -> None:
        pass

    @classmethod
    def wait_for_metric(cls, name: str, timeout: float) -> bool:
        """Wait (bounded) until a metrics push containing ``name`` arrived."""
        deadline = time.monotonic() + timeout
        while name not in metric_names(list(cls.received.get("/v1/metrics", []))):
            cls.arrived.clear()
            if not cls.arrived.wait(max(0.0, deadline - time.monotonic())):
                return False
        return True


@pytest.fixture
def collector() -> Iterator[tuple[str, type[Collector]]]:
    handler = type("Handler", (Collector,), {"received": {}, "arrived": threading.Event()})
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_port}", handler
    finally:
        server.shutdown()
        server.server_close()
        thread.join(5)


def test_the_otlp_endpoint_receives_spans_and_metrics(
    collector: tuple[str, type[Collector]],
) -> None:
    url, handler = collector
    proc = Proc("serve", "examples.echo_service:processors", "--port", "0",
                "--otlp-endpoint", url, "--service-name", "echo-test",
                env={"OTEL_METRIC_EXPORT_INTERVAL": "100"})
    try:
        port = proc.expect(r"serving .* on 127\.0\.0\.1:(\d+)").group(1)
        with RemotingClient() as client:
            call(client, f"127.0.0.1:{port}", 4)
            # pushed while it runs (the gauges report running servers only)
            assert handler.wait_for_metric("remoting.connections", timeout=20)
    finally:
        assert proc.stop() == 0  # stopping flushes the spans and pushes the metrics once more
    received = handler.received
    spans = []
    for body in received["/v1/traces"]:
        request = ExportTraceServiceRequest.FromString(body)
        for resource in request.resource_spans:
            service = {a.key: a.value.string_value for a in resource.resource.attributes}
            assert service["service.name"] == "echo-test"
            spans += [s for scope in resource.scope_spans for s in scope.spans]
    assert [s.name for s in spans] == [f"remoting/{ECHO}"] * 4
    assert {"rpc.server.call.duration", "remoting.connections", "remoting.io"} <= (
        metric_names(received["/v1/metrics"]))


def test_without_the_sdk_the_command_says_what_to_install() -> None:
    program = ("import sys; sys.modules['opentelemetry.sdk'] = None\n"
               "from remoting.cli import main\n"
               "sys.exit(main(['serve', 'examples.echo_service:processors', "
               "'--metrics-port', '0']))")
    result = subprocess.run([sys.executable, "-c", program], cwd=ROOT, capture_output=True,
                            text=True, timeout=60)
    assert result.returncode == 2
    assert result.stderr.strip().splitlines()[-1] == (
        "remoting serve: exporting telemetry needs the OpenTelemetry SDK: "
        "pip install 'trio-remoting[otel-export]'")
