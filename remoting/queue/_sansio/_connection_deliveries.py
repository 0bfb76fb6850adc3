"""`ConnectionDeliveries`: the deliveries one connection holds unacknowledged, against the
bound a service puts on them (NSQ's ``--max-rdy-count``, per connection).

Theory of operation (sync, no I/O):
- A subscription's credits bound what it holds; a connection may open many subscriptions,
  so without a bound of its own one connection could hold (streams x credits) deliveries,
  each an `InFlight` entry pinning its message for redelivery. ``limit`` bounds the sum
  over the connection's subscriptions.
- ``held`` counts the connection's deliveries in flight: `taken` adds the deliveries a
  subscription was just handed (never more than ``room``: the caller takes at most that),
  `ended` removes those that ended (finished, requeued, timed out, skipped, or returned when
  their subscription ended). ``held`` equals the number of `InFlight` entries the
  connection's subscriptions hold.
- At the bound (``room == 0``) the connection's subscriptions are handed nothing more; their
  credits stay theirs, and delivery goes on once some deliveries end. Nothing is refused:
  a subscription granted more credits than ``limit`` is not an error, it is only never
  handed more than the connection has room for.
- ``times_at_bound`` counts the times ``held`` reached ``limit`` (`taken` says when): the
  caller logs the 1st, 2nd, 4th, 8th..., so a peer cannot flood the log.
"""

from __future__ import annotations

__all__ = ["ConnectionDeliveries"]


class ConnectionDeliveries:
    """One connection's deliveries in flight and its bound (see the module docstring)."""

    __slots__ = ("held", "limit", "times_at_bound")

    def __init__(self, limit: int) -> None:
        """Start with nothing held.

        Raises:
            ValueError: ``limit`` is below 1.
        """
        if limit < 1:
            raise ValueError(f"a connection's bound on deliveries in flight must be >= 1, "
                             f"got {limit}")
        self.limit = limit
        self.held = 0
        self.times_at_bound = 0

    @property
    def room(self) -> int:
        """How many more deliveries the connection may be handed now (0: at the bound)."""
        return self.limit - self.held

    def taken(self, count: int) -> bool:
        """Record that the connection's subscriptions were handed ``count`` deliveries;
        return True if this reached the bound (counted in ``times_at_bound``).

        Raises:
            ValueError: ``count`` is negative or more than `room`; nothing changes.
        """
        if not 0 <= count <= self.room:
            raise ValueError(f"{count} deliveries do not fit the connection's room for "
                             f"{self.room}")
        self.held += count
        if count == 0 or self.held < self.limit:
            return False
        self.times_at_bound += 1
        return True

    def ended(self, count: int) -> None:
        """Record that ``count`` of the connection's deliveries ended.

        Raises:
            ValueError: ``count`` is negative or more than are held; nothing changes.
        """
        if not 0 <= count <= self.held:
            raise ValueError(f"{count} deliveries cannot end: the connection holds "
                             f"{self.held}")
        self.held -= count
