"""Interceptors: around every call (client) and every processed request (server), both faces."""

from __future__ import annotations

import contextvars
import time
from collections.abc import Awaitable, Callable
from typing import Any

import pytest
import trio

from codec import RemotingCommand, ResponseCode
from processors import AsyncRequestProcessor, RequestContext, RequestProcessor
from remoting import (
    ClientCall,
    ClientInterceptor,
    RemotingClient,
    RemotingServer,
    ResponseFuture,
    ServerCall,
    ServerInterceptor,
    TrioRemotingClient,
    TrioRemotingServer,
)

from ..factories import req
from .conftest import ASYNC_ECHO, ECHO, RAISES, REJECTS, addr_of

CALLER: contextvars.ContextVar[str] = contextvars.ContextVar("caller", default="-")


class Stamping(ClientInterceptor):
    """Adds an ext field, records what it saw, in both faces."""

    def __init__(self, name: str, log: list[str]) -> None:
        self.name, self.log = name, log

    def intercept_call(self, call: ClientCall, proceed: Callable[[ClientCall], Any]) -> Any:
        self.log.append(f"{self.name}>{call.kind}:{CALLER.get()}")
        for request in call.requests:
            before = (request.ext_fields or {}).get("stamp") or ""
            request.add_ext_field("stamp", before + self.name)
        result = proceed(call)
        self.log.append(f"{self.name}<{call.kind}")
        return result

    async def intercept_call_async(self, call: ClientCall,
                                   proceed: Callable[[ClientCall], Awaitable[Any]]) -> Any:
        self.log.append(f"{self.name}>{call.kind}:{CALLER.get()}")
        for request in call.requests:
            request.add_ext_field("stamp", self.name)
        result = await proceed(call)
        self.log.append(f"{self.name}<{call.kind}")
        return result


class StampEcho(RequestProcessor):
    """Answers with the request's ``stamp`` ext field in the remark."""

    def process_request(self, ctx: RequestContext, request: RemotingCommand) -> RemotingCommand:
        return RemotingCommand.create_response(
            ResponseCode.SUCCESS, (request.ext_fields or {}).get("stamp") or "")


STAMP_ECHO = 40


def test_blocking_client_interceptors_wrap_every_kind_in_order(
    blocking_server: RemotingServer, blocking_client: RemotingClient,
) -> None:
    blocking_server.register_processor(STAMP_ECHO, StampEcho())
    log: list[str] = []
    blocking_client.register_interceptor(Stamping("a", log))
    blocking_client.register_interceptor(Stamping("b", log))
    addr = blocking_server.addr
    CALLER.set("main")

    response = blocking_client.invoke_sync(addr, req(STAMP_ECHO), 5)
    assert response.remark == "ab"  # a ran first (outermost), then b
    assert log == ["a>sync:main", "b>sync:main", "b<sync", "a<sync"]

    log.clear()
    fut = blocking_client.invoke_async(addr, req(STAMP_ECHO), 5)
    assert isinstance(fut, ResponseFuture)
    assert fut.result().remark == "ab"
    assert log == ["a>async:main", "b>async:main", "b<async", "a<async"]

    log.clear()
    blocking_client.invoke_oneway(addr, req(STAMP_ECHO), 5)
    assert log == ["a>oneway:main", "b>oneway:main", "b<oneway", "a<oneway"]

    log.clear()
    results = blocking_client.invoke_many(addr, [req(STAMP_ECHO) for _ in range(5)], 5)
    assert [r.remark for r in results] == ["ab"] * 5  # type: ignore[union-attr]
    assert log == ["a>many:main", "b>many:main", "b<many", "a<many"]


def test_interceptors_run_before_the_hooks_so_hooks_see_their_changes(
    blocking_server: RemotingServer, blocking_client: RemotingClient,
) -> None:
    seen: list[str | None] = []

    class Hook:
        def do_before_request(self, remote_addr: str, request: RemotingCommand) -> None:
            seen.append((request.ext_fields or {}).get("stamp"))

        def do_after_response(self, *args: object) -> None:
            pass

    blocking_client.register_rpc_hook(Hook())
    blocking_client.register_interceptor(Stamping("a", []))
    blocking_client.invoke_sync(blocking_server.addr, req(ECHO), 5)
    assert seen == ["a"]


class RetryBusy(ClientInterceptor):
    """Resends once after SYSTEM_BUSY: a user's retry, built on `proceed`."""

    def __init__(self) -> None:
        self.attempts = 0

    def intercept_call(self, call: ClientCall, proceed: Callable[[ClientCall], Any]) -> Any:
        self.attempts += 1
        response = proceed(call)
        if call.kind == "sync" and response.code == ResponseCode.SYSTEM_BUSY:
            self.attempts += 1
            response = proceed(call)
        return response


class BusyOnce(RequestProcessor):
    def __init__(self) -> None:
        self.calls = 0

    def process_request(self, ctx: RequestContext, request: RemotingCommand) -> RemotingCommand:
        self.calls += 1
        code = ResponseCode.SYSTEM_BUSY if self.calls == 1 else ResponseCode.SUCCESS
        return RemotingCommand.create_response(code)


def test_an_interceptor_can_retry_by_proceeding_again(
    blocking_server: RemotingServer, blocking_client: RemotingClient,
) -> None:
    busy = BusyOnce()
    blocking_server.register_processor(41, busy)
    retry = RetryBusy()
    blocking_client.register_interceptor(retry)
    response = blocking_client.invoke_sync(blocking_server.addr, req(41), 5)
    assert response.code == ResponseCode.SUCCESS
    assert (retry.attempts, busy.calls) == (2, 2)


def test_an_interceptor_can_answer_without_sending(blocking_client: RemotingClient) -> None:
    cached = RemotingCommand.create_response(ResponseCode.SUCCESS, "from cache")

    class Cache(ClientInterceptor):
        def intercept_call(self, call: ClientCall, proceed: Callable[[ClientCall], Any]) -> Any:
            return cached

    blocking_client.register_interceptor(Cache())
    # no server listens there: the call never leaves the process
    assert blocking_client.invoke_sync("127.0.0.1:1", req(ECHO), 1) is cached
    assert blocking_client.statistics().requests_sent == {}


async def test_trio_client_interceptors_wrap_every_kind_in_the_callers_context(
    server: TrioRemotingServer, client: TrioRemotingClient,
) -> None:
    server.register_processor(STAMP_ECHO, StampEcho())
    log: list[str] = []
    client.register_interceptor(Stamping("t", log))
    addr = addr_of(server)
    CALLER.set("task")
    assert (await client.invoke_sync(addr, req(STAMP_ECHO), 5)).remark == "t"
    fut = await client.invoke_async(addr, req(STAMP_ECHO), 5)
    assert (await fut.wait()).remark == "t"
    await client.invoke_oneway(addr, req(STAMP_ECHO), 5)
    results = await client.invoke_many(addr, [req(STAMP_ECHO), req(STAMP_ECHO)], 5)
    assert [r.remark for r in results] == ["t", "t"]  # type: ignore[union-attr]
    assert log == ["t>sync:task", "t<sync", "t>async:task", "t<async", "t>oneway:task",
                   "t<oneway", "t>many:task", "t<many"]


async def test_many_reports_when_each_request_finished(
    server: TrioRemotingServer, client: TrioRemotingClient,
) -> None:
    seen: list[ClientCall] = []

    class Keep(ClientInterceptor):
        async def intercept_call_async(self, call: ClientCall,
                                       proceed: Callable[[ClientCall], Awaitable[Any]]) -> Any:
            seen.append(call)
            return await proceed(call)

    client.register_interceptor(Keep())
    before = time.monotonic()
    await client.invoke_many(addr_of(server), [req(ECHO) for _ in range(10)], 5, limit=3)
    [call] = seen
    assert len(call.finished_at) == 10
    assert all(before <= stamp <= time.monotonic() for stamp in call.finished_at)


class ContextSetting(ServerInterceptor):
    """Sets a context variable around the processor and maps its exception to a reply."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, int]] = []

    def intercept_request(self, call: ServerCall,
                          proceed: Callable[[ServerCall], RemotingCommand | None]
                          ) -> RemotingCommand | None:
        self.calls.append(("sync", call.request.code))
        token = CALLER.set("interceptor")
        try:
            return proceed(call)
        except ValueError as exc:
            return RemotingCommand.create_response(ResponseCode.NO_PERMISSION, f"mapped: {exc}")
        finally:
            CALLER.reset(token)

    async def intercept_request_async(
        self, call: ServerCall,
        proceed: Callable[[ServerCall], Awaitable[RemotingCommand | None]],
    ) -> RemotingCommand | None:
        self.calls.append(("async", call.request.code))
        CALLER.set("interceptor")
        return await proceed(call)


class ReportsCaller(RequestProcessor):
    def process_request(self, ctx: RequestContext, request: RemotingCommand) -> RemotingCommand:
        return RemotingCommand.create_response(ResponseCode.SUCCESS, CALLER.get())


class ReportsCallerAsync(AsyncRequestProcessor):
    async def process_request(self, ctx: RequestContext, request: RemotingCommand
                              ) -> RemotingCommand:
        await trio.lowlevel.checkpoint()  # suspends: the rest runs in a task, in the same context
        return RemotingCommand.create_response(ResponseCode.SUCCESS, CALLER.get())


async def test_server_interceptors_wrap_sync_and_async_processors(
    server: TrioRemotingServer, client: TrioRemotingClient,
) -> None:
    interceptor = ContextSetting()
    server.register_interceptor(interceptor)
    server.register_processor(42, ReportsCaller())
    server.register_processor(43, ReportsCallerAsync())
    addr = addr_of(server)
    assert (await client.invoke_sync(addr, req(42), 5)).remark == "interceptor"
    assert (await client.invoke_sync(addr, req(43), 5)).remark == "interceptor"
    mapped = await client.invoke_sync(addr, req(RAISES), 5)
    assert (mapped.code, mapped.remark) == (ResponseCode.NO_PERMISSION, "mapped: boom")
    # refused before processing: no interceptor runs
    assert (await client.invoke_sync(addr, req(REJECTS), 5)).code == ResponseCode.SYSTEM_BUSY
    assert (await client.invoke_sync(addr, req(999), 5)).code == (
        ResponseCode.REQUEST_CODE_NOT_SUPPORTED)
    assert interceptor.calls == [("sync", 42), ("async", 43), ("sync", RAISES)]


async def test_an_exception_leaving_the_interceptors_becomes_system_error(
    server: TrioRemotingServer, client: TrioRemotingClient,
) -> None:
    class Broken(ServerInterceptor):
        async def intercept_request_async(self, call: ServerCall, proceed: Any) -> Any:
            raise RuntimeError("interceptor failed")

    server.register_interceptor(Broken())
    response = await client.invoke_sync(addr_of(server), req(ASYNC_ECHO), 5)
    assert response.code == ResponseCode.SYSTEM_ERROR
    assert "interceptor failed" in (response.remark or "")


CALLBACK = 44


class CallsBack(RequestProcessor):
    """Calls the connected client back from a pool thread (server -> client)."""

    def process_request(self, ctx: RequestContext, request: RemotingCommand) -> RemotingCommand:
        back = ctx.channel.invoke_sync(req(CALLBACK), 5)
        return RemotingCommand.create_response(ResponseCode.SUCCESS, back.remark)


def test_server_to_client_calls_go_through_the_servers_client_interceptors(
    blocking_server: RemotingServer, blocking_client: RemotingClient,
) -> None:
    roles: list[tuple[str, str | None]] = []

    class Role(ClientInterceptor):
        def intercept_call(self, call: ClientCall, proceed: Callable[[ClientCall], Any]) -> Any:
            roles.append((call.role, call.addr))
            return proceed(call)

    blocking_server.register_interceptor(Role())
    blocking_server.register_processor(45, CallsBack())
    blocking_client.register_processor(CALLBACK, StampEcho())
    assert blocking_client.invoke_sync(blocking_server.addr, req(45), 5).code == 0
    [(role, addr)] = roles
    assert role == "server"
    assert addr is not None and addr.startswith("127.0.0.1:")


def test_register_interceptor_refuses_other_objects(blocking_client: RemotingClient) -> None:
    with pytest.raises(TypeError, match="ClientInterceptor"):
        blocking_client.register_interceptor(object())  # type: ignore[arg-type]


def test_one_object_can_intercept_both_sides() -> None:
    class Both(ClientInterceptor, ServerInterceptor):
        pass

    both = Both()
    server = RemotingServer()
    server.register_interceptor(both)
    assert server.endpoint.caller.interceptors == [both]
    assert server.endpoint.dispatcher.interceptors == [both]
