"""Credits: how many items a stream's sender may still send (Pulsar's consumer permits).

Theory of operation:
- The receiver grants credits: a first grant when it opens the stream, more as its
  application consumes (`CreditGrants`: it gives back what was taken, in batches of at least
  half the first grant, as Pulsar's consumer re-flows once half its receiver queue is
  consumed, and all it owes when the application waits with nothing to read), or on its
  own terms (a queue's acknowledgements).
- The sender keeps a `CreditWindow`: ``available = granted - used``. An item uses its cost
  (default 1; one item may carry several messages). The window never goes below zero: `use`
  refuses a cost above what is available, so the sender can never exceed the grants.
- ``available`` is bounded by `MAX_CREDITS`: a grant that would pass it is refused (a peer
  asking for an absurd window is refused rather than trusted with memory).
"""

from __future__ import annotations

from typing import Final

__all__ = ["MAX_CREDITS", "CreditGrants", "CreditWindow", "credits_of"]

# The largest window a receiver may open: the items in flight to it at most. Far above
# Pulsar's default receiver queue (1,000), far below what would let a peer make us buffer
# without bound.
MAX_CREDITS: Final = 65_536


def credits_of(value: object, name: str = "credits") -> int:
    """Return ``value`` if it is a number of credits, 1 to `MAX_CREDITS`.

    Raises:
        TypeError: not an int (a bool is not a count).
        ValueError: below 1 or above `MAX_CREDITS`.
    """
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"{name} must be an int from 1 to {MAX_CREDITS}, got {value!r}")
    if not 1 <= value <= MAX_CREDITS:
        raise ValueError(f"{name} must be from 1 to {MAX_CREDITS}, got {value}")
    return int(value)


class CreditWindow:
    """The sender's count of credits: granted, used, available."""

    __slots__ = ("available", "granted", "used")

    def __init__(self, first: int) -> None:
        """Open the window with the receiver's first grant.

        Raises:
            TypeError, ValueError: ``first`` is not 1 to `MAX_CREDITS`.
        """
        self.granted = self.available = credits_of(first)
        self.used = 0

    def grant(self, credits: int) -> None:
        """Add ``credits`` (a later grant).

        Raises:
            TypeError, ValueError: ``credits`` is below 1, or would make more than
                `MAX_CREDITS` available; nothing changes.
        """
        credits_of(credits)
        if self.available + credits > MAX_CREDITS:
            raise ValueError(f"credits: {credits} more would make {self.available + credits} "
                             f"available, over {MAX_CREDITS}")
        self.granted += credits
        self.available += credits

    def use(self, cost: int = 1) -> None:
        """Spend ``cost`` credits on an item about to be sent.

        Raises:
            ValueError: ``cost`` is negative or more than is available; nothing changes.
        """
        if not 0 <= cost <= self.available:
            raise ValueError(f"an item of cost {cost} does not fit the {self.available} "
                             "credits available")
        self.available -= cost
        self.used += cost


class CreditGrants:
    """The receiver's side of automatic credits: what to give back as items are consumed."""

    __slots__ = ("batch", "owed")

    def __init__(self, first: int) -> None:
        self.batch = max(1, first // 2)  # Pulsar re-flows at half the receiver queue
        self.owed = 0  # consumed and not yet given back

    def consumed(self, cost: int) -> int:
        """Record that the application took an item of ``cost``; return the credits to
        grant now (0: wait until a batch is owed)."""
        self.owed += cost
        if self.owed < self.batch:
            return 0
        owed, self.owed = self.owed, 0
        return owed

    def starved(self) -> int:
        """The application waits with nothing left to read: return everything owed (0:
        nothing), so that a sender waiting for a costly item's credits is not left waiting
        on a batch that only it could complete."""
        owed, self.owed = self.owed, 0
        return owed
