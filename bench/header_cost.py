"""What one frame's header costs the reader that decodes it, per kind of header.

Not a test: a standalone script for docs/security.md (why ``max_header_bytes`` is 64 KiB).

    .venv/bin/python bench/header_cost.py [--kib N] [--repeats R] [--live MB]

Every row decodes one frame whose header is N KiB (64 by default) of one shape through the
`FrameDecoder` a connection uses, limit raised out of the way, and prints the best of R runs
in CPU time of this thread, with the rate per MB. The shapes are what a hostile peer would
pick (the slowest per byte of each path: many tiny entries or tokens) next to what RocketMQ
sends (one large value: a message's properties). The last rows decode the same bytes as
small requests and as the smallest frames there are, for scale (decoding only: a request
costs its dispatch too). A header limit bounds what one frame costs, not what a peer's
bytes cost in all.

``--live MB`` also measures a real server on 127.0.0.1: the CPU time its process spends per
MB a peer (a child process, sending and reading the answers) sends of the smallest valid
requests (an unknown code: each decoded, dispatched and answered) and of the slowest
headers ``max_header_bytes`` lets in (relaxed JSON, a list of numbers). This is what a
flood of each costs the event loop, per byte.
"""

from __future__ import annotations

import argparse
import os
import struct
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import orjson

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run from a checkout

from codec import FrameDecoder, RemotingCommand, encode_frame  # noqa: E402

_PREFIX = struct.Struct(">iI")
_FIXED = struct.pack(">hBhiii", 10, 0, 0, 1, 0, 0)  # ROCKETMQ: fixed part, remark length 0


def _frame(header: bytes, serialize_type: int) -> bytes:
    return _PREFIX.pack(4 + len(header), (serialize_type << 24) | len(header)) + header


def _relaxed(entries: str) -> bytes:
    return ("{code:10,flag:0,language:'JAVA',opaque:1,version:0,extFields:{" + entries
            + "}}").encode()


def _strict(ext: dict[str, object]) -> bytes:
    return orjson.dumps({"code": 10, "extFields": ext, "flag": 0, "language": "JAVA",
                         "opaque": 1, "serializeTypeCurrentRPC": "JSON", "version": 0})


def _binary(entries: bytes) -> bytes:
    return _FIXED + struct.pack(">i", len(entries)) + entries


def shapes(size: int) -> dict[str, bytes]:
    """Return one frame of about ``size`` header bytes per shape."""
    return {
        "JSON relaxed: list of ints (the slowest)": _frame(_relaxed(
            "a:[" + ",".join(["1"] * (size // 2 - 40)) + "]"), 0),
        "JSON relaxed: many short entries": _frame(_relaxed(
            ",".join(f"k{i}:'v'" for i in range(size // 10))), 0),
        "JSON relaxed: one large value": _frame(_relaxed("p:'" + "x" * (size - 80) + "'"), 0),
        "JSON strict: many int entries": _frame(_strict(
            {f"k{i}": i for i in range(size // 14)}), 0),
        "JSON strict: many short entries": _frame(_strict(
            {f"k{i}": "v" for i in range(size // 13)}), 0),
        "JSON strict: one large value (RocketMQ)": _frame(_strict({"p": "x" * (size - 120)}), 0),
        "ROCKETMQ: empty entries": _frame(_binary(b"\0" * 6 * (size // 6 - 4)), 1),
        "ROCKETMQ: short entries": _frame(_binary(b"".join(
            struct.pack(">h", 7) + b"k%06d" % i + struct.pack(">i", 1) + b"v"
            for i in range(size // 14 - 2))), 1),
    }


def small_requests(size: int) -> bytes:
    """Return ``size`` bytes of the request bench/codec.py measures, back to back."""
    cmd = RemotingCommand(code=10, opaque=42, body=bytes(range(128)),
                          ext_fields={"topic": "TopicTest", "queueId": "3", "flagOn": "true"})
    one = encode_frame(cmd)
    return one * max(1, size // len(one))


def smallest_frames(size: int) -> bytes:
    """Return ``size`` bytes of the smallest valid frames (a ROCKETMQ header, nothing else)."""
    one = _frame(_binary(b""), 1)
    return one * (size // len(one))


def cpu_seconds(fn: Callable[[], object], repeats: int) -> float:
    best = float("inf")
    for _ in range(repeats):
        start = time.thread_time()
        fn()
        best = min(best, time.thread_time() - start)
    return best


def decode_all(data: bytes) -> Callable[[], int]:
    def run() -> int:
        decoder = FrameDecoder(2**31 - 1, 2**24)
        decoder.feed(data)
        count = 0
        while decoder.next_command() is not None:
            count += 1
        return count
    return run


_PEER = r"""
import socket, struct, sys, threading
port, kind, size = int(sys.argv[1]), sys.argv[2], int(sys.argv[3])
if kind == "small":
    fixed = struct.pack(">hBhiii", 999, 0, 0, 1, 0, 0) + struct.pack(">i", 0)
    one = struct.pack(">iI", 4 + len(fixed), (1 << 24) | len(fixed)) + fixed
else:
    head = b"{code:999,flag:0,language:'JAVA',opaque:7,version:0,extFields:{a:["
    h = head + b"1," * ((65536 - len(head) - 4) // 2) + b"1]}}"
    one = struct.pack(">iI", 4 + len(h), len(h)) + h
sock = socket.create_connection(("127.0.0.1", port))
reader = threading.Thread(target=lambda: [None for _ in iter(lambda: sock.recv(1 << 20), b"")])
reader.start()
sock.sendall(one * (size // len(one)))
sock.shutdown(socket.SHUT_WR)
reader.join()
"""


def live(megabytes: int) -> None:
    """Print the server's CPU time per MB of each flood (see the module docstring)."""
    from remoting import RemotingServer

    with RemotingServer() as server:
        print(f"# a server on 127.0.0.1, {megabytes} MB from a peer process; CPU time of the "
              "server's process")
        for kind, name in (("small", "smallest valid requests (answered)"),
                           ("relaxed", "relaxed JSON headers of 64 KiB")):
            start = time.process_time()
            subprocess.run([sys.executable, "-c", _PEER, str(server.port), kind,
                            str(megabytes << 20)], check=True, timeout=600)
            spent = time.process_time() - start
            print(f"{name:44s} {spent * 1e3 / megabytes:8.1f} ms/MB")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--kib", type=int, default=64, help="header size (KiB)")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--live", type=int, default=0, metavar="MB",
                        help="also measure a live server per MB of each flood")
    args = parser.parse_args()
    size = args.kib * 1024
    print(f"# one header of {args.kib} KiB, best of {args.repeats}, CPU time "
          f"(pid {os.getpid()})")
    print(f"{'shape':44s} {'bytes':>8s} {'ms':>8s} {'ms/MB':>8s}")
    rows = {**shapes(size), f"for scale: {args.kib} KiB of small requests": small_requests(size),
            f"for scale: {args.kib} KiB of 29-byte frames": smallest_frames(size)}
    for name, frame in rows.items():
        seconds = cpu_seconds(decode_all(frame), args.repeats)
        print(f"{name:44s} {len(frame):8d} {seconds * 1e3:8.2f} "
              f"{seconds * 1e3 / (len(frame) / 1e6):8.1f}")
    if args.live:
        live(args.live)


if __name__ == "__main__":
    main()
