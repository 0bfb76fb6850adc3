"""Receive buffers for the rest of large frames, shared by every connection of the process.

A connection borrows a kept buffer when one fits the frame's rest; else it allocates a buffer
that grows with the bytes received (remoting/_core/_connection.py), never one of the size the
prefix announces, which would commit memory for bytes that may never come (docs/security.md).

Why: a fresh buffer of 1 MiB or more per frame is what glibc hands back to the kernel once it
and the frame's body are both freed (heap trimming), so every frame page-faults all of it in
again: about 1.2 ms of CPU per MiB measured, against 35 µs with a reused buffer
(docs/performance.md). Thread-safe (a lock): blocking clients run loops in threads of their own.
"""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING, Final

if TYPE_CHECKING:
    from codec import FrameDecoder

__all__ = ["RECEIVE_BUFFERS", "BufferPool", "memory_for_rest"]


class BufferPool:
    """Reusable ``bytearray`` buffers, at most ``max_kept_bytes`` of them kept."""

    def __init__(self, max_kept_bytes: int) -> None:
        self.max_kept_bytes = max_kept_bytes
        self._free: list[bytearray] = []
        self._kept_bytes = 0
        self._lock = threading.Lock()

    def take(self, size: int) -> bytearray:
        """Return a buffer of at least ``size`` bytes (stale contents)."""
        buf = self.take_kept(size)
        return bytearray(size) if buf is None else buf

    def take_kept(self, size: int) -> bytearray | None:
        """Return the smallest kept buffer of at least ``size`` bytes, or None (none fits)."""
        with self._lock:
            for i, buf in enumerate(self._free):
                if len(buf) >= size:
                    del self._free[i]
                    self._kept_bytes -= len(buf)
                    return buf
        return None

    def give(self, buf: bytearray) -> None:
        """Keep ``buf`` for reuse if there is room; drop the smallest kept ones to make it."""
        with self._lock:
            free = self._free
            if len(buf) > self.max_kept_bytes:
                return
            free.sort(key=len)
            while free and self._kept_bytes + len(buf) > self.max_kept_bytes:
                if len(free[0]) >= len(buf):
                    return  # everything kept is bigger: keep those
                self._kept_bytes -= len(free.pop(0))
            free.append(buf)
            self._kept_bytes += len(buf)


# At most this much memory stays kept between frames, process-wide: one buffer for the
# largest default frame (RocketMQ's 16 MiB), or several for smaller ones received at once.
RECEIVE_BUFFERS: Final = BufferPool(16 * 1024 * 1024)


def memory_for_rest(decoder: FrameDecoder, lent: bytearray | None,
                    min_bytes: int) -> tuple[memoryview | None, bytearray | None]:
    """Return memory to receive the frame in progress into, and the buffer it lies in.

    ``lent`` is the buffer the decoder is filling, if any. A kept buffer that fits the frame's
    rest is borrowed whole (it commits nothing new). Else new memory is at most twice the
    frame's bytes received so far, doubling as they arrive (each time the bytes received are
    copied over: about one extra copy of the frame in all), so what a peer makes us commit
    grows with what it sends, not with what its prefix announces. None (and ``lent``, None):
    that would be under ``min_bytes``, receive a chunk instead.
    """
    if lent is not None and decoder.buffer_room:
        return decoder.get_buffer(), lent
    have = 0 if lent is None else len(lent)  # full: the decoder filled all of it
    memory = RECEIVE_BUFFERS.take_kept(have + decoder.missing_bytes)
    if memory is None:
        size = min(have + decoder.missing_bytes, 2 * decoder.buffered_bytes)
        if lent is None and size < min_bytes:
            return None, None
        memory = bytearray(size)
    into = decoder.get_buffer(memory)  # copies the bytes received into ``lent`` over
    if lent is not None:
        RECEIVE_BUFFERS.give(lent)
    return into, memory
