"""`ThreadCall`: a call of the thread driver."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .._calling._future import ResponseFuture

if TYPE_CHECKING:
    from codec import RemotingCommand

__all__ = ["ThreadCall"]


class ThreadCall(ResponseFuture):
    """A call of the thread driver: a `ResponseFuture` that knows whether a thread waits for
    it (``unattended``: none does, so the background reader reads for it) and the batch it
    belongs to, if any (``batch``: the answers of one read go to their batch together)."""

    __slots__ = ("batch", "unattended")

    def __init__(self, request: RemotingCommand, addr: str | None, timeout: float,
                 driver: Any) -> None:
        super().__init__(request, addr, timeout, driver, driver=driver)
        self.unattended = False
        self.batch: Any = None
