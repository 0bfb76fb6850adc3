"""The shortcut for async processors: their first step runs in the connection's reader.

Theory of operation (loop thread only):
- `Dispatcher._run_async` steps a processor's coroutine once by hand, in a fresh copy of the
  reader's context (`first_step`: ``context.run(coro.send, None)``, or its compiled fast
  path, ``_speedups.c``, which needs no StopIteration to learn the value). Most processors
  finish without suspending: their answer is queued right there, with no task switch.
- One that suspends yields a trio trap. A suspended coroutine belongs to the task that ran
  it, so the reader keeps it as a `Suspended` and hands reading to a new reader task
  (`Connection`, `RequestLoop`); it then runs `Suspended.finish`, which awaits the rest through
  `resume_suspended`: a ``@types.coroutine`` relay that passes the first trap on to trio and
  every later send, throw and close to the processor, each in the request's context
  (``yield from`` cannot resume a coroutine that already started).
- This relies on how trio's runner talks to a task's coroutine (it yields trap objects and is
  resumed with their outcome), which trio does not document as public; a processor never
  sees the difference. The public alternative, a task per request, was measured at about
  twice the server's CPU per pipelined request: docs/architecture.md, Dispatch.
- So it is checked before it is used: the first endpoint to run in a process (`check_first_step`)
  steps a probe by hand exactly as the reader does and finishes it through the relay (it
  suspends, is cancelled and resumed, and reads its context and task). A trio release that
  changed the protocol fails the probe: the shortcut is then off for the process
  (`first_step_usable` is False), which is logged once (``first_step.disabled``), and every
  async processor takes the public path instead: a `Suspended` from its start (``trap``
  `WHOLE`), which the reader runs to its end the ordinary way (``await``) while a new task
  takes over reading, so each request still runs in a context of its own (the task that runs it ends
  with it), begins in the order read and is cancelled with its connection.
- `mark_reader_task` labels a reader task; `in_async_processor` tells whether the calling task
  runs an async processor now (a processor waiting for the endpoint's processing to end
  must not wait for itself).
"""

from __future__ import annotations

import threading
import types
from contextvars import ContextVar, copy_context
from typing import TYPE_CHECKING, Any, Final, TypeVar

import trio
import trio.lowlevel

from ..._log import log
from ._native import speedups
from ._replies import FAILURES, encode_reply, failure

if TYPE_CHECKING:
    from collections.abc import Callable, Coroutine, Generator
    from contextvars import Context

    from codec import RemotingCommand

    from ._replies import Reply

__all__ = ["WHOLE", "SelfCheck", "Suspended", "check_first_step", "first_step",
           "first_step_usable", "in_async_processor", "mark_reader_task", "resume_suspended"]

T = TypeVar("T")

# A connection's reader task, set once per reader; each request's context is a copy of its
# reader's, and the task that runs an async processor to its end is the reader that began it.
_READER_TASK: Final[ContextVar[object]] = ContextVar("remoting_reader_task", default=None)


def mark_reader_task() -> None:
    """Label the calling task as a connection's reader (it runs async processors)."""
    _READER_TASK.set(trio.lowlevel.current_task())


def in_async_processor() -> bool:
    """True in the task running an async processor (or the hooks around it) now."""
    return _READER_TASK.get() is trio.lowlevel.current_task()



def first_step(context: Context, coro: Coroutine[Any, Any, Any]) -> tuple[bool, Any]:
    """Run ``coro`` to its first suspension in ``context``.

    Returns:
        (True, its value) if it finished; (False, what it yielded: a trio trap) if it
        suspended, to be finished by `resume_suspended`.

    Raises:
        Whatever the coroutine raises, unchanged.
    """
    try:
        trap = context.run(coro.send, None)
    except StopIteration as finished:
        return True, finished.value
    return False, trap


# The compiled fast path (``_speedups.c``, `_native`): the Python function above stays the
# specification (tests compare the two).
python_first_step: Final = first_step
if speedups is not None:
    first_step = speedups.first_step


@types.coroutine
def resume_suspended(coro: Coroutine[Any, Any, T], trap: Any, context: Context
                     ) -> Generator[Any, Any, T]:
    """Await ``coro`` after its first step was run by hand and yielded ``trap``.

    The caller ran ``context.run(coro.send, None)`` itself to learn whether the coroutine
    suspends; this passes that first trap on to trio and relays every later step, each in
    ``context`` (``yield from`` cannot resume a coroutine that already started).
    """
    run = context.run
    message = trap
    while True:
        try:
            value = yield message
        except GeneratorExit:
            run(coro.close)  # in the request's context: its finally blocks may reset vars
            raise
        except BaseException as exc:  # thrown in by the runner: forward it
            try:
                message = run(coro.throw, exc)
            except StopIteration as finished:
                return finished.value  # type: ignore[no-any-return]
            except GeneratorExit as own:  # the processor's, not a close of this generator
                raise RuntimeError("the processor raised GeneratorExit") from own
        else:
            try:
                message = run(coro.send, value)
            except StopIteration as finished:
                return finished.value  # type: ignore[no-any-return]
            except GeneratorExit as own:
                raise RuntimeError("the processor raised GeneratorExit") from own


WHOLE: Final = object()  # the ``trap`` of a processor not stepped by hand (the public path)


class Suspended:
    """An async processor the reader hands over, then ``done(code, reply)``: one that
    suspended in its first step, run by hand, which the task that ran that step finishes
    (see `resume_suspended`); or, with the shortcut off (`check_first_step`), one not
    stepped at all (``trap`` is `WHOLE`), which that task awaits whole, the ordinary way,
    while a new task reads on."""

    __slots__ = ("_context", "_coro", "_done", "_header_limit", "_limit", "_request", "_trap",
                 "_wrapped")

    def __init__(self, request: RemotingCommand, coro: Coroutine[Any, Any, Any], trap: object,
                 context: Context, *, wrapped: bool, limit: int, header_limit: int,
                 done: Callable[[int, Reply | None], None]) -> None:
        self._request = request
        self._coro = coro
        self._trap = trap
        self._context = context
        self._wrapped = wrapped  # run_async_request's coroutine: its value is the reply
        self._limit = limit  # the largest frame the peer accepts
        self._header_limit = header_limit  # and the largest header
        self._done = done

    async def finish(self) -> None:
        """Run the processor to the end and reply."""
        request = self._request
        coro = self._coro
        reply: Reply | None = None
        try:
            result = await (coro if self._trap is WHOLE
                            else resume_suspended(coro, self._trap, self._context))
            reply = result if self._wrapped or result is None else encode_reply(
                request, result, self._limit, self._header_limit)
        except FAILURES as exc:  # a hook-less processor's own failure
            reply = encode_reply(request, failure(request, exc), self._limit,
                                 self._header_limit)
        finally:
            self._done(request.code, reply)


# ------------------------------------------------------------------ the self-check

class SelfCheck:
    """Whether the shortcut works with the trio in use: None until checked (once per
    process), then True or False."""

    usable: bool | None = None
    lock: Final = threading.Lock()  # endpoints of several threads may start at once


_PROBE_VAR: Final[ContextVar[str]] = ContextVar("remoting_first_step_probe", default="outside")
_PROBE_ANSWER: Final = "finished"


def first_step_usable() -> bool:
    """True once the self-check found the shortcut works (`check_first_step`)."""
    return SelfCheck.usable is True


async def _probe() -> str:
    """What a processor may do after its first step: suspend, be cancelled and go on, read
    its own context and task."""
    _PROBE_VAR.set("inside")
    await trio.lowlevel.checkpoint()  # suspends: its first step yields trio a trap
    with trio.CancelScope() as scope:
        scope.cancel()
        await trio.lowlevel.checkpoint()  # Cancelled is thrown in through the relay
    if not scope.cancelled_caught:
        raise RuntimeError("a cancellation was not delivered")
    await trio.lowlevel.checkpoint()
    if _PROBE_VAR.get() != "inside" or trio.lowlevel.current_task() is None:
        raise RuntimeError("the step ran outside its context")
    return _PROBE_ANSWER


async def _run_probe() -> None:
    """Step the probe by hand as `Dispatcher` does, then finish it as `Suspended` does.

    Raises:
        RuntimeError (or whatever the relay raised): the protocol is not the one relied on.
    """
    context = copy_context()
    coro = _probe()
    done, trap = first_step(context, coro)
    if done:
        raise RuntimeError("the probe finished without yielding trio a trap")
    with trio.move_on_after(CHECK_SECONDS) as bound:
        result = await resume_suspended(coro, trap, context)
    if bound.cancelled_caught:
        raise RuntimeError(f"the probe did not finish within {CHECK_SECONDS}s")
    if result != _PROBE_ANSWER:
        raise RuntimeError(f"the probe returned {result!r}")
    if _PROBE_VAR.get() != "outside":
        raise RuntimeError("the probe's context leaked into its reader's")


CHECK_SECONDS: Final = 5.0  # the probe checkpoints only: it ends at once unless broken


async def check_first_step() -> bool:
    """Check, once per process and from a trio task, that the shortcut works with the trio
    in use; return whether it does. If it does not, log ``first_step.disabled`` (once) and
    leave it off: every async processor then runs the public way (`WHOLE`)."""
    if SelfCheck.usable is not None:
        return SelfCheck.usable
    try:
        await _run_probe()
    except trio.Cancelled:
        raise  # the endpoint is being cancelled: check again next time
    except Exception as exc:
        error: Exception | None = exc
    else:
        error = None
    with SelfCheck.lock:
        first = SelfCheck.usable is None
        if first:
            SelfCheck.usable = error is None
    if first and error is not None:
        log.warning("first_step.disabled", trio=trio.__version__, error=repr(error),
                    instead="a task per request (the public path)")
    return SelfCheck.usable is True
