"""The service of the cluster tests: ``remoting serve tests.cluster.fleet_service:processors``.

UPPER upper-cases a row, BATCH_UPPER the ``value`` column of an Arrow batch; SERVED answers
``{"rows": served so far, "peers": connections seen}`` as JSON (the death tests pick their
moment with it; bench/cluster.py counts connections per server). FAULT arms a signal (its
body: the number, for example ``b"9"``) that the process sends itself while it handles its
next UPPER or BATCH_UPPER request: the process dies (SIGKILL) or hangs (SIGSTOP) with that
request, and any others, in flight, which a signal sent from outside at a chosen moment
cannot promise.
"""

from __future__ import annotations

import json
import os
import threading
import time
from typing import Any

from codec import RemotingCommand, ResponseCode
from processors import BatchProcessor, RequestContext, RequestProcessor

UPPER = 1001
BATCH_UPPER = 2001
SERVED = 3001
FAULT = 3002
BATCH_WORK_SECONDS = 0.02


class _Counter:
    """Rows served by this process, and the peers (connections) they came from."""

    def __init__(self) -> None:
        self._lock = threading.Lock()  # processors run on pool threads
        self.value = 0
        self.peers: set[str] = set()

    def add(self, rows: int, peer: str) -> None:
        with self._lock:
            self.value += rows
            self.peers.add(peer)


SERVED_ROWS = _Counter()


class _Fault:
    """A signal this process sends itself while handling its next row request, once armed."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._signal = 0

    def arm(self, signum: int) -> None:
        with self._lock:
            self._signal = signum

    def strike(self) -> None:
        """Called with a request in hand: send the armed signal (once), if any."""
        with self._lock:
            signum, self._signal = self._signal, 0
        if signum:
            os.kill(os.getpid(), signum)  # the request in hand, and others, stay in flight


ARMED = _Fault()


class Upper(RequestProcessor):
    def process_request(self, ctx: RequestContext, request: RemotingCommand) -> RemotingCommand:
        ARMED.strike()
        SERVED_ROWS.add(1, ctx.remote_addr)
        response = RemotingCommand.create_response(ResponseCode.SUCCESS)
        response.body = (request.body or b"").upper()
        return response


class BatchUpper(BatchProcessor):
    def process_batch(self, ctx: RequestContext, batch: Any) -> Any:
        import pyarrow as pa
        import pyarrow.compute as pc

        ARMED.strike()
        SERVED_ROWS.add(batch.num_rows, ctx.remote_addr)
        time.sleep(BATCH_WORK_SECONDS)  # a batch handler does some work: rows stay in flight
        return pa.record_batch([pc.utf8_upper(batch.column("value"))], names=["value"])


class Served(RequestProcessor):
    def process_request(self, ctx: RequestContext, request: RemotingCommand) -> RemotingCommand:
        response = RemotingCommand.create_response(ResponseCode.SUCCESS)
        response.body = json.dumps(
            {"rows": SERVED_ROWS.value, "peers": len(SERVED_ROWS.peers)}).encode()
        return response


class Fault(RequestProcessor):
    def process_request(self, ctx: RequestContext, request: RemotingCommand) -> RemotingCommand:
        ARMED.arm(int(request.body or b"0"))
        return RemotingCommand.create_response(ResponseCode.SUCCESS)


def processors() -> dict[int | None, RequestProcessor]:
    """The factory ``remoting serve`` calls."""
    return {UPPER: Upper(), BATCH_UPPER: BatchUpper(), SERVED: Served(), FAULT: Fault()}
