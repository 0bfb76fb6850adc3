"""A trio ``invoke_sync`` parks its task on its call (`ResponseFuture._park`): whichever of
its answer, its deadline and its cancellation comes first ends it, exactly once, and leaves
the response table empty and the permit back, even when two of them land in one step."""

from __future__ import annotations

import pytest
import trio
import trio.testing

from codec import RemotingCommand, ResponseCode
from remoting import ClientConfig, RemotingTimeoutError, TrioRemotingClient, TrioRemotingServer

from ..factories import req
from .conftest import ECHO, GATED_ASYNC, AsyncGate, addr_of


async def _park_one(server: TrioRemotingServer, client: TrioRemotingClient, gate: AsyncGate,
                    nursery: trio.Nursery, outcome: list[object]) -> trio.CancelScope:
    """Start an invoke_sync held in the server's gated processor; return its cancel scope
    once its task is parked on the call."""

    async def call(task_status: trio.TaskStatus[trio.CancelScope]) -> None:
        with trio.CancelScope() as scope:
            task_status.started(scope)
            try:
                outcome.append(await client.invoke_sync(addr_of(server), req(GATED_ASYNC),
                                                        timeout=30))
            except BaseException as exc:
                outcome.append(exc)
                raise
            await trio.lowlevel.checkpoint()  # a cancel that came after the answer lands here
        outcome.append("cancelled" if scope.cancelled_caught else "not cancelled")

    scope: trio.CancelScope = await nursery.start(call)
    await gate.entered.wait()
    await trio.testing.wait_all_tasks_blocked()
    return scope


def _pending(client: TrioRemotingClient) -> tuple[object, RemotingCommand]:
    invoker = client.endpoint.invoker
    (fut,) = invoker.table.pop_all()  # looked at, then put back as the invoker had it
    invoker.table.register(fut)
    return fut.conn, RemotingCommand.response_to(fut.request, ResponseCode.SUCCESS)


@pytest.mark.parametrize("answer_first", [True, False])
async def test_an_answer_and_a_cancel_in_one_step_end_the_call_once(
    server: TrioRemotingServer, client: TrioRemotingClient, answer_first: bool,
) -> None:
    gate = AsyncGate()
    server.register_processor(GATED_ASYNC, gate)
    await client.invoke_sync(addr_of(server), req(ECHO), timeout=5)  # connect first
    outcome: list[object] = []
    async with trio.open_nursery() as nursery:
        scope = await _park_one(server, client, gate, nursery, outcome)
        conn, response = _pending(client)
        invoker = client.endpoint.invoker
        if answer_first:  # the answer is read, then the caller is cancelled, in one step
            invoker.response_received(conn, response)  # type: ignore[arg-type]
            scope.cancel()
        else:  # cancelled (its abort runs at once), then its answer is read
            scope.cancel()
            invoker.response_received(conn, response)  # type: ignore[arg-type]
    if answer_first:  # the call returned its answer; the cancel hit the next checkpoint
        assert outcome == [response, "cancelled"]
    else:
        assert isinstance(outcome[0], trio.Cancelled)
        assert outcome[1:] == ["cancelled"]
    stats = client.statistics()
    assert stats.in_flight == 0
    assert stats.async_permits_free == 65535
    assert stats.orphaned_responses == 0  # the answer found its call, whichever came first
    gate.event.set()
    after = await client.invoke_sync(addr_of(server), req(ECHO, b"after"), timeout=5)
    assert after.body == b"after"
    assert client.statistics().connections == 1


async def test_a_parked_call_times_out_once_and_a_cancel_after_changes_nothing(
    server: TrioRemotingServer,
) -> None:
    gate = AsyncGate()
    server.register_processor(GATED_ASYNC, gate)
    async with trio.open_nursery() as nursery:
        client = TrioRemotingClient(ClientConfig(close_socket_if_timeout=False))
        await nursery.start(client.serve)
        outcome: list[object] = []

        async def call() -> None:
            with trio.CancelScope() as scope:
                try:
                    await client.invoke_sync(addr_of(server), req(GATED_ASYNC), timeout=0.2)
                except RemotingTimeoutError as exc:
                    outcome.append(exc)
                    scope.cancel()  # too late: the call has ended
            outcome.append(scope.cancelled_caught)

        await call()
        assert isinstance(outcome[0], RemotingTimeoutError)
        assert outcome[1] is False  # nothing left to cancel
        stats = client.statistics()
        assert (stats.in_flight, stats.timeouts, stats.async_permits_free) == (0, 1, 65535)
        gate.event.set()
        assert (await client.invoke_sync(addr_of(server), req(ECHO), timeout=5)).code == 0
        nursery.cancel_scope.cancel()
