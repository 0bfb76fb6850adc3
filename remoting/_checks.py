"""Checks of what a caller hands the library, where it is handed over.

A wrong type raises `TypeError` and a wrong value `ValueError`, at once and before any I/O,
with a message that names the argument (docs/errors.md): never a failure deep inside the
event loop later, a hang, or a permit that is never given back.
"""

from __future__ import annotations

import functools
import inspect
import math
import sys
from concurrent.futures import Executor
from contextvars import ContextVar
from typing import TYPE_CHECKING, Any, Final, TypeVar, cast

from codec import FLAG_ONEWAY, FLAG_RESPONSE, RemotingCommand
from processors import RequestProcessor

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence

__all__ = ["ANSWERED", "batch_limit", "blocking_call", "call_timeout", "callback_of",
           "command_of", "config_of", "grace_seconds", "loop_thread_refused", "outside_trio",
           "processor_registration", "request_code", "requests_of", "seconds", "the_request",
           "wait_seconds"]

C = TypeVar("C")
F = TypeVar("F", bound="Callable[..., Any]")

INT32_MIN = -(2**31)
INT32_MAX = 2**31 - 1


def seconds(name: str, value: object, *, minimum: float = 0.0, above: bool = False) -> float:
    """Return ``value`` if it is a number of seconds ``>= minimum`` (``> minimum`` with
    ``above``); infinity is allowed, NaN is not.

    Raises:
        TypeError: not an int or float (a bool is not a number of seconds).
        ValueError: NaN, or below the minimum.
    """
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise TypeError(f"{name} must be a number of seconds, got {value!r}")
    if math.isnan(value) or value < minimum or (above and value == minimum):
        relation = ">" if above else ">="
        raise ValueError(f"{name} must be a number of seconds {relation} {minimum:g}, "
                         f"got {value!r}")
    return value


# The public blocking call being made in this context, and its trio form (`blocking_call`):
# what `outside_trio` names, instead of the client's method the face called.
_PUBLIC_CALL: Final[ContextVar[tuple[str, str] | None]] = ContextVar(
    "remoting_public_blocking_call", default=None)


def outside_trio(call: str, instead: str = "remoting.open_client() and "
                 "`await client.invoke_sync(...)`") -> None:
    """Refuse a blocking ``call`` made in a thread that runs a trio loop: it would block that
    loop, and a server or client running in it, until the call's timeout (a server in the
    same loop could never answer). Every public blocking method that waits calls this first.
    Within a face's method marked with `blocking_call`, the message names that method.

    Raises:
        RuntimeError: this thread runs trio (any ``trio.run``, the endpoint's own or not);
            the message names ``instead``, what to use there.
    """
    # trio not imported: no thread runs it (and the sans-I/O core that checks calls need not
    # import it)
    trio = sys.modules.get("trio")
    if trio is not None and trio.lowlevel.in_trio_run():
        public = _PUBLIC_CALL.get()
        if public is not None:
            call, instead = public
        raise RuntimeError(
            f"{call} blocks, and this thread runs a trio event loop, which it would stall "
            f"until the call's timeout: in trio code use {instead}, or make the blocking call "
            "from a worker thread (trio.to_thread.run_sync)")


def loop_thread_refused() -> RuntimeError:
    """The error of a blocking call made in the endpoint's own loop thread (it would wait for
    the loop it stalls)."""
    return RuntimeError(
        "blocking remoting calls cannot be made from the event loop's thread "
        "(use the trio-native client or an async processor's channel methods)")


def blocking_call(call: str, instead: str) -> Callable[[F], F]:
    """Mark a public blocking method of a face that wraps a blocking client (a queue, a bus,
    a Spark helper...): when the client refuses to block a thread that runs trio
    (`outside_trio`), the message names ``call``, what the user called
    (``"QueueClient.publish"``), and ``instead``, its trio form, not the client's method the
    face called (``RemotingClient.invoke_sync``). The outermost marked call is named.

    It costs a context variable's set and reset per call (a check of its own would cost a
    second ``in_trio_run``, a raised and caught AttributeError outside trio: ~1 us).
    """
    def decorate(method: F) -> F:
        @functools.wraps(method)
        def named(*args: Any, **kwargs: Any) -> Any:
            if _PUBLIC_CALL.get() is not None:  # called by a marked method: that one is named
                return method(*args, **kwargs)
            token = _PUBLIC_CALL.set((call, instead))
            try:
                return method(*args, **kwargs)
            finally:
                _PUBLIC_CALL.reset(token)
        return cast("F", named)
    return decorate


def call_timeout(timeout: object) -> float:
    """Return a call's timeout: a number of seconds >= 0; 0 is a deadline already past (the
    call fails with `RemotingTimeoutError` and sends nothing, as gRPC's), infinity waits for
    ever.

    Raises:
        TypeError: not an int or float.
        ValueError: NaN, or below 0 (a mistake, not a deadline).
    """
    if type(timeout) is float or type(timeout) is int:  # the usual case, cheaply
        if timeout > 0:  # False for NaN
            return timeout
        if timeout == 0:
            return 0.0
    if isinstance(timeout, bool) or not isinstance(timeout, int | float):
        raise TypeError(f"timeout must be a number of seconds, got {timeout!r}")
    if math.isnan(timeout) or timeout < 0:
        raise ValueError(f"timeout must be a number of seconds >= 0 (0: already expired, "
                         f"nothing is sent; math.inf: no limit), got {timeout!r}")
    return float(timeout)


def wait_seconds(timeout: object) -> float | None:
    """Return how long a thread may wait for a future (None: until the call's deadline;
    0 or less: not at all).

    Raises:
        TypeError: not None, an int or a float.
        ValueError: NaN.
    """
    if timeout is None or type(timeout) is float or type(timeout) is int:
        if timeout == timeout:  # False for NaN only
            return timeout
    elif isinstance(timeout, bool) or not isinstance(timeout, int | float):
        raise TypeError(f"timeout must be None or a number of seconds, got {timeout!r}")
    elif timeout == timeout:
        return float(timeout)
    raise ValueError("timeout must be None or a number of seconds, got nan")


def callback_of(callback: object, name: str = "callback", *, optional: bool = True) -> Any:
    """Return ``callback`` if it is callable (a function of the future), or None when
    ``optional``.

    Raises:
        TypeError: it is not.
    """
    if (callback is not None or not optional) and not callable(callback):
        raise TypeError(f"{name} must be a function of the future, got {callback!r}")
    return callback


def batch_limit(limit: object) -> int:
    """Return ``invoke_many``'s ``limit``: an int >= 1 (requests in flight at most).

    Raises:
        TypeError: not an int (a bool is not a count).
        ValueError: below 1.
    """
    if type(limit) is int and limit >= 1:  # the usual case, cheaply
        return limit
    if isinstance(limit, bool) or not isinstance(limit, int):
        raise TypeError(f"limit must be an int >= 1 (requests in flight at most), "
                        f"got {limit!r}")
    if limit < 1:
        raise ValueError(f"limit must be an int >= 1 (requests in flight at most), got {limit}")
    return int(limit)


def grace_seconds(grace: object) -> float | None:
    """Return a shutdown's ``grace`` (None: the config's).

    Raises:
        TypeError, ValueError: not a number of seconds >= 0.
    """
    return None if grace is None else seconds("grace", grace)


ANSWERED: Final = FLAG_RESPONSE | FLAG_ONEWAY  # either bit: the peer will not answer it


def the_request(request: object, refused: int = ANSWERED, name: str = "request"
                ) -> RemotingCommand:
    """Return ``request`` if it is a `RemotingCommand` whose flag has none of the
    ``refused`` bits (default: response and oneway, for calls that wait for an answer).

    Raises:
        TypeError: it is not a `RemotingCommand`.
        ValueError: it is a response, or marked oneway where an answer is awaited: the peer
            would never answer it.
    """
    if not isinstance(request, RemotingCommand):
        raise TypeError(f"{name} must be a RemotingCommand, got {type(request).__name__}")
    flag = request.flag
    if flag and type(flag) is int and flag & refused:  # a non-int flag: the encoder says so
        _refuse_flag(name, flag)
    return request


def _refuse_flag(name: str, flag: int) -> None:
    if flag & FLAG_RESPONSE:
        raise ValueError(f"{name} is a response (flag {flag:#x} has the response bit): "
                         "create a request with RemotingCommand.create_request")
    raise ValueError(f"{name} is marked oneway (flag {flag:#x}): send it with "
                     "invoke_oneway, or clear the oneway bit")


def requests_of(requests: object) -> Sequence[RemotingCommand]:
    """Return the requests of a batch as a sequence of `RemotingCommand` (none of them a
    response or marked oneway).

    Raises:
        TypeError: not an iterable of them (the message gives the first bad item's index).
        ValueError: an item is a response or marked oneway.
    """
    if isinstance(requests, RemotingCommand | str | bytes) or not hasattr(requests, "__iter__"):
        raise TypeError(f"requests must be a sequence of RemotingCommand, got "
                        f"{type(requests).__name__}")
    items: Sequence[Any] = requests if isinstance(requests, list | tuple) else list(requests)
    for i, request in enumerate(items):
        if not isinstance(request, RemotingCommand):
            raise TypeError(f"requests[{i}] must be a RemotingCommand, got "
                            f"{type(request).__name__}")
        flag = request.flag
        if flag and type(flag) is int and flag & ANSWERED:
            _refuse_flag(f"requests[{i}]", flag)
    return items


def command_of(name: str, command: object) -> RemotingCommand:
    """Return ``command`` if it is a `RemotingCommand` (any flag).

    Raises:
        TypeError: it is not.
    """
    return the_request(command, 0, name)


def request_code(code: object) -> int:
    """Return a processor's request code: an int in the wire's int32 range.

    Raises:
        TypeError: not an int (a bool is not a code).
        ValueError: outside int32.
    """
    if isinstance(code, bool) or not isinstance(code, int):
        raise TypeError(f"code must be an int, got {code!r}")
    if not INT32_MIN <= code <= INT32_MAX:
        raise ValueError(f"code must fit the wire's int32, got {code}")
    return code


def rpc_hook(hook: object) -> None:
    """Check that ``hook`` has both methods of an `RPCHook`.

    Raises:
        TypeError: it lacks one, naming it.
    """
    for method in ("do_before_request", "do_after_response"):
        if not callable(getattr(hook, method, None)):
            raise TypeError(f"an RPC hook needs do_before_request(remote_addr, request) and "
                            f"do_after_response(remote_addr, request, response) methods "
                            f"(remoting.RPCHook); {type(hook).__name__} has no {method}")


def config_of(config: C | None, cls: type[C]) -> C:
    """Return ``config``, or ``cls()`` when it is None.

    Raises:
        TypeError: ``config`` is not a ``cls`` (a ServerConfig for a client, a dict...).
    """
    if config is None:
        return cls()
    if not isinstance(config, cls):
        raise TypeError(f"config must be a {cls.__name__}, got {type(config).__name__}")
    return config


def processor_registration(code: object, processor: object, executor: object,
                           threads: object) -> None:
    """Refuse a processor registration that could never serve a request.

    Raises:
        TypeError: a wrong type of ``code``, ``executor`` or ``threads``, or a
            `RequestProcessor` whose ``process_request`` is a coroutine function.
        ValueError: a code outside int32, or ``threads`` below 0.
    """
    if code is not None:
        request_code(code)
    if executor is not None and not isinstance(executor, Executor):
        raise TypeError(f"executor must be a concurrent.futures.Executor, got "
                        f"{type(executor).__name__}")
    if threads is not None:
        if isinstance(threads, bool) or not isinstance(threads, int):
            raise TypeError(f"threads must be an int, got {threads!r}")
        if threads < 0:
            raise ValueError(f"threads must be >= 0 (0: config.default_processor_threads), "
                             f"got {threads}")
    if (isinstance(processor, RequestProcessor)
            and inspect.iscoroutinefunction(processor.process_request)):
        raise TypeError(f"{type(processor).__name__}.process_request is a coroutine function: "
                        "subclass processors.AsyncRequestProcessor for processors that await")
