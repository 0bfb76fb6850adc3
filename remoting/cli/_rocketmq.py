"""``remoting rocketmq send | tail | route | offsets``: a RocketMQ cluster from the command
line, the way ``mqadmin`` and ``kcat`` are used (`remoting.rocketmq`).

Each takes the name servers with ``-n`` (default: ``NAMESRV_ADDR``, as RocketMQ's tools),
ACL credentials with ``--access-key`` / ``--secret-key``, and the client TLS options. Output
is for people (a table) or, with ``--json``, one JSON object per line; ``tail`` always prints
JSON lines, one per message (the body as text when it is UTF-8, else ``body_base64``).
"""

from __future__ import annotations

import base64
import json
import os
import sys
import threading
import time
from typing import TYPE_CHECKING, Any

from ._args import count, seconds
from ._command import Command
from ._signals import stopped_by_signals
from ._tls import add_tls_options, tls_problem, tls_settings

if TYPE_CHECKING:
    import argparse

    from ..rocketmq import Message

__all__ = ["ROCKETMQ_COMMANDS"]


def _common(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("-n", "--namesrv", default=os.environ.get("NAMESRV_ADDR"),
                        help="name servers, host:port;host:port (default: $NAMESRV_ADDR)")
    parser.add_argument("--access-key", default=None, help="ACL access key (plain_acl.yml)")
    parser.add_argument("--secret-key", default=None, help="ACL secret key")
    parser.add_argument("--json", action="store_true", help="one JSON object per line")
    add_tls_options(parser, "client")


def _arguments(parser: argparse.ArgumentParser) -> None:
    sub = parser.add_subparsers(dest="rocketmq_command", metavar="ACTION", required=True)
    send = sub.add_parser("send", help="send messages to a topic")
    _common(send)
    send.add_argument("-t", "--topic", required=True)
    send.add_argument("-m", "--body", default="-",
                      help="the body (default '-': each line of stdin is one message)")
    send.add_argument("--tags", default=None)
    send.add_argument("--keys", default=None, help="keys, separated by spaces")
    send.add_argument("-p", "--property", action="append", default=[], metavar="NAME=VALUE",
                      help="a user property (repeatable)")
    send.add_argument("--sharding-key", default=None,
                      help="send every message to the queue of this key (ordered messages)")
    send.add_argument("--count", type=count, default=1, help="send the body this many times")
    send.add_argument("-g", "--group", default="remoting-cli-producer")
    tail = sub.add_parser("tail", help="consume a topic and print its messages")
    _common(tail)
    tail.add_argument("-t", "--topic", required=True)
    tail.add_argument("-g", "--group", default=None,
                      help="consumer group (default: a new one, reading from --from)")
    tail.add_argument("-e", "--expression", default="*", help="tags, e.g. 'a || b' (default *)")
    tail.add_argument("--from", dest="start", default="now",
                      help="where a new group starts: first, last, now, or seconds since "
                           "the epoch (default: now)")
    tail.add_argument("--count", type=count, default=None, help="stop after this many")
    tail.add_argument("--idle", type=seconds, default=None,
                      help="stop after this many seconds without a message")
    route = sub.add_parser("route", help="print a topic's brokers and queues")
    _common(route)
    route.add_argument("-t", "--topic", required=True)
    offsets = sub.add_parser("offsets", help="print a group's committed offsets and lag")
    _common(offsets)
    offsets.add_argument("-t", "--topic", required=True)
    offsets.add_argument("-g", "--group", required=True)


def _fail(message: str) -> int:
    print(f"remoting rocketmq: {message}", file=sys.stderr)
    return 2


def _client_options(args: argparse.Namespace) -> dict[str, Any]:
    from .._config import ClientConfig

    config = ClientConfig(**tls_settings(args, "client"))  # type: ignore[arg-type]
    problem = tls_problem(config)
    if problem is not None:
        raise ValueError(problem)
    return {"client_config": config, "access_key": args.access_key,
            "secret_key": args.secret_key}


def _properties(pairs: list[str]) -> dict[str, str]:
    out = {}
    for pair in pairs:
        name, sep, value = pair.partition("=")
        if not sep or not name:
            raise ValueError(f"a property is NAME=VALUE, got {pair!r}")
        out[name] = value
    return out


def message_json(message: Message) -> dict[str, Any]:
    """Return ``message`` as ``tail`` prints it."""
    out: dict[str, Any] = {
        "msg_id": message.msg_id, "topic": message.topic, "tags": message.tags,
        "keys": message.keys, "broker": message.broker_name, "queue": message.queue_id,
        "offset": message.queue_offset, "reconsume_times": message.reconsume_times,
        "born_timestamp": message.born_timestamp, "store_timestamp": message.store_timestamp,
        "properties": message.properties}
    try:
        out["body"] = message.body.decode("utf-8")
    except UnicodeDecodeError:
        out["body_base64"] = base64.b64encode(message.body).decode("ascii")
    return out


def _send(args: argparse.Namespace) -> int:
    from ..rocketmq import Producer

    bodies = ([line.rstrip("\n").encode() for line in sys.stdin if line.strip()]
              if args.body == "-" else [args.body.encode()] * args.count)
    with Producer(args.namesrv, group=args.group, **_client_options(args)) as producer:
        for body in bodies:
            result = producer.send(args.topic, body, tags=args.tags, keys=args.keys,
                                   properties=_properties(args.property),
                                   sharding_key=args.sharding_key)
            row = {"status": result.status.value, "msg_id": result.msg_id,
                   "offset_msg_id": result.offset_msg_id, "broker": result.broker_name,
                   "queue": result.queue_id, "offset": result.queue_offset}
            print(json.dumps(row) if args.json else
                  f"{row['status']} {row['msg_id']} {row['broker']}:{row['queue']}@"
                  f"{row['offset']}", flush=True)
    return 0


def _start(value: str) -> str | float:
    if value in ("first", "last"):
        return value
    if value == "now":
        return time.time()
    try:
        return float(value)
    except ValueError:
        raise ValueError(f"--from is first, last, now or seconds since the epoch, got "
                         f"{value!r}") from None


def _tail(args: argparse.Namespace, stop: threading.Event | None = None) -> int:
    from ..rocketmq import LitePullConsumer

    group = args.group or f"remoting-tail-{os.getpid()}-{int(time.time())}"
    stop = stop or threading.Event()
    printed = 0
    last = time.monotonic()
    with LitePullConsumer(args.namesrv, group, args.topic, args.expression,
                          consume_from=_start(args.start),
                          **_client_options(args)) as consumer, stopped_by_signals(stop):
        while not stop.is_set():
            messages = consumer.poll(0.5)
            for message in messages:
                print(json.dumps(message_json(message)), flush=True)
                printed += 1
                if args.count is not None and printed >= args.count:
                    return 0
            if messages:
                last = time.monotonic()
            elif args.idle is not None and time.monotonic() - last >= args.idle:
                return 0
    return 0


def _route(args: argparse.Namespace) -> int:
    from .. import RemotingClient
    from ..rocketmq._drive import run_blocking
    from ..rocketmq._flows import fetch_route
    from ..rocketmq._instance import ClientState, name_server_list

    options = _client_options(args)
    state = ClientState(name_server_list(args.namesrv), "remoting-cli")
    with RemotingClient(options["client_config"]) as client:
        _acl(client, options)
        route = run_blocking(fetch_route(state, args.topic), client)
    if route is None:
        return _fail(f"no name server knows topic {args.topic!r}")
    rows: list[dict[str, Any]] = [
            {"broker": q.broker_name, "addresses": {str(k): v for k, v in
                                                    route.brokers.get(q.broker_name, {}).items()},
             "read_queues": q.read_queues, "write_queues": q.write_queues, "perm": q.perm}
            for q in route.queue_datas]
    for row in rows:
        print(json.dumps(row) if args.json else
              f"{row['broker']:<20} read {row['read_queues']:>3}  write "
              f"{row['write_queues']:>3}  perm {row['perm']}  "
              f"{' '.join(row['addresses'].values())}")
    return 0


def _acl(client: Any, options: dict[str, Any]) -> None:
    if options["access_key"] and options["secret_key"]:
        from .. import AclClientRPCHook

        client.register_rpc_hook(AclClientRPCHook(options["access_key"],
                                                  options["secret_key"]))


def _offsets(args: argparse.Namespace) -> int:
    from .. import RemotingClient
    from ..rocketmq._drive import run_blocking
    from ..rocketmq._flows import fetch_route, query_offset, queue_offset
    from ..rocketmq._instance import ClientState, name_server_list
    from ..rocketmq._protocol import Code

    options = _client_options(args)
    state = ClientState(name_server_list(args.namesrv), "remoting-cli")
    total = 0
    with RemotingClient(options["client_config"]) as client:
        _acl(client, options)
        route = run_blocking(fetch_route(state, args.topic), client)
        if route is None:
            return _fail(f"no name server knows topic {args.topic!r}")
        for queue in route.subscribe_queues(args.topic):
            addr = route.any_broker(queue.broker_name)
            if addr is None:
                continue
            committed = run_blocking(query_offset(addr, args.group, queue), client)
            end = run_blocking(queue_offset(addr, Code.GET_MAX_OFFSET, queue), client)
            lag = end - max(committed, 0)
            total += lag
            row = {"broker": queue.broker_name, "queue": queue.queue_id,
                   "committed": committed, "end": end, "lag": lag}
            print(json.dumps(row) if args.json else
                  f"{queue.broker_name:<20} {queue.queue_id:>4}  committed {committed:>10}  "
                  f"end {end:>10}  lag {lag:>8}")
    if not args.json:
        print(f"total lag {total}")
    return 0


_ACTIONS = {"send": _send, "tail": _tail, "route": _route, "offsets": _offsets}


def _run(args: argparse.Namespace) -> int:
    from .._errors import RemotingError

    if not args.namesrv:
        return _fail("no name server: give -n host:port or set NAMESRV_ADDR")
    try:
        return _ACTIONS[args.rocketmq_command](args)
    except (RemotingError, ValueError, TypeError) as exc:
        return _fail(str(exc))


ROCKETMQ_COMMANDS: list[Command] = [
    Command("rocketmq", "send to, tail, and inspect a RocketMQ cluster (docs/rocketmq.md)",
            _arguments, _run),
]
