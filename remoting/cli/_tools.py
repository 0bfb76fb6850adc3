"""The operator commands of ``remoting``: ``serve``, ``call``, ``ping`` and ``stats``.

Exit codes: 0 success; 1 the server answered with a non-SUCCESS code; 2 a transport error or
bad arguments (the message says which).
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
import time
from typing import TYPE_CHECKING, Any

from ._command import Command

if TYPE_CHECKING:
    from codec import RemotingCommand

__all__ = ["TOOL_COMMANDS"]

PING_CODE = 32_001  # any code: a server without a processor for it still answers


def _quiet_logs() -> None:
    import structlog

    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(logging.WARNING),
                        logger_factory=structlog.PrintLoggerFactory(sys.stderr))


def _ext_pair(text: str) -> tuple[str, str]:
    key, sep, value = text.partition("=")
    if not sep or not key:
        raise argparse.ArgumentTypeError(f"--ext takes key=value, got {text!r}")
    return key, value


def _client() -> Any:
    from ..blocking import RemotingClient

    return RemotingClient().start()


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
    parser.add_argument("--port", type=int, default=0, help="listen port (default: ephemeral)")
    parser.add_argument("--bind", default="127.0.0.1", help="bind address (default: 127.0.0.1)")
    parser.add_argument("--workers", type=int, default=1,
                        help="server processes sharing the port with SO_REUSEPORT (default 1)")
    parser.add_argument("--reuse-port", action="store_true", help=argparse.SUPPRESS)


def _run_serve(args: argparse.Namespace) -> int:
    from .._config import ServerConfig
    from ._serve import FactoryError, run_server, supervise

    _quiet_logs()
    if args.workers < 1:
        print("--workers must be >= 1", file=sys.stderr)
        return 2
    config = ServerConfig(listen_port=args.port, bind_address=args.bind,
                          reuse_port=args.reuse_port or args.workers > 1)
    try:
        if args.workers > 1:
            return supervise(args.factory, config, args.workers)
        run_server(args.factory, config)
    except FactoryError as exc:
        print(f"remoting serve: {exc}", file=sys.stderr)
        return 2
    except OSError as exc:
        print(f"remoting serve: cannot listen on {args.bind}:{args.port}: {exc}",
              file=sys.stderr)
        return 2
    return 0


# --------------------------------------------------------------------------- call


def _call_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("addr", help="host:port")
    parser.add_argument("code", type=int, help="request code")
    body = parser.add_mutually_exclusive_group()
    body.add_argument("--body", help="request body (UTF-8 text)")
    body.add_argument("--body-file", help="read the request body from this file ('-': stdin)")
    parser.add_argument("--ext", type=_ext_pair, action="append", default=[],
                        metavar="KEY=VALUE", help="an ext field (repeatable)")
    parser.add_argument("--json", action="store_true", help="print the response as JSON")
    parser.add_argument("--rocketmq", action="store_true",
                        help="send the binary ROCKETMQ header instead of JSON")
    parser.add_argument("--timeout", type=float, default=3.0, help="seconds (default 3)")


def _run_call(args: argparse.Namespace) -> int:
    from codec import RemotingCommand, ResponseCode, SerializeType

    from .._errors import RemotingError

    _quiet_logs()
    body: bytes | None = None
    if args.body is not None:
        body = args.body.encode("utf-8")
    elif args.body_file is not None:
        body = sys.stdin.buffer.read() if args.body_file == "-" else open(
            args.body_file, "rb").read()
    request = RemotingCommand.create_request(args.code, header=dict(args.ext) or None,
                                             body=body)
    if args.rocketmq:
        request.serialize_type = SerializeType.ROCKETMQ
    client = _client()
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
    parser.add_argument("--count", type=int, default=3, help="round trips (default 3)")
    parser.add_argument("--timeout", type=float, default=3.0, help="seconds per round trip")


def _run_ping(args: argparse.Namespace) -> int:
    from codec import RemotingCommand

    from .._errors import RemotingError

    _quiet_logs()
    client = _client()
    times: list[float] = []
    failed = 0
    try:
        for i in range(max(1, args.count)):
            start = time.perf_counter()
            try:
                response = client.invoke_sync(
                    args.addr, RemotingCommand.create_request(PING_CODE), args.timeout)
            except RemotingError as exc:
                failed += 1
                print(f"{args.addr}: {type(exc).__name__}: {exc}")
                continue
            elapsed = (time.perf_counter() - start) * 1000
            times.append(elapsed)
            print(f"{args.addr}: seq={i} code={response.code} time={elapsed:.2f} ms")
    finally:
        client.shutdown()
    if times:
        print(f"{len(times)} answered, {failed} failed, min/avg/max = {min(times):.2f}/"
              f"{sum(times) / len(times):.2f}/{max(times):.2f} ms")
    return 0 if not failed else 2


# --------------------------------------------------------------------------- stats


def _stats_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("addr", help="host:port")
    parser.add_argument("--json", action="store_true", help="print the raw JSON")
    parser.add_argument("--timeout", type=float, default=3.0, help="seconds (default 3)")


def _run_stats(args: argparse.Namespace) -> int:
    from codec import RemotingCommand, ResponseCode

    from .._errors import RemotingError
    from .._observability._stats_processor import STATS_REQUEST_CODE

    _quiet_logs()
    client = _client()
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
    stats = json.loads(response.body or b"{}")
    if args.json:
        print(json.dumps(stats, indent=2, sort_keys=True))
        return 0
    print(f"connections: {stats['connections']}  in flight: {stats['in_flight']}  "
          f"timeouts: {stats['timeouts']}  orphaned: {stats['orphaned_responses']}")
    print(f"{'code':>7} {'received':>10} {'errors':>8} {'queued':>7}")
    codes = sorted({int(c) for c in stats["requests_received"]} | {
        int(c) for c in stats["processor_queue"]})
    for code in codes:
        key = str(code)
        print(f"{code:>7} {stats['requests_received'].get(key, 0):>10} "
              f"{stats['error_replies'].get(key, 0):>8} "
              f"{stats['processor_queue'].get(key, 0):>7}")
    return 0


def _commands() -> list[Command]:
    return [
        Command("serve", "serve processors from a module:factory (on N worker processes)",
                _serve_arguments, _run_serve),
        Command("call", "send one request and print the response", _call_arguments,
                _run_call),
        Command("ping", "measure round trips to a server", _ping_arguments, _run_ping),
        Command("stats", "show a server's statistics (built-in stats processor)",
                _stats_arguments, _run_stats),
    ]


TOOL_COMMANDS = _commands
