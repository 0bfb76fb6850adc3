"""``remoting bus``: a standalone event bus server (docs/bus.md): an `EventBus` on a
`RemotingServer`, which bus clients (`BusClient`, `TrioBusClient`) use to reach each other,
with the stats processor (``remoting stats`` shows the bus's counters too).

One process: the address table is the process's, so the bus is not spread over workers (a
message sent to one worker would not reach the consumers registered at another).
"""

from __future__ import annotations

import os
import sys
import threading
from typing import TYPE_CHECKING

from ._acl_file import read_acl_file
from ._args import port
from ._command import Command
from ._signals import stopped_by_signals
from ._tls import add_tls_options, tls_problem, tls_settings

if TYPE_CHECKING:
    import argparse
    from collections.abc import Callable

    from .._config import ServerConfig
    from .._security._acl import AclServerRPCHook
    from ..bus import AddressPermissions
    from ._serve import TelemetryOptions

__all__ = ["BUS_COMMANDS", "run_bus_server"]


def _bus_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--port", type=port, default=0, help="listen port (default: ephemeral)")
    parser.add_argument("--bind", default="127.0.0.1", help="bind address (default: 127.0.0.1)")
    parser.add_argument("--max-queued-per-consumer", type=_queued, default=None, metavar="N",
                        help="messages held for a remote consumer whose window is full "
                             "(default: 1000)")
    parser.add_argument("--acl", metavar="FILE", default=None,
                        help="a TOML file of access keys (RocketMQ's ACL signatures), the "
                             "request codes and the bus addresses each may consume at and "
                             "send to (docs/bus.md); without it any client may use any "
                             "address")
    parser.add_argument("--metrics-port", type=port, default=None,
                        help="serve Prometheus metrics on this port, on the --bind address "
                             "(0: a free port)")
    parser.add_argument("--otlp-endpoint", metavar="URL", default=None,
                        help="push traces and metrics over OTLP/HTTP to this collector "
                             "(e.g. http://127.0.0.1:4318)")
    parser.add_argument("--service-name", default="remoting-bus",
                        help="the service.name of exported telemetry (default: remoting-bus; "
                             "OTEL_SERVICE_NAME wins)")
    add_tls_options(parser, "server")


def _queued(text: str) -> int:
    import argparse

    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be a whole number, got {text!r}") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be >= 0, got {text}")
    return value


def _run_bus(args: argparse.Namespace) -> int:
    from .._config import ServerConfig
    from .._errors import RemotingStartError
    from ._serve import TelemetryOptions
    from ._telemetry import TelemetrySetupError

    telemetry = TelemetryOptions(metrics_port=args.metrics_port,
                                 otlp_endpoint=args.otlp_endpoint,
                                 service_name=args.service_name)
    try:
        config = ServerConfig(listen_port=args.port, bind_address=args.bind,
                              **tls_settings(args, "server"))  # type: ignore[arg-type]
        problem = tls_problem(config)
        if problem is not None:
            print(f"remoting bus: {problem}", file=sys.stderr)
            return 2
        acl = None if args.acl is None else read_acl_file(args.acl)
        run_bus_server(config, args.max_queued_per_consumer, telemetry=telemetry, acl=acl)
    except (RemotingStartError, TelemetrySetupError, ValueError) as exc:
        print(f"remoting bus: {exc}", file=sys.stderr)
        return 2
    return 0


def run_bus_server(config: ServerConfig, max_queued_per_consumer: int | None = None, *,
                   telemetry: TelemetryOptions | None = None,
                   ready: Callable[[], object] | None = None,
                   stop: threading.Event | None = None,
                   acl: tuple[AclServerRPCHook, dict[str, AddressPermissions]] | None = None
                   ) -> None:
    """Serve an event bus (and the stats processor, with the bus's counters) until
    SIGTERM/SIGINT or ``stop``, exporting telemetry if asked; call ``ready`` once serving.
    With ``acl`` (`read_acl_file`), requests are verified by its hook and the bus's
    addresses are permitted per access key."""
    from .._faces._blocking_server import RemotingServer
    from .._observability._stats_processor import STATS_REQUEST_CODE, StatsProcessor
    from ..bus import DEFAULT_MAX_QUEUED, EventBus
    from ._telemetry import start_exporters

    exporters = None
    if telemetry is not None and telemetry.wanted:
        exporters = start_exporters(
            metrics_port=telemetry.metrics_port, metrics_bind=config.bind_address,
            otlp_endpoint=telemetry.otlp_endpoint, service_name=telemetry.service_name)
        if exporters.metrics_url is not None:
            sys.stdout.write(f"metrics on {exporters.metrics_url} (pid {os.getpid()})\n")
    stop = stop or threading.Event()
    bus = EventBus(max_queued_per_consumer=DEFAULT_MAX_QUEUED if max_queued_per_consumer is None
                   else max_queued_per_consumer, permissions=None if acl is None else acl[1])
    server = RemotingServer(config)
    if acl is not None:
        server.register_rpc_hook(acl[0])
    bus.attach(server)
    server.register_processor(STATS_REQUEST_CODE,
                              StatsProcessor(server.statistics, bus=bus.statistics))
    try:
        server.start()
        with stopped_by_signals(stop):  # before the line that says it serves
            sys.stdout.write(f"event bus on {config.bind_address}:{server.port} "
                             f"(pid {os.getpid()})\n")
            sys.stdout.flush()
            if ready is not None:
                ready()
            stop.wait()
    finally:
        bus.close()
        server.shutdown()
        if exporters is not None:
            exporters.shutdown()  # flushes the last spans and metrics


BUS_COMMANDS: list[Command] = [
    Command("bus", "serve an event bus that bus clients share (docs/bus.md)", _bus_arguments,
            _run_bus, log_level="info"),
]
