"""`RemoteConsumer`: a consumer that lives in a client of a bus server, as the server sees
it: the connection it came over, its id there, its `Outlet` (window and queue) and the
messages on their way to it, which the server's loop pushes in order."""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .._core._receiving._channel_handle import ChannelHandle
    from ._outlet import Budget, Outlet

__all__ = ["RemoteConsumer"]


@dataclass(slots=True, eq=False, kw_only=True)
class RemoteConsumer:
    """A client's consumer registered at this bus server (an entry of its address table).

    Attributes:
        channel: the client's connection.
        consumer_id: the consumer's id in that client.
        address: where it is registered.
        outlet: its window and queue here.
        budget: what the server holds for its connection's consumers together.
        to_push: messages the window admitted, not yet handed to the connection.
        pump_due: the loop is asked to push ``to_push`` (or waits for room to).
        registered: False once unregistered or its connection closed.
        many: its client takes DELIVER_MANY (several messages a push).
    """

    channel: ChannelHandle
    consumer_id: int
    address: str
    outlet: Outlet[Any]
    budget: Budget
    to_push: deque[Any] = field(default_factory=deque)
    pump_due: bool = False
    registered: bool = True
    many: bool = False
