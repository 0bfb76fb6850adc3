"""``remoting queue``: run a queue service (`remoting.queue.QueueService`) on a port until
SIGTERM or SIGINT; ``remoting queue pub``, ``tail`` and ``stats``: publish to it, watch a
topic, and see its topics, channels and groups (`remoting.cli._queue_tools`).

The service says at start what it keeps where (memory only, or a data directory and what it
recovered there), its bounds and its TLS, then ``serving queue on HOST:PORT (pid N)``; at
stop, what it held and that its files are closed. What recovery found wrong goes to stderr.
It serves the stats processor too: ``remoting stats`` shows its topics, channels and groups.
"""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING, Final

from ._args import count, seconds, seconds_from_zero, whole_number
from ._command import Command
from ._queue_tools import add_queue_tools, counted, size_text
from ._serving import (
    add_server_options,
    exporting,
    serve_until_stopped,
    server_config,
    telemetry_of,
)

if TYPE_CHECKING:
    import argparse
    import threading

    from .._config import ServerConfig
    from ..queue import QueueService
    from ._telemetry import TelemetryOptions

__all__ = ["QUEUE_COMMANDS", "run_queue_server"]

# QueueService's settings the options give (None: not given, the service's default)
SETTINGS: Final = ("memory_messages", "memory_bytes", "total_memory_bytes", "msg_timeout",
                   "max_attempts", "fsync", "fsync_interval", "segment_bytes", "retention",
                   "retention_bytes", "max_topics", "max_channels", "max_total_channels",
                   "max_total_groups", "channel_idle_timeout", "max_held_pulls",
                   "max_deferred", "max_in_flight_per_connection")
# topics the stats processor's answer shows in detail (``remoting stats``): the whole
# service is ``remoting queue stats``'s, page by page
TOPICS_IN_STATS: Final = 10


def _arguments(parser: argparse.ArgumentParser) -> None:
    add_server_options(parser, "remoting-queue")
    parser.add_argument("--data-dir", default=None,
                        help="keep topics in segment files here (default: in memory only)")
    parser.add_argument("--memory-messages", type=count,
                        help="messages per topic held in memory (default 10,000)")
    parser.add_argument("--memory-bytes", type=count,
                        help="bytes of messages per topic held in memory (default 256 MiB)")
    parser.add_argument("--total-memory-bytes", type=count,
                        help="bytes of messages all topics hold in memory together "
                             "(default 1 GiB)")
    parser.add_argument("--msg-timeout", type=seconds,
                        help="seconds to acknowledge a delivery before it is redelivered "
                             "(default 60)")
    parser.add_argument("--max-attempts", type=whole_number,
                        help="deliveries of a message at most, 0: no limit (default 0)")
    parser.add_argument("--fsync", choices=("always", "interval", "never"),
                        help="when segment files are fsynced (default: interval)")
    parser.add_argument("--fsync-interval", type=seconds,
                        help="seconds between fsyncs with --fsync interval (default 1)")
    parser.add_argument("--segment-bytes", type=count,
                        help="size at which a topic starts a new segment file (default 64 MiB)")
    parser.add_argument("--retention", type=seconds,
                        help="delete a topic's segment files last written this many seconds "
                             "ago, consumed or not (default: only once consumed)")
    parser.add_argument("--retention-bytes", type=count,
                        help="delete a topic's oldest segment files while it holds more than "
                             "this many bytes, consumed or not (default: no bound)")
    parser.add_argument("--max-topics", type=count,
                        help="topics the service holds at most (default 10,000)")
    parser.add_argument("--max-channels", type=count,
                        help="channels, and groups, of a topic at most (default 1,000)")
    parser.add_argument("--max-total-channels", type=count,
                        help="channels of all topics at most (default 10,000)")
    parser.add_argument("--max-total-groups", type=count,
                        help="groups of all topics at most (default 100,000)")
    parser.add_argument("--channel-idle-timeout", type=seconds_from_zero,
                        help="delete a channel without subscribers after this many seconds, "
                             "0: when its last subscriber leaves (default: keep it)")
    parser.add_argument("--max-held-pulls", type=count,
                        help="pulls held at once, all connections together (default 65,536)")
    parser.add_argument("--max-deferred", type=whole_number,
                        help="deferred messages not yet due, all topics together (default "
                             "1,000,000)")
    parser.add_argument("--max-in-flight-per-connection", type=count,
                        help="deliveries one connection's subscriptions hold unacknowledged "
                             "at most, together (default 65,536)")
    add_queue_tools(parser)


def _run(args: argparse.Namespace) -> int:
    from .._errors import RemotingStartError
    from ..queue import QueueService
    from ._telemetry import TelemetrySetupError

    try:
        config = server_config(args)
        service = QueueService(args.data_dir, **{
            name: value for name in SETTINGS if (value := getattr(args, name)) is not None})
    except (OSError, ValueError) as exc:
        print(f"remoting queue: {exc}", file=sys.stderr)
        return 2
    for problem in service.problems:
        print(f"remoting queue: recovered with a problem: {problem}", file=sys.stderr)
    try:
        run_queue_server(service, config, telemetry=telemetry_of(args))
    except (RemotingStartError, TelemetrySetupError) as exc:
        print(f"remoting queue: {exc}", file=sys.stderr)
        return 2
    return 0


def run_queue_server(service: QueueService, config: ServerConfig, *,
                     telemetry: TelemetryOptions | None = None,
                     stop: threading.Event | None = None) -> None:
    """Serve ``service`` (and the stats processor, with its topics) until SIGTERM/SIGINT or
    ``stop``, exporting telemetry if asked; say what it keeps, its bounds and its TLS at
    start, and what it held at stop.

    Raises:
        RemotingStartError: the server cannot listen (the service is closed).
        TelemetrySetupError: the exporters cannot start (likewise).
    """
    from .._faces._blocking_server import RemotingServer
    from .._observability._stats_processor import STATS_REQUEST_CODE, StatsProcessor

    broker = service.broker
    try:
        with exporting(telemetry, config.bind_address):
            server = RemotingServer(config)
            service.attach(server)
            server.register_processor(STATS_REQUEST_CODE, StatsProcessor(
                server.statistics,
                queue=lambda: broker.statistics(limit=TOPICS_IN_STATS, detail=True)))
            try:
                server.start()
                for line in describe(service, config):
                    sys.stdout.write(line + "\n")
                serve_until_stopped(f"serving queue on {config.bind_address}:{server.port}",
                                    stop)
            finally:
                server.shutdown()  # which closes the service: offsets saved, files closed
    finally:
        service.close()  # a server that never started leaves it open
    sys.stdout.write(stopped(service) + "\n")
    sys.stdout.flush()


def describe(service: QueueService, config: ServerConfig) -> list[str]:
    """What a starting service says: where it keeps messages, its bounds, its TLS."""
    settings = service.broker.settings
    if settings.data_dir is None:
        storage = ("queue storage: in memory only: messages are lost when the service stops "
                   "(--data-dir keeps them)")
    else:
        every = (f" every {settings.fsync_interval:g} s" if settings.fsync == "interval"
                 else "")
        storage = (f"queue storage: {settings.data_dir} ("
                   f"{counted(len(service.broker.topics), 'topic')} recovered, "
                   f"{counted(len(service.problems), 'problem')}; fsync {settings.fsync}"
                   f"{every})")
    bounds = (
        f"queue limits: per topic {settings.memory_messages:,} messages and "
        f"{size_text(settings.memory_bytes)} in memory, {size_text(settings.total_memory_bytes)} "
        f"in all; {settings.max_topics:,} topics; {settings.max_channels:,} channels and "
        f"groups per topic, {settings.max_total_channels:,} channels and "
        f"{settings.max_total_groups:,} groups in all; {settings.max_held_pulls:,} held "
        f"pulls; {settings.max_deferred:,} deferred messages; "
        f"{settings.max_in_flight_per_connection:,} deliveries in flight per "
        f"connection; {settings.msg_timeout:g} s to acknowledge")
    return [storage, bounds, "queue tls: " + _tls(config)]


def _tls(config: ServerConfig) -> str:
    if config.tls_mode == "disabled":
        return "off (plaintext only)"
    accepts = "TLS and plaintext" if config.tls_mode == "permissive" else "TLS only"
    clients = {"none": "no client certificate asked for",
               "optional": "client certificates optional",
               "require": "client certificates required"}[config.client_auth()]
    return f"{config.tls_mode} ({accepts}; {clients})"


def stopped(service: QueueService) -> str:
    """What a stopped service says: what it held, and where that is now."""
    topics = service.broker.topics
    published = sum(topic.published for topic in topics.values())
    kept = ("offsets saved, files closed" if service.data_dir is not None
            else "its messages are gone (in memory only)")
    return (f"queue stopped: {counted(len(topics), 'topic')}, "
            f"{counted(published, 'message')} published since start; {kept}")


QUEUE_COMMANDS: list[Command] = [
    Command("queue", "run a queue service (topics, channels, groups) on a port; pub, tail "
            "and stats use one", _arguments, _run, log_level="info"),
]
