"""``remoting bus``: a standalone event bus server (docs/bus.md): an `EventBus` on a
`RemotingServer`, which bus clients (`BusClient`, `TrioBusClient`) use to reach each other,
with the stats processor (``remoting stats`` shows the bus's counters too).

One process: the address table is the process's, so the bus is not spread over workers (a
message sent to one worker would not reach the consumers registered at another).
"""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING

from ._acl_file import read_acl_file
from ._args import whole_number
from ._command import Command
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
    from collections.abc import Callable

    from .._config import ServerConfig
    from .._security._acl import AclServerRPCHook
    from ..bus import AddressPermissions
    from ._telemetry import TelemetryOptions

__all__ = ["BUS_COMMANDS", "run_bus_server"]


def _bus_arguments(parser: argparse.ArgumentParser) -> None:
    add_server_options(parser, "remoting-bus")
    parser.add_argument("--max-queued-per-consumer", type=whole_number, default=None, metavar="N",
                        help="messages held for a remote consumer whose window is full "
                             "(default: 1000)")
    parser.add_argument("--acl", metavar="FILE", default=None,
                        help="a TOML file of access keys (RocketMQ's ACL signatures), the "
                             "request codes and the bus addresses each may consume at and "
                             "send to (docs/bus.md); without it any client may use any "
                             "address")


def _run_bus(args: argparse.Namespace) -> int:
    from .._errors import RemotingStartError
    from ._telemetry import TelemetrySetupError

    try:
        config = server_config(args)
        acl = None if args.acl is None else read_acl_file(args.acl)
        run_bus_server(config, args.max_queued_per_consumer, telemetry=telemetry_of(args),
                       acl=acl)
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

    with exporting(telemetry, config.bind_address):
        bus = EventBus(max_queued_per_consumer=DEFAULT_MAX_QUEUED
                       if max_queued_per_consumer is None else max_queued_per_consumer,
                       permissions=None if acl is None else acl[1])
        server = RemotingServer(config)
        if acl is not None:
            server.register_rpc_hook(acl[0])
        bus.attach(server)
        server.register_processor(STATS_REQUEST_CODE,
                                  StatsProcessor(server.statistics, bus=bus.statistics))
        try:
            server.start()
            serve_until_stopped(f"event bus on {config.bind_address}:{server.port}", stop,
                                ready)
        finally:
            bus.close()
            server.shutdown()


BUS_COMMANDS: list[Command] = [
    Command("bus", "serve an event bus that bus clients share (docs/bus.md)", _bus_arguments,
            _run_bus, log_level="info"),
]
