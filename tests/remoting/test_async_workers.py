"""Async processors on the shared workers: a worker runs each processor's first step itself and
hands the rest of the queue on only when a processor suspends (real sockets, no sleeps)."""

from __future__ import annotations

import contextvars

import pytest
import trio

from codec import RemotingCommand, ResponseCode
from processors import AsyncRequestProcessor, RequestContext
from remoting import RemotingSendRequestError, TrioRemotingClient, TrioRemotingServer
from remoting._core._receiving import _first_step

from ..factories import req
from .conftest import ASYNC_ECHO, GATED_ASYNC, AsyncGate, addr_of


@pytest.fixture(autouse=True, params=["first step in the reader", "a task per request"])
def async_path(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> None:
    """Each test runs both ways an async processor may run: its first step in the reader
    (the shortcut), and the public path a trio that broke the shortcut falls back to."""
    if request.param == "a task per request":
        monkeypatch.setattr(_first_step.SelfCheck, "usable", False)


STEPS = 50
STEPS_THEN_RAISE = 51
TOGGLED = 52


class Steps(AsyncRequestProcessor):
    """Suspends several times (checkpoints and a short wait), then answers or raises."""

    def __init__(self, fail: bool = False) -> None:
        self.fail = fail

    async def process_request(self, ctx: RequestContext, request: RemotingCommand
                              ) -> RemotingCommand:
        for _ in range(3):
            await trio.lowlevel.checkpoint()
        with trio.move_on_after(0.001):
            await trio.Event().wait()
        if self.fail:
            raise LookupError("after suspending")
        response = RemotingCommand.create_response(ResponseCode.SUCCESS)
        response.body = request.body
        return response


class Plain(AsyncRequestProcessor):
    async def process_request(self, ctx: RequestContext, request: RemotingCommand
                              ) -> RemotingCommand:
        return RemotingCommand.create_response(ResponseCode.SUCCESS)


async def test_a_suspended_processor_does_not_hold_up_the_rest_of_its_burst(
    server: TrioRemotingServer, client: TrioRemotingClient,
) -> None:
    gate = AsyncGate()
    server.register_processor(GATED_ASYNC, gate)
    addr = addr_of(server)
    # Written without yielding in between: the first frame goes out at once, the next ones
    # together, so the gated request (third) shares a read with the echoes behind it.
    futures = [await client.invoke_async(addr, req(ASYNC_ECHO, b"%d" % i), timeout=30)
               for i in range(2)]
    held = await client.invoke_async(addr, req(GATED_ASYNC), timeout=30)
    futures += [await client.invoke_async(addr, req(ASYNC_ECHO, b"%d" % i), timeout=30)
                for i in range(2, 30)]
    with trio.fail_after(10):
        bodies = [(await f.wait()).body for f in futures]
    assert bodies == [b"%d" % i for i in range(30)]
    assert not held.done()  # still parked in its processor
    gate.event.set()
    with trio.fail_after(10):
        assert (await held.wait()).code == ResponseCode.SUCCESS


async def test_processors_that_suspend_many_times_answer_or_fail_cleanly(
    server: TrioRemotingServer, client: TrioRemotingClient,
) -> None:
    server.register_processor(STEPS, Steps())
    server.register_processor(STEPS_THEN_RAISE, Steps(fail=True))
    reqs = [req(STEPS if i % 3 else STEPS_THEN_RAISE, b"%d" % i) for i in range(60)]
    with trio.fail_after(20):
        results = await client.invoke_many(addr_of(server), reqs, timeout=10, limit=60)
    for i, r in enumerate(results):
        assert isinstance(r, RemotingCommand)
        if i % 3:
            assert r.code == ResponseCode.SUCCESS
            assert r.body == b"%d" % i
        else:
            assert r.code == ResponseCode.SYSTEM_ERROR
            assert "LookupError: after suspending" in (r.remark or "")
    assert server.statistics().processing == 0


async def test_reject_request_set_on_the_instance_is_honoured(
    server: TrioRemotingServer, client: TrioRemotingClient,
) -> None:
    processor = Plain()
    processor.reject_request = lambda: True  # type: ignore[method-assign]
    server.register_processor(TOGGLED, processor)
    response = await client.invoke_sync(addr_of(server), req(TOGGLED), timeout=10)
    assert response.code == ResponseCode.SYSTEM_BUSY
    assert (response.remark or "").startswith("[REJECTREQUEST]")


LISTENS = 53
REMEMBERS = 54
REQUEST_ID: contextvars.ContextVar[bytes] = contextvars.ContextVar("request_id", default=b"")


class Listens(AsyncRequestProcessor):
    """Waits forever; records how it ended."""

    def __init__(self) -> None:
        self.entered = trio.Event()
        self.cancelled = trio.Event()

    async def process_request(self, ctx: RequestContext, request: RemotingCommand
                              ) -> RemotingCommand:
        self.entered.set()
        try:
            await trio.sleep_forever()
        finally:
            self.cancelled.set()


class Remembers(AsyncRequestProcessor):
    """Answers with what the context var held on entry, then sets it (and maybe suspends)."""

    async def process_request(self, ctx: RequestContext, request: RemotingCommand
                              ) -> RemotingCommand:
        seen = REQUEST_ID.get()
        REQUEST_ID.set(request.body or b"")
        if request.ext_fields:  # suspend, then check the value survived the suspension
            await trio.lowlevel.checkpoint()
            assert REQUEST_ID.get() == request.body
        response = RemotingCommand.create_response(ResponseCode.SUCCESS)
        response.body = seen
        return response


async def test_a_suspended_processor_is_cancelled_when_its_connection_closes(
    server: TrioRemotingServer, client: TrioRemotingClient,
) -> None:
    listens = Listens()
    server.register_processor(LISTENS, listens)
    fut = await client.invoke_async(addr_of(server), req(LISTENS), timeout=30)
    with trio.fail_after(10):
        await listens.entered.wait()
        assert server.statistics().processing == 1
        assert fut.conn is not None
        fut.conn.close("test: the client goes away")
        await listens.cancelled.wait()  # the peer is gone: its answer could not be delivered
        while server.statistics().processing:  # the cancellation is counted right after
            await trio.lowlevel.checkpoint()
        with pytest.raises(RemotingSendRequestError):  # the client's side of it
            await fut.wait()


async def test_context_variables_never_leak_between_requests(
    server: TrioRemotingServer, client: TrioRemotingClient,
) -> None:
    server.register_processor(REMEMBERS, Remembers())
    addr = addr_of(server)
    for i in range(6):  # alternately finishing at once and suspending, on one connection
        request = req(REMEMBERS, b"r%d" % i)
        if i % 2:
            request.ext_fields = {"suspend": "1"}
        response = await client.invoke_sync(addr, request, timeout=10)
        assert response.body in (None, b"")  # never the previous request's value
    assert client.statistics().connections == 1
