"""The queue service's refusals: each a response code and a remark that says what happened and
what to do (the broker raises them; the handlers answer with them)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from codec import ResponseCode

from ._wire import Refusal

if TYPE_CHECKING:
    from ._topic import Topic

__all__ = ["disk_failed", "fsync_failed", "full", "moved", "no_subscription", "no_topic",
           "past_end", "too_many", "too_many_deferred", "too_many_in_all", "too_many_pulls",
           "too_many_topics"]


def no_topic(name: str) -> Refusal:
    return Refusal(ResponseCode.TOPIC_NOT_EXIST, f"topic {name!r} does not exist: publish to "
                   "it, or create it (create_topic), first")


def too_many_topics(name: str, limit: int) -> Refusal:
    return Refusal(ResponseCode.NO_PERMISSION, (
        f"topic {name!r} is new and the service holds {limit} topics, its max_topics: use an "
        "existing topic, or raise max_topics"))


def too_many(kind: str, topic: str, limit: int) -> Refusal:
    """``kind`` ("channels", "groups") of ``topic`` are at the service's ``max_channels``."""
    return Refusal(ResponseCode.NO_PERMISSION, (
        f"topic {topic!r} has {limit} {kind}, the service's max_channels: use an existing "
        f"one, delete some (QueueService.delete_{kind[:-1]}), or raise max_channels"))


def too_many_in_all(kind: str, limit: int) -> Refusal:
    """``kind`` ("channels", "groups") of all topics are at the service's total."""
    return Refusal(ResponseCode.NO_PERMISSION, (
        f"the service has {limit} {kind} in all, its max_total_{kind}: use an existing one, "
        f"delete some (QueueService.delete_{kind[:-1]}), or raise max_total_{kind}"))


def too_many_pulls(limit: int) -> Refusal:
    return Refusal(ResponseCode.POLLING_FULL, (
        f"the service holds {limit} pulls already, its max_held_pulls: pull again later (or "
        "with max_wait=0)"))


def too_many_deferred(limit: int) -> Refusal:
    return Refusal(ResponseCode.SYSTEM_BUSY, (
        f"the service holds {limit} deferred messages not yet due (its max_deferred) "
        "already: publish these later, or without defer"))


def past_end(offset: int, topic: Topic, what: str = "") -> Refusal:
    return Refusal(ResponseCode.INVALID_PARAMETER,
                   f"offset {offset} is past the end of topic {topic.name!r} ({topic.end}){what}")


def full(topic: Topic, size: int) -> Refusal:
    """A publish of ``size`` bytes of records that ``topic`` (no data directory) has no room
    for: its own bounds, or the service's total."""
    store = topic.store
    budget = store.budget
    if not budget.fits(size):
        return Refusal(ResponseCode.SYSTEM_BUSY, (
            f"the service is full: its topics hold {budget.used} bytes of messages in memory, "
            f"and its total_memory_bytes is {budget.limit} ({size} more asked for topic "
            f"{topic.name!r}); consume them, raise total_memory_bytes, or run the service "
            "with a data_dir"))
    return Refusal(ResponseCode.SYSTEM_BUSY, (
        f"topic {topic.name!r} is full: it holds {store.retained} messages of "
        f"{store.memory_size} bytes, and memory_messages is {store.memory_messages}, "
        f"memory_bytes {store.memory_bytes}; consume them, or run the service with a "
        "data_dir"))


def disk_failed(operation: str, topic: str, error: OSError) -> Refusal:
    """``operation`` ("write", "read", "subscribe") of ``topic`` failed on the data
    directory's disk."""
    reason = error.strerror or error
    if operation == "write":
        return Refusal(ResponseCode.SERVICE_NOT_AVAILABLE, (
            f"the service could not write topic {topic!r} to its data directory ({reason}): "
            "nothing of this publish was kept; retry once its disk has room"))
    if operation == "subscribe":
        return Refusal(ResponseCode.SERVICE_NOT_AVAILABLE, (
            f"the service could not read topic {topic!r} from its data directory ({reason}): "
            "subscribe again later"))
    return Refusal(ResponseCode.SERVICE_NOT_AVAILABLE, (
        f"the service could not read topic {topic!r} from its data directory ({reason}); "
        "retry later"))


def fsync_failed(topic: str, first: int, count: int, error: OSError) -> Refusal:
    """Appended, but its fsync failed (RocketMQ answers a failed synchronous flush so too)."""
    return Refusal(ResponseCode.FLUSH_DISK_TIMEOUT, (
        f"the messages were appended to topic {topic!r} (offsets {first} to "
        f"{first + count - 1}) and will be delivered, but their fsync failed "
        f"({error.strerror or error}): they may not survive a crash of the machine"))


def no_subscription(stream_id: int) -> Refusal:
    return Refusal(ResponseCode.SUBSCRIPTION_NOT_EXIST, (
        f"no subscription {stream_id} on this connection: it ended, and its deliveries went "
        "back to the channel"))


def moved(topic: Topic, incarnation: str) -> Refusal:
    """A pull of another log of ``topic`` than the one it holds now."""
    return Refusal(ResponseCode.PULL_OFFSET_MOVED, (
        f"topic {topic.name!r} is another log now (incarnation {topic.incarnation}, not "
        f"{incarnation[:64]}): the service started it afresh, so the offsets read from the "
        "old one do not name its messages; read its offsets again"))
