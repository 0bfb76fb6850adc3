"""Wrong arguments fail where they are given, with TypeError or ValueError naming them.

Never later inside the event loop, never as a hang, never with a permit kept for good, and
never after the request was already processed by the server (docs/errors.md).
"""

from __future__ import annotations

import math
import threading
from collections.abc import Awaitable, Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest
import trio

from codec import RemotingCommand, RequestCode, ResponseCode
from processors import EchoProcessor, RequestContext, RequestProcessor
from remoting import (
    ClientCall,
    ClientConfig,
    ClientInterceptor,
    RemotingClient,
    RemotingCommandError,
    RemotingConnectError,
    RemotingError,
    RemotingServer,
    RemotingTimeoutError,
    ServerConfig,
    TrioRemotingClient,
    TrioRemotingServer,
)

from ..factories import req
from .conftest import ECHO, addr_of

COUNTED = 40


class Counting(RequestProcessor):
    """Echo that counts what reached it (a request the client refused must not)."""

    def __init__(self) -> None:
        self.calls = 0
        self.lock = threading.Lock()

    def process_request(self, ctx: RequestContext, request: RemotingCommand) -> RemotingCommand:
        with self.lock:
            self.calls += 1
        return RemotingCommand.create_response(ResponseCode.SUCCESS)


# ---------------------------------------------------------------------- configs

BAD_CONFIGS: list[tuple[type[Any], dict[str, Any], type[Exception]]] = [
    (ServerConfig, {"max_frame_bytes": 0}, ValueError),  # crashed the loop at the first connection
    (ClientConfig, {"max_frame_bytes": 4}, ValueError),
    (ServerConfig, {"max_frame_bytes": "16"}, TypeError),
    (ServerConfig, {"max_header_bytes": 100}, ValueError),  # under 1 KiB: no room for ext fields
    (ClientConfig, {"max_header_bytes": 64.0}, TypeError),
    (ClientConfig, {"scan_period": -1}, ValueError),  # crashed the loop once the scanner ran
    (ClientConfig, {"scan_period": 0}, ValueError),  # a busy loop at 100% CPU
    (ServerConfig, {"scan_initial_delay": -1}, ValueError),
    (ClientConfig, {"callback_executor_threads": -1}, ValueError),
    (ClientConfig, {"connect_timeout": -1}, ValueError),
    (ClientConfig, {"connect_timeout": None}, TypeError),
    (ClientConfig, {"connect_timeout": math.nan}, ValueError),
    (ServerConfig, {"write_buffer_high_water_mark": -1}, ValueError),  # every call timed out
    (ClientConfig, {"write_buffer_low_water_mark": -1}, ValueError),
    (ServerConfig, {"max_requests_per_connection": -1}, ValueError),
    (ServerConfig, {"max_connections": -1}, ValueError),  # refused every connection
    (ServerConfig, {"max_connections_per_ip": -1}, ValueError),
    (ServerConfig, {"processor_queue_capacity": -100}, ValueError),  # all SYSTEM_BUSY
    (ClientConfig, {"client_async_semaphore_value": -1}, ValueError),
    (ClientConfig, {"client_oneway_semaphore_value": 0}, ValueError),
    (ServerConfig, {"listen_port": "0"}, TypeError),
    (ServerConfig, {"listen_port": 0.5}, TypeError),
    (ServerConfig, {"bind_address": None}, TypeError),  # bound every interface
    (ServerConfig, {"tls_mode": "Permissive"}, ValueError),  # enforced TLS
    (ServerConfig, {"tls_mode": "on"}, ValueError),
    (ServerConfig, {"shutdown_grace_seconds": -1}, ValueError),  # half-stopped the server
    (ServerConfig, {"tls_handshake_timeout": 0}, ValueError),
    (ServerConfig, {"default_processor_threads": -2}, ValueError),
    (ClientConfig, {"use_tls": "yes"}, TypeError),
    (ServerConfig, {"tls_cert_file": 42}, TypeError),
]


@pytest.mark.parametrize(("cls", "kwargs", "error"), BAD_CONFIGS,
                         ids=[f"{c.__name__}-{next(iter(k))}={next(iter(k.values()))!r}"
                              for c, k, _ in BAD_CONFIGS])
def test_a_bad_config_field_is_refused_when_the_config_is_made(
        cls: type[Any], kwargs: dict[str, Any], error: type[Exception]) -> None:
    [(name, value)] = kwargs.items()
    with pytest.raises(error) as info:
        cls(**kwargs)
    assert f"{cls.__name__}.{name} must be" in str(info.value)
    assert repr(value) in str(info.value)


def test_a_low_water_mark_above_the_high_one_is_refused() -> None:
    with pytest.raises(ValueError, match="write_buffer_low_water_mark .* must not exceed"):
        ClientConfig(write_buffer_high_water_mark=512 * 1024)  # the default low is 1 MiB
    ClientConfig(write_buffer_high_water_mark=1 << 20, write_buffer_low_water_mark=1 << 20)


def test_documented_special_values_stay_accepted() -> None:
    ServerConfig(listen_port=0, max_idle_seconds=0, partial_frame_timeout=0,
                 processor_queue_capacity=0, max_connections=0, max_connections_per_ip=0,
                 default_processor_threads=0, shutdown_grace_seconds=0)
    ClientConfig(callback_executor_threads=0, connect_timeout=math.inf, max_idle_seconds=0)


@pytest.mark.parametrize(("face", "config"), [
    (RemotingClient, ServerConfig()), (RemotingServer, ClientConfig()),
    (TrioRemotingClient, {}), (TrioRemotingServer, {"listen_port": 0}),
])
def test_a_config_of_the_wrong_kind_is_refused(face: type[Any], config: object) -> None:
    with pytest.raises(TypeError, match="config must be a"):
        face(config)


def test_default_processor_threads_0_means_4_as_documented() -> None:
    with RemotingServer(ServerConfig(default_processor_threads=0)) as server, \
            RemotingClient() as client:
        server.register_processor(ECHO, EchoProcessor())  # raised "needs at least one thread"
        response = client.invoke_sync(server.addr, req(ECHO, b"hi"), 5)
    assert response.body == b"hi"


# ---------------------------------------------------------------------- registration

class AwaitingInASyncProcessor(RequestProcessor):
    async def process_request(self, ctx: RequestContext,  # type: ignore[override]
                              request: RemotingCommand) -> RemotingCommand:
        return RemotingCommand.create_response(ResponseCode.SUCCESS)


@pytest.mark.parametrize(("args", "kwargs", "error", "words"), [
    ((2**31, EchoProcessor()), {}, ValueError, "int32"),
    (("101", EchoProcessor()), {}, TypeError, "code must be an int"),
    ((True, EchoProcessor()), {}, TypeError, "code must be an int"),
    ((108, EchoProcessor(), "pool"), {}, TypeError, "Executor"),  # answered SYSTEM_BUSY
    ((109, EchoProcessor()), {"threads": "2"}, TypeError, "threads"),
    ((109, EchoProcessor()), {"threads": -1}, ValueError, "threads"),
    ((110, AwaitingInASyncProcessor()), {}, TypeError, "AsyncRequestProcessor"),
])
def test_a_registration_that_could_never_serve_is_refused(
        args: tuple[Any, ...], kwargs: dict[str, Any], error: type[Exception], words: str
) -> None:
    server = TrioRemotingServer()
    with pytest.raises(error, match=words):
        server.register_processor(*args, **kwargs)


def test_a_user_executor_is_still_accepted() -> None:
    with ThreadPoolExecutor(2) as pool, RemotingServer() as server, RemotingClient() as client:
        server.register_processor(ECHO, EchoProcessor(), pool)
        assert client.invoke_sync(server.addr, req(ECHO, b"x"), 5).body == b"x"


def test_an_address_list_given_as_one_string_is_refused() -> None:
    client = TrioRemotingClient()
    with pytest.raises(TypeError, match="list of 'host:port'"):
        client.update_name_server_address_list("127.0.0.1:9876")  # type: ignore[arg-type]


# ---------------------------------------------------------------------- calls, blocking face

Counted = tuple[RemotingServer, RemotingClient, "Counting"]


@pytest.fixture
def counted() -> Iterator[Counted]:
    processor = Counting()
    with RemotingServer() as server, RemotingClient() as client:
        server.register_processor(COUNTED, processor)
        client.invoke_sync(server.addr, req(COUNTED), 5)  # connected: every check below is live
        processor.calls = 0
        yield server, client, processor


@pytest.mark.parametrize(("timeout", "error"), [
    (math.nan, ValueError), ("1", TypeError), (None, TypeError), (True, TypeError),
    (-1, ValueError), (-0.5, ValueError)])  # a negative one was taken as an expired deadline
@pytest.mark.parametrize("kind", ["sync", "async", "oneway", "many"])
def test_a_bad_timeout_fails_before_anything_is_sent(counted: Counted, kind: str, timeout: object,
                                                     error: type[Exception]) -> None:
    server, client, processor = counted
    before = client.statistics()
    calls: dict[str, Callable[[], object]] = {  # hostile timeouts on purpose
        "sync": lambda: client.invoke_sync(server.addr, req(COUNTED), timeout),  # type: ignore[arg-type]
        "async": lambda: client.invoke_async(server.addr, req(COUNTED), timeout),  # type: ignore[arg-type]
        "oneway": lambda: client.invoke_oneway(server.addr, req(COUNTED), timeout),  # type: ignore[arg-type]
        "many": lambda: client.invoke_many(server.addr, [req(COUNTED)], timeout)}  # type: ignore[arg-type]
    call = calls[kind]
    with pytest.raises(error, match="timeout must be a number of seconds"):
        call()
    after = client.statistics()
    assert (after.async_permits_free, after.oneway_permits_free) == (
        before.async_permits_free, before.oneway_permits_free)
    assert client.invoke_sync(server.addr, req(COUNTED), 5).code == ResponseCode.SUCCESS
    assert processor.calls == 1  # only the last call reached the server


@pytest.mark.parametrize("timeout", [0, 0.0])
def test_a_timeout_of_0_is_a_deadline_already_past_and_sends_nothing(
        counted: Counted, timeout: float) -> None:
    server, client, processor = counted
    before = client.statistics()
    with pytest.raises(RemotingTimeoutError, match="left no time: nothing was sent"):
        client.invoke_sync(server.addr, req(COUNTED), timeout)
    [result] = client.invoke_many(server.addr, [req(COUNTED)], timeout)
    assert isinstance(result, RemotingTimeoutError)
    with pytest.raises(RemotingTimeoutError):
        client.invoke_async(server.addr, req(COUNTED), timeout).result(5)
    with pytest.raises(RemotingTimeoutError):
        client.invoke_oneway(server.addr, req(COUNTED), timeout)
    # nothing went out: a live call after them is the first the server sees
    assert client.invoke_sync(server.addr, req(COUNTED), 5).code == ResponseCode.SUCCESS
    assert processor.calls == 1
    after = client.statistics()
    assert (after.async_permits_free, after.oneway_permits_free) == (
        before.async_permits_free, before.oneway_permits_free)


async def test_trio_calls_with_a_timeout_of_0_send_nothing(nursery: trio.Nursery) -> None:
    processor = Counting()
    server = TrioRemotingServer()
    server.register_processor(COUNTED, processor)
    await nursery.start(server.serve)
    client = TrioRemotingClient()
    await nursery.start(client.serve)
    addr = addr_of(server)
    await client.invoke_sync(addr, req(COUNTED), 5)
    with pytest.raises(RemotingTimeoutError):
        await client.invoke_sync(addr, req(COUNTED), 0)
    with pytest.raises(RemotingTimeoutError):
        await client.invoke_oneway(addr, req(COUNTED), 0)
    with pytest.raises(RemotingTimeoutError):
        await (await client.invoke_async(addr, req(COUNTED), 0)).wait()
    [result] = await client.invoke_many(addr, [req(COUNTED)], 0)
    assert isinstance(result, RemotingTimeoutError)
    for call in (client.invoke_sync, client.invoke_oneway, client.invoke_async):
        with pytest.raises(ValueError, match="timeout must be a number of seconds >= 0"):
            await call(addr, req(COUNTED), -1)
    with pytest.raises(ValueError, match="timeout must be a number of seconds >= 0"):
        await client.invoke_many(addr, [req(COUNTED)], -1)
    await client.invoke_sync(addr, req(COUNTED), 5)
    assert processor.calls == 2


def test_an_infinite_timeout_waits_as_long_as_it_takes(counted: Counted) -> None:
    server, client, processor = counted  # OverflowError after the request was processed
    assert client.invoke_sync(server.addr, req(COUNTED), math.inf).code == ResponseCode.SUCCESS
    [response] = client.invoke_many(server.addr, [req(COUNTED)], math.inf)
    assert isinstance(response, RemotingCommand)
    assert client.invoke_async(server.addr, req(COUNTED), math.inf).result(5).code == 0
    assert processor.calls == 3


@pytest.mark.parametrize("request_", [None, {"code": COUNTED}, b"frame"])
def test_a_request_that_is_not_a_command_is_refused(counted: Counted, request_: object) -> None:
    server, client, _ = counted
    with pytest.raises(TypeError, match="request must be a RemotingCommand"):
        client.invoke_sync(server.addr, request_, 5)  # type: ignore[arg-type]  # hostile input on purpose


def test_invoke_many_with_a_foreign_item_fails_at_once_and_keeps_no_permit(
        counted: Counted) -> None:
    server, client, processor = counted
    free = client.statistics().async_permits_free
    with pytest.raises(TypeError, match=r"requests\[1\] must be a RemotingCommand"):
        client.invoke_many(server.addr, [req(COUNTED), "x", req(COUNTED)], 5)  # type: ignore[list-item]  # hostile: hung 31 s
    assert client.statistics().async_permits_free == free
    assert processor.calls == 0


def test_a_oneway_request_with_a_bad_flag_fails_and_keeps_no_permit(counted: Counted) -> None:
    server, client, _ = counted
    free = client.statistics().oneway_permits_free
    request = req(COUNTED)
    request.flag = None  # type: ignore[assignment]
    with pytest.raises(RemotingCommandError):  # was a 6 s wait, then "loop stalled"
        client.invoke_oneway(server.addr, request, 1.0)
    assert client.statistics().oneway_permits_free == free


class ClosedEvent:
    """A channel event listener that sets ``closed`` when a connection closes."""

    def __init__(self) -> None:
        self.closed = threading.Event()

    def on_channel_close(self, remote_addr: str, channel: Any) -> None:
        self.closed.set()

    def on_channel_connect(self, remote_addr: str, channel: Any) -> None:
        pass

    on_channel_exception = on_channel_idle = on_channel_connect


def test_a_shutdown_with_a_bad_grace_changes_nothing() -> None:
    server = RemotingServer().start()
    server.register_processor(ECHO, EchoProcessor())
    addr = server.addr
    listener = ClosedEvent()
    with RemotingClient() as client:
        client.register_channel_event_listener(listener)
        with pytest.raises(ValueError, match="grace"):
            server.shutdown(grace=-1)  # stopped accepting, then could not be stopped at all
        assert client.invoke_sync(addr, req(ECHO, b"still"), 5).body == b"still"
        server.shutdown()
        # the client's loop sees the server's close of the connection: a call sent before that
        # went out on it and failed as "peer closed the connection" (a race, not a shutdown's)
        assert listener.closed.wait(5)
        with pytest.raises(RemotingConnectError):  # now it did stop
            client.invoke_sync(addr, req(ECHO), 5)


# ---------------------------------------------------------------------- calls, trio face

async def test_trio_invoke_many_with_bad_arguments_keeps_no_permit(
        server: TrioRemotingServer, nursery: trio.Nursery) -> None:
    client = TrioRemotingClient(ClientConfig(client_async_semaphore_value=2))
    await nursery.start(client.serve)
    addr = addr_of(server)
    for _ in range(3):  # each used to keep a permit: the third found none left
        with pytest.raises(TypeError):
            await client.invoke_many(addr, [req(ECHO), req(ECHO)], "1")  # type: ignore[arg-type]
        with pytest.raises(TypeError):
            await client.invoke_many(addr, [req(ECHO), 7])  # type: ignore[list-item]
    results = await client.invoke_many(addr, [req(ECHO, b"a"), req(ECHO, b"b")], 5)
    assert [r.body for r in results] == [b"a", b"b"]  # type: ignore[union-attr]
    assert client.statistics().async_permits_free == 2


async def test_trio_oneway_with_a_bad_flag_keeps_no_permit(
        server: TrioRemotingServer, client: TrioRemotingClient) -> None:
    addr = addr_of(server)
    await client.invoke_sync(addr, req(ECHO), 5)
    free = client.statistics().oneway_permits_free
    request = req(ECHO)
    request.flag = None  # type: ignore[assignment]
    with pytest.raises(RemotingCommandError):
        await client.invoke_oneway(addr, request, 1.0)
    assert client.statistics().oneway_permits_free == free


async def test_trio_shutdown_with_a_bad_grace_changes_nothing(
        server: TrioRemotingServer, client: TrioRemotingClient) -> None:
    with pytest.raises(ValueError, match="grace"):
        await server.shutdown(grace=math.nan)
    assert (await client.invoke_sync(addr_of(server), req(ECHO, b"up"), 5)).body == b"up"


# ---------------------------------------------------------------------- requests no one answers

def a_response() -> RemotingCommand:
    response = RemotingCommand.create_response(ResponseCode.SUCCESS)
    response.code = COUNTED
    return response


def marked_oneway() -> RemotingCommand:
    request = req(COUNTED)
    request.mark_oneway()
    return request


UNANSWERED = [(a_response, "is a response .* RemotingCommand.create_request"),
              (marked_oneway, "is marked oneway .* invoke_oneway")]


@pytest.mark.parametrize(("make", "words"), UNANSWERED, ids=["response", "oneway"])
@pytest.mark.parametrize("kind", ["sync", "async", "many"])
def test_a_request_no_one_would_answer_is_refused_before_it_is_sent(
        counted: Counted, kind: str, make: Any, words: str) -> None:
    server, client, processor = counted  # it timed out, and the timeout closed the connection
    calls: dict[str, Callable[[RemotingCommand], object]] = {
        "sync": lambda r: client.invoke_sync(server.addr, r, 5),
        "async": lambda r: client.invoke_async(server.addr, r, 5),
        "many": lambda r: client.invoke_many(server.addr, [req(COUNTED), r], 5)}
    call = calls[kind]
    with pytest.raises(ValueError, match=("requests\\[1\\] " if kind == "many" else "request ")
                       + words):
        call(make())
    assert processor.calls == 0
    assert client.invoke_sync(server.addr, req(COUNTED), 5).code == ResponseCode.SUCCESS


def test_a_received_response_is_not_a_request(counted: Counted) -> None:
    server, client, processor = counted
    response = client.invoke_sync(server.addr, req(COUNTED), 5)
    with pytest.raises(ValueError, match="request is a response"):
        client.invoke_sync(server.addr, response, 5)
    with pytest.raises(ValueError, match="request is a response"):
        client.invoke_oneway(server.addr, response, 5)
    assert processor.calls == 1


def test_oneway_sends_leave_the_callers_request_as_it_was(counted: Counted) -> None:
    server, client, processor = counted
    request = req(COUNTED)
    client.invoke_oneway(server.addr, request, 5)
    assert server.broadcast_oneway(server.channels(), request) == 1
    assert request.flag == 0  # both set the oneway bit on it: invoke_sync then timed out
    assert client.invoke_sync(server.addr, request, 5).code == ResponseCode.SUCCESS
    marked = marked_oneway()
    client.invoke_oneway(server.addr, marked, 5)  # already marked: fine for oneway
    assert marked.is_oneway and not marked.is_response


async def test_trio_requests_no_one_would_answer_are_refused(
        server: TrioRemotingServer, client: TrioRemotingClient) -> None:
    addr = addr_of(server)
    for make, words in UNANSWERED:
        with pytest.raises(ValueError, match=f"request {words}"):
            await client.invoke_sync(addr, make(), 5)
        with pytest.raises(ValueError, match=f"request {words}"):
            await client.invoke_async(addr, make(), 5)
        with pytest.raises(ValueError, match=f"requests\\[0\\] {words}"):
            await client.invoke_many(addr, [make()], 5)
    with pytest.raises(ValueError, match="request is a response"):
        await client.invoke_oneway(addr, a_response(), 5)
    request = req(ECHO, b"again")
    await client.invoke_oneway(addr, request, 5)
    assert (await client.invoke_sync(addr, request, 5)).body == b"again"


# ---------------------------------------------------------------------- server push

class Push:
    """What a server push is given, one bad argument at a time."""

    def __init__(self, server: Any, channel: Any) -> None:
        self.server, self.channel = server, channel


PUSH_MISUSE: list[tuple[str, Any, type[Exception], str]] = [
    ("broadcast a str", lambda p: p.server.broadcast_oneway(p.server.channels(), "x"),
     TypeError, "request must be a RemotingCommand"),
    ("broadcast to addresses", lambda p: p.server.broadcast_oneway(["127.0.0.1:1"], req(ECHO)),
     TypeError, r"channels\[0\] must be a channel"),
    ("broadcast to one channel", lambda p: p.server.broadcast_oneway(p.channel, req(ECHO)),
     TypeError, "channels must be an iterable of channels"),
    ("broadcast a response", lambda p: p.server.broadcast_oneway(
        p.server.channels(), RemotingCommand.create_response(0)), ValueError, "is a response"),
    ("broadcast code 2**40", lambda p: p.server.broadcast_oneway(
        p.server.channels(), RemotingCommand(code=2**40)), RemotingCommandError, "int32"),
    ("broadcast over max_frame", lambda p: p.server.broadcast_oneway(
        p.server.channels(), req(ECHO, b"x" * (17 << 20))), RemotingCommandError, "limit"),
    ("invoke_sync to an address", lambda p: p.server.invoke_sync("127.0.0.1:1", req(ECHO)),
     TypeError, "channel must be a channel"),
    ("invoke_async to an address", lambda p: p.server.invoke_async("127.0.0.1:1", req(ECHO)),
     TypeError, "channel must be a channel"),
    ("invoke_oneway to None", lambda p: p.server.invoke_oneway(None, req(ECHO)),
     TypeError, "channel must be a channel"),
    ("write_response of strs", lambda p: p.channel.write_response("x", "y"),
     TypeError, "request must be a RemotingCommand"),
    ("write_response of a dict", lambda p: p.channel.write_response(req(ECHO), {"code": 0}),
     TypeError, "response must be a RemotingCommand"),
]


@pytest.mark.parametrize(("push", "error", "words"), [m[1:] for m in PUSH_MISUSE],
                         ids=[m[0] for m in PUSH_MISUSE])
def test_a_bad_server_push_fails_at_once(push: Any, error: type[Exception], words: str) -> None:
    with RemotingServer() as server, RemotingClient() as client:
        server.register_processor(ECHO, EchoProcessor())
        client.register_processor(ECHO, EchoProcessor())
        client.invoke_sync(server.addr, req(ECHO), 5)
        [channel] = server.channels()
        with pytest.raises(error, match=words):  # AttributeError, or returned and only logged
            push(Push(server, channel))
        assert server.invoke_sync(channel, req(ECHO, b"up"), 5).body == b"up"


async def test_trio_server_push_checks_its_arguments(
        server: TrioRemotingServer, client: TrioRemotingClient) -> None:
    client.register_processor(ECHO, EchoProcessor())
    await client.invoke_sync(addr_of(server), req(ECHO), 5)
    [channel] = server.channels()
    with pytest.raises(TypeError, match="channel must be a channel"):
        await server.invoke_sync("127.0.0.1:1", req(ECHO))  # type: ignore[arg-type]
    with pytest.raises(TypeError, match=r"channels\[0\] must be a channel"):
        server.broadcast_oneway(["127.0.0.1:1"], req(ECHO))  # type: ignore[list-item]
    with pytest.raises(RemotingCommandError, match="int32"):
        server.broadcast_oneway([channel], RemotingCommand(code=2**40))
    request = req(ECHO, b"push")
    assert server.broadcast_oneway([channel], request) == 1
    assert (await server.invoke_sync(channel, request, 5)).body == b"push"


# ---------------------------------------------------------------------- what interceptors change

class Changes(ClientInterceptor):
    """Sets one field of every call before it goes on."""

    def __init__(self, field: str, value: Any) -> None:
        self.field, self.value = field, value

    def intercept_call(self, call: ClientCall, proceed: Any) -> Any:
        setattr(call, self.field, self.value() if callable(self.value) else self.value)
        return proceed(call)

    async def intercept_call_async(self, call: ClientCall, proceed: Any) -> Any:
        setattr(call, self.field, self.value() if callable(self.value) else self.value)
        return await proceed(call)


CHANGED: list[tuple[str, Any, type[Exception], str]] = [
    ("timeout", "3", TypeError, "timeout must be a number"),  # invoke_async never completed
    ("timeout", math.nan, ValueError, "timeout must be a number"),
    ("request", "x", TypeError, "request must be a RemotingCommand"),  # AttributeError
    ("request", a_response, ValueError, "request is a response"),
    ("requests", lambda: ["x"], TypeError, r"requests\[0\] must be a RemotingCommand"),
]


def _changed_ids() -> list[str]:
    return [f"{f}={getattr(v, '__name__', v)!r}" for f, v, _, _ in CHANGED]


def _applies(kind: str, field: str) -> bool:
    return (field == "requests") == (kind == "many")


CHANGED_CALLS = [(kind, *change) for change in CHANGED
                 for kind in ("sync", "async", "oneway", "many") if _applies(kind, change[0])]


@pytest.mark.parametrize(("kind", "field", "value", "error", "words"), CHANGED_CALLS,
                         ids=[f"{k}-{f}={getattr(v, '__name__', v)!r}"
                              for k, f, v, _, _ in CHANGED_CALLS])
def test_what_an_interceptor_changes_is_checked_before_it_is_sent(
        counted: Counted, kind: str, field: str, value: Any, error: type[Exception], words: str
) -> None:
    server, client, processor = counted
    client.register_interceptor(Changes(field, value))
    calls: dict[str, Callable[[], object]] = {
        "sync": lambda: client.invoke_sync(server.addr, req(COUNTED), 5),
        "async": lambda: client.invoke_async(server.addr, req(COUNTED), 5),
        "oneway": lambda: client.invoke_oneway(server.addr, req(COUNTED), 5),
        "many": lambda: client.invoke_many(server.addr, [req(COUNTED)], 5)}
    call = calls[kind]
    with pytest.raises(error, match=words):
        call()
    assert processor.calls == 0
    assert client.statistics().in_flight == 0


@pytest.mark.parametrize(("field", "value", "error", "words"), CHANGED, ids=_changed_ids())
async def test_what_an_interceptor_changes_is_checked_on_the_trio_face(
        server: TrioRemotingServer, client: TrioRemotingClient, field: str, value: Any,
        error: type[Exception], words: str) -> None:
    addr = addr_of(server)
    client.register_interceptor(Changes(field, value))
    calls: dict[str, Callable[[], Awaitable[object]]] = {
             "sync": lambda: client.invoke_sync(addr, req(ECHO), 5),
             "async": lambda: client.invoke_async(addr, req(ECHO), 5),
             "oneway": lambda: client.invoke_oneway(addr, req(ECHO), 5),
             "many": lambda: client.invoke_many(addr, [req(ECHO)], 5)}
    for kind, call in calls.items():
        if _applies(kind, field):
            with pytest.raises(error, match=words):
                await call()


def test_an_interceptor_timeout_of_minus_1_is_refused_as_the_call_s_would_be(
        counted: Counted) -> None:
    server, client, processor = counted
    client.register_interceptor(Changes("timeout", -1))
    with pytest.raises(ValueError, match="timeout must be a number of seconds >= 0"):
        client.invoke_sync(server.addr, req(COUNTED), 5)
    assert processor.calls == 0


def test_a_call_a_thread_hands_over_that_cannot_start_fails_its_future() -> None:
    ran = threading.Event()
    with RemotingServer() as server, RemotingClient(ClientConfig(io="loop")) as client:
        # the door to the loop threads use, given what no face lets through: it raised on the
        # loop, and the future stayed pending for ever (its callback never ran)
        fut = client.endpoint.invoker.threads.submit(server.addr, req(COUNTED), "3", "async",  # type: ignore[arg-type]  # on purpose
                                                     lambda _: ran.set())
        assert ran.wait(5)
        with pytest.raises(RemotingError, match="failed unexpectedly"):
            fut.result(5)


# ---------------------------------------------------------------------- more call arguments

@pytest.mark.parametrize(("limit", "error"), [
    ("4", TypeError), (None, TypeError), (True, TypeError), (1.5, TypeError),
    (0, ValueError), (-1, ValueError)])
def test_a_bad_invoke_many_limit_fails_at_once(counted: Counted, limit: object,
                                               error: type[Exception]) -> None:
    server, client, processor = counted  # 0, -1 and 1.5 were taken as 1; "4" and None raised
    with pytest.raises(error, match="limit must be an int >= 1"):  # bare TypeErrors
        client.invoke_many(server.addr, [req(COUNTED)], 5, limit)  # type: ignore[arg-type]  # hostile input on purpose
    assert processor.calls == 0
    assert len(client.invoke_many(server.addr, [req(COUNTED)] * 3, 5, 10**30)) == 3


async def test_a_bad_trio_invoke_many_limit_fails_at_once(
        server: TrioRemotingServer, client: TrioRemotingClient) -> None:
    for limit in (0, "4"):
        with pytest.raises((TypeError, ValueError), match="limit must be"):
            await client.invoke_many(addr_of(server), [req(ECHO)], 5, limit)  # type: ignore[arg-type]


@pytest.mark.parametrize(("timeout", "error"), [("1", TypeError), (math.nan, ValueError),
                                                (True, TypeError)])
def test_a_bad_result_timeout_names_the_argument(counted: Counted, timeout: object,
                                                 error: type[Exception]) -> None:
    server, client, _ = counted
    fut = client.invoke_async(server.addr, req(COUNTED), 5)
    with pytest.raises(error, match="timeout must be None or a number of seconds"):
        fut.result(timeout)  # type: ignore[arg-type]
    assert fut.result(math.inf).code == ResponseCode.SUCCESS
    with pytest.raises(error, match="timeout must be None"):  # done or not
        fut.result(timeout)  # type: ignore[arg-type]


def test_a_callback_that_cannot_be_called_fails_at_once(counted: Counted) -> None:
    server, client, processor = counted  # both were accepted, then only logged
    with pytest.raises(TypeError, match="callback must be a function of the future"):
        client.invoke_async(server.addr, req(COUNTED), 5, callback=5)  # type: ignore[arg-type]
    assert processor.calls == 0
    fut = client.invoke_async(server.addr, req(COUNTED), 5)
    with pytest.raises(TypeError, match="fn must be a function of the future"):
        fut.add_done_callback("x")  # type: ignore[arg-type]
    fut.result(5)
    with pytest.raises(TypeError, match="fn must be"):
        fut.add_done_callback(None)  # type: ignore[arg-type]
    interceptor = Changes("callback", 5)
    client.register_interceptor(interceptor)
    with pytest.raises(TypeError, match="callback must be"):
        client.invoke_async(server.addr, req(COUNTED), 5)
    interceptor.field, interceptor.value = "limit", lambda: 0
    with pytest.raises(ValueError, match="limit must be"):
        client.invoke_many(server.addr, [req(COUNTED)], 5)
    assert processor.calls == 1


async def test_a_trio_callback_that_cannot_be_called_fails_at_once(
        server: TrioRemotingServer, client: TrioRemotingClient) -> None:
    with pytest.raises(TypeError, match="callback must be"):
        await client.invoke_async(addr_of(server), req(ECHO), 5, callback="x")  # type: ignore[arg-type]


@pytest.mark.parametrize("code", [1.7, "12", True, None, b"1"])
@pytest.mark.parametrize("factory", [RemotingCommand.create_request,
                                     RemotingCommand.create_response],
                         ids=["create_request", "create_response"])
def test_a_code_that_is_not_an_int_is_refused_when_the_command_is_made(
        factory: Any, code: object) -> None:
    with pytest.raises(TypeError, match="code must be an int"):  # 1.7 gave code 1, "12" 12
        factory(code)


def test_int_codes_and_their_enums_are_taken() -> None:
    assert RemotingCommand.create_request(RequestCode.HEART_BEAT).code == RequestCode.HEART_BEAT
    assert type(RemotingCommand.create_response(ResponseCode.SYSTEM_BUSY).code) is int
    with pytest.raises(TypeError, match="code must be an int"):
        RemotingCommand.response_to(req(ECHO), 0.0)  # type: ignore[arg-type]
