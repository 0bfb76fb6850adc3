"""Whatever a processor raises, its caller gets one SYSTEM_ERROR reply and nothing else breaks.

Before: an exception whose ``str()`` fails, or an `AbortProcessError` whose code is not an
int, made building the error reply raise in turn, which closed the connection (every other
call on it failed) and left ``processing`` counted for good; a `SystemExit` or a
`GeneratorExit` from an async processor crashed the server's event loop, and from a sync
processor sent no reply at all (the caller waited out its timeout).
"""

from __future__ import annotations

from collections.abc import Callable

import pytest
import trio
import trio.lowlevel

from codec import RemotingCommand, ResponseCode
from processors import AsyncRequestProcessor, RequestContext, RequestProcessor
from remoting import AbortProcessError, RPCHook, TrioRemotingClient, TrioRemotingServer

from ..factories import req
from .conftest import ASYNC_ECHO, addr_of

FAILS = 40


class BadStr(Exception):
    def __str__(self) -> str:
        raise RuntimeError("no message")


RAISERS: dict[str, Callable[[], BaseException]] = {
    "SystemExit": lambda: SystemExit(3),
    "GeneratorExit": GeneratorExit,
    "str-fails": BadStr,
    "abort-code-not-int": lambda: AbortProcessError("NOT_A_CODE", "x"),  # type: ignore[arg-type]
    "abort-code-too-big": lambda: AbortProcessError(2**40, "x"),
}


class RaisesSync(RequestProcessor):
    def __init__(self, make: Callable[[], BaseException]) -> None:
        self.make = make

    def process_request(self, ctx: RequestContext, request: RemotingCommand) -> RemotingCommand:
        raise self.make()


class RaisesAsync(AsyncRequestProcessor):
    def __init__(self, make: Callable[[], BaseException], suspend: bool) -> None:
        self.make = make
        self.suspend = suspend

    async def process_request(self, ctx: RequestContext, request: RemotingCommand
                              ) -> RemotingCommand:
        if self.suspend:
            await trio.lowlevel.checkpoint()  # raise from a later step, not from the first
        raise self.make()


class NoOpHook(RPCHook):  # hooks put the processor inside the wrapping path
    def do_before_request(self, remote_addr: str, request: RemotingCommand) -> None:
        pass

    def do_after_response(self, remote_addr: str, request: RemotingCommand,
                          response: RemotingCommand | None) -> None:
        pass


@pytest.mark.parametrize("hooked", [False, True], ids=["bare", "hooked"])
@pytest.mark.parametrize("kind", ["sync", "async-first-step", "async-suspended"])
@pytest.mark.parametrize("raised", list(RAISERS))
async def test_a_failing_processor_gets_a_system_error_reply_and_nothing_else_breaks(
        server: TrioRemotingServer, client: TrioRemotingClient, raised: str, kind: str,
        hooked: bool) -> None:
    make = RAISERS[raised]
    processor: RequestProcessor | AsyncRequestProcessor = (
        RaisesSync(make) if kind == "sync" else RaisesAsync(make, kind == "async-suspended"))
    server.register_processor(FAILS, processor)
    if hooked:
        server.register_rpc_hook(NoOpHook())
    addr = addr_of(server)
    others: list[RemotingCommand] = []

    async def other_call() -> None:
        others.append(await client.invoke_sync(addr, req(ASYNC_ECHO), 5))

    with trio.fail_after(5):  # no reply at all used to cost the whole timeout
        async with trio.open_nursery() as nursery:
            for _ in range(5):  # in flight on the same connection meanwhile
                nursery.start_soon(other_call)
            failed = await client.invoke_sync(addr, req(FAILS), 5)
        after = await client.invoke_sync(addr, req(ASYNC_ECHO), 5)

    assert failed.code == ResponseCode.SYSTEM_ERROR
    assert failed.remark
    assert [r.code for r in others] == [ResponseCode.SUCCESS] * 5
    assert after.code == ResponseCode.SUCCESS
    assert client.statistics().connections_opened == 1  # the connection survived
    with trio.fail_after(3):  # nothing stays counted as processing: it leaked, and a
        await server.shutdown(grace=10)  # graceful shutdown then waited its whole grace
