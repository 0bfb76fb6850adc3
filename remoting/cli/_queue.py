"""``remoting queue``: run a queue service (`remoting.queue.QueueService`) on a port until
SIGTERM or SIGINT. It prints ``serving queue on HOST:PORT (pid N)`` once it serves, and what
recovery found wrong in its data directory on stderr."""

from __future__ import annotations

import os
import sys
import threading
from typing import TYPE_CHECKING

from ._args import count, port, seconds, seconds_from_zero
from ._command import Command
from ._signals import stopped_by_signals

if TYPE_CHECKING:
    import argparse

__all__ = ["QUEUE_COMMANDS"]


def _arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--port", type=port, default=0, help="listen port (default: ephemeral)")
    parser.add_argument("--bind", default="127.0.0.1", help="bind address (default: 127.0.0.1)")
    parser.add_argument("--data-dir", default=None,
                        help="keep topics in segment files here (default: in memory only)")
    parser.add_argument("--memory-messages", type=count, default=10_000,
                        help="messages per topic held in memory (default 10,000)")
    parser.add_argument("--memory-bytes", type=count, default=256 * 1024 * 1024,
                        help="bytes of messages per topic held in memory (default 256 MiB)")
    parser.add_argument("--msg-timeout", type=seconds, default=60.0,
                        help="seconds to acknowledge a delivery before it is redelivered "
                             "(default 60)")
    parser.add_argument("--max-attempts", type=int, default=0,
                        help="deliveries of a message at most, 0: no limit (default 0)")
    parser.add_argument("--fsync", choices=("always", "interval", "never"), default="interval",
                        help="when segment files are fsynced (default: interval)")
    parser.add_argument("--fsync-interval", type=seconds, default=1.0,
                        help="seconds between fsyncs with --fsync interval (default 1)")
    parser.add_argument("--segment-bytes", type=count, default=64 * 1024 * 1024,
                        help="size at which a topic starts a new segment file (default 64 MiB)")
    parser.add_argument("--retention", type=seconds, default=None,
                        help="delete a topic's segment files last written this many seconds "
                             "ago, consumed or not (default: only once consumed)")
    parser.add_argument("--max-topics", type=count, default=10_000,
                        help="topics the service holds at most (default 10,000)")
    parser.add_argument("--max-channels", type=count, default=1_000,
                        help="channels, and groups, of a topic at most (default 1,000)")
    parser.add_argument("--max-in-flight-per-connection", type=count, default=65_536,
                        help="deliveries one connection's subscriptions hold unacknowledged "
                             "at most, together (default 65,536)")
    parser.add_argument("--retention-bytes", type=count, default=None,
                        help="delete a topic's oldest segment files while it holds more than "
                             "this many bytes, consumed or not (default: no bound)")
    parser.add_argument("--max-total-channels", type=count, default=10_000,
                        help="channels of all topics at most (default 10,000)")
    parser.add_argument("--max-total-groups", type=count, default=100_000,
                        help="groups of all topics at most (default 100,000)")
    parser.add_argument("--channel-idle-timeout", type=seconds_from_zero, default=None,
                        help="delete a channel without subscribers after this many seconds, "
                             "0: when its last subscriber leaves (default: keep it)")
    parser.add_argument("--max-held-pulls", type=count, default=65_536,
                        help="pulls held at once, all connections together (default 65,536)")
    parser.add_argument("--total-memory-bytes", type=count, default=1024 * 1024 * 1024,
                        help="bytes of messages all topics hold in memory together "
                             "(default 1 GiB)")


def _run(args: argparse.Namespace, stop: threading.Event | None = None) -> int:
    from .._config import ServerConfig
    from .._errors import RemotingStartError
    from .._observability._stats_processor import STATS_REQUEST_CODE, StatsProcessor
    from ..blocking import RemotingServer
    from ..queue import QueueService

    try:
        service = QueueService(args.data_dir, memory_messages=args.memory_messages,
                               memory_bytes=args.memory_bytes,
                               msg_timeout=args.msg_timeout, max_attempts=args.max_attempts,
                               fsync=args.fsync, fsync_interval=args.fsync_interval,
                               segment_bytes=args.segment_bytes,
                               retention=args.retention,
                               retention_bytes=args.retention_bytes,
                               max_topics=args.max_topics, max_channels=args.max_channels,
                               max_in_flight_per_connection=args.max_in_flight_per_connection,
                               max_total_channels=args.max_total_channels,
                               max_total_groups=args.max_total_groups,
                               channel_idle_timeout=args.channel_idle_timeout,
                               max_held_pulls=args.max_held_pulls,
                               total_memory_bytes=args.total_memory_bytes)
    except (OSError, ValueError) as exc:
        print(f"remoting queue: {exc}", file=sys.stderr)
        return 2
    for problem in service.problems:
        print(f"remoting queue: recovered with a problem: {problem}", file=sys.stderr)
    stop = stop or threading.Event()
    server = RemotingServer(ServerConfig(listen_port=args.port, bind_address=args.bind))
    service.attach(server)
    server.register_processor(STATS_REQUEST_CODE, StatsProcessor(server.statistics))
    try:
        server.start()
    except RemotingStartError as exc:
        service.close()  # its files were open: offsets saved, closed
        print(f"remoting queue: {exc}", file=sys.stderr)
        return 2
    try:
        with stopped_by_signals(stop):  # before the line that says it serves
            sys.stdout.write(f"serving queue on {args.bind}:{server.port} (pid {os.getpid()})\n")
            sys.stdout.flush()
            stop.wait()
    finally:
        server.shutdown()
    return 0


QUEUE_COMMANDS: list[Command] = [
    Command("queue", "run a queue service (topics, channels, groups) on a port", _arguments, _run,
            log_level="info"),
]
