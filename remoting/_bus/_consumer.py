"""`Consumer`: a handler registered at an address, with its mailbox (Vert.x's
``MessageConsumer``: ``pause``, ``resume``, ``maxBufferedMessages``, a discard handler).

A consumer's state (its mailbox, its counters, whether it is registered) is guarded by its
bus's lock; its handler runs outside that lock, one message at a time, on the bus's runner (a
thread, or a trio task). What it needs from the bus that owns it is `ConsumerOwner`: where
its interceptors, telemetry and counters are, how to fail a message, how to unregister it.
"""

from __future__ import annotations

import inspect
from typing import TYPE_CHECKING, Literal, Protocol

from .._steps import Await
from ._mailbox import Mailbox
from ._wire import max_buffered_bytes_of, max_buffered_of, size_of

if TYPE_CHECKING:
    import threading
    from collections.abc import Callable

    from .._steps import Steps
    from ._message import Message
    from ._runners import Runner
    from ._telemetry import BusTelemetry

__all__ = ["Consumer", "ConsumerOwner", "Credits", "Taken", "check_callback", "check_handler"]

Taken = Literal["accepted", "full", "gone"]


class ConsumerOwner(Protocol):
    """What a consumer needs from its bus."""

    @property
    def lock(self) -> threading.Lock: ...

    def remove_consumer(self, consumer: Consumer) -> None:
        """Take ``consumer`` out of the bus's tables (called under the lock)."""
        ...

    def consumer_removed(self, consumer: Consumer, dropped: list[Message]) -> None:
        """``consumer`` is unregistered; ``dropped`` were waiting for its handler (called
        after the lock is released)."""
        ...

    @property
    def telemetry(self) -> BusTelemetry: ...

    def inbound(self, message: Message) -> None:
        """Run the inbound interceptors on ``message``."""
        ...

    def handler_failed(self, consumer: Consumer, message: Message, exc: BaseException) -> None:
        """Log and count a handler's failure; fail a message still awaiting its reply."""
        ...

    def counted(self, delivered: int, discarded: int) -> None:
        """Count messages delivered to and discarded by a consumer (under the lock)."""
        ...


class Credits(Protocol):
    """Where a remote consumer's credits and window go: its bus server, through the client."""

    def credit(self, consumer: Consumer, credits: int) -> Steps[None]:
        """Tell the server ``consumer`` finished ``credits`` messages (steps)."""
        ...

    def resize(self, consumer: Consumer, window: int, credits: int,
               applied: Callable[[], object]) -> None:
        """Tell the server ``consumer`` may hold ``window`` messages and is done with
        ``credits``; never waits. ``applied()`` runs once the server has it (or the
        connection is gone, and the server with it forgot the consumer)."""
        ...


class Consumer:
    """A handler registered at an address; ``unregister()`` removes it.

    Messages reach the handler one at a time and in order. The consumer holds at most
    ``max_buffered`` messages, the one its handler runs included, and at most
    ``max_buffered_bytes`` of their bodies and headers (one larger message is taken when it
    holds nothing, alone); one more is discarded (counted in ``discarded``, passed to
    ``on_discard``). A remote consumer (a `BusClient`'s ``consumer``) tells its bus server
    how many messages it may hold, and the server sends no more than that: its senders wait,
    then fail (docs/bus.md, back-pressure); the server does not know its bytes, so beyond
    them the consumer discards what was sent.

    Attributes:
        address: where it is registered.
        local: True for a ``local_consumer`` (only its own bus sends to it).
        on_discard: called with each message it discards, where handlers run (None: none).
    """

    def __init__(self, owner: ConsumerOwner, runner: Runner, address: str,
                 handler: Callable[[Message], object], *, max_buffered: int,
                 max_buffered_bytes: int, local: bool,
                 on_discard: Callable[[Message], object] | None = None,
                 consumer_id: int = 0, credits: Credits | None = None) -> None:
        self.address = address
        self._max_buffered = max_buffered
        self._resizes = 0  # WINDOW updates sent to the server: only the latest one applies
        self.local = local
        self.on_discard = on_discard
        self.consumer_id = consumer_id  # a remote consumer's id at its bus server
        self._owner = owner
        self._runner = runner
        self._handler = handler
        self._credits = credits
        self._mailbox: Mailbox[Message] = Mailbox(max_buffered, max_buffered_bytes)
        self._registered = True
        self._discarded = 0
        self._uncredited = 0  # finished messages not yet credited back (remote consumers)
        self._registering = False  # a registration is on its way: credits wait
        self._credit_every = max(1, max_buffered // 4)

    def __repr__(self) -> str:
        state = "paused" if self.paused else "registered" if self._registered else "unregistered"
        return f"<Consumer {self.address!r} {state}, {self.buffered} buffered>"

    @property
    def max_buffered(self) -> int:
        """How many messages the consumer may hold, the one its handler runs included
        (Vert.x's ``maxBufferedMessages``). Set it at any time, from any thread or task.

        A smaller bound keeps the messages held already (none is dropped) and takes new ones
        only once the handler brought them under it. A remote consumer's bus server is told
        in the background; until it answers, the consumer still takes what the server sent
        under the larger bound, so no message in flight is discarded. A larger bound applies
        at once.

        Raises:
            TypeError, ValueError: not an int from 1 to 1,000,000.
        """
        return self._max_buffered

    @max_buffered.setter
    def max_buffered(self, value: int) -> None:
        value = max_buffered_of(value)
        link = self._credits
        with self._owner.lock:
            self._max_buffered = value
            self._credit_every = max(1, value // 4)
            mailbox = self._mailbox
            if link is None or not self._registered:
                mailbox.max_buffered = value
                return
            if value >= mailbox.max_buffered:
                mailbox.max_buffered = value  # room at once; the server learns it next
            self._resizes += 1
            resize = self._resizes
            owed, self._uncredited = self._uncredited, 0  # the server needs them to move
        link.resize(self, value, owed, lambda: self._resized(resize))

    @property
    def max_buffered_bytes(self) -> int:
        """How many bytes of messages (bodies and headers) the consumer may hold, the one
        its handler runs included; one larger message is taken when it holds nothing. Set
        it at any time, from any thread or task: a smaller bound keeps what is held (none is
        dropped) and takes new messages once under it.

        Raises:
            TypeError, ValueError: not an int >= 1.
        """
        return self._mailbox.max_bytes

    @max_buffered_bytes.setter
    def max_buffered_bytes(self, value: int) -> None:
        value = max_buffered_bytes_of(value)
        with self._owner.lock:
            self._mailbox.max_bytes = value

    @property
    def buffered_bytes(self) -> int:
        """Bytes of the messages the consumer holds (bodies and headers), the one its
        handler runs included."""
        with self._owner.lock:
            return self._mailbox.held_bytes

    def _resized(self, resize: int) -> None:
        """The server has the window of update number ``resize``: the consumer's bound
        follows it, unless a later update was sent meanwhile."""
        with self._owner.lock:
            if resize == self._resizes:
                self._mailbox.max_buffered = self._max_buffered

    def registering(self) -> int:
        """A (new) registration at the server is on its way: return the messages the
        consumer holds, which the server counts in its fresh window until they are credited
        (under the lock). Credits wait meanwhile (`registered_again`): one sent before the
        server has the consumer would be lost, and its window slot with it."""
        self._registering = True
        self._uncredited = 0  # for the connection that is gone: its server forgot them
        return self._mailbox.held

    def registered_again(self) -> int:
        """The server has the registration: return the credits owed meanwhile (under the
        lock), to send now."""
        self._registering = False
        owed, self._uncredited = self._uncredited, 0
        return owed

    @property
    def registered(self) -> bool:
        """False once unregistered."""
        return self._registered

    @property
    def paused(self) -> bool:
        """True between `pause` and `resume`."""
        return self._mailbox.paused

    @property
    def buffered(self) -> int:
        """Messages waiting for the handler."""
        with self._owner.lock:
            return self._mailbox.buffered

    @property
    def discarded(self) -> int:
        """Messages discarded, the consumer being full."""
        return self._discarded

    # ------------------------------------------------------------------ control

    def pause(self) -> None:
        """Stop handing messages to the handler (the one it runs finishes); keep those that
        arrive, up to ``max_buffered`` (Vert.x ``pause``). From any thread or task."""
        with self._owner.lock:
            self._mailbox.pause()

    def resume(self) -> None:
        """Hand messages to the handler again, those kept first (Vert.x ``resume``)."""
        with self._owner.lock:
            start = self._registered and self._mailbox.resume()
        if start:
            self._runner.start(self)

    def unregister(self) -> None:
        """Remove the consumer (idempotent; from any thread or task).

        Its handler is handed nothing more (a message it runs finishes). The messages it
        kept are dropped, and those awaiting a reply are failed to their requesters as
        RECIPIENT_FAILURE. A remote consumer's bus server is told in the background; what it
        pushes meanwhile goes to another consumer of the address, or fails as NO_HANDLERS.
        """
        with self._owner.lock:
            if not self._registered:
                return
            self._registered = False
            dropped = self._mailbox.clear()
            self._owner.remove_consumer(self)
        self._owner.consumer_removed(self, dropped)

    # ------------------------------------------------------------------ delivery

    def offer(self, message: Message) -> Taken:
        """Hand ``message`` to the consumer (the bus lock must not be held): ``"accepted"``,
        ``"full"`` (discarded: counted, ``on_discard`` runs) or ``"gone"`` (unregistered)."""
        with self._owner.lock:
            if not self._registered:
                return "gone"
            taken = self._mailbox.offer(message, size_of(message.body, message.headers))
            if taken == "full":
                self._discarded += 1
                self._uncredited += self._credits is not None  # its window slot comes back
                self._owner.counted(0, 1)
            else:
                self._owner.counted(1, 0)
        if taken == "start":
            self._runner.start(self)
        elif taken == "full":
            on_discard = self.on_discard
            if on_discard is not None:
                self._runner.call(lambda: on_discard(message))
            return "full"
        return "accepted"

    def drain(self) -> Steps[None]:
        """Run the handler on the messages waiting, in order, until none is left or the
        consumer is paused (steps: a job of its runner, in a thread or a trio task)."""
        owner = self._owner
        lock = owner.lock
        mailbox = self._mailbox
        link = self._credits
        while True:
            with lock:
                message = mailbox.take()
                credit = self._credit_due()
            if credit and link is not None and self._registered:
                yield from link.credit(self, credit)
            if message is None:
                return
            try:
                with owner.telemetry.processing(message):
                    owner.inbound(message)
                    result = self._handler(message)
                    if inspect.isawaitable(result):
                        yield Await(result, "a blocking bus runs plain functions: this handler "
                                    "returned an awaitable (use a trio bus for async handlers)")
            except Exception as exc:
                owner.handler_failed(self, message, exc)
            finally:
                with lock:
                    mailbox.done()
                    self._uncredited += link is not None

    def _credit_due(self) -> int:
        """Return the credits to send now (under the lock): every quarter window. Those
        kept meanwhile are fewer than a quarter window, so the server, which stops at a
        full window, never waits for them: it waits only for messages still held."""
        owed = self._uncredited
        if owed >= self._credit_every and not self._registering:
            self._uncredited = 0
            return owed
        return 0

def check_handler(handler: object, blocking: bool, name: str = "handler") -> None:
    """Check a handler (or ``on_discard``): callable, and a plain function for a blocking bus.

    Raises:
        TypeError: it is not.
    """
    if not callable(handler):
        raise TypeError(f"{name} must be callable, got {type(handler).__name__}")
    call = handler if inspect.isroutine(handler) else type(handler).__call__
    if blocking and (inspect.iscoroutinefunction(handler) or inspect.iscoroutinefunction(call)):
        raise TypeError(f"a blocking bus runs {name}s on threads: give a plain function, "
                        "not an async one (async ones need a trio bus)")


def check_callback(callback: Callable[[Message], object] | None, blocking: bool
                   ) -> Callable[[Message], object] | None:
    """Check ``on_discard`` (None, or as `check_handler`).

    Raises:
        TypeError: it is not callable, or async for a blocking bus.
    """
    if callback is not None:
        check_handler(callback, blocking, "on_discard")
    return callback
