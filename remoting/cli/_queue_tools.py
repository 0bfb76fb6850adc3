"""``remoting queue pub``, ``tail`` and ``stats``: a shell's way to publish to a queue
service, watch a topic, and see its topics, channels and groups (as ``nats pub`` /
``nats sub``, ``nsq_tail`` and ``nsq_stat`` do for theirs).

- ``pub ADDR TOPIC [BODY]`` publishes BODY, or each line of stdin as a message (in batches
  of up to 1,000), and prints the offsets.
- ``tail ADDR TOPIC`` prints the messages published from now on (``--from earliest`` or an
  offset: from there), read with pulls from an offset: it leaves nothing on the service.
  With ``--channel NAME`` it subscribes to that channel instead and acknowledges what it
  prints (a competing consumer). One line per message; ``--count N`` stops after N.
- ``stats ADDR [TOPIC]`` prints a table by topic, channel and group: depth, in flight,
  consumers, lag, and rates over ``--interval`` seconds (two snapshots).

Exit codes: 0 done; 1 the service refused (the message says why); 2 a transport error or
bad arguments. Ctrl-C ends ``tail`` with 0.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
import time
from typing import TYPE_CHECKING, Any, Final

from ._args import count, ext_pair, seconds, seconds_from_zero, whole_number
from ._tls import add_tls_options, started_client

if TYPE_CHECKING:
    from collections.abc import Callable, Iterable

    from ..queue import BlockingQueueClient, Message, QueueStatistics

__all__ = ["add_queue_tools", "counted", "queue_table", "size_text"]

PUB_BATCH: Final = 1000  # stdin lines per publish
TAIL_PULL: Final = 256  # messages one pull of tail asks for
TAIL_WAIT: Final = 1.0  # seconds a pull of tail is held while there is nothing new
MAX_TOPICS_SHOWN: Final = 100  # stats: topics in detail at most, by default


def add_queue_tools(parser: argparse.ArgumentParser) -> None:
    """Add ``pub``, ``tail`` and ``stats`` under ``remoting queue``."""
    tools = parser.add_subparsers(dest="queue_tool", metavar="TOOL", title="tools",
                                  description="clients of a running queue service "
                                              "(remoting queue TOOL --help)")
    pub = tools.add_parser("pub", help="publish a message, or each line of stdin",
                           description="Publish BODY to TOPIC, or each line of stdin as a "
                                       "message; print the offsets.")
    _addressed(pub)
    pub.add_argument("body", nargs="?", help="the message (UTF-8 text; default: each line "
                                             "of stdin is one)")
    pub.add_argument("--header", type=ext_pair, action="append", default=[],
                     metavar="KEY=VALUE", help="a header of every message (repeatable)")
    pub.add_argument("--defer", type=seconds_from_zero, default=0.0,
                     help="seconds before the messages may be delivered (default 0)")
    pub.add_argument("--key", default=None,
                     help="an idempotence key: a publish repeated with it appends nothing "
                          "(with stdin: KEY/0, KEY/1... per batch)")
    pub.set_defaults(_run=_run_pub, _log_level="warning")

    tail = tools.add_parser("tail", help="print a topic's messages as they come",
                            description="Print TOPIC's messages, one line each: from now "
                                        "on, or from --from; with --channel, as a consumer "
                                        "of that channel.")
    _addressed(tail)
    tail.add_argument("--from", dest="start", default="end", metavar="WHERE",
                      help="end (default: what is published from now on), earliest, or an "
                           "offset")
    tail.add_argument("--channel", default=None,
                      help="subscribe to this channel and acknowledge what is printed (the "
                           "channel is made if new and kept)")
    tail.add_argument("-n", "--count", type=count, default=None,
                      help="stop after this many messages (default: until Ctrl-C)")
    tail.add_argument("--json", action="store_true",
                      help="one JSON object per message (offset, timestamp, attempts, "
                           "headers, body)")
    tail.set_defaults(_run=_run_tail, _log_level="warning")

    stats = tools.add_parser("stats", help="a table by topic, channel and group",
                             description="Print the service's topics, channels and groups: "
                                         "depth, in flight, consumers, lag, and rates.")
    stats.add_argument("addr", help="the queue service's host:port")
    stats.add_argument("topic", nargs="?", help="this topic only (default: every topic)")
    stats.add_argument("--interval", type=seconds_from_zero, default=1.0,
                       help="seconds between the two snapshots the rates come from (0: no "
                            "rates; default 1)")
    stats.add_argument("--topics", type=whole_number, default=MAX_TOPICS_SHOWN,
                       help=f"topics shown at most, in name order (default "
                            f"{MAX_TOPICS_SHOWN})")
    stats.add_argument("--json", action="store_true", help="print the snapshot as JSON")
    stats.add_argument("--timeout", type=seconds, default=3.0,
                       help="seconds per request (default 3)")
    add_tls_options(stats, "client")
    stats.set_defaults(_run=_run_stats, _log_level="warning")


def _addressed(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("addr", help="the queue service's host:port")
    parser.add_argument("topic", help="the topic")
    parser.add_argument("--timeout", type=seconds, default=3.0,
                        help="seconds per request (default 3)")
    add_tls_options(parser, "client")


def _with_queue(args: argparse.Namespace, tool: Callable[[BlockingQueueClient], int]
                ) -> int:
    """Run ``tool`` with a queue client of the command's options; a refusal or a transport
    error is one line on stderr."""
    from .._errors import RemotingError
    from ..queue import QueueClient, QueueError

    client = started_client(args)
    if client is None:
        return 2
    try:
        return tool(QueueClient(client))
    except QueueError as exc:
        print(f"remoting queue {args.queue_tool}: {exc}", file=sys.stderr)
        return 1
    except RemotingError as exc:
        print(f"remoting queue {args.queue_tool}: {type(exc).__name__}: {exc}",
              file=sys.stderr)
        return 2
    finally:
        client.shutdown()


# --------------------------------------------------------------------------- pub


def _run_pub(args: argparse.Namespace) -> int:
    headers = dict(args.header)

    def pub(q: BlockingQueueClient) -> int:
        if args.body is not None:
            body = args.body.encode("utf-8", "surrogateescape")  # the argument's bytes
            offset = q.publish(args.addr, args.topic, body, headers, args.defer,
                               key=args.key, timeout=args.timeout)
            print(f"published {args.topic}@{offset}")
            return 0
        published = 0
        first = last = None
        for number, batch in enumerate(_batches(sys.stdin.buffer, PUB_BATCH)):
            key = None if args.key is None else f"{args.key}/{number}"
            offsets = q.publish_many(args.addr, args.topic, [(b, headers) for b in batch],
                                     defer=args.defer, key=key, timeout=args.timeout)
            published += len(offsets)
            first = offsets[0] if first is None else first
            last = offsets[-1]
        where = "" if first is None else f" (offsets {first} to {last})"
        print(f"published {published} messages to {args.topic}{where}")
        return 0
    return _with_queue(args, pub)


def _batches(lines: Iterable[bytes], size: int) -> Iterable[list[bytes]]:
    batch: list[bytes] = []
    for line in lines:
        batch.append(line.rstrip(b"\r\n"))
        if len(batch) == size:
            yield batch
            batch = []
    if batch:
        yield batch


# --------------------------------------------------------------------------- tail


def _run_tail(args: argparse.Namespace) -> int:
    def tail(q: BlockingQueueClient) -> int:
        shown = 0

        def show(message: Message) -> bool:
            nonlocal shown
            print(_line(message, args.json), flush=True)
            shown += 1
            return args.count is not None and shown >= args.count

        try:
            if args.channel is not None:
                _consume(q, args, show)
            else:
                _follow(q, args, show)
        except KeyboardInterrupt:  # the way to stop a tail
            pass
        return 0
    return _with_queue(args, tail)


def _follow(q: BlockingQueueClient, args: argparse.Namespace,
            show: Callable[[Message], bool]) -> None:
    """Pull from an offset, from ``--from`` on, until ``show`` says it is done."""
    offset = _start(q, args)
    while True:
        messages = q.pull(args.addr, args.topic, offset=offset, max_messages=TAIL_PULL,
                          max_wait=TAIL_WAIT, timeout=TAIL_WAIT + args.timeout)
        for message in messages:
            if message.offset > offset:  # let go of by the service (retention, a restart)
                print(f"remoting queue tail: offsets {offset} to {message.offset - 1} are "
                      "gone", file=sys.stderr)
            offset = message.offset + 1
            if show(message):
                return


def _start(q: BlockingQueueClient, args: argparse.Namespace) -> int:
    """The offset ``--from`` names (a topic that does not exist yet is waited for)."""
    from codec import ResponseCode

    from ..queue import QueueError

    waited = False
    while True:
        try:
            bounds = q.offsets(args.addr, args.topic, timeout=args.timeout)
        except QueueError as exc:
            if exc.code != ResponseCode.TOPIC_NOT_EXIST:
                raise
            if not waited:
                print(f"remoting queue tail: waiting for topic {args.topic!r} to exist",
                      file=sys.stderr)
                waited = True
            time.sleep(TAIL_WAIT)  # polling another process's publish
            continue
        if args.start == "end":  # a topic made while waited for: all of it came since
            return bounds.earliest if waited else bounds.end
        if args.start == "earliest":
            return bounds.earliest
        try:
            return max(bounds.earliest, min(whole_number(args.start), bounds.end))
        except argparse.ArgumentTypeError:
            raise QueueError(args.addr, None, f"--from must be end, earliest or an offset, "
                             f"got {args.start!r}") from None


def _consume(q: BlockingQueueClient, args: argparse.Namespace,
             show: Callable[[Message], bool]) -> None:
    """Subscribe to ``--channel``; acknowledge each message once shown."""
    with q.subscribe(args.addr, args.topic, args.channel, timeout=args.timeout) as sub:
        for delivery in sub:
            done = show(delivery)
            delivery.ack()
            if done:
                return


def _line(message: Message, as_json: bool) -> str:
    """One message on one line: ``topic@offset body`` (control characters escaped), or a
    JSON object."""
    try:
        text: str | None = message.body.decode("utf-8")
    except UnicodeDecodeError:
        text = None
    if as_json:
        body: dict[str, Any] = ({"body": text} if text is not None
                                else {"body_hex": message.body.hex()})
        return json.dumps({"topic": message.topic, "offset": message.offset,
                           "timestamp": message.timestamp, "attempts": message.attempts,
                           "headers": message.headers, **body}, ensure_ascii=False)
    shown = message.body.decode("utf-8", "backslashreplace") if text is None else text
    if not shown.isprintable():  # a newline, a NUL... escaped: one message, one line
        shown = "".join(c if c.isprintable() else c.encode("unicode_escape").decode("ascii")
                        for c in shown)
    heads = "" if not message.headers else " " + json.dumps(message.headers,
                                                              ensure_ascii=False)
    return f"{message.id}{heads} {shown}"


# --------------------------------------------------------------------------- stats


def _run_stats(args: argparse.Namespace) -> int:
    def stats(q: BlockingQueueClient) -> int:
        before = None
        if args.interval and not args.json:
            before = _snapshot(q, args)
            time.sleep(args.interval)  # the rates' interval, not a synchronisation
        now = _snapshot(q, args)
        if args.json:
            from ..queue._stats import statistics_to_json

            print(statistics_to_json(now).decode())
            return 0
        if args.topic is not None and args.topic not in now.topics:
            print(f"remoting queue stats: no topic {args.topic!r} at {args.addr}",
                  file=sys.stderr)
            return 1
        for line in queue_table(now, before, args.interval, f"queue at {args.addr}"):
            print(line)
        return 0
    return _with_queue(args, stats)


def _snapshot(q: BlockingQueueClient, args: argparse.Namespace) -> QueueStatistics:
    """The service's totals and, in detail, ``args.topic`` or its first ``--topics``."""
    if args.topic is not None:
        return q.statistics(args.addr, args.topic, timeout=args.timeout)
    totals = q.statistics(args.addr, timeout=args.timeout)
    names: list[str] = []
    after = None
    while len(names) < args.topics:
        page = q.statistics(args.addr, after=after, limit=min(1000, args.topics - len(names)),
                            timeout=args.timeout)
        names += page.topics
        after = page.next_after
        if after is None:
            break
    topics = {}
    for name in names:  # one request each: each answer is bounded
        found = q.statistics(args.addr, name, timeout=args.timeout).topics.get(name)
        if found is not None:  # deleted meanwhile otherwise
            topics[name] = found
    return dataclasses.replace(totals, topics=topics)


COLUMNS: Final = (("TOPIC", "<"), ("CHANNEL / GROUP", "<"), ("DEPTH", ">"),
                  ("IN FLIGHT", ">"), ("CONSUMERS", ">"), ("LAG", ">"), ("IN/S", ">"),
                  ("OUT/S", ">"))


def queue_table(now: QueueStatistics, before: QueueStatistics | None, interval: float,
                title: str) -> list[str]:
    """Return a queue service's statistics as lines: its totals, then a row per topic (DEPTH:
    the messages it holds; IN/S: published), per channel (OUT/S: finished) and per group
    (OUT/S: its offset's progress); rates from ``before``, ``interval`` seconds earlier
    (None: no rates)."""
    lines = [f"{title}: {counted(now.topic_count, 'topic')}, "
             f"{counted(now.channel_count, 'channel')}, {counted(now.group_count, 'group')}; "
             f"{size_text(now.memory_bytes)} of {size_text(now.total_memory_bytes)} in "
             f"memory; {counted(now.held_pulls, 'held pull')}; "
             f"{counted(now.problem_count, 'problem')}"]
    lines += [f"  problem: {problem}" for problem in now.problems]
    rows: list[tuple[str, ...]] = []
    for name, topic in now.topics.items():
        old = None if before is None else before.topics.get(name)
        rows.append((name, f"(topic: {topic.earliest} to {topic.end})",
                     str(topic.end - topic.earliest), "", "", "",
                     _rate(topic.published, None if old is None else old.published, interval), ""))
        for channel_name, channel in topic.channels.items():
            was = None if old is None else old.channels.get(channel_name)
            rows.append((name, f"channel {channel_name}", str(channel.depth),
                         str(channel.in_flight), str(channel.consumers), "", "",
                         _rate(channel.finished, None if was is None else was.finished, interval)))
        for group_name, group in topic.groups.items():
            was_group = None if old is None else old.groups.get(group_name)
            rows.append((name, f"group {group_name}", "", "", "", str(group.lag), "",
                         _rate(group.offset, None if was_group is None else was_group.offset,
                               interval)))
    if not rows:
        return lines
    widths = [max(len(title), *(len(row[i]) for row in rows))
              for i, (title, _) in enumerate(COLUMNS)]
    lines.append("  ".join(f"{title:{align}{width}}"
                           for (title, align), width in zip(COLUMNS, widths, strict=True)))
    lines += ["  ".join(f"{cell:{align}{width}}"
                        for cell, (_, align), width in zip(row, COLUMNS, widths, strict=True))
              .rstrip() for row in rows]
    if now.topic_count > len(now.topics):
        lines.append(f"({len(now.topics)} of {now.topic_count} topics shown)")
    return lines


def _rate(value: int, earlier: int | None, interval: float) -> str:
    if earlier is None or not interval:
        return ""
    return f"{(value - earlier) / interval:.1f}"


def counted(number: int, noun: str) -> str:
    """``1 topic``, ``2 topics``, ``1,000 topics``."""
    return f"{number:,} {noun}{'' if number == 1 else 's'}"


def size_text(size: int) -> str:
    """``size`` bytes for people: ``256 MiB``, ``1.5 GiB``, ``900 bytes``."""
    for unit, scale in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if size >= scale:
            return (f"{size // scale:,} {unit}" if size % scale == 0
                    else f"{size / scale:,.1f} {unit}")
    return f"{size:,} bytes"
