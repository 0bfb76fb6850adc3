"""The blocking and trio faces of the bus and of the queue are written once
(docs/architecture.md, "One source for both faces"): every call is a generator of steps in
the shared code, and each face method only drives it. These checks fail when a face grows a
body of its own (a twin written twice by hand), or when the twins' names or signatures drift
apart."""

from __future__ import annotations

import ast
import inspect
import textwrap
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import trio

import remoting.queue
from remoting._steps import Await, Step, Steps, drive, drive_async
from remoting.bus import BusClient, EventBus, Message, TrioBusClient
from remoting.queue import (
    BlockingQueueClient,
    BlockingSubscription,
    Delivery,
    TrioDelivery,
    TrioQueueClient,
    TrioSubscription,
)

# blocking name -> trio name, where they differ (the rest are the same name)
RENAMED = {"close": "aclose", "__enter__": "__aenter__", "__exit__": "__aexit__",
           "__iter__": "__aiter__", "__next__": "__anext__"}
# methods the bus's faces inherit, sync on both (they never wait): in neither face
SHARED: dict[type, set[str]] = {
    BusClient: {"add_interceptor", "statistics", "addr", "connection_lost", "credit",
                "resize", "send_reply", "replying"}}
# a trio method that is sync by its protocol (``async for`` calls it without awaiting)
SYNC_ON_BOTH = {"__aiter__"}
# a trio twin with other parameters on purpose: a task's timeout is its cancel scope
OWN_PARAMETERS = {(TrioSubscription, "receive")}

TWINS = [(BusClient, TrioBusClient), (BlockingQueueClient, TrioQueueClient),
         (BlockingSubscription, TrioSubscription), (Delivery, TrioDelivery)]


def public_methods(cls: type) -> dict[str, Any]:
    return {name: member for name, member in vars(cls).items()
            if callable(member) and (not name.startswith("_") or name in RENAMED
                                     or name in RENAMED.values())}


def awaited(method: Callable[..., object]) -> bool:
    """True if calling ``method`` gives something to await, or an async context manager."""
    wrapped = getattr(method, "__wrapped__", None)  # @asynccontextmanager
    return inspect.iscoroutinefunction(method) or (
        wrapped is not None and inspect.isasyncgenfunction(wrapped))


@pytest.mark.parametrize(("blocking_face", "trio_face"), TWINS,
                         ids=[b.__name__ for b, _ in TWINS])
def test_the_twins_have_the_same_calls_with_the_same_parameters(
        blocking_face: type, trio_face: type) -> None:
    blocking, trio_methods = public_methods(blocking_face), public_methods(trio_face)
    assert {RENAMED.get(name, name) for name in blocking} == set(trio_methods)
    for name, method in blocking.items():
        twin_name = RENAMED.get(name, name)
        twin = trio_methods[twin_name]
        if twin_name not in SYNC_ON_BOTH:
            assert awaited(twin), f"{trio_face.__name__}.{twin_name} must be async"
        if (trio_face, twin_name) in OWN_PARAMETERS:
            continue
        ours = inspect.signature(method).parameters
        theirs = inspect.signature(twin).parameters
        assert ours == theirs, f"{name}: {ours} != {theirs}"
    shared = SHARED.get(blocking_face, set())
    assert shared.isdisjoint(blocking) and shared.isdisjoint(trio_methods)  # written once


@pytest.mark.parametrize(("blocking", "trio_face"), [
    (EventBus.send, EventBus.send_async), (EventBus.request, EventBus.request_async),
    (Message.reply_and_request, Message.reply_and_request_async)])
def test_the_blocking_and_async_methods_of_one_class_are_twins(
        blocking: Callable[..., object], trio_face: Callable[..., object]) -> None:
    assert inspect.signature(blocking).parameters == inspect.signature(trio_face).parameters
    assert inspect.iscoroutinefunction(trio_face)


def body(method: Callable[..., object]) -> list[ast.stmt]:
    """The statements of ``method``, its docstring left out."""
    method = getattr(method, "__wrapped__", method)
    tree = ast.parse(textwrap.dedent(inspect.getsource(method)))
    function = tree.body[0]
    assert isinstance(function, ast.FunctionDef | ast.AsyncFunctionDef)
    statements = function.body
    if statements and isinstance(statements[0], ast.Expr) and isinstance(
            statements[0].value, ast.Constant):
        statements = statements[1:]
    return statements


QUEUE_CALLS = ["publish", "publish_many", "subscribe", "pull", "pull_records", "commit",
               "offsets", "create_topic", "statistics"]
DRIVEN = {  # class -> its methods that are only a drive of shared steps
    BusClient: ["consumer", "send", "publish", "request"],
    TrioBusClient: ["consumer", "send", "publish", "request"],
    EventBus: ["send_async", "request_async"],
    Message: ["reply_and_request_async"],
    BlockingQueueClient: QUEUE_CALLS,
    TrioQueueClient: QUEUE_CALLS,
    BlockingSubscription: ["receive", "flush", "close"],
    TrioSubscription: ["receive", "flush", "aclose"],
    Delivery: ["ack", "requeue", "touch"],
    TrioDelivery: ["ack", "requeue", "touch"],
}


@pytest.mark.parametrize(("cls", "name"), [(cls, name) for cls, names in DRIVEN.items()
                                           for name in names])
def test_a_face_method_only_drives_the_shared_steps(cls: type, name: str) -> None:
    statements = body(getattr(cls, name))
    calls = [node.func for s in statements for node in ast.walk(s)
             if isinstance(node, ast.Call) and isinstance(node.func, ast.Name)]
    assert len(statements) <= 2, f"{cls.__name__}.{name} has a body of its own"
    assert {"drive", "drive_async"} & {c.id for c in calls}, f"{cls.__name__}.{name}"


def test_both_queue_faces_open_their_streams_through_the_public_api() -> None:
    """The one way to open a subscription's stream, and to move it, is the transport
    client's public ``open_stream`` (a task's and a thread's alike)."""
    package = Path(remoting.queue.__file__).parent
    private = [f"{path.name}: {name}" for path in sorted(package.rglob("*.py"))
               for name in ("open_trio_stream", "open_blocking_stream")
               if name in path.read_text()]
    assert private == []


# --------------------------------------------------------------------------- the drivers


class Sleep:
    """A step: a thread's or a task's sleep of ``seconds``; its result is ``seconds``."""

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds

    def run(self) -> float:
        import time

        time.sleep(self.seconds)
        return self.seconds

    async def run_async(self) -> float:
        await trio.sleep(self.seconds)
        return self.seconds


class Boom:
    """A step that fails with ``error``."""

    def __init__(self, error: BaseException) -> None:
        self.error = error

    def run(self) -> None:
        raise self.error

    async def run_async(self) -> None:
        raise self.error


class Interrupted(BaseException):
    """What a KeyboardInterrupt is to a thread that waits: not an Exception."""


def conversation(log: list[str], long_wait: Step) -> Steps[str]:
    total = yield Sleep(0)
    log.append(f"slept {total}")
    try:
        yield Boom(ValueError("step failed"))
    except ValueError as exc:  # a step's exception arrives at its yield
        log.append(f"caught {exc}")
    try:
        yield long_wait  # cut short here: cancelled (trio), interrupted (a thread)
    finally:
        log.append("cleaned up")
    return "done"


def short(log: list[str]) -> Steps[str]:
    total = yield Sleep(0)
    log.append(f"slept {total}")
    return "done"


def test_drive_returns_what_the_steps_return_and_hands_back_results() -> None:
    log: list[str] = []
    assert drive(short(log)) == "done"
    assert log == ["slept 0"]


async def test_drive_async_returns_the_same() -> None:
    log: list[str] = []
    assert await drive_async(short(log)) == "done"
    assert log == ["slept 0"]


def test_a_thread_interrupted_at_a_step_cleans_up_and_raises() -> None:
    log: list[str] = []
    with pytest.raises(Interrupted):
        drive(conversation(log, Boom(Interrupted())))
    assert log == ["slept 0", "caught step failed", "cleaned up"]


async def test_a_task_cancelled_at_a_step_cleans_up_and_is_cancelled() -> None:
    log: list[str] = []
    with trio.move_on_after(0.05) as scope:
        await drive_async(conversation(log, Sleep(60)))
    assert scope.cancelled_caught
    assert log == ["slept 0", "caught step failed", "cleaned up"]


def test_a_thread_refuses_an_awaitable_a_handler_returned() -> None:
    async def handler() -> None:
        pass

    def steps() -> Steps[None]:
        yield Await(handler(), "plain functions only")

    with pytest.raises(TypeError, match="plain functions only"):
        drive(steps())  # and the coroutine is closed: no "never awaited" warning


async def test_a_task_awaits_an_awaitable_a_handler_returned() -> None:
    async def handler() -> int:
        await trio.lowlevel.checkpoint()
        return 7

    def steps() -> Steps[int]:
        answer: int = yield Await(handler(), "plain functions only")
        return answer

    assert await drive_async(steps()) == 7
