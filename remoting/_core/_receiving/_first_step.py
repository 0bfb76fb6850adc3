"""The shortcut for async processors: their first step runs in the connection's reader.

Theory of operation (loop thread only):
- `Dispatcher._run_async` steps a processor's coroutine once by hand, in a fresh copy of the
  reader's context (``context.run(coro.send, None)``). Most processors finish without
  suspending: their answer is queued right there, with no task switch.
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
- `mark_reader_task` labels a reader task; `in_async_processor` tells whether the calling task
  runs an async processor now (a processor waiting for the endpoint's processing to end
  must not wait for itself).
"""

from __future__ import annotations

import types
from contextvars import ContextVar
from typing import TYPE_CHECKING, Any, Final

import trio

from ._replies import FAILURES, encode_reply, failure

if TYPE_CHECKING:
    from collections.abc import Callable, Coroutine, Generator
    from contextvars import Context

    from codec import RemotingCommand

    from ._replies import Reply

__all__ = ["Suspended", "in_async_processor", "mark_reader_task", "resume_suspended"]

# A connection's reader task, set once per reader; each request's context is a copy of its
# reader's, and the task that runs an async processor to its end is the reader that began it.
_READER_TASK: Final[ContextVar[object]] = ContextVar("remoting_reader_task", default=None)


def mark_reader_task() -> None:
    """Label the calling task as a connection's reader (it runs async processors)."""
    _READER_TASK.set(trio.lowlevel.current_task())


def in_async_processor() -> bool:
    """True in the task running an async processor (or the hooks around it) now."""
    return _READER_TASK.get() is trio.lowlevel.current_task()



@types.coroutine
def resume_suspended(coro: Coroutine[Any, Any, Reply | None], trap: Any, context: Context
                     ) -> Generator[Any, Any, Reply | None]:
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


class Suspended:
    """An async processor that suspended in its first step: finished by the task that ran
    that step (see `resume_suspended`), then ``done(code, reply)``."""

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
        reply: Reply | None = None
        try:
            result = await resume_suspended(self._coro, self._trap, self._context)
            reply = result if self._wrapped or result is None else encode_reply(
                request, result, self._limit, self._header_limit)
        except FAILURES as exc:  # a hook-less processor's own failure
            reply = encode_reply(request, failure(request, exc), self._limit,
                                 self._header_limit)
        finally:
            self._done(request.code, reply)
