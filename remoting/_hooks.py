"""RPC hooks (RocketMQ's ``RPCHook``): code that wraps every call on both sides.

Client side: ``do_before_request`` before every send (sync, async, oneway, and each request of
an ``invoke_many`` batch), in registration order; ``do_after_response`` only after a response
arrived (for a batch: each request that got one): it observes, and what it
raises is logged (``hook.failed``) without changing the call's outcome or stopping the other
after-hooks or an async call's callback. Server side: around the processor
(SPEC 6.1 step 5): a before-hook that raises skips the processor, after-hooks still run with a
placeholder SYSTEM_ERROR response, and the reply is SYSTEM_ERROR naming the hook's exception;
`AbortProcessError` from any hook replies with its own code and message.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol

from codec import ResponseCode

from ._errors import RemotingError, rebuild_error
from ._log import log

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence

    from codec import RemotingCommand

    from ._core._calling._future import ResponseFuture

__all__ = ["AbortProcessError", "RPCHook", "run_after_hooks", "run_after_hooks_many",
           "run_before_hooks", "run_before_hooks_many", "with_after_hooks"]


class RPCHook(Protocol):
    """The two callbacks of a hook; both run on the thread that makes or serves the call."""

    def do_before_request(self, remote_addr: str, request: RemotingCommand) -> None:
        """Inspect or amend ``request`` before it is sent (client) or processed (server)."""
        ...

    def do_after_response(
        self, remote_addr: str, request: RemotingCommand, response: RemotingCommand | None
    ) -> None:
        """Inspect ``response`` after it arrived (client) or was produced (server)."""
        ...


class AbortProcessError(Exception):
    """Raised by a server-side hook to refuse a request with a chosen response code.

    Attributes:
        code: the response code to reply with.
        remark: the reply's remark.
    """

    def __init__(self, code: int = ResponseCode.SYSTEM_ERROR, remark: str = "") -> None:
        self.code = code
        self.remark = remark
        super().__init__(f"request aborted with code {code}: {remark}")

    def __reduce__(self) -> tuple[Any, ...]:
        return rebuild_error, (type(self), self.args), self.__dict__


def run_before_hooks(hooks: Sequence[RPCHook], addr: str | None, request: RemotingCommand) -> None:
    """Run the client-side before-hooks in registration order."""
    for hook in hooks:
        hook.do_before_request(addr or "", request)


def run_after_hooks(hooks: Sequence[RPCHook], addr: str | None, request: RemotingCommand,
                    response: RemotingCommand) -> None:
    """Run the client-side after-hooks (successful responses only); log what they raise."""
    for hook in hooks:
        try:
            hook.do_after_response(addr or "", request, response)
        except Exception:
            log.error("hook.failed", hook=type(hook).__name__, method="do_after_response",
                      peer=addr, code=request.code, exc_info=True)


def run_before_hooks_many(hooks: Sequence[RPCHook], addr: str | None,
                          requests: Sequence[RemotingCommand]) -> None:
    """Run the before-hooks on every request of a batch, before any is sent: what a hook
    raises propagates (as for one call) and nothing of the batch goes out."""
    for request in requests:
        for hook in hooks:
            hook.do_before_request(addr or "", request)


def run_after_hooks_many(hooks: Sequence[RPCHook], addr: str | None,
                         requests: Sequence[RemotingCommand],
                         results: Sequence[RemotingCommand | RemotingError]) -> None:
    """Run the after-hooks for each request of a batch that got a response (logged as
    `run_after_hooks` does; a failed request, as a failed call, runs none)."""
    for request, result in zip(requests, results, strict=True):
        if not isinstance(result, RemotingError):
            run_after_hooks(hooks, addr, request, result)


def with_after_hooks(
    hooks: Sequence[RPCHook], request: RemotingCommand,
    callback: Callable[[ResponseFuture], object] | None,
) -> Callable[[ResponseFuture], object]:
    """Wrap an async call's callback so the after-hooks run first (on the callback executor);
    the callback runs whatever they do."""
    def run(fut: ResponseFuture) -> None:
        try:
            if fut.response_command is not None:
                run_after_hooks(hooks, fut.addr, request, fut.response_command)
        finally:
            if callback is not None:
                callback(fut)

    return run
