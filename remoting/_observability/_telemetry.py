"""`Telemetry`: the OpenTelemetry interceptor, on both sides of every call.

Client side (innermost of the client interceptors): a CLIENT span per request, whose context
goes into the request's ext fields (``traceparent``, ``tracestate``, through the configured
propagator, W3C trace context by default) before the RPC hooks run, so an ACL hook signs
them; the call's duration, by outcome, when it ends. Server side (outermost of the server
interceptors): a SERVER span per processed request, child of the context the request carries
and current while the processor runs, so a processor's own spans nest under it.

Only ``opentelemetry-api`` is imported; what is exported, and where, is the application's
choice (the SDK). Tracing is skipped without a tracer provider, metrics without a meter
provider (see `telemetry_for`).
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any, Final

from opentelemetry import context as otel_context
from opentelemetry import metrics, trace
from opentelemetry.trace import SpanKind, Status, StatusCode

from codec import ResponseCode
from codec._header_numbers import header_int

from .._hooks import AbortProcessError
from .._interceptors import ClientInterceptor, ServerInterceptor
from .._version import __version__
from ._otel_metrics import instruments_for
from ._outcome import outcome_of_error, outcome_of_response
from ._w3c import extract, inject

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable

    from opentelemetry.metrics import Histogram
    from opentelemetry.trace import Span, Tracer

    from codec import RemotingCommand

    from .._core._calling._future import ResponseFuture
    from .._core._endpoint import Endpoint
    from .._interceptors import ClientCall, ServerCall
    from ._outcome import Outcome

__all__ = ["SYSTEM_NAME", "Telemetry", "configured", "telemetry_for"]

SYSTEM_NAME: Final = "rocketmq"  # rpc.system.name: RocketMQ's remoting protocol
TRACE_FIELDS: Final = ("traceparent", "tracestate")


class Telemetry(ClientInterceptor, ServerInterceptor):
    """Spans and call durations for one endpoint (see the module docstring)."""

    def __init__(self, tracer: Tracer | None, client_duration: Histogram | None,
                 server_duration: Histogram | None) -> None:
        self._tracer = tracer
        # True if the SDK's sampler drops every child of an unsampled parent (its default,
        # ParentBased): such calls then make no span and pass the parent's context on
        self._skip_unsampled = follows_parent(tracer)
        self._client_duration = client_duration
        self._server_duration = server_duration
        self._attributes: dict[tuple[Any, ...], dict[str, Any]] = {}

    # ------------------------------------------------------------------ client side

    def intercept_call(self, call: ClientCall, proceed: Callable[[ClientCall], Any]) -> Any:
        spans = self._start_client(call)
        started = time.monotonic()
        try:
            result = proceed(call)
        except BaseException as exc:
            self._end_client(call, spans, started, None, exc)
            raise
        self._client_result(call, spans, started, result)
        return result

    async def intercept_call_async(
        self, call: ClientCall, proceed: Callable[[ClientCall], Awaitable[Any]]
    ) -> Any:
        spans = self._start_client(call)
        started = time.monotonic()
        try:
            result = await proceed(call)
        except BaseException as exc:
            self._end_client(call, spans, started, None, exc)
            raise
        self._client_result(call, spans, started, result)
        return result

    def _start_client(self, call: ClientCall) -> list[Span] | None:
        """Start a CLIENT span per request and put its context in the request's ext fields."""
        tracer = self._tracer
        if tracer is None:
            return None
        if self._skip_unsampled:
            parent = trace.get_current_span()
            context = parent.get_span_context()
            if context.is_valid and not context.trace_flags.sampled:
                for request in call.requests:  # the unsampled parent's context travels on
                    if request.ext_fields is None:
                        request.ext_fields = {}
                    inject(request.ext_fields, parent)
                return None
        spans = []
        name = f"remoting/{call.request.code}"
        for request in call.requests:
            span = tracer.start_span(name, kind=SpanKind.CLIENT)
            if span.is_recording():
                span.set_attributes(self._span_attributes(call, request))
            if request.ext_fields is None:
                request.ext_fields = {}
            inject(request.ext_fields, span)
            spans.append(span)
        return spans

    def _client_result(self, call: ClientCall, spans: list[Span] | None, started: float,
                       result: Any) -> None:
        kind = call.kind
        if kind == "sync":
            self._end_client(call, spans, started, result, None)
        elif kind == "oneway":
            self._end_client(call, spans, started, None, None)
        elif kind == "async":
            future: ResponseFuture = result
            future.add_done_callback(
                lambda fut: self._end_client(call, spans, started, fut.response_command,
                                             fut.cause))
        else:  # many: each request ends when its own outcome was known
            for i, outcome in enumerate(result):
                response, error = ((outcome, None) if not isinstance(outcome, BaseException)
                                   else (None, outcome))
                finished = call.finished_at[i] if i < len(call.finished_at) else None
                self._end_one(call, call.requests[i], None if spans is None else spans[i],
                              started, response, error, finished)

    def _end_client(self, call: ClientCall, spans: list[Span] | None, started: float,
                    response: RemotingCommand | None, error: BaseException | None) -> None:
        for i, request in enumerate(call.requests):
            self._end_one(call, request, None if spans is None else spans[i], started,
                          response, error, None)

    def _end_one(self, call: ClientCall, request: RemotingCommand, span: Span | None,
                 started: float, response: RemotingCommand | None, error: BaseException | None,
                 finished: float | None) -> None:
        now = time.monotonic()
        end = now if finished is None else finished
        outcome: Outcome = (outcome_of_error(error) if error is not None
                            else "success" if response is None  # oneway: queued
                            else outcome_of_response(response.code))
        code = None if response is None else response.code
        attributes = self._metric_attributes("client", request.code, outcome, code, error,
                                             call.addr if call.role == "client" else None)
        if self._client_duration is not None:
            self._client_duration.record(end - started, attributes)
        if span is not None:
            _finish_span(span, attributes, outcome, error, time.time_ns() - int((now - end) * 1e9))

    # ------------------------------------------------------------------ server side

    def intercept_request(
        self, call: ServerCall, proceed: Callable[[ServerCall], RemotingCommand | None]
    ) -> RemotingCommand | None:
        span, token = self._start_server(call)
        started = time.monotonic()
        try:
            response = proceed(call)
        except BaseException as exc:
            self._end_server(call, span, token, started, None, exc)
            raise
        self._end_server(call, span, token, started, response, None)
        return response

    async def intercept_request_async(
        self, call: ServerCall,
        proceed: Callable[[ServerCall], Awaitable[RemotingCommand | None]],
    ) -> RemotingCommand | None:
        span, token = self._start_server(call)
        started = time.monotonic()
        try:
            response = await proceed(call)
        except BaseException as exc:
            self._end_server(call, span, token, started, None, exc)
            raise
        self._end_server(call, span, token, started, response, None)
        return response

    def _start_server(self, call: ServerCall) -> tuple[Span | None, object]:
        tracer = self._tracer
        if tracer is None:
            return None, None
        request = call.request
        ext = request.ext_fields
        parent = extract(ext) if ext else None
        if self._skip_unsampled and parent is not None:
            remote = trace.get_current_span(parent)
            if not remote.get_span_context().trace_flags.sampled:
                # the processor runs in the unsampled parent's context: its spans drop too
                return None, otel_context.attach(parent)
        span = tracer.start_span(f"remoting/{request.code}", context=parent,
                                 kind=SpanKind.SERVER)
        if span.is_recording():
            host, _, port = call.context.remote_addr.rpartition(":")
            span.set_attributes({"rpc.system.name": SYSTEM_NAME, "rpc.method": str(request.code),
                                 "client.address": host, "client.port": _port(port),
                                 "network.transport": "tcp"})
        return span, otel_context.attach(trace.set_span_in_context(span))

    def _end_server(self, call: ServerCall, span: Span | None, token: object, started: float,
                    response: RemotingCommand | None, error: BaseException | None) -> None:
        code: int | None
        outcome: Outcome
        if isinstance(error, AbortProcessError):  # replied with its own code
            code, outcome = error.code, outcome_of_response(error.code)
        elif error is not None:  # the processor raised: the reply is SYSTEM_ERROR
            code = int(ResponseCode.SYSTEM_ERROR) if isinstance(error, Exception) else None
            outcome = "error_reply"
        elif response is None:
            code, outcome = None, "success"  # oneway, or answered later
        else:
            code, outcome = response.code, outcome_of_response(response.code)
        attributes = self._metric_attributes("server", call.request.code, outcome, code, error,
                                             None)
        if self._server_duration is not None:
            self._server_duration.record(time.monotonic() - started, attributes)
        if token is not None:
            otel_context.detach(token)  # type: ignore[arg-type]
        if span is not None:
            _finish_span(span, attributes, outcome, error, None)

    # ------------------------------------------------------------------ attributes

    def _span_attributes(self, call: ClientCall, request: RemotingCommand) -> dict[str, Any]:
        attributes: dict[str, Any] = {"rpc.system.name": SYSTEM_NAME,
                                      "rpc.method": str(request.code),
                                      "network.transport": "tcp"}
        if call.addr:
            host, _, port = call.addr.rpartition(":")
            attributes["server.address"] = host
            attributes["server.port"] = _port(port)
        return attributes

    def _metric_attributes(self, side: str, request_code: int, outcome: Outcome,
                           response_code: int | None, error: BaseException | None,
                           addr: str | None) -> dict[str, Any]:
        """Return the (bounded, cached) attributes of a call's measurement."""
        error_type = (type(error).__name__ if error is not None
                      else None if outcome == "success" else str(response_code))
        key = (side, request_code, outcome, response_code, error_type, addr)
        found = self._attributes.get(key)
        if found is not None:
            return found
        attributes: dict[str, Any] = {"rpc.system.name": SYSTEM_NAME,
                                      "rpc.method": str(request_code),
                                      "remoting.outcome": outcome}
        if response_code is not None:
            attributes["rpc.response.status_code"] = str(response_code)
        if error_type is not None:
            attributes["error.type"] = error_type
        if addr:
            host, _, port = addr.rpartition(":")
            attributes["server.address"] = host
            attributes["server.port"] = _port(port)
        if len(self._attributes) < 10_000:  # a bound, in case codes come from the wire
            self._attributes[key] = attributes
        return attributes


def _port(text: str) -> int:
    try:
        return header_int("port", text, 0, 65535)
    except ValueError:
        return 0


def _finish_span(span: Span, attributes: dict[str, Any], outcome: Outcome,
                 error: BaseException | None, end_time: int | None) -> None:
    if span.is_recording():
        span.set_attribute("remoting.outcome", outcome)
        status = attributes.get("rpc.response.status_code")
        if status is not None:
            span.set_attribute("rpc.response.status_code", status)
        if outcome != "success":
            span.set_attribute("error.type", attributes.get("error.type", outcome))
            if error is not None:
                span.record_exception(error)
            span.set_status(Status(StatusCode.ERROR, str(error) if error is not None
                                   else f"response code {status}"))
    span.end(end_time)


def follows_parent(tracer: object) -> bool:
    """True if ``tracer`` is the SDK's with a sampler that drops every span whose parent was
    not sampled: ``ParentBased`` with its default for unsampled parents, ``TraceIdRatioBased``
    (the trace id decides, as it did for the parent), or ``ALWAYS_OFF``."""
    try:
        from opentelemetry.sdk.trace import sampling
    except ImportError:  # another SDK: make every span
        return False
    sampler = getattr(tracer, "sampler", None)
    if isinstance(sampler, sampling.ParentBased):
        return all(getattr(sampler, name, None) is sampling.ALWAYS_OFF
                   for name in ("_remote_parent_not_sampled", "_local_parent_not_sampled"))
    return isinstance(sampler, sampling.TraceIdRatioBased) or sampler is sampling.ALWAYS_OFF


def configured(provider: object) -> bool:
    """False for the API's stand-ins (no SDK configured), True for a real provider."""
    return not isinstance(provider, trace.ProxyTracerProvider | trace.NoOpTracerProvider
                          | metrics.NoOpMeterProvider) and (
        type(provider).__name__ != "_ProxyMeterProvider")


def telemetry_for(endpoint: Endpoint, tracer_provider: Any, meter_provider: Any
                  ) -> Telemetry | None:
    """Return the `Telemetry` of ``endpoint`` (its gauges and counters observed from now on),
    or None if neither a tracer nor a meter provider is configured (given, or global)."""
    tracing = tracer_provider is not None or configured(trace.get_tracer_provider())
    metering = meter_provider is not None or configured(metrics.get_meter_provider())
    if not tracing and not metering:
        return None
    tracer = trace.get_tracer("remoting", __version__, tracer_provider) if tracing else None
    if not metering:
        return Telemetry(tracer, None, None)
    instruments = instruments_for(meter_provider)
    instruments.observe(endpoint)
    return Telemetry(tracer, instruments.client_duration, instruments.server_duration)
