"""Builders for RocketMQ client tests: stored messages as a broker writes them (Java's
``MessageDecoder.encode``), pull answers and route bodies, and a responder that answers a
flow's calls without sockets."""

from __future__ import annotations

import socket
import struct
import zlib
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TypeVar

from codec import RemotingCommand, ResponseCode
from remoting.rocketmq._flows import Call, Flow
from remoting.rocketmq._message_codec import MAGIC_CODE, properties_string

DATA = __import__("pathlib").Path(__file__).parent / "data"

T = TypeVar("T")


def stored_message(*, topic: str = "T", body: bytes = b"body", queue_id: int = 0,
                   queue_offset: int = 0, commit_offset: int = 1000, sys_flag: int = 0,
                   properties: dict[str, str] | None = None, reconsume_times: int = 0,
                   born_ms: int = 1_700_000_000_000, store_ms: int = 1_700_000_000_500,
                   born_host: tuple[str, int] = ("10.0.0.1", 40000),
                   store_host: tuple[str, int] = ("127.0.0.1", 10911), flag: int = 0,
                   compress: bool = False, total_size: int | None = None,
                   magic: int = MAGIC_CODE) -> bytes:
    """Return one message in a broker's commit-log layout (``MessageDecoder.encode``)."""
    if compress:
        body = zlib.compress(body, 5)
        sys_flag |= 0x1 | (0x3 << 8)
    born = socket.inet_pton(socket.AF_INET6 if ":" in born_host[0] else socket.AF_INET,
                            born_host[0])
    store = socket.inet_pton(socket.AF_INET6 if ":" in store_host[0] else socket.AF_INET,
                             store_host[0])
    if len(born) == 16:
        sys_flag |= 0x1 << 4
    if len(store) == 16:
        sys_flag |= 0x1 << 5
    topic_bytes = topic.encode()
    props = properties_string(properties or {}).encode()
    size = (4 + 4 + 4 + 4 + 4 + 8 + 8 + 4 + 8 + len(born) + 4 + 8 + len(store) + 4 + 4 + 8
            + 4 + len(body) + 1 + len(topic_bytes) + 2 + len(props))
    parts = [struct.pack(">iiiiiqqiq", total_size if total_size is not None else size, magic,
                         zlib.crc32(body) & 0x7FFFFFFF, queue_id, flag, queue_offset,
                         commit_offset, sys_flag, born_ms),
             born, struct.pack(">i", born_host[1]), struct.pack(">q", store_ms), store,
             struct.pack(">i", store_host[1]), struct.pack(">iqi", reconsume_times, 0,
                                                           len(body)),
             body, struct.pack(">b", len(topic_bytes)), topic_bytes,
             struct.pack(">h", len(props)), props]
    return b"".join(parts)


def pull_response(body: bytes | None, *, code: int = ResponseCode.SUCCESS,
                  next_offset: int = 1, min_offset: int = 0, max_offset: int = 1
                  ) -> RemotingCommand:
    """Return a PULL_MESSAGE answer as a broker sends it."""
    response = RemotingCommand.create_response(code)
    response.ext_fields = {"nextBeginOffset": str(next_offset), "minOffset": str(min_offset),
                           "maxOffset": str(max_offset), "suggestWhichBrokerId": "0"}
    response.body = body
    return response


def route_body(brokers: dict[str, str], queues: int = 4, perm: int = 6) -> bytes:
    """Return a route as a name server writes it (fastjson: broker ids as bare keys)."""
    datas = ",".join(
        f'{{"brokerAddrs":{{0:"{addr}"}},"brokerName":"{name}","cluster":"DefaultCluster"}}'
        for name, addr in brokers.items())
    queue_datas = ",".join(
        f'{{"brokerName":"{name}","perm":{perm},"readQueueNums":{queues},'
        f'"topicSysFlag":0,"writeQueueNums":{queues}}}' for name in brokers)
    return (f'{{"brokerDatas":[{datas}],"filterServerTable":{{}},'
            f'"queueDatas":[{queue_datas}]}}').encode()


def response(code: int = ResponseCode.SUCCESS, remark: str | None = None,
             fields: dict[str, str] | None = None, body: bytes | None = None
             ) -> RemotingCommand:
    cmd = RemotingCommand.create_response(code, remark)
    cmd.ext_fields = dict(fields) if fields else None
    cmd.body = body
    return cmd


@dataclass
class Responder:
    """Answers a flow's calls: ``answer(call)`` returns a response or raises; records calls."""

    answer: Callable[[Call], RemotingCommand | None]
    calls: list[Call] = field(default_factory=list)

    def run(self, flow: Flow[T]) -> T:
        """Run ``flow`` (of single calls) to its end; return its result (or raise what it
        raised)."""
        try:
            call = next(flow)
            while True:
                assert isinstance(call, Call), f"a Responder answers single calls: {call}"
                self.calls.append(call)
                try:
                    result = self.answer(call)
                except Exception as exc:
                    call = flow.throw(exc)
                    continue
                call = flow.send(result)
        except StopIteration as stop:
            value: T = stop.value
            return value
