"""Receive buffers for the rest of large frames, shared by every connection of the process.

Why: a fresh buffer of 1 MiB or more per frame is what glibc hands back to the kernel once it
and the frame's body are both freed (heap trimming), so every frame page-faults all of it in
again: about 1.2 ms of CPU per MiB measured, against 35 µs with a reused buffer
(docs/performance.md). Thread-safe (a lock): blocking clients run loops in threads of their own.
"""

from __future__ import annotations

import threading
from typing import Final

__all__ = ["RECEIVE_BUFFERS", "BufferPool"]


class BufferPool:
    """Reusable ``bytearray`` buffers, at most ``max_kept_bytes`` of them kept."""

    def __init__(self, max_kept_bytes: int) -> None:
        self.max_kept_bytes = max_kept_bytes
        self._free: list[bytearray] = []
        self._kept_bytes = 0
        self._lock = threading.Lock()

    def take(self, size: int) -> bytearray:
        """Return a buffer of at least ``size`` bytes (stale contents)."""
        with self._lock:
            for i, buf in enumerate(self._free):
                if len(buf) >= size:
                    del self._free[i]
                    self._kept_bytes -= len(buf)
                    return buf
        return bytearray(size)

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
