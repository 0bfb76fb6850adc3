"""A remoting server to run in a child process: ``python -m tests.faults.server_process``.

Prints ``PORT <n>`` once listening (``--port 0`` picks one), then ``ENTERED <body>`` each time
the hanging processor starts. Reads commands on stdin: ``stats`` prints ``STATS {json}`` (the
server's statistics and its VmRSS), ``quit`` shuts down gracefully. Used by `support.ServerProcess`;
nothing here listens beyond 127.0.0.1.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import threading
from collections.abc import Mapping, MutableMapping
from typing import Any

import structlog

from codec import RemotingCommand, ResponseCode
from processors import AsyncEchoProcessor, EchoProcessor, RequestContext, RequestProcessor
from remoting import RemotingServer, ServerConfig

ECHO = 1
ASYNC_ECHO = 2
HANG = 3  # prints ENTERED, then never answers (until the process dies)


_print_lock = threading.Lock()


def say(line: str) -> None:
    """Print one whole line (print() from several threads can interleave)."""
    with _print_lock:
        sys.stdout.write(line + "\n")
        sys.stdout.flush()


class Hang(RequestProcessor):
    def __init__(self) -> None:
        self.forever = threading.Event()

    def process_request(self, ctx: RequestContext, request: RemotingCommand) -> RemotingCommand:
        say(f"ENTERED {(request.body or b'').decode()}")
        self.forever.wait()
        return RemotingCommand.create_response(ResponseCode.SUCCESS)


def vm_rss_kib() -> int:
    with open(f"/proc/{os.getpid()}/status", encoding="ascii") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return -1


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--threads", type=int, default=4)
    args = parser.parse_args()

    def drop(_logger: object, _name: str, _event: MutableMapping[str, Any]) -> Mapping[str, Any]:
        raise structlog.DropEvent

    structlog.configure(processors=[drop])  # stdout carries our protocol lines only
    server = RemotingServer(ServerConfig(listen_port=args.port, shutdown_grace_seconds=1.0))
    server.register_processor(ECHO, EchoProcessor(), threads=args.threads)
    server.register_processor(ASYNC_ECHO, AsyncEchoProcessor())
    server.register_processor(HANG, Hang(), threads=64)
    server.start()
    say(f"PORT {server.port}")
    for line in sys.stdin:
        command = line.strip()
        if command == "stats":
            stats = server.statistics()
            say("STATS " + json.dumps({
                "rss_kib": vm_rss_kib(), "connections": stats.connections,
                "connections_opened": stats.connections_opened, "in_flight": stats.in_flight,
                "requests_received": stats.requests_received,
                "error_replies": stats.error_replies, "processing": server.statistics().processing,
            }))
        elif command == "quit":
            break
    server.shutdown()


if __name__ == "__main__":
    main()
