"""`BusNode`: what one bus (an `EventBus`, or a bus client) keeps, and the steps of sending,
requesting and answering that stay in its process.

Theory of operation:
- One lock per bus guards its state: the address tables, its consumers' mailboxes, the reply
  addresses it waits on, the outlets of a bus server's remote consumers, and the counters.
  It is held only around that bookkeeping: never across I/O, an await, or user code (handlers,
  interceptors, discard handlers run outside it). Waiters are completed under it (see
  `_waiter`), so a waiter whose deadline passed, once it holds the lock, either removes its
  own entry or finds its outcome.
- Routing follows Vert.x: a send or a request from this bus goes to one of its own local
  consumers of the address, round-robin, when it has any; otherwise to one of the consumers
  every sender reaches (``shared``: a bus server's own and its clients'), round-robin; a bus
  client has none of those here and hands the message to its server. A publish reaches all
  of them. A consumer that turns out unregistered when a message reaches it is passed over:
  the message goes to the next one (it was not delivered, so this keeps at most once).
- A request registers a reply address (`ReplyTable`) before the message leaves; its answer
  (a reply, a failure, or a reply that awaits an answer in turn) completes the waiter of that
  address. Whoever removes an entry completes it: the answer, the waiter's own deadline, or
  the consumer that held the message going away.
"""

from __future__ import annotations

import threading
from time import monotonic
from typing import TYPE_CHECKING, Literal

from .._core._receiving._replies import exception_simple_desc
from .._log import log
from ._address_table import AddressTable
from ._failure import NO_CODE, ReplyFailure
from ._message import Message, OutboundMessage
from ._remote_consumer import RemoteConsumer
from ._reply_table import PendingReply, ReplyTable
from ._statistics import BusCounters, BusStatistics
from ._waiter import TaskWaiter, ThreadWaiter, send_answers
from ._wire import address_of, body_of, headers_of

if TYPE_CHECKING:
    from collections.abc import Callable

    from .._steps import Steps
    from ._consumer import Consumer
    from ._interceptors import BusInterceptor
    from ._message import OutboundKind
    from ._telemetry import BusTelemetry
    from ._waiter import Outcome, Waiter
    from ._wire import Kind

__all__ = ["BusNode", "consumer_full", "deadline_after", "no_handlers", "receipt_failure"]

_OUTBOUND_COUNTER = {"send": "sent", "publish": "published", "request": "requests",
                     "reply": "replies", "fail": "replies"}


class BusNode:
    """The state of one bus and its in-process steps (see the module docstring)."""

    def __init__(self, telemetry: BusTelemetry, *, reply_prefix: str = "") -> None:
        self.lock = threading.Lock()
        self.telemetry = telemetry
        self.local: AddressTable[Consumer] = AddressTable()  # local consumers: this bus only
        self.shared: AddressTable[Consumer | RemoteConsumer] = AddressTable()  # all senders
        self.replies: ReplyTable[Waiter] = ReplyTable(reply_prefix)
        self.counters = BusCounters()
        self.interceptors: list[BusInterceptor] = []
        self.consumers = 0
        self.remote_consumers = 0
        # a bus client: tells its server a remote consumer is gone (None: a bus server)
        self.on_remote_removed: Callable[[Consumer], None] | None = None

    # ------------------------------------------------------------------ consumers

    def add_consumer(self, consumer: Consumer, *, shared: bool) -> None:
        """Route messages to ``consumer`` (``shared``: from every sender, else only from
        this bus; a bus client's remote consumers are routed by its server instead)."""
        with self.lock:
            if consumer.local:
                self.local.add(consumer.address, consumer)
            elif shared:
                self.shared.add(consumer.address, consumer)
            self.consumers += 1

    def remove_consumer(self, consumer: Consumer) -> None:
        """`ConsumerOwner`: take ``consumer`` out of the tables (the lock is held)."""
        if consumer.local:
            self.local.remove(consumer.address, consumer)
        else:
            self.shared.remove(consumer.address, consumer)
        self.consumers -= 1

    def consumer_removed(self, consumer: Consumer, dropped: list[Message]) -> None:
        """`ConsumerOwner`: fail the requests ``consumer`` dropped; tell a bus server."""
        for message in dropped:
            if message.reply_address is not None and not message.answered:
                message.fail(NO_CODE, "the consumer was unregistered before handling it")
        if not consumer.local and self.on_remote_removed is not None:
            self.on_remote_removed(consumer)

    def counted(self, delivered: int, discarded: int) -> None:
        """`ConsumerOwner`: count deliveries and discards (the lock is held)."""
        self.counters.delivered += delivered
        self.counters.discarded += discarded

    def inbound(self, message: Message) -> None:
        """`ConsumerOwner`: run the inbound interceptors."""
        for interceptor in self.interceptors:
            interceptor.inbound(message)

    def handler_failed(self, consumer: Consumer, message: Message, exc: BaseException) -> None:
        """`ConsumerOwner`: log and count a handler's failure; fail its request."""
        log.error("bus.handler_failed", address=consumer.address, exc_info=exc)
        with self.lock:
            self.counters.handler_failures += 1
        if message.reply_address is not None and not message.answered:
            message.fail(NO_CODE, f"the handler raised {exception_simple_desc(exc)}")

    # ------------------------------------------------------------------ routing

    def choose(self, address: str, *, here: bool, skip: set[object] | None = None
               ) -> Consumer | RemoteConsumer | None:
        """Return the consumer a send to ``address`` goes to (``here``: sent by this bus,
        whose local consumers come first), passing over ``skip``; None if none."""
        passed = skip.__contains__ if skip else None
        with self.lock:
            if here:
                chosen = self.local.choose(address, passed)
                if chosen is not None:
                    return chosen
            return self.shared.choose(address, passed)

    def every(self, address: str, *, here: bool) -> list[Consumer | RemoteConsumer]:
        """Return every consumer a publish to ``address`` reaches."""
        with self.lock:
            shared = self.shared.all(address)
            return [*self.local.all(address), *shared] if here else shared

    def outbound(self, kind: OutboundKind, address: str, body: object, headers: object
                 ) -> OutboundMessage:
        """Return a message about to leave this bus, checked and seen by the outbound
        interceptors, and count it.

        Raises:
            TypeError, ValueError: a bad address, body or headers.
            Whatever an interceptor raised.
        """
        if kind not in ("reply", "fail"):
            address = address_of(address)
        message = OutboundMessage(kind=kind, address=address, body=body_of(body),
                                  headers=headers_of(headers))
        for interceptor in self.interceptors:
            interceptor.outbound(message)
        with self.lock:
            name = _OUTBOUND_COUNTER[kind]
            setattr(self.counters, name, getattr(self.counters, name) + 1)
        return message

    def send_to(self, consumer: Consumer, kind: Kind, address: str, body: bytes,
                headers: dict[str, str], reply_address: str | None = None
                ) -> Literal["accepted", "full", "gone"]:
        """Hand a send, publish or request to a consumer of this process (each consumer gets
        its own copy of the headers)."""
        return consumer.offer(Message(address=address, body=body, headers=dict(headers),
                                      kind=kind, reply_address=reply_address, replier=self))

    def count(self, failure: ReplyFailure) -> ReplyFailure:
        """Count ``failure`` of a message of this bus (the lock is held); return it."""
        if failure.kind == "NO_HANDLERS":
            self.counters.no_handlers += 1
        elif failure.kind == "TIMEOUT":
            self.counters.timeouts += 1
        else:
            self.counters.recipient_failures += 1
        return failure

    # ------------------------------------------------------------------ reply addresses

    def expect_reply(self, waiter: Waiter, deadline: float | None, address: str | None, *,
                     requester: object | None = None, holder: object | None = None
                     ) -> PendingReply[Waiter]:
        """Register a reply address for ``waiter``."""
        with self.lock:
            return self.replies.add(waiter, deadline, address=address, requester=requester,
                                    holder=holder)

    def hold(self, entry: PendingReply[Waiter], holder: object | None) -> None:
        """Record which connection's consumer holds the message of ``entry`` now."""
        with self.lock:
            entry.holder = holder

    def answer(self, reply_address: str, body: bytes, headers: dict[str, str],
               failure: tuple[int, str] | None,
               then: tuple[Waiter, float | None, object | None] | None = None, *,
               answerer: object | None = None) -> PendingReply[Waiter] | ReplyFailure:
        """Answer the message of ``reply_address``: a reply, or ``failure`` (code, message).
        With ``then`` (waiter, deadline, requester), the reply awaits an answer in turn.
        ``answerer``: the connection the answer came over (None: this process), which must
        hold the message (`ReplyTable.take`).

        Returns the entry answered (with ``then``: the new one, to wait on), or a
        NO_HANDLERS failure: the address expired, was never ours, or is not the answerer's
        to answer (told apart from an expired one to no one).
        """
        now = monotonic()
        with self.lock:
            due = self._expire(now)
            entry = self.replies.take(reply_address, now, answerer)
            if entry is None:
                self.counters.expired_replies += 1
                answered: PendingReply[Waiter] | ReplyFailure = ReplyFailure(
                    "NO_HANDLERS", "the reply address has expired: the requester timed out "
                    "or went away")
            else:
                answered = self._complete(entry, body, headers, failure, then)
                due.append(entry.waiter)
        send_answers(due)
        return answered

    def _complete(self, entry: PendingReply[Waiter], body: bytes, headers: dict[str, str],
                  failure: tuple[int, str] | None,
                  then: tuple[Waiter, float | None, object | None] | None
                  ) -> PendingReply[Waiter]:
        """Complete the waiter of ``entry`` (taken) with its answer (see `answer`; the lock
        is held); return the entry answered, or with ``then`` the new one."""
        outcome: Outcome
        after = entry
        if failure is not None:
            code, text = failure
            outcome = self.count(ReplyFailure("RECIPIENT_FAILURE", text,
                                              address=entry.address, code=code))
        else:
            next_address = None
            if then is not None:
                waiter, deadline, requester = then
                after = self.replies.add(waiter, deadline, address=None,
                                         requester=requester, holder=entry.requester)
                next_address = after.reply_address
            outcome = Message(address=entry.reply_address, body=body, headers=headers,
                              kind="reply", reply_address=next_address, replier=self)
        entry.waiter.complete(outcome)
        return after

    def _expire(self, now: float) -> list[Waiter]:
        """Complete the entries whose deadline passed with TIMEOUT (the lock is held);
        return their waiters (`send_answers` after the lock)."""
        expired = self.replies.expire(now)
        for entry in expired:
            entry.waiter.complete(self.count(_timeout(entry)))
        return [entry.waiter for entry in expired]

    def expire(self) -> float | None:
        """Complete the entries whose deadline passed with TIMEOUT, and send the answers
        among them; return the next deadline (None: none)."""
        with self.lock:
            due = self._expire(monotonic())
            deadline = self.replies.next_deadline()
        send_answers(due)
        return deadline

    def give_up(self, entry: PendingReply[Waiter]) -> None:
        """The waiter of ``entry`` stopped waiting (its deadline): complete it with TIMEOUT
        unless its outcome came meanwhile."""
        with self.lock:
            due = self._expire(monotonic())
            if self.replies.remove(entry):
                entry.waiter.complete(self.count(_timeout(entry)))
        send_answers(due)

    def outcome_of(self, waiter: Waiter) -> Message:
        """Return the reply ``waiter`` got.

        Raises:
            ReplyFailure: it got a failure.
        """
        outcome = waiter.outcome
        if isinstance(outcome, ReplyFailure):
            raise outcome
        assert isinstance(outcome, Message), outcome
        return outcome

    def wait_reply(self, waiter: Waiter, entry: PendingReply[Waiter]) -> Steps[Message]:
        """Wait for the answer to ``entry`` (steps: a thread's or a trio task's); return it.

        Raises:
            ReplyFailure: it failed, or timed out.
        """
        try:
            if not (yield waiter.until(entry.deadline)):
                self.give_up(entry)
        except BaseException:  # cancelled: nobody waits for this answer any more
            with self.lock:
                self.replies.remove(entry)
            raise
        return self.outcome_of(waiter)

    # ------------------------------------------------------------------ Replier

    def send_reply(self, reply_address: str, body: bytes, headers: dict[str, str],
                   failure: tuple[int, str] | None) -> None:
        """Answer a message delivered by this bus (never waits)."""
        message = self.outbound("fail" if failure else "reply", reply_address, body, headers)
        with self.telemetry.sending(message):
            self.answer(reply_address, message.body, message.headers, failure)

    def replying(self, reply_address: str, body: bytes, headers: dict[str, str],
                 timeout: float, *, blocking: bool) -> Steps[Message]:
        """Answer a message delivered by this bus, and wait for the answer to that (steps,
        of a thread if ``blocking``, else of a trio task)."""
        waiter: Waiter = ThreadWaiter() if blocking else TaskWaiter()
        message = self.outbound("reply", reply_address, body, headers)
        with self.telemetry.sending(message):
            after = self.answer(reply_address, message.body, message.headers, None,
                                (waiter, deadline_after(timeout), None))
            if isinstance(after, ReplyFailure):
                raise after
            return (yield from self.wait_reply(waiter, after))

    # ------------------------------------------------------------------ statistics

    def statistics(self) -> BusStatistics:
        """Return a snapshot of the counters."""
        with self.lock:
            c = self.counters
            addresses = {*self.local.addresses(), *self.shared.addresses()}
            return BusStatistics(
                addresses=len(addresses), consumers=self.consumers,
                remote_consumers=self.remote_consumers, sent=c.sent, published=c.published,
                requests=c.requests, replies=c.replies, delivered=c.delivered,
                no_handlers=c.no_handlers, unrouted_publishes=c.unrouted_publishes,
                dropped=c.dropped, discarded=c.discarded, handler_failures=c.handler_failures,
                timeouts=c.timeouts, recipient_failures=c.recipient_failures,
                expired_replies=c.expired_replies, pending_replies=len(self.replies),
                queued=sum(h.outlet.queued for h in self.shared.handlers()
                           if isinstance(h, RemoteConsumer)))


def deadline_after(timeout: float) -> float | None:
    """Return the `time.monotonic` deadline ``timeout`` seconds from now (None: infinite)."""
    return None if timeout == float("inf") else monotonic() + timeout


def receipt_failure(node: BusNode, waiter: Waiter, address: str) -> ReplyFailure | None:
    """Return how a send whose sender stopped waiting for its receipt ended: None if
    delivered, else its failure; one whose receipt has not come is failed with TIMEOUT now
    (a late receipt is then ignored: the sender was told)."""
    with node.lock:
        outcome = waiter.outcome
        if outcome is None:
            failure = node.count(ReplyFailure("TIMEOUT", "the consumer did not take the "
                                              "message in time", address=address))
            waiter.complete(failure)
            return failure
        return outcome if isinstance(outcome, ReplyFailure) else None


def no_handlers(address: str) -> ReplyFailure:
    return ReplyFailure("NO_HANDLERS", f"no handlers for address {address}", address=address)


def consumer_full(address: str) -> ReplyFailure:
    return ReplyFailure("RECIPIENT_FAILURE", f"the consumer of {address} is full (paused or "
                        "slow, holding max_buffered messages or max_buffered_bytes)",
                        address=address)


def _timeout(entry: PendingReply[Waiter]) -> ReplyFailure:
    return ReplyFailure("TIMEOUT", "timed out waiting for a reply", address=entry.address)

