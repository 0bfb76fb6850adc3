"""`BusInterceptor`: code that sees every message a bus sends and every message its consumers
receive (Vert.x's ``addOutboundInterceptor`` and ``addInboundInterceptor``)."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import threading

    from ._message import Message, OutboundMessage

__all__ = ["BusInterceptor", "add_interceptor"]


class BusInterceptor:
    """Base class of bus interceptors; both methods do nothing. Register one with
    ``bus.add_interceptor``; interceptors run in registration order.

    A bus server relays messages between clients without running interceptors: a client's
    run on its own sends and its own consumers' messages.
    """

    def outbound(self, message: OutboundMessage) -> None:
        """See a message before it leaves this bus (send, publish, request, reply, fail), in
        the sending thread or task; it may change ``message.body`` and ``message.headers``.
        Whatever it raises stops the message, and the call that sent it raises it."""

    def inbound(self, message: Message) -> None:
        """See a message before a consumer's handler does, on the handler's thread or task
        (once per consumer: a publish reaching three consumers of this bus is seen three
        times). Whatever it raises counts as the handler's failure: logged, counted, and a
        request is failed to its requester as RECIPIENT_FAILURE."""


def add_interceptor(lock: threading.Lock, interceptors: list[BusInterceptor],
                    interceptor: object) -> None:
    """Append ``interceptor`` to a bus's ``interceptors`` (once), under its ``lock``.

    Raises:
        TypeError: it is not a `BusInterceptor`.
    """
    if not isinstance(interceptor, BusInterceptor):
        raise TypeError("an interceptor must subclass remoting.bus.BusInterceptor, not "
                        f"{type(interceptor).__name__}")
    with lock:
        if interceptor not in interceptors:
            interceptors.append(interceptor)
