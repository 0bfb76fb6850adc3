"""The bus's blocking and trio faces are written once (docs/architecture.md, "One source for
both faces"): every call is a generator of steps in the shared code, and each face method only
drives it. These checks fail when a face grows a body of its own (a twin written twice by
hand), or when the twins' names or signatures drift apart."""

from __future__ import annotations

import ast
import inspect
import textwrap
from collections.abc import Callable
from typing import Any

import pytest
import trio

from remoting._steps import Await, Steps, drive, drive_async
from remoting.bus import BusClient, EventBus, Message, TrioBusClient

# blocking name -> trio name, where they differ (the rest are the same name)
RENAMED = {"close": "aclose", "__enter__": "__aenter__", "__exit__": "__aexit__"}
# methods both faces inherit, sync on both (they never wait)
SHARED = {"add_interceptor", "statistics", "addr", "connection_lost", "credit", "resize",
          "send_reply", "replying"}


def public_methods(cls: type) -> dict[str, Any]:
    return {name: member for name, member in vars(cls).items()
            if callable(member) and (not name.startswith("_") or name in RENAMED
                                     or name in RENAMED.values())}


def test_the_bus_clients_have_the_same_calls_with_the_same_signatures() -> None:
    blocking, trio_face = public_methods(BusClient), public_methods(TrioBusClient)
    assert {RENAMED.get(name, name) for name in blocking} == set(trio_face)
    for name, method in blocking.items():
        twin = trio_face[RENAMED.get(name, name)]
        assert inspect.iscoroutinefunction(twin), f"TrioBusClient.{twin.__name__} must be async"
        ours, theirs = inspect.signature(method), inspect.signature(twin)
        assert ours == theirs, f"{name}: {ours} != {theirs}"
    assert SHARED.isdisjoint(blocking) and SHARED.isdisjoint(trio_face)  # written once


@pytest.mark.parametrize(("blocking", "trio_face"), [
    (EventBus.send, EventBus.send_async), (EventBus.request, EventBus.request_async),
    (Message.reply_and_request, Message.reply_and_request_async)])
def test_the_blocking_and_async_methods_of_one_class_are_twins(
        blocking: Callable[..., object], trio_face: Callable[..., object]) -> None:
    assert inspect.signature(blocking).parameters == inspect.signature(trio_face).parameters
    assert inspect.iscoroutinefunction(trio_face)


def body(method: Callable[..., object]) -> list[ast.stmt]:
    """The statements of ``method``, its docstring left out."""
    tree = ast.parse(textwrap.dedent(inspect.getsource(method)))
    function = tree.body[0]
    assert isinstance(function, ast.FunctionDef | ast.AsyncFunctionDef)
    statements = function.body
    if statements and isinstance(statements[0], ast.Expr) and isinstance(
            statements[0].value, ast.Constant):
        statements = statements[1:]
    return statements


DRIVEN = {  # class -> its methods that are only a drive of shared steps
    BusClient: ["consumer", "send", "publish", "request"],
    TrioBusClient: ["consumer", "send", "publish", "request"],
    EventBus: ["send_async", "request_async"],
    Message: ["reply_and_request_async"],
}


@pytest.mark.parametrize(("cls", "name"), [(cls, name) for cls, names in DRIVEN.items()
                                           for name in names])
def test_a_face_method_only_drives_the_shared_steps(cls: type, name: str) -> None:
    statements = body(getattr(cls, name))
    calls = [node.func for s in statements for node in ast.walk(s)
             if isinstance(node, ast.Call) and isinstance(node.func, ast.Name)]
    assert len(statements) <= 2, f"{cls.__name__}.{name} has a body of its own"
    assert {"drive", "drive_async"} & {c.id for c in calls}, f"{cls.__name__}.{name}"


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


def conversation(log: list[str], long_wait: object) -> Steps[str]:
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
        return (yield Await(handler(), "plain functions only"))

    assert await drive_async(steps()) == 7
