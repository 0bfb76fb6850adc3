"""The operator commands of ``remoting``: ``serve``, ``call``, ``ping`` and ``stats``
(``bus``: `remoting.cli._bus`).

Exit codes: 0 success; 1 the server answered with a non-SUCCESS code (for ``stats``, or with
something other than statistics); 2 a transport error or bad arguments (one line on stderr
says which; never a traceback for a user's mistake).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from typing import TYPE_CHECKING, Any

from ._args import count, ext_pair, seconds
from ._command import Command
from ._serving import add_server_options
from ._tls import add_tls_options, started_client, tls_worker_argv

if TYPE_CHECKING:
    from codec import RemotingCommand

__all__ = ["TOOL_COMMANDS"]



def _describe(response: RemotingCommand) -> dict[str, object]:
    from codec import ResponseCode

    try:
        name = ResponseCode(response.code).name
    except ValueError:
        name = str(response.code)
    body: object = None
    if response.body is not None:
        try:
            body = response.body.decode("utf-8")
        except UnicodeDecodeError:
            body = {"hex": response.body.hex()}
    return {"code": response.code, "code_name": name, "remark": response.remark,
            "ext_fields": response.ext_fields, "body": body, "opaque": response.opaque}


# --------------------------------------------------------------------------- serve


def _serve_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("factory", help="module:callable returning {request code: processor}")
    parser.add_argument("--workers", type=count, default=1,
                        help="server processes sharing the port with SO_REUSEPORT (default 1)")
    parser.add_argument("--reuse-port", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--status-fd", type=int, default=None, help=argparse.SUPPRESS)
    add_server_options(parser, "remoting-serve", workers=True)


def _run_serve(args: argparse.Namespace) -> int:
    from .._errors import RemotingStartError
    from ._serve import FactoryError, run_server
    from ._serving import server_config, telemetry_of
    from ._supervise import WorkerStatus, supervise
    from ._telemetry import TelemetrySetupError

    telemetry = telemetry_of(args)
    status = WorkerStatus(args.status_fd)  # a worker of `supervise` reports to it
    try:
        config = server_config(args, reuse_port=args.reuse_port or args.workers > 1)
        if args.workers > 1:
            return supervise(args.factory, config, args.workers, telemetry=telemetry,
                             worker_options=tls_worker_argv(args))
        run_server(args.factory, config, ready=status.ready, telemetry=telemetry)
    except (FactoryError, RemotingStartError, TelemetrySetupError, ValueError) as exc:
        return status.refuse(f"remoting serve: {exc}")
    return 0


# --------------------------------------------------------------------------- call


def _call_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("addr", help="host:port")
    parser.add_argument("code", type=int, help="request code")
    body = parser.add_mutually_exclusive_group()
    body.add_argument("--body", help="request body (UTF-8 text; bytes that are not UTF-8 "
                                     "are sent as given)")
    body.add_argument("--body-file", help="read the request body from this file ('-': stdin)")
    parser.add_argument("--ext", type=ext_pair, action="append", default=[],
                        metavar="KEY=VALUE", help="an ext field (repeatable)")
    parser.add_argument("--json", action="store_true", help="print the response as JSON")
    parser.add_argument("--rocketmq", action="store_true",
                        help="send the binary ROCKETMQ header instead of JSON")
    parser.add_argument("--timeout", type=seconds, default=3.0, help="seconds (default 3)")
    add_tls_options(parser, "client")


def _read_body(args: argparse.Namespace) -> bytes | None:
    """The request body; raises UnicodeEncodeError for a ``--body`` UTF-8 cannot encode."""
    if args.body is not None:
        # Python decoded the argument's bytes with surrogateescape: this gives them back.
        return bytes(args.body.encode("utf-8", "surrogateescape"))
    if args.body_file is None:
        return None
    if args.body_file == "-":
        return sys.stdin.buffer.read()
    with open(args.body_file, "rb") as f:
        return f.read()


def _run_call(args: argparse.Namespace) -> int:
    from codec import RemotingCommand, ResponseCode, SerializeType

    from .._errors import RemotingError

    try:
        body = _read_body(args)
    except OSError as exc:
        print(f"remoting call: cannot read --body-file {args.body_file}: "
              f"{exc.strerror or exc}", file=sys.stderr)
        return 2
    except UnicodeEncodeError as exc:
        print(f"remoting call: --body has a character UTF-8 cannot encode "
              f"({exc.object[exc.start:exc.end]!r}); give the body with --body-file",
              file=sys.stderr)
        return 2
    request = RemotingCommand.create_request(args.code, header=dict(args.ext) or None,
                                             body=body)
    if args.rocketmq:
        request.serialize_type = SerializeType.ROCKETMQ
    client = started_client(args)
    if client is None:
        return 2
    try:
        response = client.invoke_sync(args.addr, request, args.timeout)
    except RemotingError as exc:
        print(f"remoting call: {type(exc).__name__}: {exc}", file=sys.stderr)
        return 2
    finally:
        client.shutdown()
    info = _describe(response)
    if args.json:
        print(json.dumps(info, ensure_ascii=False))
    else:
        print(f"code: {info['code']} ({info['code_name']})")
        if response.remark is not None:
            print(f"remark: {response.remark}")
        for key, value in (response.ext_fields or {}).items():
            print(f"ext {key}: {value}")
        if info["body"] is not None:
            print(f"body: {info['body']}")
    return 0 if response.code == ResponseCode.SUCCESS else 1


# --------------------------------------------------------------------------- ping


def _ping_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("addr", help="host:port")
    parser.add_argument("--count", type=count, default=3, help="round trips (default 3)")
    parser.add_argument("--timeout", type=seconds, default=3.0, help="seconds per round trip")
    add_tls_options(parser, "client")


def _run_ping(args: argparse.Namespace) -> int:
    from codec import RemotingCommand

    from .._core._receiving._dispatch import PING_REQUEST_CODE
    from .._errors import RemotingError

    client = started_client(args)
    if client is None:
        return 2
    times: list[float] = []
    failed = 0
    try:
        for i in range(args.count):
            start = time.perf_counter()
            try:
                response = client.invoke_sync(
                    args.addr, RemotingCommand.create_request(PING_REQUEST_CODE), args.timeout)
            except RemotingError as exc:
                failed += 1
                print(f"{args.addr}: seq={i} {type(exc).__name__}: {exc}", file=sys.stderr)
                continue
            elapsed = (time.perf_counter() - start) * 1000
            times.append(elapsed)
            print(f"{args.addr}: seq={i} code={response.code} time={elapsed:.2f} ms")
    finally:
        client.shutdown()
    summary = f"{args.count} sent, {len(times)} answered, {failed} failed"
    if times:
        summary += (f", min/avg/max = {min(times):.2f}/{sum(times) / len(times):.2f}/"
                    f"{max(times):.2f} ms")
    print(summary)
    return 0 if not failed else 2


# --------------------------------------------------------------------------- stats


def _stats_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("addr", help="host:port")
    parser.add_argument("--json", action="store_true", help="print the raw JSON")
    parser.add_argument("--timeout", type=seconds, default=3.0, help="seconds (default 3)")
    add_tls_options(parser, "client")


STATS_KEYS = ("connections", "in_flight", "timeouts", "orphaned_responses",
              "requests_received", "error_replies", "processor_queue")
STATS_TABLES = ("requests_received", "error_replies", "processor_queue")


def _statistics(body: bytes | None) -> dict[str, Any] | None:
    """The stats processor's reply, or None if ``body`` is not one."""
    try:
        stats = json.loads(body or b"")
    except ValueError:  # not JSON, or not UTF-8
        return None
    if (not isinstance(stats, dict) or any(key not in stats for key in STATS_KEYS)
            or any(not _code_table(stats[key]) for key in STATS_TABLES)):
        return None
    return stats


def _code_table(table: object) -> bool:
    """Whether ``table`` maps request codes (as JSON keys) to counts."""
    return isinstance(table, dict) and all(
        _code(key) is not None and isinstance(value, int) for key, value in table.items())


def _code(key: str) -> int | None:
    """The request code a stats reply's key names (None: it names none)."""
    from codec._header_numbers import INT32_MAX, INT32_MIN, header_int

    try:
        return header_int("code", key, INT32_MIN, INT32_MAX)
    except ValueError:
        return None


def _run_stats(args: argparse.Namespace) -> int:
    from codec import RemotingCommand, ResponseCode

    from .._errors import RemotingError
    from .._observability._stats_processor import STATS_REQUEST_CODE

    client = started_client(args)
    if client is None:
        return 2
    try:
        response = client.invoke_sync(
            args.addr, RemotingCommand.create_request(STATS_REQUEST_CODE), args.timeout)
    except RemotingError as exc:
        print(f"remoting stats: {type(exc).__name__}: {exc}", file=sys.stderr)
        return 2
    finally:
        client.shutdown()
    if response.code == ResponseCode.REQUEST_CODE_NOT_SUPPORTED:
        print(f"remoting stats: {args.addr} has no stats processor (register "
              f"remoting.StatsProcessor for code {STATS_REQUEST_CODE})", file=sys.stderr)
        return 1
    if response.code != ResponseCode.SUCCESS:
        print(f"remoting stats: code {response.code}: {response.remark}", file=sys.stderr)
        return 1
    stats = _statistics(response.body)
    if stats is None:
        print(f"remoting stats: {args.addr} answered code {STATS_REQUEST_CODE} with something "
              f"other than statistics (is that code served by remoting.StatsProcessor?)",
              file=sys.stderr)
        return 1
    if args.json:
        print(json.dumps(stats, indent=2, sort_keys=True))
        return 0
    print(f"connections: {stats['connections']}  in flight: {stats['in_flight']}  "
          f"timeouts: {stats['timeouts']}  orphaned: {stats['orphaned_responses']}")
    print(f"{'code':>7} {'received':>10} {'errors':>8} {'queued':>7}")
    keys = {code: key for table in ("requests_received", "processor_queue")
            for key in stats[table] if (code := _code(key)) is not None}
    for code, key in sorted(keys.items()):
        print(f"{code:>7} {stats['requests_received'].get(key, 0):>10} "
              f"{stats['error_replies'].get(key, 0):>8} "
              f"{stats['processor_queue'].get(key, 0):>7}")
    _print_latency(stats.get("latency"))
    _print_bus(stats.get("bus"))
    _print_queue(stats.get("queue"))
    return 0


BUS_ROWS = (
    ("consumers", ("addresses", "consumers", "remote_consumers")),
    ("messages", ("sent", "published", "requests", "replies", "delivered")),
    ("failures", ("no_handlers", "timeouts", "recipient_failures", "handler_failures")),
    ("lost", ("unrouted_publishes", "dropped", "discarded", "expired_replies")),
    ("now", ("pending_replies", "queued")),
)


def _print_bus(bus: object) -> None:
    """Print the event bus's counters when the reply has them (``remoting bus``, or a
    StatsProcessor given ``bus=``); skip what is not a number."""
    if not isinstance(bus, dict):
        return
    print("event bus:")
    for title, keys in BUS_ROWS:
        cells = [f"{key} {bus[key]}" for key in keys if isinstance(bus.get(key), int)]
        if cells:
            print(f"  {title + ':':<11}" + "  ".join(cells))


def _print_queue(queue: object) -> None:
    """Print a queue service's totals and first topics, with their channels and groups,
    when the reply has them (``remoting queue``); skip what is not that."""
    from ..queue._stats import statistics_from_json
    from ._queue_tools import queue_table

    if not isinstance(queue, dict):
        return
    try:
        now = statistics_from_json(json.dumps(queue).encode())
    except (KeyError, TypeError, ValueError):
        return
    for line in queue_table(now, None, 0.0, "queue service"):
        print(line)
    if now.topic_count:
        print("(rates, and every topic: remoting queue stats ADDR)")


LATENCY_COLUMNS = ("mean", "p50", "p90", "p99", "max")


def _print_latency(latency: object) -> None:
    """Print the latency table of a statistics reply when it has one (the calls that side
    made, by request code: a server's are its calls to its clients); skip what is not one."""
    if not isinstance(latency, dict):
        return
    rows = []
    for key, summary in latency.items():
        code = _code(key) if isinstance(key, str) else None
        if code is None or not (isinstance(summary, dict) and all(
                isinstance(summary.get(c), int | float) for c in ("count", *LATENCY_COLUMNS))):
            continue
        rows.append((code, summary))
    if not rows:
        return
    print("latency of its own calls, ms:")
    print(f"{'code':>7} {'calls':>10} " + " ".join(f"{c:>8}" for c in LATENCY_COLUMNS))
    for code, summary in sorted(rows, key=lambda row: row[0]):
        print(f"{code:>7} {int(summary['count']):>10} "
              + " ".join(f"{summary[c] * 1000:>8.2f}" for c in LATENCY_COLUMNS))


TOOL_COMMANDS: list[Command] = [
    Command("serve", "serve processors from a module:factory (on N worker processes)",
            _serve_arguments, _run_serve, log_level="info"),
    Command("call", "send one request and print the response", _call_arguments, _run_call),
    Command("ping", "measure round trips to a server", _ping_arguments, _run_ping),
    Command("stats", "show a server's statistics (built-in stats processor)",
            _stats_arguments, _run_stats),
]
