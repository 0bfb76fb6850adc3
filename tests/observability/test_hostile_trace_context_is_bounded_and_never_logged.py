"""Trace context fields come from the peer: bounded before they are parsed, never logged.

OpenTelemetry's propagators log a value they refuse verbatim, at WARNING: one request with a
1 MB ``tracestate`` wrote a 1 MB line, an embedded line break forged a line of its own, and
12 such requests wrote 2.2 MB. Every logger is captured here, OpenTelemetry's included.
"""

from __future__ import annotations

import io
import logging
from collections.abc import Iterator

import pytest
import trio
from hypothesis import given
from hypothesis import strategies as st
from opentelemetry import baggage, trace

from codec import RemotingCommand, ResponseCode
from processors import AsyncEchoProcessor
from remoting import ClientConfig, TrioRemotingClient, TrioRemotingServer
from remoting._observability._w3c import extract

from .conftest import Telemetry

ECHO = 1
TRACE_ID = 0x0AF7651916CD43DD8448EB211C80319C
PARENT = f"00-{TRACE_ID:032x}-b7ad6b7169203331-01"
MARK = "PEERSAID"  # in every hostile value: it must appear in no log line

HOSTILE: dict[str, dict[str, str]] = {
    "tracestate of 1 MB": {"traceparent": PARENT, "tracestate": "a=" + MARK * 131_072},
    "tracestate forging a line": {
        "traceparent": PARENT, "tracestate": f"a=b,\nCRITICAL {MARK} forged line\n=x"},
    "tracestate member out of the grammar": {
        "traceparent": PARENT, "tracestate": f"a=b,{MARK}=c d e,"},
    "tracestate of 33 members": {
        "traceparent": PARENT, "tracestate": ",".join(f"k{i}={MARK}" for i in range(33))},
    "tracestate not ASCII": {"traceparent": PARENT, "tracestate": f"a={MARK}\u00e9"},
    "baggage of 1 MB": {"traceparent": PARENT, "baggage": "k=" + MARK * 131_072},
    "baggage forging a line": {
        "traceparent": PARENT, "baggage": f"k=v,\nCRITICAL {MARK} forged line\n"},
    "baggage entry out of the grammar": {"traceparent": PARENT, "baggage": f"k=v,{MARK}"},
    "baggage of 200 members": {
        "traceparent": PARENT, "baggage": ",".join(f"k{i}={MARK}" for i in range(200))},
    "baggage member over 4096": {"traceparent": PARENT, "baggage": "k=" + MARK * 600},
    "baggage not ASCII": {"traceparent": PARENT, "baggage": f"k={MARK}\u00e9"},
    "traceparent of 1 MB": {"traceparent": PARENT + "-" + MARK * 131_072},
}


@pytest.fixture
def all_logs() -> Iterator[io.StringIO]:
    """Everything any logger writes meanwhile, formatted as an application would."""
    out = io.StringIO()
    handler = logging.StreamHandler(out)
    handler.setFormatter(logging.Formatter("%(levelname)s %(name)s %(message)s"))
    root = logging.getLogger()
    level = root.level
    root.addHandler(handler)
    root.setLevel(logging.DEBUG)
    try:
        yield out
    finally:
        root.removeHandler(handler)
        root.setLevel(level)


async def test_hostile_trace_context_writes_no_log_and_the_requests_are_served(
    nursery: trio.Nursery, otel: Telemetry, all_logs: io.StringIO,
) -> None:
    # headers up to 4 MiB here: the propagators' own limits are under test, not the codec's
    server = TrioRemotingServer(otel.server_config(max_header_bytes=4 << 20))
    server.register_processor(ECHO, AsyncEchoProcessor())
    await nursery.start(server.serve)
    client = TrioRemotingClient(ClientConfig(telemetry=False, max_header_bytes=4 << 20))
    await nursery.start(client.serve)
    addr = f"127.0.0.1:{server.port}"
    for name, ext in HOSTILE.items():
        request = RemotingCommand.create_request(ECHO, header=ext, body=name.encode())
        response = await client.invoke_sync(addr, request, 10)
        assert response.code == ResponseCode.SUCCESS, name
    text = all_logs.getvalue()
    assert MARK not in text
    assert "forged" not in text
    assert len(text) < 2000, text[:2000]  # the endpoints' lifecycle lines, no more
    spans = otel.finished("SERVER")
    assert len(spans) == len(HOSTILE)
    # a bad tracestate or baggage is left out; the trace itself goes on
    continued = [s for s in spans if s.parent is not None and s.parent.trace_id == TRACE_ID]
    assert len(continued) == len(HOSTILE) - 1  # all but the 1 MB traceparent


@pytest.mark.parametrize("name", list(HOSTILE))
def test_extract_bounds_each_hostile_field_without_a_log_line(
    name: str, all_logs: io.StringIO,
) -> None:
    found = extract(dict(HOSTILE[name]))
    assert all_logs.getvalue() == ""
    if name == "traceparent of 1 MB":
        assert found is None
        return
    assert found is not None
    context = trace.get_current_span(found).get_span_context()
    assert context.trace_id == TRACE_ID
    assert MARK not in str(context.trace_state)


def test_a_valid_tracestate_and_baggage_still_travel() -> None:
    found = extract({"traceparent": PARENT, "baggage": "tenant=acme,region=eu",
                     "tracestate": "congo=t61rcWkgMzE,rojo=00f067aa0ba902b7"})
    assert found is not None
    context = trace.get_current_span(found).get_span_context()
    assert dict(context.trace_state) == {"congo": "t61rcWkgMzE", "rojo": "00f067aa0ba902b7"}
    assert baggage.get_all(found) == {"tenant": "acme", "region": "eu"}


_FIELD_TEXT = st.text(st.characters(codec="utf-8"), max_size=600) | st.text(
    st.sampled_from("abc0123456789-=,; \t\n\r@*/%\x00\x7f\u00e9"), max_size=9000)


@given(traceparent=st.sampled_from([PARENT, PARENT[:-1] + "0", "01" + PARENT[2:] + "-x"])
       | _FIELD_TEXT, tracestate=_FIELD_TEXT | st.none(), bag=_FIELD_TEXT | st.none())
def test_extract_never_logs_nor_raises_on_any_trace_fields(
    traceparent: str, tracestate: str | None, bag: str | None,
) -> None:
    ext: dict[str, str | None] = {"traceparent": traceparent}
    if tracestate is not None:
        ext["tracestate"] = tracestate
    if bag is not None:
        ext["baggage"] = bag
    out = io.StringIO()
    handler = logging.StreamHandler(out)
    root = logging.getLogger()
    level = root.level
    root.addHandler(handler)
    root.setLevel(logging.DEBUG)
    try:
        extract(ext)
    finally:
        root.removeHandler(handler)
        root.setLevel(level)
    assert out.getvalue() == ""
