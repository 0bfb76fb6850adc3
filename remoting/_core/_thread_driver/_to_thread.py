"""`ToThreadDriver`: the trio face of a thread-driven client, for its async processors."""

from __future__ import annotations

from typing import TYPE_CHECKING

import trio

if TYPE_CHECKING:
    from codec import RemotingCommand

    from ..._errors import RemotingError
    from ..._interceptors import ClientCall
    from .._calling._caller import BlockingDriver
    from .._calling._future import ResponseFuture

__all__ = ["ToThreadDriver"]


class ToThreadDriver:
    """The trio face's driver over a blocking one: each call runs on a worker thread
    (``trio.to_thread``), for async processors of a thread-driven client that call the
    server back. Cancelling the awaiting task does not end the call: it ends by its
    deadline, as a thread's call does."""

    def __init__(self, blocking: BlockingDriver) -> None:
        self._blocking = blocking

    async def call_sync(self, call: ClientCall) -> RemotingCommand:
        return await trio.to_thread.run_sync(self._blocking.call_sync, call)

    async def call_async(self, call: ClientCall) -> ResponseFuture:
        return await trio.to_thread.run_sync(self._blocking.call_async, call)

    async def call_oneway(self, call: ClientCall) -> None:
        await trio.to_thread.run_sync(self._blocking.call_oneway, call)

    async def call_many(self, call: ClientCall) -> list[RemotingCommand | RemotingError]:
        return await trio.to_thread.run_sync(self._blocking.call_many, call)
