"""W3C trace context in ext fields: the quick path agrees with OpenTelemetry's propagators."""

from __future__ import annotations

import pytest
from opentelemetry import baggage, context, propagate, trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.trace import NonRecordingSpan, SpanContext, TraceFlags, TraceState

from codec import ExtFields
from remoting._observability._w3c import extract, inject

SPAN = SpanContext(0x0AF7651916CD43DD8448EB211C80319C, 0xB7AD6B7169203331, is_remote=False,
                   trace_flags=TraceFlags(1), trace_state=TraceState([("vendor", "v1")]))


def generic(span_context: SpanContext) -> dict[str, str]:
    carrier: dict[str, str] = {}
    propagate.inject(carrier, trace.set_span_in_context(NonRecordingSpan(span_context)))
    return carrier


def test_inject_writes_what_the_w3c_propagator_writes() -> None:
    ext: ExtFields = {}
    inject(ext, NonRecordingSpan(SPAN))
    assert ext == generic(SPAN) == {
        "traceparent": "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01",
        "tracestate": "vendor=v1"}


def test_extract_reads_what_inject_wrote() -> None:
    ext: ExtFields = {}
    inject(ext, NonRecordingSpan(SPAN))
    found = extract(ext)
    assert found is not None
    got = trace.get_current_span(found).get_span_context()
    assert (got.trace_id, got.span_id, got.trace_flags, got.is_remote) == (
        SPAN.trace_id, SPAN.span_id, SPAN.trace_flags, True)
    assert got.trace_state == SPAN.trace_state
    assert trace.get_current_span(propagate.extract(ext)).get_span_context() == got


@pytest.mark.parametrize("header", [
    "", "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331",  # too few parts
    "00-00000000000000000000000000000000-b7ad6b7169203331-01",  # zero trace id
    "00-0af7651916cd43dd8448eb211c80319c-0000000000000000-01",  # zero span id
    "ff-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01",  # forbidden version
    "00-0AF7651916CD43DD8448EB211C80319C-b7ad6b7169203331-01",  # upper case
    "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01-extra",  # v00 has 4 parts
    "00-xyz7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01",
])
def test_an_invalid_traceparent_starts_a_new_trace_as_the_w3c_propagator_does(header: str
                                                                                ) -> None:
    ext: ExtFields = {"traceparent": header}
    assert extract(ext) is None
    generic_span = trace.get_current_span(propagate.extract(ext))
    assert not generic_span.get_span_context().is_valid


def test_baggage_goes_through_the_generic_propagator_both_ways() -> None:
    provider = TracerProvider()
    token = context.attach(baggage.set_baggage("tenant", "acme"))
    try:
        with provider.get_tracer("t").start_as_current_span("s") as span:
            ext: ExtFields = {}
            inject(ext, span)
    finally:
        context.detach(token)
    assert ext["baggage"] == "tenant=acme"
    found = extract(ext)
    assert found is not None and baggage.get_baggage("tenant", found) == "acme"


def test_a_baggage_value_the_propagator_chokes_on_is_left_out() -> None:
    # OpenTelemetry's baggage propagator raised on a lone surrogate (the lenient JSON reader
    # lets a peer send one): the processor never ran and the peer got SYSTEM_ERROR. A value
    # outside printable ASCII never reaches it now: the trace goes on without the baggage.
    ext: ExtFields = {"traceparent": "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01",
                      "baggage": "k=\ud800"}
    with pytest.raises(Exception):  # noqa: B017, PT011  (what the propagator does with it)
        propagate.extract(ext)
    found = extract(ext)
    assert found is not None and not baggage.get_all(found)
    assert trace.get_current_span(found).get_span_context().trace_id == (
        0x0AF7651916CD43DD8448EB211C80319C)
