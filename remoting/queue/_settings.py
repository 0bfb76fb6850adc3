"""`QueueSettings`: what a queue service is made with, checked once: its storage, its timers
and its bounds (what `QueueService` takes and its `Broker` reads).

The bounds say what one peer can make the service hold: every name a peer makes (a topic, a
channel, a group) is state in memory, and on disk with a data directory, kept until deleted.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Final, Literal

from .._checks import seconds
from .._messaging._credits import MAX_CREDITS

if TYPE_CHECKING:
    from pathlib import Path

__all__ = ["FsyncPolicy", "QueueSettings"]

FsyncPolicy = Literal["always", "interval", "never"]
DEFAULT_SEGMENT_BYTES: Final = 64 * 1024 * 1024
DEFAULT_DEDUP_WINDOW: Final = 600.0  # seconds a publish's key is remembered
# Bytes of messages a topic holds in memory at most (with memory_messages): without a data
# directory its most, with one its cache of the newest. Ten thousand messages of 1 MiB would
# otherwise be 10 GiB.
DEFAULT_MEMORY_BYTES: Final = 256 * 1024 * 1024
# Names a peer may make, at most: far above what a service of one process serves in
# practice; a client making names in a loop is stopped here.
DEFAULT_MAX_TOPICS: Final = 10_000
DEFAULT_MAX_CHANNELS: Final = 1_000  # channels of a topic, and groups of a topic (each)
# Channels of all topics at most: a channel costs about 2 KB while idle (its queue, its
# tables, its statistics), so 10,000 are about 20 MB; the per-topic bound alone let 10,000
# topics x 1,000 channels (10 million, about 19 GB) be made by one peer.
DEFAULT_MAX_TOTAL_CHANNELS: Final = 10_000
# Groups of all topics at most: a group is a name and an offset (about 300 bytes), and a
# Spark query makes one per checkpoint location, so more room than channels.
DEFAULT_MAX_TOTAL_GROUPS: Final = 100_000
# Pulls held at once by the whole service (each connection holds at most 16,384): a held pull
# costs about 1.4 KB, so about 90 MB.
DEFAULT_MAX_HELD_PULLS: Final = 65_536
# deferred messages not yet due, all topics together (about 150 bytes each of memory, with
# or without a data directory, whatever the channels: 150 MB)
DEFAULT_MAX_DEFERRED: Final = 1_000_000
# Bytes of messages all topics hold in memory together: the per-topic bound (256 MiB) times
# 10,000 topics would be 2.4 TiB.
DEFAULT_TOTAL_MEMORY_BYTES: Final = 1024 * 1024 * 1024
# Deliveries in flight one connection's subscriptions hold at most, together (NSQ bounds a
# connection's RDY at 2,500 by default). One subscription's largest window, so a connection
# with one subscription is never slowed by it; and a client's connection (one per server,
# shared by all its subscriptions) fits 1,024 subscriptions, the most streams a connection
# may open, at the default 64 credits. Without it one connection could hold 1,024 x 65,536.
DEFAULT_MAX_IN_FLIGHT_PER_CONNECTION: Final = MAX_CREDITS


@dataclass(frozen=True, slots=True, kw_only=True)
class QueueSettings:
    """A queue service's settings (`QueueService` documents each).

    Raises:
        TypeError, ValueError: a setting out of range, or a retention without ``data_dir``.
    """

    data_dir: Path | None = None
    memory_messages: int = 10_000
    memory_bytes: int = DEFAULT_MEMORY_BYTES
    total_memory_bytes: int = DEFAULT_TOTAL_MEMORY_BYTES
    msg_timeout: float = 60.0
    max_attempts: int = 0
    fsync: FsyncPolicy = "interval"
    fsync_interval: float = 1.0
    segment_bytes: int = DEFAULT_SEGMENT_BYTES
    dedup_window: float = DEFAULT_DEDUP_WINDOW
    retention: float | None = None
    retention_bytes: int | None = None
    max_topics: int = DEFAULT_MAX_TOPICS
    max_channels: int = DEFAULT_MAX_CHANNELS
    max_total_channels: int = DEFAULT_MAX_TOTAL_CHANNELS
    max_total_groups: int = DEFAULT_MAX_TOTAL_GROUPS
    channel_idle_timeout: float | None = None
    max_held_pulls: int = DEFAULT_MAX_HELD_PULLS
    max_deferred: int = DEFAULT_MAX_DEFERRED
    max_in_flight_per_connection: int = DEFAULT_MAX_IN_FLIGHT_PER_CONNECTION

    def __post_init__(self) -> None:
        if self.fsync not in ("always", "interval", "never"):
            raise ValueError(f"fsync must be 'always', 'interval' or 'never', got "
                             f"{self.fsync!r}")
        if self.data_dir is None and (self.retention is not None
                                      or self.retention_bytes is not None):
            raise ValueError("retention and retention_bytes bound a data directory's segment "
                             "files: give a data_dir (without one, memory_messages bounds "
                             "each topic)")
        for name, minimum in _COUNTS.items():
            value = getattr(self, name)
            if value is not None or name not in _OPTIONAL:
                count(name, value, minimum)
        for name in ("msg_timeout", "fsync_interval", "retention"):
            if getattr(self, name) is not None:
                seconds(name, getattr(self, name), above=True)
        for name in ("dedup_window", "channel_idle_timeout"):
            if getattr(self, name) is not None:
                seconds(name, getattr(self, name))


_COUNTS: Final = {"memory_messages": 1, "memory_bytes": 1, "total_memory_bytes": 1,
                  "max_attempts": 0, "segment_bytes": 4096, "retention_bytes": 1,
                  "max_topics": 1, "max_channels": 1, "max_total_channels": 1,
                  "max_total_groups": 1, "max_held_pulls": 1, "max_deferred": 0,
                  "max_in_flight_per_connection": 1}
_OPTIONAL: Final = {"retention_bytes"}


def count(name: str, value: object, minimum: int) -> int:
    """Return ``value`` if it is an int >= ``minimum``.

    Raises:
        TypeError: not an int (a bool is not a count).
        ValueError: below ``minimum``.
    """
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"{name} must be an int, got {value!r}")
    if value < minimum:
        raise ValueError(f"{name} must be >= {minimum}, got {value}")
    return value
