"""Held requests (long polling, RocketMQ's PullRequestHoldService), over real sockets: a
processor parks a request and returns; a notification, from a task or any thread, answers it;
its deadline answers it otherwise; thousands of them hold no thread and no request slot."""

from __future__ import annotations

import threading

import pytest
import trio
import trio.testing

from codec import RemotingCommand, ResponseCode
from processors import AsyncRequestProcessor, RequestContext, RequestProcessor
from remoting import (
    ClientConfig,
    HeldRequests,
    RemotingClient,
    RemotingServer,
    ServerConfig,
    TrioRemotingClient,
    TrioRemotingServer,
)

from .conftest import addr_of

POLL = 720


class Mailbox(AsyncRequestProcessor):
    """Answers with the letters of a box, or holds the request until some arrive."""

    def __init__(self, expect: int = 0) -> None:
        self.holds = HeldRequests()
        self.boxes: dict[str, list[bytes]] = {}
        self.wakes = 0
        self.expect = expect  # set `all_held` once this many requests were held
        self.all_held = threading.Event()

    def post(self, box: str, letter: bytes) -> None:
        self.boxes.setdefault(box, []).append(letter)
        self.holds.notify(box)

    def answer(self, ctx: RequestContext, request: RemotingCommand, expired: bool
               ) -> RemotingCommand | None:
        self.wakes += 1
        box = (request.ext_fields or {})["box"]
        assert box is not None
        if box == "broken":
            raise LookupError("no such box")
        letters = self.boxes.get(box)
        if not letters and not expired:
            return None  # hold on
        response = RemotingCommand.create_response(ResponseCode.SUCCESS)
        response.body = letters.pop(0) if letters else None
        return response

    async def process_request(self, ctx: RequestContext, request: RemotingCommand
                              ) -> RemotingCommand | None:
        answer = self.answer(ctx, request, False)
        if answer is not None:
            return answer
        wait = float((request.ext_fields or {}).get("wait") or "30")
        self.holds.hold(ctx, request, key=request.ext_fields["box"],  # type: ignore[index]
                        timeout=wait, wake=self.answer)
        if len(self.holds) == self.expect:
            self.all_held.set()
        return None


def poll(box: str, wait: float = 30.0) -> RemotingCommand:
    return RemotingCommand.create_request(POLL, header={"box": box, "wait": str(wait)})


async def test_a_notification_answers_the_requests_held_under_its_key(
        server: TrioRemotingServer, client: TrioRemotingClient) -> None:
    mailbox = Mailbox()
    server.register_processor(POLL, mailbox)
    answers: list[bytes | None] = []

    async def wait_for(box: str) -> None:
        reply = await client.invoke_sync(addr_of(server), poll(box), 10)
        answers.append(reply.body)

    async with trio.open_nursery() as nursery:
        nursery.start_soon(wait_for, "a")
        nursery.start_soon(wait_for, "b")
        await trio.testing.wait_all_tasks_blocked(cushion=0.05)
        assert len(mailbox.holds) == 2
        mailbox.post("a", b"hello")
        await trio.testing.wait_all_tasks_blocked(cushion=0.05)
        assert answers == [b"hello"]
        assert mailbox.holds.held("b") == 1  # not woken: its key was not notified
        mailbox.post("b", b"later")
    assert answers == [b"hello", b"later"]
    assert len(mailbox.holds) == 0


async def test_the_deadline_answers_a_request_nothing_woke(
        server: TrioRemotingServer, client: TrioRemotingClient) -> None:
    mailbox = Mailbox()
    server.register_processor(POLL, mailbox)
    started = trio.current_time()
    reply = await client.invoke_sync(addr_of(server), poll("empty", 0.3), 10)
    waited = trio.current_time() - started
    # answered empty by its hold's deadline (the call's own 10 s would raise a timeout)
    assert reply.code == ResponseCode.SUCCESS and reply.body is None
    assert waited >= 0.3  # wall-clock: a lower bound (it was held until its deadline)
    assert mailbox.holds.expired == 1


async def test_a_wake_that_holds_on_keeps_the_request_until_it_can_answer(
        server: TrioRemotingServer, client: TrioRemotingClient) -> None:
    mailbox = Mailbox()
    server.register_processor(POLL, mailbox)
    async with trio.open_nursery() as nursery:
        results: list[RemotingCommand] = []

        async def wait() -> None:
            results.append(await client.invoke_sync(addr_of(server), poll("x"), 10))

        nursery.start_soon(wait)
        await trio.testing.wait_all_tasks_blocked(cushion=0.05)
        mailbox.holds.notify("x")  # nothing there yet: it holds on
        await trio.testing.wait_all_tasks_blocked(cushion=0.05)
        assert not results and mailbox.holds.held("x") == 1
        mailbox.post("x", b"now")
    assert results[0].body == b"now"


async def test_a_wake_that_raises_answers_system_error(
        server: TrioRemotingServer, client: TrioRemotingClient) -> None:
    mailbox = Mailbox()
    server.register_processor(POLL, mailbox)
    mailbox.boxes["broken"] = []
    reply = await client.invoke_sync(addr_of(server), poll("broken", 0.0), 10)
    assert reply.code == ResponseCode.SYSTEM_ERROR and "LookupError" in (reply.remark or "")


def test_a_thread_notifies_a_blocking_server_and_held_requests_take_no_thread() -> None:
    mailbox = Mailbox(expect=1000)
    config = ServerConfig(max_requests_per_connection=4)
    with RemotingServer(config) as server, RemotingClient(ClientConfig()) as client:
        server.register_processor(POLL, mailbox)
        client.invoke_sync(server.addr, RemotingCommand.create_request(9999), 5)  # connected
        threads = threading.active_count()  # io="threads": its background reader included
        futures = [client.invoke_async(server.addr, poll(f"box{i % 10}"), 30)
                   for i in range(1000)]
        assert mailbox.all_held.wait(20)
        assert threading.active_count() == threads  # no thread per held request
        assert server.statistics().processing == 0  # and no request slot either
        echo = client.invoke_sync(server.addr, RemotingCommand.create_request(9999), 5)
        assert echo.code == ResponseCode.REQUEST_CODE_NOT_SUPPORTED
        for i in range(10):
            for _ in range(100):
                mailbox.boxes.setdefault(f"box{i}", []).append(b"m")

        def notify_every_box() -> None:
            for i in range(10):
                mailbox.holds.notify(f"box{i}")

        notifier = threading.Thread(target=notify_every_box)
        notifier.start()
        notifier.join()
        replies = [f.result(10) for f in futures]
    assert all(r.code == ResponseCode.SUCCESS and r.body == b"m" for r in replies)


async def test_a_request_whose_connection_closed_is_dropped_when_woken(
        server: TrioRemotingServer) -> None:
    mailbox = Mailbox()
    server.register_processor(POLL, mailbox)
    async with trio.open_nursery() as nursery:
        other = TrioRemotingClient()
        await nursery.start(other.serve)
        nursery.start_soon(_ignore_failure, other, addr_of(server))
        await trio.testing.wait_all_tasks_blocked(cushion=0.05)
        assert mailbox.holds.held("gone") == 1
        nursery.cancel_scope.cancel()
    with trio.fail_after(5):
        while server.channels():
            await trio.testing.wait_all_tasks_blocked(cushion=0.01)
    wakes = mailbox.wakes
    mailbox.post("gone", b"nobody")
    assert mailbox.wakes == wakes  # dropped without a wake
    assert len(mailbox.holds) == 0


async def _ignore_failure(client: TrioRemotingClient, addr: str) -> None:
    await client.invoke_sync(addr, poll("gone"), 30)


@pytest.mark.parametrize("timeout", [-1, float("nan"), "5"])
async def test_a_bad_timeout_is_refused(server: TrioRemotingServer,
                                        client: TrioRemotingClient, timeout: object) -> None:
    errors: list[BaseException] = []

    class Bad(AsyncRequestProcessor):
        async def process_request(self, ctx: RequestContext, request: RemotingCommand
                                  ) -> RemotingCommand | None:
            try:
                HeldRequests().hold(ctx, request, key="k", timeout=timeout,  # type: ignore[arg-type]
                                    wake=lambda *_: None)
            except (TypeError, ValueError) as exc:
                errors.append(exc)
            return RemotingCommand.create_response(ResponseCode.SUCCESS)

    server.register_processor(POLL, Bad())
    await client.invoke_sync(addr_of(server), poll("k"), 5)
    assert len(errors) == 1 and "timeout must be a number of seconds" in str(errors[0])


class Sync(RequestProcessor):
    def __init__(self, holds: HeldRequests) -> None:
        self.holds = holds
        self.held = threading.Event()

    def process_request(self, ctx: RequestContext, request: RemotingCommand
                        ) -> RemotingCommand | None:
        self.holds.hold(ctx, request, key="k", timeout=30, wake=lambda c, r, e: (
            RemotingCommand.create_response(ResponseCode.SUCCESS)))
        self.held.set()
        return None


def test_a_sync_processor_may_hold_too() -> None:
    processor = Sync(HeldRequests())
    with RemotingServer(ServerConfig()) as server, RemotingClient() as client:
        server.register_processor(POLL, processor)
        fut = client.invoke_async(server.addr, poll("k"), 10)
        assert processor.held.wait(10)
        processor.holds.notify("k")  # after the hold, through the same door: it is there
        assert fut.result(5).code == ResponseCode.SUCCESS


class ShortThenLong(AsyncRequestProcessor):
    """Holds the request for a short while, then another for long, in one step."""

    def __init__(self) -> None:
        self.holds = HeldRequests()

    async def process_request(self, ctx: RequestContext, request: RemotingCommand
                              ) -> RemotingCommand | None:
        answer = RemotingCommand.create_response(ResponseCode.SUCCESS)
        self.holds.hold(ctx, request, key="short", timeout=0.2, wake=lambda *_: answer)
        other = RemotingCommand.create_request(POLL)
        self.holds.hold(ctx, other, key="long", timeout=30, wake=lambda *_: None)
        return None


async def test_a_later_deadline_never_delays_an_earlier_one(
        server: TrioRemotingServer, client: TrioRemotingClient) -> None:
    server.register_processor(POLL, ShortThenLong())
    with trio.fail_after(5):
        reply = await client.invoke_sync(addr_of(server), poll("k"), 10)
    assert reply.code == ResponseCode.SUCCESS
