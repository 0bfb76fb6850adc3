"""The receiving side's compiled kernel (remoting/_core/_receiving/_speedups.c) gives exactly what
its Python specification gives.

`first_step` runs an async processor's coroutine to its first suspension in a context of its
own. The C function is held to the Python one on the same coroutines: what it returns (done
or suspended, and the value or the trap), what it raises (class and message), what the
coroutine saw of the context and left in it, and that the caller's context is untouched.
The coroutines are programs hypothesis writes: set and read a context variable, suspend,
return, raise (StopIteration and GeneratorExit included), in any order. The extension is
imported here directly, so this runs wherever it was built, also under
TRIO_REMOTING_PURE_PYTHON=1 (which only keeps the transport from using it).
"""

from __future__ import annotations

import contextvars
import importlib
import types
from collections.abc import Callable, Coroutine, Generator
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from remoting._core._receiving import _first_step, _native

VAR: contextvars.ContextVar[str] = contextvars.ContextVar("first_step_test", default="unset")
Step = Callable[[contextvars.Context, Any], tuple[bool, Any]]


@pytest.fixture(scope="module")
def compiled() -> Step:
    try:
        sp = importlib.import_module("remoting._core._receiving._speedups")
    except ImportError:
        pytest.skip("the compiled fast path is not built here (no C compiler at install)")
    step: Step = sp.first_step
    return step


@types.coroutine
def _suspend(trap: object) -> Generator[object, None, None]:
    yield trap


class Failure(Exception):
    pass


# One operation of a coroutine's program: ("set", value), ("read",), ("suspend", trap),
# ("return", value), ("raise", exception class).
OPS = st.one_of(
    st.tuples(st.just("set"), st.text(max_size=3)),
    st.tuples(st.just("read")),
    st.tuples(st.just("suspend"), st.sampled_from([None, 0, "trap", ("a", 1)])),
    st.tuples(st.just("return"), st.sampled_from([None, 0, 1.5, "done", (None,)])),
    st.tuples(st.just("raise"), st.sampled_from([Failure, StopIteration, GeneratorExit,
                                                 KeyError, RuntimeError])),
)


async def program(ops: list[tuple[Any, ...]], seen: list[str]) -> object:
    for op in ops:
        if op[0] == "set":
            VAR.set(op[1])
        elif op[0] == "read":
            seen.append(VAR.get())
        elif op[0] == "suspend":
            await _suspend(op[1])
        elif op[0] == "return":
            return op[1]
        else:
            raise op[1]("from the program")
    return "fell off the end"


def run(step: Step, ops: list[tuple[Any, ...]], make: Callable[..., Any] = program
        ) -> tuple[Any, ...]:
    """What one step gives, and what the coroutine saw and left behind."""
    context = contextvars.copy_context()
    seen: list[str] = []
    coro = make(ops, seen)
    try:
        result: tuple[Any, ...] = ("ok", step(context, coro))
    except BaseException as exc:  # GeneratorExit included: it must propagate alike
        result = ("raised", type(exc), str(exc))
    finally:
        if isinstance(coro, Coroutine):
            coro.close()
    return (*result, seen, context.run(VAR.get), VAR.get())


@given(st.lists(OPS, max_size=6))
def test_compiled_first_step_gives_what_the_python_one_gives(
        compiled: Step, ops: list[tuple[Any, ...]]) -> None:
    assert run(compiled, ops) == run(_first_step.python_first_step, ops)


class SendOnly:
    """An awaitable's iterator with only a ``send`` method (no native coroutine)."""

    def __init__(self, ops: list[tuple[Any, ...]], seen: list[str]) -> None:
        self._coro = program(ops, seen)

    def send(self, value: object) -> object:
        return self._coro.send(value)

    def close(self) -> None:
        self._coro.close()


@given(st.lists(OPS, max_size=6))
def test_an_object_with_only_a_send_method_is_stepped_alike(
        compiled: Step, ops: list[tuple[Any, ...]]) -> None:
    assert (run(compiled, ops, SendOnly)
            == run(_first_step.python_first_step, ops, SendOnly))


def test_a_finished_coroutine_and_bad_arguments_fail_alike(compiled: Step) -> None:
    def outcome(step: Step, context: object, coro: object) -> tuple[type, str]:
        try:
            step(context, coro)  # type: ignore[arg-type]
        except Exception as exc:
            return type(exc), str(exc)
        raise AssertionError("it did not raise")

    for step_args in [(None,), ("not a context",)]:
        coro = program([], [])
        try:
            assert outcome(compiled, step_args[0], coro)[0] in (TypeError, AttributeError)
        finally:
            coro.close()
    for step in (compiled, _first_step.python_first_step):
        coro = program([], [])
        assert step(contextvars.copy_context(), coro) == (True, "fell off the end")
        assert outcome(step, contextvars.copy_context(), coro) == (
            RuntimeError, "cannot reuse already awaited coroutine")

    def entered(step: Step) -> tuple[type, str]:  # a context entered already: as run()
        context = contextvars.copy_context()
        coro = program([], [])
        try:
            return context.run(outcome, step, context, coro)
        finally:
            coro.close()

    assert entered(compiled)[0] is entered(_first_step.python_first_step)[0] is RuntimeError


def test_the_transport_uses_the_compiled_kernel_unless_pure_python_is_asked_for() -> None:
    from codec import _native as codec_native

    assert _native.STATUS.split(" (")[0] == codec_native.STATUS.split(" (")[0]
    assert (_first_step.first_step is not _first_step.python_first_step) == (
        _native.STATUS == "compiled")
