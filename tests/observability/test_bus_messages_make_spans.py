"""OpenTelemetry spans per bus message, with the real SDK: a PRODUCER span where a message
is sent (its context travels in the message's headers, and the transport's CLIENT span
nests under it), a CONSUMER span around each handler run, child of that context: one trace
from a sender through the bus server to the handler and back with the reply."""

from __future__ import annotations

import threading

import pytest
from opentelemetry import trace
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.trace import SpanKind, StatusCode

from remoting import RemotingClient, RemotingServer
from remoting.bus import BusClient, EventBus, Message, ReplyFailure

from .conftest import Telemetry

WAIT = 10.0


def one(spans: list[ReadableSpan], name: str, kind: SpanKind) -> ReadableSpan:
    found = [s for s in spans if s.name == name and s.kind is kind]
    assert len(found) == 1, [(s.name, s.kind) for s in spans]
    return found[0]


def test_a_request_is_one_trace_from_sender_to_handler_and_back(otel: Telemetry) -> None:
    handled = threading.Event()
    seen_headers: list[dict[str, str]] = []

    def handler(message: Message) -> None:
        seen_headers.append(dict(message.headers))
        with trace.get_tracer("app", tracer_provider=otel.tracer_provider).start_as_current_span(
                "inside the handler"):
            message.reply(b"done")
        handled.set()

    with (RemotingServer(otel.server_config()) as server,
          RemotingClient(otel.client_config()) as c1, RemotingClient(otel.client_config()) as c2,
          EventBus() as bus):
        bus.attach(server)
        with BusClient(c1, server.addr) as worker, BusClient(c2, server.addr) as asker:
            worker.consumer("jobs", handler)
            otel.spans.clear()
            assert asker.request("jobs", b"x", timeout=WAIT).body == b"done"
            assert handled.wait(WAIT)
            with pytest.raises(ReplyFailure):
                asker.request("nobody", timeout=WAIT)
    spans = otel.finished()
    producer = one(spans, "request jobs", SpanKind.PRODUCER)
    consumer = one(spans, "process jobs", SpanKind.CONSUMER)
    reply = one(spans, "reply", SpanKind.PRODUCER)
    inner = one(spans, "inside the handler", SpanKind.INTERNAL)
    trace_id = producer.context.trace_id
    assert consumer.parent is not None and consumer.parent.span_id == producer.context.span_id
    assert reply.parent is not None and reply.parent.span_id == inner.context.span_id
    assert inner.parent is not None and inner.parent.span_id == consumer.context.span_id
    send_call = [s for s in spans if s.kind is SpanKind.CLIENT and s.name == "remoting/32302"
                 and s.context.trace_id == trace_id]
    assert send_call and send_call[0].parent.span_id == producer.context.span_id  # type: ignore[union-attr]
    assert {s.context.trace_id for s in (producer, consumer, reply, inner)} == {trace_id}
    assert producer.attributes is not None
    assert producer.attributes["messaging.destination.name"] == "jobs"
    assert producer.attributes["messaging.operation.name"] == "request"
    assert seen_headers[0]["traceparent"].split("-")[1] == f"{trace_id:032x}"
    failed = one(spans, "request nobody", SpanKind.PRODUCER)
    assert failed.status.status_code is StatusCode.ERROR


def test_a_raising_handler_s_span_records_the_error(otel: Telemetry) -> None:
    with (RemotingServer(otel.server_config()) as server, EventBus() as bus):
        bus.attach(server)
        raised = threading.Event()

        def handler(message: Message) -> None:
            raised.set()
            raise ValueError("bad")

        bus.consumer("x", handler)
        bus.send("x")
        assert raised.wait(WAIT)
    # closing the bus joined its handler threads: the handler's span has ended
    span = one(otel.finished(), "process x", SpanKind.CONSUMER)
    assert span.status.status_code is StatusCode.ERROR
    assert span.events and span.events[0].name == "exception"


def test_without_a_tracer_provider_no_span_and_no_header() -> None:
    seen: list[dict[str, str]] = []
    done = threading.Event()
    with RemotingServer() as server, EventBus() as bus:
        bus.attach(server)

        def keep(m: Message) -> None:
            seen.append(m.headers)
            done.set()

        bus.consumer("x", keep)
        bus.send("x", b"", {"k": "v"})
        assert done.wait(WAIT)
    assert seen == [{"k": "v"}]
