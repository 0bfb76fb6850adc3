"""OpenTelemetry traces: linked CLIENT and SERVER spans across real sockets, with the real SDK."""

from __future__ import annotations

import subprocess
import sys
import textwrap
import threading
from collections.abc import Iterator

import pytest
import trio
from opentelemetry import trace
from opentelemetry.sdk.trace import ReadableSpan, SpanProcessor, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.sampling import ALWAYS_OFF, ALWAYS_ON, ParentBased
from opentelemetry.trace import SpanContext, StatusCode

from codec import RemotingCommand, ResponseCode
from processors import AsyncEchoProcessor, EchoProcessor, RequestContext, RequestProcessor
from remoting import (
    AclClientRPCHook,
    AclServerRPCHook,
    RemotingClient,
    RemotingSendRequestError,
    RemotingServer,
    RemotingTimeoutError,
    open_client,
    open_server,
)

from ..factories import req
from .conftest import Telemetry

ECHO, ASYNC_ECHO, RAISES, SLOW, HANG_UP, NESTED, CALLS_BACK, CALLBACK = range(1, 9)


class Raises(RequestProcessor):
    def process_request(self, ctx: RequestContext, request: RemotingCommand) -> RemotingCommand:
        raise ValueError("boom")


class Slow(RequestProcessor):
    def __init__(self) -> None:
        self.release = threading.Event()

    def process_request(self, ctx: RequestContext, request: RemotingCommand) -> RemotingCommand:
        self.release.wait(10)
        return RemotingCommand.create_response(ResponseCode.SUCCESS)


class HangsUp(RequestProcessor):
    """Closes the caller's connection instead of answering."""

    def process_request(self, ctx: RequestContext, request: RemotingCommand) -> None:
        ctx.channel.close()


class Nested(RequestProcessor):
    """Makes a span of its own: it must nest under the server span."""

    def __init__(self, provider: TracerProvider) -> None:
        self.tracer = provider.get_tracer("service")

    def process_request(self, ctx: RequestContext, request: RemotingCommand) -> RemotingCommand:
        with self.tracer.start_as_current_span("lookup"):
            return RemotingCommand.create_response(ResponseCode.SUCCESS)


class CallsBack(RequestProcessor):
    def process_request(self, ctx: RequestContext, request: RemotingCommand) -> RemotingCommand:
        back = ctx.channel.invoke_sync(req(CALLBACK), 5)
        return RemotingCommand.create_response(back.code)


class Ended(SpanProcessor):
    """Counts finished spans; waits (bounded) for a number of them (async calls end theirs on
    the callback thread)."""

    def __init__(self) -> None:
        self.count = 0
        self.cond = threading.Condition()

    def on_end(self, span: ReadableSpan) -> None:
        with self.cond:
            self.count += 1
            self.cond.notify_all()

    def wait_for(self, n: int, timeout: float = 10.0) -> None:
        with self.cond:
            assert self.cond.wait_for(lambda: self.count >= n, timeout), (self.count, n)


@pytest.fixture
def ended(otel: Telemetry) -> Ended:
    processor = Ended()
    otel.tracer_provider.add_span_processor(processor)
    return processor


@pytest.fixture
def pair(otel: Telemetry) -> Iterator[tuple[RemotingServer, RemotingClient, Slow]]:
    slow = Slow()
    server = RemotingServer(otel.server_config())
    server.register_processor(ECHO, EchoProcessor())
    server.register_processor(ASYNC_ECHO, AsyncEchoProcessor())
    server.register_processor(RAISES, Raises())
    server.register_processor(SLOW, slow)
    server.register_processor(HANG_UP, HangsUp())
    server.register_processor(NESTED, Nested(otel.tracer_provider))
    server.register_processor(CALLS_BACK, CallsBack())
    client = RemotingClient(otel.client_config())
    client.register_processor(CALLBACK, EchoProcessor())
    with server.start(), client.start():
        yield server, client, slow
        slow.release.set()


def one(spans: list[ReadableSpan]) -> ReadableSpan:
    assert len(spans) == 1, [s.name for s in spans]
    return spans[0]


def assert_child(child: ReadableSpan, parent: ReadableSpan) -> None:
    assert child.context is not None and parent.context is not None
    assert child.context.trace_id == parent.context.trace_id
    assert child.parent is not None and child.parent.span_id == parent.context.span_id


def test_a_call_yields_a_client_span_and_a_linked_server_span(
    otel: Telemetry, pair: tuple[RemotingServer, RemotingClient, Slow],
) -> None:
    server, client, _ = pair
    request = req(ECHO)
    assert client.invoke_sync(server.addr, request, 5).code == ResponseCode.SUCCESS
    client_span, server_span = one(otel.finished("CLIENT")), one(otel.finished("SERVER"))
    assert_child(server_span, client_span)
    assert client_span.name == server_span.name == f"remoting/{ECHO}"
    assert client_span.attributes is not None and server_span.attributes is not None
    assert dict(client_span.attributes) | {"server.port": 0} == {
        "rpc.system.name": "rocketmq", "rpc.method": str(ECHO), "network.transport": "tcp",
        "server.address": "127.0.0.1", "server.port": 0, "remoting.outcome": "success",
        "rpc.response.status_code": "0"}
    assert client_span.attributes["server.port"] == server.port
    assert server_span.attributes["remoting.outcome"] == "success"
    assert server_span.attributes["client.address"] == "127.0.0.1"
    assert client_span.status.status_code is StatusCode.UNSET
    # the context travelled in the request's ext fields, W3C trace context
    assert request.ext_fields is not None
    assert str(request.ext_fields["traceparent"]).split("-")[1] == (
        f"{client_span.context.trace_id:032x}")


def test_the_callers_current_span_is_the_parent(
    otel: Telemetry, pair: tuple[RemotingServer, RemotingClient, Slow],
) -> None:
    server, client, _ = pair
    with otel.tracer_provider.get_tracer("app").start_as_current_span("job") as job:
        client.invoke_sync(server.addr, req(ECHO), 5)
    spans = {s.name: s for s in otel.finished()}
    assert_child(one(otel.finished("CLIENT")), spans["job"])
    assert job.get_span_context().trace_id == one(otel.finished("SERVER")).context.trace_id


def test_a_processors_own_span_nests_under_the_server_span(
    otel: Telemetry, pair: tuple[RemotingServer, RemotingClient, Slow],
) -> None:
    server, client, _ = pair
    client.invoke_sync(server.addr, req(NESTED), 5)
    lookup = one([s for s in otel.finished() if s.name == "lookup"])
    assert_child(lookup, one(otel.finished("SERVER")))


def test_an_error_reply_marks_both_spans(
    otel: Telemetry, pair: tuple[RemotingServer, RemotingClient, Slow],
) -> None:
    server, client, _ = pair
    assert client.invoke_sync(server.addr, req(RAISES), 5).code == ResponseCode.SYSTEM_ERROR
    client_span, server_span = one(otel.finished("CLIENT")), one(otel.finished("SERVER"))
    for span in (client_span, server_span):
        assert span.attributes is not None
        assert span.attributes["remoting.outcome"] == "error_reply"
        assert span.attributes["rpc.response.status_code"] == "1"
        assert span.status.status_code is StatusCode.ERROR
    assert server_span.attributes["error.type"] == "ValueError"  # type: ignore[index]
    assert [e.name for e in server_span.events] == ["exception"]


def test_a_timeout_and_a_lost_connection_have_their_outcomes(
    otel: Telemetry, pair: tuple[RemotingServer, RemotingClient, Slow],
) -> None:
    server, client, slow = pair
    with pytest.raises(RemotingTimeoutError):
        client.invoke_sync(server.addr, req(SLOW), 0.2)
    slow.release.set()
    with pytest.raises(RemotingSendRequestError) as lost:
        client.invoke_sync(server.addr, req(HANG_UP), 5)
    assert lost.value.connection_lost
    outcomes = {s.attributes["remoting.outcome"]: s for s in otel.finished("CLIENT")}  # type: ignore[index]
    assert set(outcomes) == {"timeout", "connection_lost"}
    assert outcomes["timeout"].attributes["error.type"] == "RemotingTimeoutError"  # type: ignore[index]
    assert outcomes["timeout"].status.status_code is StatusCode.ERROR
    assert [e.name for e in outcomes["connection_lost"].events] == ["exception"]


def test_a_refused_connect_is_a_send_failure(
    otel: Telemetry, pair: tuple[RemotingServer, RemotingClient, Slow],
) -> None:
    _, client, _ = pair
    with pytest.raises(Exception, match="connect"):
        client.invoke_sync("127.0.0.1:1", req(ECHO), 2)
    span = one(otel.finished("CLIENT"))
    assert span.attributes is not None
    assert (span.attributes["remoting.outcome"], span.attributes["error.type"]) == (
        "send_failure", "RemotingConnectError")


def test_async_oneway_and_many_calls_carry_the_context(
    otel: Telemetry, ended: Ended, pair: tuple[RemotingServer, RemotingClient, Slow],
) -> None:
    server, client, _ = pair
    client.invoke_async(server.addr, req(ECHO), 5).result()
    ended.wait_for(2)  # its client span ends on the callback thread
    client.invoke_oneway(server.addr, req(ECHO), 5)
    ended.wait_for(4)  # the server's span of a oneway request ends after the call returned
    results = client.invoke_many(server.addr, [req(ECHO) for _ in range(5)], 5, limit=2)
    assert all(r.code == 0 for r in results)  # type: ignore[union-attr]
    ended.wait_for(14)
    clients = otel.finished("CLIENT")
    servers = otel.finished("SERVER")
    assert len(clients) == len(servers) == 7
    by_id = {c.context.span_id: c for c in clients}
    for span in servers:
        assert span.parent is not None and span.parent.span_id in by_id
    # a batch's spans end one by one, each when its own response came (two in flight here)
    many = sorted(clients, key=lambda c: c.start_time or 0)[-5:]
    assert len({c.end_time for c in many}) > 1


def test_trace_context_crosses_a_server_to_client_call(
    otel: Telemetry, pair: tuple[RemotingServer, RemotingClient, Slow],
) -> None:
    server, client, _ = pair
    assert client.invoke_sync(server.addr, req(CALLS_BACK), 5).code == 0
    clients = sorted(otel.finished("CLIENT"), key=lambda s: s.start_time or 0)
    servers = sorted(otel.finished("SERVER"), key=lambda s: s.start_time or 0)
    assert len(clients) == len(servers) == 2
    outer_call, back_call = clients
    outer_served, back_served = servers
    assert_child(outer_served, outer_call)  # client -> server
    assert_child(back_call, outer_served)  # the server calls back while serving it
    assert_child(back_served, back_call)  # and the client serves that
    assert back_call.name == f"remoting/{CALLBACK}"


async def test_trio_faces_and_async_processors_link_too(otel: Telemetry, ended: Ended) -> None:
    async with open_server(otel.server_config()) as server, \
            open_client(otel.client_config()) as client:
        server.register_processor(ASYNC_ECHO, AsyncEchoProcessor())
        await client.invoke_sync(f"127.0.0.1:{server.port}", req(ASYNC_ECHO), 5)
        fut = await client.invoke_async(f"127.0.0.1:{server.port}", req(ASYNC_ECHO), 5)
        await fut.wait()
        # the async call's span ends on the callback thread
        await trio.to_thread.run_sync(ended.wait_for, 4)
    clients, servers = otel.finished("CLIENT"), otel.finished("SERVER")
    assert len(clients) == len(servers) == 2
    for client_span, server_span in zip(clients, sorted(servers, key=lambda s: s.start_time or 0),
                                        strict=True):
        assert client_span.context.trace_id == server_span.context.trace_id


def test_a_dropping_sampler_records_nothing_but_calls_work(otel: Telemetry) -> None:
    provider = TracerProvider(sampler=ALWAYS_OFF)
    provider.add_span_processor(SimpleSpanProcessor(otel.spans))
    with RemotingServer(otel.server_config(tracer_provider=provider)) as server, \
            RemotingClient(otel.client_config(tracer_provider=provider)) as client:
        server.register_processor(ECHO, EchoProcessor())
        request = req(ECHO)
        assert client.invoke_sync(server.addr, request, 5).code == 0
    assert otel.finished() == []
    assert request.ext_fields is not None
    flags = str(request.ext_fields["traceparent"]).rsplit("-", 1)[1]
    assert int(flags, 16) & 1 == 0  # "not sampled" travels on


def test_the_acl_signature_covers_the_trace_fields(otel: Telemetry) -> None:
    with RemotingServer(otel.server_config()) as server, \
            RemotingClient(otel.client_config()) as client:
        server.register_rpc_hook(AclServerRPCHook({"RocketMQ": "12345678"}))
        server.register_processor(ECHO, EchoProcessor())
        client.register_rpc_hook(AclClientRPCHook("RocketMQ", "12345678"))
        request = req(ECHO)
        assert client.invoke_sync(server.addr, request, 5).code == ResponseCode.SUCCESS
        assert request.ext_fields is not None and "traceparent" in request.ext_fields
        assert "Signature" in request.ext_fields
    assert one(otel.finished("SERVER")).attributes["remoting.outcome"] == "success"  # type: ignore[index]


def test_telemetry_can_be_switched_off(otel: Telemetry) -> None:
    with RemotingServer(otel.server_config(telemetry=False)) as server, \
            RemotingClient(otel.client_config(telemetry=False)) as client:
        server.register_processor(ECHO, EchoProcessor())
        request = req(ECHO)
        client.invoke_sync(server.addr, request, 5)
    assert otel.finished() == []
    assert "traceparent" not in (request.ext_fields or {})


def test_the_global_providers_are_used_by_default() -> None:
    """An application that configures the SDK globally gets spans with no further code."""
    script = textwrap.dedent("""
        from opentelemetry import trace
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import SimpleSpanProcessor
        from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
        from processors import EchoProcessor
        from remoting import RemotingClient, RemotingCommand, RemotingServer

        exporter = InMemorySpanExporter()
        provider = TracerProvider()
        provider.add_span_processor(SimpleSpanProcessor(exporter))
        trace.set_tracer_provider(provider)
        with RemotingServer() as server, RemotingClient() as client:
            server.register_processor(7, EchoProcessor())
            client.invoke_sync(server.addr, RemotingCommand.create_request(7), 5)
        print(sorted(s.kind.name for s in exporter.get_finished_spans()))
    """)
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                         timeout=60, check=True).stdout
    assert out.strip() == "['CLIENT', 'SERVER']"


def test_without_a_configured_sdk_nothing_is_installed() -> None:
    with RemotingServer() as server, RemotingClient() as client:
        server.register_processor(ECHO, EchoProcessor())
        request = req(ECHO)
        client.invoke_sync(server.addr, request, 5)
        assert not client.endpoint.telemetry_installed
        assert client.endpoint.caller.interceptors == []
    assert isinstance(trace.get_tracer_provider(), trace.ProxyTracerProvider)
    assert "traceparent" not in (request.ext_fields or {})


def test_calls_of_an_unsampled_trace_make_no_spans_and_pass_its_context_on(
    otel: Telemetry,
) -> None:
    """With the SDK's default ParentBased sampler, the children of an unsampled span are
    dropped: the calls of such a trace make no span and carry the parent's context."""
    provider = TracerProvider(sampler=ParentBased(ALWAYS_OFF))
    provider.add_span_processor(SimpleSpanProcessor(otel.spans))
    seen: list[SpanContext] = []

    class Current(RequestProcessor):
        def process_request(self, ctx: RequestContext, request: RemotingCommand
                            ) -> RemotingCommand:
            seen.append(trace.get_current_span().get_span_context())
            with provider.get_tracer("service").start_as_current_span("own work"):
                return RemotingCommand.create_response(ResponseCode.SUCCESS)

    with RemotingServer(otel.server_config(tracer_provider=provider)) as server, \
            RemotingClient(otel.client_config(tracer_provider=provider)) as client:
        server.register_processor(ECHO, Current())
        with provider.get_tracer("app").start_as_current_span("unsampled job") as job:
            request = req(ECHO)
            assert client.invoke_sync(server.addr, request, 5).code == 0
    parent = job.get_span_context()
    assert not parent.trace_flags.sampled
    assert otel.finished() == []
    assert request.ext_fields is not None
    assert request.ext_fields["traceparent"] == (
        f"00-{parent.trace_id:032x}-{parent.span_id:016x}-{parent.trace_flags:02x}")
    [current] = seen
    assert (current.trace_id, current.span_id, current.is_remote) == (
        parent.trace_id, parent.span_id, True)


def test_a_sampler_that_records_children_of_unsampled_parents_still_gets_spans(
    otel: Telemetry,
) -> None:
    sampler = ParentBased(ALWAYS_OFF, remote_parent_not_sampled=ALWAYS_ON)
    provider = TracerProvider(sampler=sampler)
    provider.add_span_processor(SimpleSpanProcessor(otel.spans))
    with RemotingServer(otel.server_config(tracer_provider=provider)) as server, \
            RemotingClient(otel.client_config(tracer_provider=provider)) as client:
        server.register_processor(ECHO, EchoProcessor())
        client.invoke_sync(server.addr, req(ECHO), 5)
    assert [s.kind.name for s in otel.finished()] == ["SERVER"]  # the client's was dropped
