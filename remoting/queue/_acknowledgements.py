"""`SubscriptionAcks`: one subscription stream's acknowledgements, as its client keeps them
(both faces): made, grouped, counted, and what the service answered.

Acknowledgements wait in an `AckGroup` and travel together (one ACK request per group): once
half the credits are pending, once the oldest has waited ``ack_window`` seconds, at once for
a requeue or a touch, and when the subscription closes. The service says which it refused (a
delivery that timed out meanwhile and went to another subscriber): in an ACK's answer, or in
a notice on the stream for a oneway ACK (`deliveries_of` counts those). Those that cannot be
applied are counted as refused too, and their messages will be delivered again: made once
the stream had ended, that found its connection gone, or whose ACK failed or was answered
with anything but SUCCESS. A subscription that moves to another server starts new ones
(`moved_to`): a delivery remembers those of its stream, so an acknowledgement of the old
server's delivery is counted as refused, never sent to the new server.

No I/O and no waiting: a subscription (`remoting.queue._subscription`) sends what `request`
returns and hands back the futures of the answers it waits for (``sent``).
"""

from __future__ import annotations

from collections import deque
from typing import TYPE_CHECKING

from codec import ResponseCode

from .._errors import RemotingError
from .._log import log
from ._errors import QueueError, malformed_records
from ._requests import ack_request
from ._sansio._acks import AckGroup, AckOp
from ._sansio._records import record_fields
from ._wire import ATTEMPTS, REFUSED, answered_int, parse_attempts

if TYPE_CHECKING:
    from codec import RemotingCommand

    from .._core._calling._future import ResponseFuture
    from ._messages import Message
    from ._sansio._records import Fields

__all__ = ["SubscriptionAcks", "deliveries_of"]


class SubscriptionAcks:
    """One stream's acknowledgements: grouped, counted, and their answers read."""

    def __init__(self, addr: str | None, topic: str, channel: str, stream_id: int,
                 credits: int, window: float) -> None:
        self.addr = addr
        self.topic = topic
        self.channel = channel
        self.stream_id = stream_id
        self.credits = credits
        self.group = AckGroup(max(1, credits // 2), window)
        # ACKs sent with an answer to come, and how many acknowledgements each carries
        self.sent: deque[tuple[ResponseFuture, int]] = deque()
        self.acked = self.requeued = self.touched = self.refused = 0
        self.closed = False
        self._said_unsent = False  # logged (warning) that some could not be applied

    def moved_to(self, stream_id: int) -> SubscriptionAcks:
        """Return the acknowledgements of the subscription's next stream (it moved to
        another server), with the same counts. Those pending here cannot reach the server
        they were for (its stream is over, and its deliveries went back to its channel):
        they count as refused."""
        moved = SubscriptionAcks(self.addr, self.topic, self.channel, stream_id, self.credits,
                                 self.group.window)
        moved.acked, moved.requeued, moved.touched = self.acked, self.requeued, self.touched
        moved.refused = self.refused + len(self.group.take())
        return moved

    def stale(self, delivery: Message, done: bool) -> None:
        """Count an acknowledgement of a delivery that came on a stream the subscription
        has left (it moved to another server): it cannot be applied, its message went back
        to that server's channel, so it counts as refused.

        Raises:
            QueueError: as `add`.
        """
        self.check(delivery, done)
        self.refused += 1
        log.debug("queue.ack_refused", topic=self.topic, channel=self.channel, code=None,
                  refused=1)

    def check(self, delivery: Message, done: bool) -> None:
        """Raise if ``delivery`` may not be acknowledged now.

        Raises:
            QueueError: it was finished or requeued already, or the subscription is closed.
        """
        if done:
            closed = " (and the subscription is closed)" if self.closed else ""
            raise QueueError(self.addr, None, f"{delivery.id} was finished or requeued "
                             f"already{closed}: this acknowledgement changes nothing")
        if self.closed:
            raise QueueError(self.addr, None, f"the subscription is closed: {delivery.id} went "
                             "back to the channel (it will be delivered again)")

    def unsent(self, count: int, reason: str) -> None:
        """Count ``count`` acknowledgements that cannot be applied (``reason``: why): their
        messages will be delivered again. Logged as ``queue.ack_refused``, a warning the
        first time for the subscription."""
        if not count:
            return
        self.refused += count
        level = log.debug if self._said_unsent else log.warning
        self._said_unsent = True
        level("queue.ack_refused", topic=self.topic, channel=self.channel, code=None,
              refused=count, reason=reason)

    def failed(self, count: int, error: RemotingError, what: str) -> None:
        """Count ``count`` acknowledgements whose ACK failed with ``error`` (``what``: "could
        not be sent", "got no answer"): the connection is gone, the stream ends with it."""
        log.debug("queue.ack_failed", topic=self.topic, channel=self.channel, error=str(error))
        self.unsent(count, f"its ACK {what} ({type(error).__name__})")

    def add(self, delivery: Message, done: bool, op: AckOp, delay_ms: int, now: float
            ) -> bool:
        """Record one acknowledgement; return True if the group is due to be sent.

        Raises:
            QueueError: ``delivery`` was finished or requeued already (``done``), or the
                subscription is closed.
        """
        self.check(delivery, done)
        self.made(op)
        return self.group.add(op, delivery.offset, now, delay_ms)

    def made(self, op: AckOp) -> None:
        """Count an acknowledgement made (in ``acked``, ``requeued`` or ``touched``)."""
        if op is AckOp.FINISH:
            self.acked += 1
        elif op is AckOp.REQUEUE:
            self.requeued += 1
        else:
            self.touched += 1

    def request(self, even_empty: bool = False) -> tuple[RemotingCommand, int] | None:
        """Return the ACK request of what is pending and how many it carries (None: nothing,
        unless ``even_empty``: an empty ACK's answer says every ACK before it was applied).
        Whether it is sent oneway is the sender's choice (a oneway one gets no answer: its
        refusals come back on the stream)."""
        acks = self.group.take()
        if not acks and not even_empty:
            return None
        return ack_request(self.stream_id, self.topic, self.channel, acks, False), len(acks)

    def collect(self) -> None:
        """Read the answers of the ACKs sent that have come back."""
        sent = self.sent
        while sent and sent[0][0].done():
            fut, count = sent.popleft()
            try:
                reply = fut.result(0)
            except RemotingError as exc:  # the connection failed: the stream ends with it
                self.failed(count, exc, "got no answer")
                continue
            if reply.code != ResponseCode.SUCCESS:
                self.unsent(count, f"its ACK was answered code {reply.code}: {reply.remark}")
                continue
            refused = answered_int(self.addr, reply.ext_fields, REFUSED)
            if refused:
                self.note_refused(refused, reply.code)

    def note_refused(self, refused: int, code: int | None) -> None:
        """The service refused ``refused`` acknowledgements (in an ACK's answer, or a notice
        on the stream for oneway ones)."""
        self.refused += refused
        log.warning("queue.ack_refused", topic=self.topic, channel=self.channel,
                    code=code, refused=refused)


def deliveries_of(item: RemotingCommand, acks: SubscriptionAcks) -> list[tuple[Fields, int]]:
    """Return the deliveries (their fields and attempts) an item of the stream carries: none
    for a notice of refused acknowledgements, which it counts.

    Raises:
        QueueError: the service sent a bad ``attempts`` field.
    """
    ext = item.ext_fields or {}
    refused = ext.get(REFUSED)
    if refused is not None:
        acks.note_refused(answered_int(acks.addr, ext, REFUSED), None)
        return []
    try:
        tries = parse_attempts(ext.get(ATTEMPTS))
    except ValueError as exc:
        raise QueueError(acks.addr, None, f"the service sent bad {ATTEMPTS}: {exc}") from None
    try:
        fields = record_fields(item.body or b"")
    except ValueError as exc:
        raise malformed_records(acks.addr, exc) from None
    if not tries:
        return [(f, 1) for f in fields]
    return [(f, tries.get(f[0], 1)) for f in fields]
