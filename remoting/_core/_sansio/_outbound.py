"""`Outbound`: the frames waiting for one connection's socket (sans-I/O bookkeeping).

Theory of operation:
- A frame is what `codec.encode_frame_parts` returns: ``bytes``, or ``(head, body)`` pieces
  that are never copied together. The queue holds pieces, in order, plus the byte and frame
  counts, and ``on_sent`` callbacks (oneway permits) released once the frames queued before
  them have been handed to the socket, or dropped at close.
- Two ways out, both decided by the connection and done by its transport: a non-blocking
  attempt of everything queued (`Outbound.pieces` then `sent`), whose rest stays queued; or the
  writer's `take` of everything queued, awaited to the end, then `taken_done`. While a take is
  in flight its bytes still count (`size`) for back-pressure.
- Policy constants live here: `FLUSH_FRAMES` (send early during a burst of work),
  `BUNDLE_FRAMES` (the same for a bundle of pushes) and the water marks given by the
  connection's config.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Final, TypeAlias

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence

    from codec import EncodedFrame

__all__ = ["BUNDLE_FRAMES", "FLUSH_FRAMES", "Outbound", "Piece", "consume"]

Piece: TypeAlias = "bytes | memoryview"
# Frames queued by one burst of work (a read of many requests, a batch of pool results) that
# are sent at once instead of after the burst: the peer starts on them while this side goes
# on, so both processes work at the same time (pipelined throughput ~1.7x, bench/rpc.py).
FLUSH_FRAMES: Final = 16
# The same for frames a part pushes to a peer in a bundle (`Endpoint.bundled`: the event
# bus's deliveries to a consumer's connection, its answers to a sender's) while it handles
# another connection's read: the bus's three processes leave no core idle to overlap the
# peer's work with. Pipelined bus sends (bench/bus.py, loaded 2-vCPU machine, 3 A/B pairs):
# 0.19 -> 0.11 server writes per message, server CPU per message unchanged (46 / 47 us).
BUNDLE_FRAMES: Final = 64


def consume(pieces: list[Piece], sent: int) -> list[Piece]:
    """Return what is left of ``pieces`` after ``sent`` bytes went out (no copy).

    A piece sent in part is replaced by a memoryview of its rest.
    """
    i = 0
    while sent:
        size = len(pieces[i])
        if sent < size:
            rest = pieces[i:]
            rest[0] = memoryview(rest[0])[sent:]
            return rest
        sent -= size
        i += 1
    return pieces[i:]


class Outbound:
    """Pieces queued for one socket, with their counts and the callbacks behind them."""

    __slots__ = ("_callbacks", "frames", "in_flight", "pieces", "queued")

    def __init__(self) -> None:
        self.pieces: list[Piece] = []
        self.queued = 0  # bytes in ``pieces``
        self.frames = 0  # frames added since the queue was last emptied
        self.in_flight = 0  # bytes of the writer's take still being sent
        self._callbacks: list[Callable[[], None]] = []

    def __bool__(self) -> bool:
        return bool(self.pieces)

    @property
    def size(self) -> int:
        """Bytes not yet taken by the socket: queued, and in the writer's send."""
        return self.queued + self.in_flight

    @property
    def idle(self) -> bool:
        """True when nothing is queued and no send is in flight."""
        return not self.pieces and not self.in_flight

    def add(self, frame: EncodedFrame, on_sent: Callable[[], None] | None = None) -> int:
        """Queue ``frame``; return how many frames are now queued."""
        if isinstance(frame, tuple):
            head, body = frame
            self.pieces += (head, body)
            self.queued += len(head) + len(body)
        else:
            self.pieces.append(frame)
            self.queued += len(frame)
        if on_sent is not None:
            self._callbacks.append(on_sent)
        self.frames += 1
        return self.frames

    def add_many(self, frames: Sequence[EncodedFrame]) -> int:
        """Queue ``frames`` (no callbacks); return how many frames are now queued."""
        if tuple in map(type, frames):  # a large body among them: its pieces, in order
            for frame in frames:
                self.add(frame)
            return self.frames
        self.pieces += frames  # type: ignore[arg-type]
        self.queued += sum(map(len, frames))
        self.frames += len(frames)
        return self.frames

    def add_rest(self, rest: list[Piece], on_sent: Callable[[], None] | None = None) -> None:
        """Queue what a direct send left of a frame (``rest`` from `consume`)."""
        self.pieces += rest
        self.queued += sum(len(piece) for piece in rest)
        if on_sent is not None:
            self._callbacks.append(on_sent)
        self.frames += 1

    def sent(self, count: int) -> list[Callable[[], None]] | None:
        """Record that a non-blocking send of `pieces` took ``count`` bytes.

        Returns the callbacks to run when that emptied the queue, else None (the rest stays,
        in order, for the next attempt or the writer).
        """
        if count == self.queued:
            self.pieces = []
            self.queued = 0
            self.frames = 0
            callbacks, self._callbacks = self._callbacks, []
            return callbacks
        if count:
            self.pieces = consume(self.pieces, count)
            self.queued -= count
        return None

    def take(self) -> tuple[list[Piece], list[Callable[[], None]]]:
        """Take everything queued for the writer; its bytes stay counted until `taken_done`."""
        pieces, self.pieces = self.pieces, []
        callbacks, self._callbacks = self._callbacks, []
        self.in_flight = self.queued
        self.queued = 0
        self.frames = 0
        return pieces, callbacks

    def taken_done(self) -> None:
        """The writer's take was sent (or failed: the connection is then closed)."""
        self.in_flight = 0

    def clear(self) -> list[Callable[[], None]]:
        """Drop everything (the connection closed); return the callbacks to run."""
        self.pieces = []
        self.queued = self.frames = self.in_flight = 0
        callbacks, self._callbacks = self._callbacks, []
        return callbacks
