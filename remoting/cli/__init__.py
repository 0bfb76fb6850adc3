"""The ``remoting`` command line: ``remoting [--log-level L] [--log-format F] <command> ...``.

Each command is a `Command`: a name, a help line, a function that adds its options to its
subparser, a function that runs it and returns the exit code, and its default log level. A
new command is one more entry in its module's list (`TOOL_COMMANDS`, `QUEUE_COMMANDS`,
`BUS_COMMANDS`, `ROCKETMQ_COMMANDS`), joined into `COMMANDS` here; nothing else changes.
Commands import what they need when they run, so ``remoting --help`` stays fast and works
without the ``spark`` extra.
The command line is an application: it configures how the library's events are rendered
(`configure_logging`), on stderr; stdout carries the commands' own output.
"""

from __future__ import annotations

import argparse
import os
import re
import signal
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from codec import _native as codec_native

from .._version import __version__
from ._args import positive_int
from ._bus import BUS_COMMANDS
from ._command import Command
from ._logging import LEVELS, configure_logging
from ._queue import QUEUE_COMMANDS
from ._rocketmq import ROCKETMQ_COMMANDS
from ._tools import TOOL_COMMANDS

if TYPE_CHECKING:
    from collections.abc import Sequence

__all__ = ["COMMANDS", "Command", "build_parser", "main"]


def _demo_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--rows", type=positive_int, default=None,
                        help="synthetic rows to score (default: 1,000,000; 200,000 with "
                             "--stream)")
    parser.add_argument("--stream", action="store_true",
                        help="a Structured Streaming query instead: messages from a queue "
                             "service, scored per trigger, to Parquet; stops after --rows")
    parser.add_argument("--source", choices=("queue", "rocketmq"), default="queue",
                        help="with --stream: what the query reads, a queue service started "
                             "here (default) or a new topic of a RocketMQ cluster")
    parser.add_argument("--name-servers", default=None, metavar="HOST:PORT",
                        help="with --source rocketmq: its name servers (default: "
                             "$NAMESRV_ADDR, else 127.0.0.1:9876, where "
                             "../shared/rocketmq-broker/start.sh puts one)")
    parser.add_argument("--output", type=Path, default=Path("output"),
                        help="folder for the Parquet tables (default: output/)")
    parser.add_argument("--partitions", type=positive_int, default=None,
                        help="Spark partitions (default: 2 per CPU core)")
    parser.add_argument("--master", default="local[*]",
                        help="Spark master URL, e.g. spark://HOST:7077 for a standalone "
                             "cluster whose workers run on this host (default: local[*])")


# The master URLs SparkContext parses (SparkMasterRegex), and yarn and k8s's cluster managers.
SPARK_MASTER = re.compile(
    r"local(\[([1-9][0-9]*|\*)(\s*,\s*[0-9]+)?\])?"
    r"|local-cluster\[\s*[0-9]+\s*,\s*[0-9]+\s*,\s*[0-9]+\s*\]"
    r"|spark://[^,/\s]+:[0-9]+(,[^,/\s]+:[0-9]+)*|yarn|k8s://\S+")


def _run_demo(args: argparse.Namespace) -> int:
    if not SPARK_MASTER.fullmatch(args.master):
        print(f"remoting demo: --master {args.master!r} is not a Spark master URL: use local, "
              "local[N], local[*], spark://HOST:PORT, yarn or k8s://URL", file=sys.stderr)
        return 2
    try:
        from ..spark._demo import run_demo
    except ImportError as exc:  # remoting.spark says which module of the extra is missing
        missing = exc.__cause__ if isinstance(exc.__cause__, ImportError) else exc
        print(f"remoting demo needs the spark extra ({missing.name or missing} is missing): "
              "pip install 'trio-remoting[spark]'", file=sys.stderr)
        return 2
    if args.stream:
        from ..spark._demo import run_stream_demo

        return run_stream_demo(rows=args.rows or 200_000, output=args.output,
                               partitions=args.partitions, master=args.master,
                               source=args.source, name_servers=args.name_servers)
    if args.source != "queue" or args.name_servers is not None:
        print("remoting demo: --source and --name-servers go with --stream", file=sys.stderr)
        return 2
    return run_demo(rows=args.rows or 1_000_000, output=args.output,
                    partitions=args.partitions, master=args.master)


COMMANDS: list[Command] = [
    Command(
        name="demo",
        help="score synthetic rows through a demo service from a local Spark job",
        add_arguments=_demo_arguments,
        run=_run_demo,
    ),
]
COMMANDS += TOOL_COMMANDS + QUEUE_COMMANDS + BUS_COMMANDS + ROCKETMQ_COMMANDS


def build_parser(commands: Sequence[Command] = COMMANDS) -> argparse.ArgumentParser:
    """Return the argument parser with one subparser per command."""
    parser = argparse.ArgumentParser(
        prog="remoting", description="trio-remoting: RocketMQ-compatible RPC on trio")
    parser.add_argument("--version", action="version",
                        version=f"remoting (trio-remoting) {__version__}; codec: "
                                f"{codec_native.STATUS}")
    servers = ", ".join(command.name for command in commands if command.log_level == "info")
    parser.add_argument("--log-level", choices=LEVELS, default=None,
                        help=f"events shown on stderr: this level and above (default: info "
                             f"for the servers ({servers}), whose info events include a line "
                             f"per connection opened and closed; warning for the other "
                             f"commands, queue pub, tail and stats included)")
    parser.add_argument("--log-format", choices=("console", "json"), default="console",
                        help="how events are rendered (default: console)")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for command in commands:
        child = sub.add_parser(command.name, help=command.help, description=command.help)
        command.add_arguments(child)
        child.set_defaults(_run=command.run, _log_level=command.log_level)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run ``remoting`` with ``argv`` (default: the process arguments); return the exit code."""
    args = build_parser().parse_args(argv)
    configure_logging(args.log_level or args._log_level, args.log_format)
    try:
        code: int = args._run(args)
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        # the reader of our output left (`remoting ... | head`): stop quietly, as a command
        # killed by SIGPIPE would; stdout goes to /dev/null so the exit's flush cannot fail
        # again (the Python docs' recipe, "Note on SIGPIPE")
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return 128 + signal.SIGPIPE
    return code
