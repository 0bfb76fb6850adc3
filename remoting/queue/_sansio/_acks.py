"""Grouped acknowledgements: what a consumer owes the service, sent together.

Theory of operation (sync, takes ``now``, no I/O):
- A consumer finishes, requeues or touches each message it received. Sending one frame per
  acknowledgement would cost as much as the delivery itself, so `AckGroup` collects them and
  says when to send: once ``max_count`` are pending, or once the oldest has waited
  ``window`` seconds (Pulsar's client groups acknowledgements by a count and a time in the
  same way: ``maxAcknowledgmentGroupSize``, ``acknowledgementsGroupTime``). A requeue or a
  touch asks to be sent at once: one is a message to redeliver, the other a deadline to move.
- `pack_acks` / `unpack_acks` are the wire form of a group: 13 bytes per acknowledgement (a
  1-byte operation, an 8-byte offset, a 4-byte delay in milliseconds), big-endian.
"""

from __future__ import annotations

import enum
import struct
from typing import Final

__all__ = ["ACK_BYTES", "MAX_DELAY_MS", "AckGroup", "AckOp", "pack_acks", "unpack_acks"]

_ACK: Final = struct.Struct(">Bqi")
ACK_BYTES: Final = _ACK.size
MAX_DELAY_MS: Final = 2**31 - 1  # a requeue's delay on the wire: about 24 days at most


class AckOp(enum.IntEnum):
    """An acknowledgement's operation (NSQ's FIN, REQ, TOUCH)."""

    FINISH = 0
    REQUEUE = 1
    TOUCH = 2


Ack = tuple[AckOp, int, int]  # (operation, offset, delay in ms: requeues only)


class AckGroup:
    """Acknowledgements pending for one subscription, and when they are due to be sent."""

    __slots__ = ("_since", "max_count", "pending", "window")

    def __init__(self, max_count: int, window: float) -> None:
        self.max_count = max(1, max_count)
        self.window = window
        self.pending: list[Ack] = []
        self._since: float | None = None  # when the oldest pending one was added

    def __len__(self) -> int:
        return len(self.pending)

    def add(self, op: AckOp, offset: int, now: float, delay_ms: int = 0) -> bool:
        """Add one; return True if the group should be sent now."""
        if not self.pending:
            self._since = now
        self.pending.append((op, offset, delay_ms))
        return (op is not AckOp.FINISH or len(self.pending) >= self.max_count
                or now - self._since >= self.window)  # type: ignore[operator]

    @property
    def deadline(self) -> float | None:
        """When the pending ones are due at the latest (None: nothing pending)."""
        return None if self._since is None else self._since + self.window

    def due(self, now: float) -> bool:
        """True if something is pending and its window has passed."""
        return self._since is not None and now >= self._since + self.window

    def take(self) -> list[Ack]:
        """Return the pending acknowledgements and start a new group."""
        taken, self.pending = self.pending, []
        self._since = None
        return taken


def pack_acks(acks: list[Ack]) -> bytes:
    """Return the wire form of ``acks``."""
    pack = _ACK.pack
    return b"".join([pack(op, offset, delay) for op, offset, delay in acks])


def unpack_acks(data: bytes) -> list[Ack]:
    """Return the acknowledgements of ``data``.

    Raises:
        ValueError: ``data`` is not a whole number of acknowledgements, or holds an unknown
            operation or a negative delay.
    """
    if len(data) % ACK_BYTES:
        raise ValueError(f"an acknowledgement list is a multiple of {ACK_BYTES} bytes, got "
                         f"{len(data)}")
    ops = _OPS
    try:
        return [(ops[op], offset, delay) if delay >= 0 else _bad(op, delay)
                for op, offset, delay in _ACK.iter_unpack(data)]
    except IndexError:  # an operation past TOUCH
        bad = next(op for op, _, _ in _ACK.iter_unpack(data) if op >= len(ops))
        raise ValueError(f"bad acknowledgement: operation {bad}") from None


_OPS: Final = tuple(AckOp)  # by value: indexing is cheaper than AckOp(op) (per message)


def _bad(op: int, delay: int) -> Ack:
    raise ValueError(f"bad acknowledgement: operation {op}, delay {delay} ms")
