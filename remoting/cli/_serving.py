"""What the long-running server commands (``serve``, ``bus``, ``queue``) share: their listen,
telemetry and TLS options, the exporters around the server, and serving until SIGTERM or
SIGINT with one line that says where."""

from __future__ import annotations

import os
import sys
import threading
from contextlib import contextmanager
from typing import TYPE_CHECKING

from ._args import port
from ._signals import stopped_by_signals
from ._telemetry import TelemetryOptions, start_exporters
from ._tls import add_tls_options, tls_problem, tls_settings

if TYPE_CHECKING:
    import argparse
    from collections.abc import Callable, Iterator

    from .._config import ServerConfig
    from ._telemetry import Exporters

__all__ = ["add_server_options", "exporting", "serve_until_stopped", "server_config",
           "telemetry_of"]


def add_server_options(parser: argparse.ArgumentParser, service_name: str,
                       workers: bool = False) -> None:
    """Add ``--port``, ``--bind``, the telemetry options (``--metrics-port``,
    ``--otlp-endpoint``, ``--service-name``, its default ``service_name``) and the TLS group
    of a server (``workers``: metrics ports per worker, as ``serve --workers`` gives)."""
    parser.add_argument("--port", type=port, default=0, help="listen port (default: ephemeral)")
    parser.add_argument("--bind", default="127.0.0.1", help="bind address (default: 127.0.0.1)")
    parser.add_argument("--metrics-port", type=port, default=None,
                        help="serve Prometheus metrics on this port, on the --bind address "
                             "(0: a free port" + ("; with --workers, worker i uses port + i)"
                                                  if workers else ")"))
    parser.add_argument("--otlp-endpoint", metavar="URL", default=None,
                        help="push traces and metrics over OTLP/HTTP to this collector "
                             "(e.g. http://127.0.0.1:4318)")
    parser.add_argument("--service-name", default=service_name,
                        help=f"the service.name of exported telemetry (default: {service_name};"
                             " OTEL_SERVICE_NAME wins)")
    add_tls_options(parser, "server")


def telemetry_of(args: argparse.Namespace) -> TelemetryOptions:
    """What the telemetry options of ``args`` ask for."""
    return TelemetryOptions(metrics_port=args.metrics_port, otlp_endpoint=args.otlp_endpoint,
                            service_name=args.service_name)


def server_config(args: argparse.Namespace, **fields: object) -> ServerConfig:
    """Return the server's config: ``--port``, ``--bind``, the TLS options, and ``fields``.

    Raises:
        ValueError: a bad setting, or TLS options that contradict each other (the message
            says what to give).
    """
    from .._config import ServerConfig

    config = ServerConfig(listen_port=args.port, bind_address=args.bind,
                          **tls_settings(args, "server"), **fields)  # type: ignore[arg-type]
    problem = tls_problem(config)
    if problem is not None:
        raise ValueError(problem)
    return config


@contextmanager
def exporting(telemetry: TelemetryOptions | None, bind: str) -> Iterator[Exporters | None]:
    """Export telemetry as ``telemetry`` asks while the block runs (the SDK is configured
    before the server starts: its instruments find it), saying where metrics are served;
    flush and stop the exporters after it.

    Raises:
        TelemetrySetupError: the exporters cannot start.
    """
    if telemetry is None or not telemetry.wanted:
        yield None
        return
    exporters = start_exporters(metrics_port=telemetry.metrics_port, metrics_bind=bind,
                                otlp_endpoint=telemetry.otlp_endpoint,
                                service_name=telemetry.service_name)
    if exporters.metrics_url is not None:
        sys.stdout.write(f"metrics on {exporters.metrics_url} (pid {os.getpid()})\n")
    try:
        yield exporters
    finally:
        exporters.shutdown()  # flushes the last spans and metrics


def serve_until_stopped(line: str, stop: threading.Event | None = None,
                        ready: Callable[[], object] | None = None) -> None:
    """Print ``line`` (what serves where) once SIGTERM and SIGINT stop the command, call
    ``ready``, and wait until ``stop`` is set (by a signal, or by the caller)."""
    stop = stop or threading.Event()
    with stopped_by_signals(stop):  # before the line that says it serves
        # One write of the whole line: workers share the supervisor's stdout, and print() may
        # write the text and the newline separately, which let two workers' lines run together.
        sys.stdout.write(f"{line} (pid {os.getpid()})\n")
        sys.stdout.flush()
        if ready is not None:
            ready()
        stop.wait()
