"""The options of the ``remoting`` data source, checked in the driver where they are given.

Spark hands a data source its options as strings, keys lower-cased. Each is read here into a
typed value, or refused with a `ValueError` naming the option as documented and what it
takes: a wrong option would otherwise show as a failed task on an executor, or not at all (a
misspelt ``maxMessagesPerTrigger`` that bounds nothing), so unknown options are refused too.
`load_options` checks them all when the source is loaded (``load()``, a sink's ``start()``);
`source_options` and `sink_options` again for what the source or the sink takes.
"""

from __future__ import annotations

import difflib
import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, Final

from ...queue._wire import _NAME
from .._options import _addresses

if TYPE_CHECKING:
    from collections.abc import Mapping

    from ._offsets import Starting

__all__ = ["QueueOptions", "SinkOptions", "SourceOptions", "sink_options", "source_options"]

DEFAULT_TIMEOUT: Final = 10.0  # seconds per call to the queue service
DEFAULT_RECONNECT_TIMEOUT: Final = 60.0  # seconds a call retries a service that is down
DEFAULT_MESSAGES_PER_PARTITION: Final = 10_000  # offsets one task reads at most
# Options Spark itself may pass along with the user's.
SPARK_OWN: Final = frozenset({"path", "paths", "checkpointlocation"})
COMMON: Final = frozenset({"addresses", "topic", "timeout", "reconnecttimeout"})
SOURCE: Final = COMMON | {"startingoffsets", "endingoffsets", "maxmessagespertrigger",
                          "messagesperpartition", "group", "failondataloss", "waitfortopic"}
SINK: Final = COMMON
# Each option's name as documented (Spark lower-cases the names it hands over).
DOCUMENTED: Final = {name.lower(): name for name in (
    "addresses", "topic", "timeout", "reconnectTimeout", "startingOffsets", "endingOffsets",
    "maxMessagesPerTrigger", "messagesPerPartition", "group", "failOnDataLoss",
    "waitForTopic")}


@dataclass(frozen=True, slots=True, kw_only=True)
class QueueOptions:
    """Where the topic is, and how long calls to its service may take.

    Attributes:
        addresses: the queue service's addresses (tried in order: one service that may be
            reached at several).
        topic: the topic read or written.
        timeout: seconds per call.
        reconnect_timeout: seconds a call keeps retrying a service that cannot be reached
            before the task or the query fails.
    """

    addresses: tuple[str, ...]
    topic: str
    timeout: float = DEFAULT_TIMEOUT
    reconnect_timeout: float = DEFAULT_RECONNECT_TIMEOUT


@dataclass(frozen=True, slots=True, kw_only=True)
class SourceOptions:
    """What the source reads.

    Attributes:
        queue: the topic and its service.
        starting: where a new query (or a batch read) starts.
        ending: where a batch read ends (``latest``: the topic's readable end when planned).
        max_per_trigger: offsets one trigger reads at most (None: all there are).
        per_partition: offsets one task reads at most.
        group: the consumer group committed to (None: none, nothing committed).
        fail_on_data_loss: fail when offsets the query has not read are gone (else skip
            them, logged).
        wait_for_topic: a stream whose topic does not exist yet waits for it (else the
            query fails when it starts).
    """

    queue: QueueOptions
    starting: Starting
    ending: Starting = "latest"
    max_per_trigger: int | None = None
    per_partition: int = DEFAULT_MESSAGES_PER_PARTITION
    group: str | None = None
    fail_on_data_loss: bool = True
    wait_for_topic: bool = False


@dataclass(frozen=True, slots=True, kw_only=True)
class SinkOptions:
    """Where the sink publishes."""

    queue: QueueOptions


def source_options(options: Mapping[str, str], *, streaming: bool) -> SourceOptions:
    """Return the source's options (a stream starts at ``latest`` by default, a batch read at
    ``earliest``, as Spark's Kafka source does).

    Raises:
        ValueError: an option is missing, unknown, or not of its kind (the message says).
    """
    opts = _lower(options)
    if streaming:
        _known(opts, SOURCE - {"endingoffsets"}, "a stream (endingOffsets ends a batch read)")
    else:
        _known(opts, SOURCE - {"waitfortopic"}, "a batch read (waitForTopic is a stream's)")
    max_per_trigger = opts.get("maxmessagespertrigger")
    group = opts.get("group")
    if group is not None:
        _check_name("group", group)
    return SourceOptions(
        queue=_queue(opts),
        starting=_starting("startingOffsets", opts.get("startingoffsets"),
                           "latest" if streaming else "earliest"),
        ending=_starting("endingOffsets", opts.get("endingoffsets"), "latest"),
        max_per_trigger=(None if max_per_trigger is None
                         else _count("maxMessagesPerTrigger", max_per_trigger)),
        per_partition=_count("messagesPerPartition",
                             opts.get("messagesperpartition",
                                      str(DEFAULT_MESSAGES_PER_PARTITION))),
        group=group,
        fail_on_data_loss=_flag("failOnDataLoss", opts.get("failondataloss", "true")),
        wait_for_topic=_flag("waitForTopic", opts.get("waitfortopic", "false")),
    )


def load_options(options: Mapping[str, str]) -> None:
    """Check the options a source or a sink is loaded with: every name is one of the data
    source's, and every value is of its kind (reading a sink's options as a source's: they
    are a subset).

    Raises:
        ValueError: an option is missing, unknown (the message suggests the nearest name),
            or not of its kind.
    """
    _known(_lower(options), SOURCE, "the data source")
    source_options({k: v for k, v in options.items() if str(k).lower() != "waitfortopic"},
                   streaming=False)
    _flag("waitForTopic", _lower(options).get("waitfortopic", "false"))


def sink_options(options: Mapping[str, str]) -> SinkOptions:
    """Return the sink's options.

    Raises:
        ValueError: an option is missing, unknown, or not of its kind.
    """
    opts = _lower(options)
    _known(opts, SINK, "the sink")
    return SinkOptions(queue=_queue(opts))


def _lower(options: Mapping[str, str]) -> dict[str, str]:
    return {str(k).lower(): str(v) for k, v in options.items()}


def _known(opts: Mapping[str, str], allowed: frozenset[str], what: str) -> None:
    unknown = sorted(set(opts) - allowed - SPARK_OWN)
    if not unknown:
        return
    names = [DOCUMENTED[name] for name in sorted(allowed)]
    guesses = []
    for name in unknown:
        near = difflib.get_close_matches(name, sorted(allowed), n=1, cutoff=0.75)
        guesses.append(f"{name!r} (did you mean {DOCUMENTED[near[0]]}?)" if near
                       else repr(name))
    raise ValueError(f"the remoting data source has no option {', '.join(guesses)} for "
                     f"{what} (Spark passes option names lower-cased): it takes "
                     f"{', '.join(names)} (see docs/spark.md, Streaming)")


def _queue(opts: Mapping[str, str]) -> QueueOptions:
    if not opts.get("addresses", "").strip():
        raise ValueError("the remoting data source needs option addresses: the queue "
                         "service's 'host:port' (several comma-separated)")
    topic = opts.get("topic")
    if topic is None:
        raise ValueError("the remoting data source needs option topic")
    _check_name("topic", topic)
    return QueueOptions(
        addresses=_addresses(opts["addresses"]), topic=topic,
        timeout=_seconds("timeout", opts.get("timeout", str(DEFAULT_TIMEOUT))),
        reconnect_timeout=_seconds("reconnectTimeout",
                                   opts.get("reconnecttimeout",
                                            str(DEFAULT_RECONNECT_TIMEOUT)), zero=True))


def _check_name(option: str, value: str) -> None:
    if not _NAME.fullmatch(value) or not value.strip("."):
        raise ValueError(f"option {option} must be 1-128 of A-Z a-z 0-9 . _ - (not only "
                         f"dots), got {value!r}")


def _count(option: str, value: str) -> int:
    try:
        number = int(value.replace("_", ""))
    except ValueError:
        number = 0
    if number < 1:
        raise ValueError(f"option {option} must be a whole number >= 1, got {value!r}")
    return number


def _seconds(option: str, value: str, *, zero: bool = False) -> float:
    try:
        number = float(value)
    except ValueError:
        number = math.nan
    if math.isnan(number) or math.isinf(number) or number < 0 or (number == 0 and not zero):
        relation = ">= 0" if zero else "> 0"
        raise ValueError(f"option {option} must be a number of seconds {relation}, "
                         f"got {value!r}")
    return number


def _flag(option: str, value: str) -> bool:
    lowered = value.strip().lower()
    if lowered not in ("true", "false"):
        raise ValueError(f"option {option} must be true or false, got {value!r}")
    return lowered == "true"


def _starting(option: str, value: str | None, default: Starting) -> Starting:
    if value is None:
        return default
    lowered = value.strip().lower()
    if lowered in ("earliest", "latest"):
        return "earliest" if lowered == "earliest" else "latest"
    try:
        offset = int(lowered)
    except ValueError:
        offset = -1
    if offset < 0:
        raise ValueError(f"option {option} must be earliest, latest or an offset >= 0, "
                         f"got {value!r}")
    return offset
