"""`KeyWindow`: the idempotence keys of recent publishes, for a while (sans-I/O).

A publisher that may retry a batch (a Spark task run twice, a call that timed out after the
service appended it) tags it with a key; the service remembers each key with the offsets its
batch got, for ``window`` seconds, and answers a repeat with those offsets instead of
appending the batch again. Keys are forgotten oldest first (`expire`); a key seen again after
its window is a new batch. At most ``max_keys`` are remembered: past that the oldest is
forgotten early, so a publisher tagging every publish with a new key (up to 1 KiB each)
cannot grow the service's memory for the whole window. ``bytes`` is about what the keys
cost (their characters and `KEY_OVERHEAD` each), for the service's memory total; `shed`
forgets the oldest early when that total is past.
"""

from __future__ import annotations

from collections import OrderedDict
from typing import Final

__all__ = ["DEFAULT_MAX_KEYS", "KEY_OVERHEAD", "KeyWindow"]

# Keys remembered at most (a topic's): far more than the batches a publisher retries within
# a window in practice; about 70 MiB at the largest keys.
DEFAULT_MAX_KEYS: Final = 65_536
KEY_OVERHEAD: Final = 200  # bytes a remembered key costs besides its characters (measured)


class KeyWindow:
    """Recent idempotence keys, each with its batch's first offset and count."""

    __slots__ = ("_keys", "bytes", "max_keys", "window")

    def __init__(self, window: float, max_keys: int = DEFAULT_MAX_KEYS) -> None:
        self.window = window
        self.max_keys = max_keys
        self._keys: OrderedDict[str, tuple[int, int, float]] = OrderedDict()
        self.bytes = 0  # about what the keys remembered cost

    def __len__(self) -> int:
        return len(self._keys)

    def get(self, key: str, now: float) -> tuple[int, int] | None:
        """Return (first offset, count) of ``key``'s batch if seen within the window."""
        found = self._keys.get(key)
        if found is None or now - found[2] > self.window:
            return None
        return found[0], found[1]

    def add(self, key: str, first: int, count: int, now: float) -> None:
        """Remember ``key`` for a batch appended at ``now`` (``now`` never goes back)."""
        if key not in self._keys:
            self.bytes += len(key) + KEY_OVERHEAD
        self._keys[key] = (first, count, now)
        self._keys.move_to_end(key)
        if len(self._keys) > self.max_keys:
            self._forget_oldest()

    def shed(self, excess: int) -> int:
        """Forget the oldest keys, but the newest, until ``excess`` bytes are freed; return
        the bytes freed (the service holds more than its memory total)."""
        freed = 0
        while freed < excess and len(self._keys) > 1:
            freed += self._forget_oldest()
        return freed

    def _forget_oldest(self) -> int:
        key, _ = self._keys.popitem(last=False)
        cost = len(key) + KEY_OVERHEAD
        self.bytes -= cost
        return cost

    def next_expiry(self) -> float | None:
        """Return when `expire` next forgets a key (None: no key is remembered)."""
        for _, _, seen in self._keys.values():  # the oldest: keys are kept in time order
            return seen + self.window
        return None

    def expire(self, now: float) -> int:
        """Forget the keys older than the window; return how many."""
        keys = self._keys
        gone = 0
        while keys:
            key, (_, _, seen) = next(iter(keys.items()))
            if now - seen <= self.window:
                break
            del keys[key]
            self.bytes -= len(key) + KEY_OVERHEAD
            gone += 1
        return gone
