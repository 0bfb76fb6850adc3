"""The options of the ``rocketmq`` data source, checked when it is loaded (``load()``, a
sink's ``start()``), where they are given.

Spark hands a data source its options as strings, names lower-cased. Each is read here into a
typed value, or refused with a `ValueError` that names the option as documented and says what
it takes; an unknown option is refused too, with the nearest name suggested (a misspelt
``maxMessagesPerTrigger`` would otherwise bound nothing).
"""

from __future__ import annotations

import difflib
from dataclasses import dataclass
from typing import TYPE_CHECKING, Final

from ...._config import ClientConfig
from ....rocketmq._instance import name_server_list
from ....rocketmq._send import check_topic
from ....rocketmq._subscription import Subscription
from .._options import _count, _flag, _seconds
from ._offsets import Given, given_offsets

if TYPE_CHECKING:
    from collections.abc import Mapping

__all__ = ["ClusterOptions", "SinkOptions", "SourceOptions", "check_options", "sink_options",
           "source_options"]

DEFAULT_TIMEOUT: Final = 10.0  # seconds per call to a name server or a broker
DEFAULT_MESSAGES_PER_PARTITION: Final = 10_000  # offsets one task reads at most
DEFAULT_PULL_BATCH: Final = 32  # a broker's maxTransferCountOnMessageInMemory
DEFAULT_PULLS_IN_FLIGHT: Final = 16
DEFAULT_READER_GROUP: Final = "spark-rocketmq-reader"  # names pulls when no group is given
DEFAULT_PRODUCER_GROUP: Final = "spark-rocketmq-writer"
DEFAULT_BATCH_MESSAGES: Final = 256  # messages in one SEND_BATCH_MESSAGE at most
DEFAULT_BATCH_BYTES: Final = 1024 * 1024  # and bytes (a broker takes 4 MiB at most)
SPARK_OWN: Final = frozenset({"path", "paths", "checkpointlocation"})
COMMON: Final = ("nameServers", "topic", "timeout", "accessKey", "secretKey", "tls",
                 "tlsCaFile")
SOURCE: Final = (*COMMON, "expression", "startingOffsets", "endingOffsets",
                 "maxMessagesPerTrigger", "failOnDataLoss", "minPartitions",
                 "messagesPerPartition", "group", "pullBatchSize", "pullsInFlight")
SINK: Final = (*COMMON, "producerGroup", "batchMessages", "batchBytes")


@dataclass(frozen=True, slots=True, kw_only=True)
class ClusterOptions:
    """Where the cluster is and how to reach it.

    Attributes:
        name_servers: ``host:port`` of the name servers.
        timeout: seconds per call.
        credentials: the ACL access key and secret key (None: no ACL).
        config: the client settings (TLS), None: the defaults.
    """

    name_servers: tuple[str, ...]
    timeout: float = DEFAULT_TIMEOUT
    credentials: tuple[str, str] | None = None
    config: ClientConfig | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class SourceOptions:
    """What the source reads (see docs/spark.md, "RocketMQ")."""

    cluster: ClusterOptions
    topics: tuple[str, ...]
    expression: str = "*"
    starting: Given = "latest"
    ending: Given = "latest"
    max_per_trigger: int | None = None
    fail_on_data_loss: bool = True
    min_partitions: int = 1
    per_partition: int = DEFAULT_MESSAGES_PER_PARTITION
    group: str | None = None
    pull_batch: int = DEFAULT_PULL_BATCH
    pulls_in_flight: int = DEFAULT_PULLS_IN_FLIGHT

    @property
    def tags(self) -> frozenset[str]:
        """The tags read (empty: all)."""
        return Subscription.parse(self.topics[0], self.expression, 0).tags

    @property
    def reader_group(self) -> str:
        """The group a pull names (nothing is committed to it)."""
        return self.group or DEFAULT_READER_GROUP


@dataclass(frozen=True, slots=True, kw_only=True)
class SinkOptions:
    """Where the sink sends."""

    cluster: ClusterOptions
    topic: str | None = None
    producer_group: str = DEFAULT_PRODUCER_GROUP
    batch_messages: int = DEFAULT_BATCH_MESSAGES
    batch_bytes: int = DEFAULT_BATCH_BYTES


def _lower(options: Mapping[str, str]) -> dict[str, str]:
    return {str(k).lower(): str(v) for k, v in options.items()}


def _known(opts: Mapping[str, str], allowed: tuple[str, ...], what: str) -> None:
    names = {name.lower(): name for name in allowed}
    unknown = sorted(set(opts) - set(names) - SPARK_OWN)
    if not unknown:
        return
    said = []
    for name in unknown:
        near = difflib.get_close_matches(name, sorted(names), n=1, cutoff=0.75)
        said.append(f"{name!r} (did you mean {names[near[0]]}?)" if near else repr(name))
    raise ValueError(f"the rocketmq data source has no option {', '.join(said)} for {what} "
                     f"(Spark passes option names lower-cased): it takes "
                     f"{', '.join(allowed)} (see docs/spark.md, RocketMQ)")


def _cluster(opts: Mapping[str, str]) -> ClusterOptions:
    text = opts.get("nameservers", "").replace(",", ";")
    if not text.strip():
        raise ValueError("the rocketmq data source needs option nameServers: the name "
                         "servers' 'host:port' (several separated by ';' or ',')")
    try:
        servers = tuple(name_server_list(text))
    except ValueError as exc:
        raise ValueError(f"option nameServers: {exc}") from None
    access, secret = opts.get("accesskey"), opts.get("secretkey")
    if (access is None) != (secret is None):
        raise ValueError("options accessKey and secretKey go together (RocketMQ's ACL): give "
                         "both, or neither")
    config = None
    if _flag("tls", opts.get("tls", "false")):
        config = ClientConfig(use_tls=True, tls_ca_file=opts.get("tlscafile"))
    elif "tlscafile" in opts:
        raise ValueError("option tlsCaFile needs tls=true")
    return ClusterOptions(
        name_servers=servers,
        timeout=_seconds("timeout", opts.get("timeout", str(DEFAULT_TIMEOUT))),
        credentials=(access, secret) if access is not None and secret is not None else None,
        config=config)


def _topic(option: str, value: str) -> str:
    try:
        return check_topic(value.strip())
    except ValueError as exc:
        raise ValueError(f"option {option}: {exc}") from None


def _group(option: str, value: str) -> str:
    if not value or len(value) > 255 or not value.replace("-", "").replace("_", "").replace(
            "%", "").replace("|", "").isalnum():
        raise ValueError(f"option {option} is 1-255 of letters, digits, '%', '|', '_', '-', "
                         f"got {value!r}")
    return value


def source_options(options: Mapping[str, str], *, streaming: bool) -> SourceOptions:
    """Return the source's options (a stream starts at ``latest`` by default, a batch read at
    ``earliest``, as Spark's Kafka source does).

    Raises:
        ValueError: an option is missing, unknown, or not of its kind (the message says).
    """
    opts = _lower(options)
    if streaming:
        _known(opts, tuple(o for o in SOURCE if o != "endingOffsets"),
               "a stream (endingOffsets ends a batch read)")
    else:
        _known(opts, SOURCE, "a batch read")
    if not opts.get("topic", "").strip():
        raise ValueError("the rocketmq data source needs option topic: a topic, or several "
                         "separated by ','")
    topics = tuple(dict.fromkeys(_topic("topic", t) for t in opts["topic"].split(",")
                                 if t.strip()))
    expression = opts.get("expression", "*")
    try:
        Subscription.parse(topics[0], expression, 0)
    except ValueError as exc:
        raise ValueError(f"option expression: {exc} (tags joined by '||', or '*')") from None
    group = opts.get("group")
    max_per_trigger = opts.get("maxmessagespertrigger")
    starting = opts.get("startingoffsets")
    ending = opts.get("endingoffsets")
    pull_batch = _count("pullBatchSize", opts.get("pullbatchsize", str(DEFAULT_PULL_BATCH)))
    if pull_batch > 1024:
        raise ValueError(f"option pullBatchSize is 1 to 1024, got {pull_batch}")
    return SourceOptions(
        cluster=_cluster(opts), topics=topics, expression=expression,
        starting=(given_offsets("startingOffsets", starting, topics) if starting is not None
                  else "latest" if streaming else "earliest"),
        ending=(given_offsets("endingOffsets", ending, topics) if ending is not None
                else "latest"),
        max_per_trigger=(None if max_per_trigger is None
                         else _count("maxMessagesPerTrigger", max_per_trigger)),
        fail_on_data_loss=_flag("failOnDataLoss", opts.get("failondataloss", "true")),
        min_partitions=_count("minPartitions", opts.get("minpartitions", "1")),
        per_partition=_count("messagesPerPartition",
                             opts.get("messagesperpartition",
                                      str(DEFAULT_MESSAGES_PER_PARTITION))),
        group=None if group is None else _group("group", group),
        pull_batch=pull_batch,
        pulls_in_flight=_count("pullsInFlight",
                               opts.get("pullsinflight", str(DEFAULT_PULLS_IN_FLIGHT))))


def sink_options(options: Mapping[str, str]) -> SinkOptions:
    """Return the sink's options.

    Raises:
        ValueError: an option is missing, unknown, or not of its kind.
    """
    opts = _lower(options)
    _known(opts, SINK, "the sink")
    topic = opts.get("topic")
    batch_bytes = _count("batchBytes", opts.get("batchbytes", str(DEFAULT_BATCH_BYTES)))
    if batch_bytes > 4 * 1024 * 1024:
        raise ValueError(f"option batchBytes is at most 4 MiB (a broker's maxMessageSize), "
                         f"got {batch_bytes}")
    return SinkOptions(
        cluster=_cluster(opts), topic=None if topic is None else _topic("topic", topic),
        producer_group=_group("producerGroup",
                              opts.get("producergroup", DEFAULT_PRODUCER_GROUP)),
        batch_messages=_count("batchMessages",
                              opts.get("batchmessages", str(DEFAULT_BATCH_MESSAGES))),
        batch_bytes=batch_bytes)


def check_options(options: Mapping[str, str]) -> None:
    """Check the options the source or the sink is loaded with (Spark makes the data source
    at ``load()`` and at a sink's ``start()``, before it knows which it is): every name is
    the source's or the sink's, and those that are the source's are read as a batch
    read's.

    Raises:
        ValueError: an option is missing, unknown (the nearest name suggested), or not of its
            kind.
    """
    opts = _lower(options)
    _known(opts, tuple(dict.fromkeys((*SOURCE, *SINK))), "the source or the sink")
    sink_only = {o.lower() for o in SINK} - {o.lower() for o in SOURCE}
    if sink_only & set(opts):
        sink_options(options)
    else:
        _cluster(opts)
        if "topic" in opts:
            source_options(options, streaming=False)
