"""A call a thread hands to the loop while the loop ends is never lost: it fails as "shut
down" (never as an unexpected error), its future completes, and its callback runs once, on
a thread that is not the event loop's. Before, a post could be dropped when two threads
posted as the loop ended (the future never completed), a call could meet the loop's
closed nursery ("the call failed unexpectedly"), and late callbacks ran on the loop thread."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

import pytest
import trio
import trio.testing

from codec import RemotingCommand
from remoting import RemotingClient, RemotingError, RemotingServer, ResponseFuture
from remoting._core._doors._threads import Inbox

from .conftest import ECHO

# ------------------------------------------------------------------ the inbox alone


class EndingToken:
    """trio's token at the instant its loop ends: run_sync_soon refuses once ``ended``."""

    def __init__(self) -> None:
        self.entered = threading.Event()
        self.ended = threading.Event()

    def run_sync_soon(self, fn: Callable[[], object]) -> None:
        self.entered.set()
        assert self.ended.wait(5)
        raise trio.RunFinishedError("run() has exited")


def test_a_post_beside_a_failing_one_is_refused_not_dropped() -> None:
    token = EndingToken()
    inbox = Inbox()
    inbox.open(token)  # type: ignore[arg-type]
    ran: list[str] = []
    refused: list[str] = []
    raised: list[BaseException] = []

    def post_a() -> None:
        try:
            inbox.post(ran.append, "A", refused.append)
        except RuntimeError as exc:
            raised.append(exc)

    first = threading.Thread(target=post_a)
    first.start()
    assert token.entered.wait(5)  # A is scheduling the drain; the loop is about to end
    inbox.post(ran.append, "B", refused.append)  # B sees a drain due and returns
    token.ended.set()
    first.join(5)
    assert not first.is_alive()
    assert ran == []
    assert len(raised) == 1  # A's own post is refused by raising, as before
    assert refused == ["B"]  # B's was dropped without a word
    with pytest.raises(RuntimeError):  # from now on, posts are refused at once
        inbox.post(ran.append, "C", refused.append)


# ------------------------------------------------------------------ a real client


class HoldUntil:
    """A before-hook that returns at an instant chosen per thread (a slow signing hook)."""

    def __init__(self) -> None:
        self.when = threading.local()

    def do_before_request(self, remote_addr: str, request: RemotingCommand) -> None:
        left = getattr(self.when, "t", 0.0) - time.perf_counter()
        if left > 0:
            threading.Event().wait(left)

    def do_after_response(self, remote_addr: str, request: RemotingCommand,
                          response: RemotingCommand | None) -> None:
        return None


TRIALS, THREADS, SPREAD = 12, 30, 0.03


def test_calls_racing_a_shutdown_fail_as_shut_down(blocking_server: RemotingServer) -> None:
    outcomes: list[str] = []
    futures: list[Any] = []
    callback_threads: list[str] = []
    lock = threading.Condition()

    def note(future: Any) -> None:
        with lock:
            callback_threads.append(threading.current_thread().name)
            lock.notify_all()

    def call(client: RemotingClient, hook: HoldUntil, when: float) -> None:
        hook.when.t = when
        try:  # a closed port: the call fails, and takes its time connecting if it gets there
            future = client.invoke_async("127.0.0.1:1", RemotingCommand.create_request(1), 1.0,
                                         callback=note)  # raises if the client is shut down
            with lock:
                futures.append(future)
            future.result(5)
        except RemotingError as exc:
            outcome = str(exc)
        except BaseException as exc:  # noqa: BLE001 - the test reports what it was
            outcome = f"not ours: {exc!r}"
        else:
            outcome = "answered"
        with lock:
            outcomes.append(outcome)

    for trial in range(TRIALS):
        client = RemotingClient()
        hook = HoldUntil()
        client.register_rpc_hook(hook)
        client.start()
        client.invoke_sync(blocking_server.addr, RemotingCommand.create_request(ECHO), 5)
        shut_at = time.perf_counter() + 0.05
        threads = [threading.Thread(target=call, args=(
            client, hook, shut_at + (i + trial / TRIALS) * SPREAD / THREADS))
            for i in range(THREADS)]
        for thread in threads:
            thread.start()
        threading.Event().wait(max(0.0, shut_at - time.perf_counter()))
        client.shutdown()
        for thread in threads:
            thread.join(10)
            assert not thread.is_alive()
    assert len(outcomes) == TRIALS * THREADS
    assert not [o for o in outcomes if "not ours" in o or "unexpectedly" in o]
    with lock:  # each callback of a future made ran, once (some on threads of their own)
        assert lock.wait_for(lambda: len(callback_threads) >= len(futures), timeout=5)
        assert len(callback_threads) == len(futures) > 0
    assert "remoting-client" not in callback_threads  # the loop thread's name


async def test_a_call_refused_outside_any_loop_wakes_a_trio_task_awaiting_it() -> None:
    """A refused call is failed by a plain thread (the loop has ended): a task of another trio
    loop awaiting its future must still be woken (it was not: the wake-up looked for the
    current trio loop, in a thread that has none)."""
    future = ResponseFuture(RemotingCommand.create_request(1), "127.0.0.1:1", 5, threaded=True)
    waiting = trio.Event()
    outcome: list[BaseException] = []

    async def wait() -> None:
        waiting.set()
        try:
            await future.wait()
        except RemotingError as exc:
            outcome.append(exc)

    with trio.fail_after(5):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(wait)
            await waiting.wait()
            await trio.testing.wait_all_tasks_blocked()
            refuse = threading.Thread(  # as `_refuse_start` does, in the thread finding the end
                target=future._fail, args=(RemotingError("the client is shut down"),))
            refuse.start()
            await trio.to_thread.run_sync(refuse.join)
    assert len(outcome) == 1
