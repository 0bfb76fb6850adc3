"""The service the Spark tests call: row and batch processors on known request codes.

Each processor computes something the tests can also compute locally (`upper`, `length`...),
so a test compares every row with the local result.
"""

from __future__ import annotations

import threading
from collections import defaultdict
from typing import Any

import orjson
import trio

from codec import RemotingCommand, ResponseCode
from processors import AsyncRequestProcessor, BatchProcessor, RequestContext, RequestProcessor

UPPER = 1001  # body -> body.upper()
FLAKY = 1002  # like UPPER, but bodies ending in "7" get SYSTEM_ERROR "no sevens"
LENGTH = 1003  # body -> len(body) as text
JSON_SUM = 1004  # {"a": x, "b": y} -> {"total": x + y, "label": "a+b"}
SLOW = 1005  # async; bodies ending in "13" sleep SLOW_SECONDS before answering
WHO = 1006  # echo; records which connection (client) sent each request, by "tag" header
TYPED = 1007  # body n -> JSON array, map or ISO date built from n, per the "want" header
BATCH_UPPER = 2001  # Arrow: column "value" -> "value" upper-cased
BATCH_ENRICH = 2002  # Arrow: appends column "up" = upper(column "s")
BATCH_SUM = 2003  # Arrow: fields a, b -> columns total, label
BATCH_FAIL = 2004  # Arrow: always raises

SLOW_SECONDS = 3.0


def upper(value: str) -> str:
    """The local twin of UPPER."""
    return value.upper()


def typed(n: int, want: str) -> bytes:
    """The local twin of TYPED (as the bytes the service sends)."""
    if want == "array":
        return orjson.dumps([n, n + 1])
    if want == "map":
        return orjson.dumps({"n": n})
    return f"2024-01-{1 + n % 28:02d}".encode()


def ok(body: bytes | None) -> RemotingCommand:
    """Return a SUCCESS response carrying ``body``."""
    response = RemotingCommand.create_response(ResponseCode.SUCCESS)
    response.body = body
    return response


class Recorder:
    """Counts requests per code and remembers the client connections per tag."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.requests: dict[int, int] = defaultdict(int)
        self.clients: dict[str, set[str]] = defaultdict(set)

    def record(self, ctx: RequestContext, request: RemotingCommand) -> None:
        tag = (request.ext_fields or {}).get("tag")
        with self._lock:
            self.requests[request.code] += 1
            if tag:
                self.clients[tag].add(ctx.remote_addr)

    def count(self, code: int) -> int:
        with self._lock:
            return self.requests[code]


class RowProcessor(RequestProcessor):
    """UPPER, FLAKY, LENGTH, JSON_SUM and WHO, told apart by the request code."""

    def __init__(self, recorder: Recorder) -> None:
        self.recorder = recorder

    def process_request(self, ctx: RequestContext, request: RemotingCommand) -> RemotingCommand:
        self.recorder.record(ctx, request)
        body = request.body or b""
        code = request.code
        if code == UPPER:
            return ok(body.upper())
        if code == FLAKY:
            if body.endswith(b"7"):
                return RemotingCommand.create_response(ResponseCode.SYSTEM_ERROR, "no sevens")
            return ok(body.upper())
        if code == LENGTH:
            return ok(str(len(body.decode())).encode())
        if code == JSON_SUM:
            row = orjson.loads(body)
            return ok(orjson.dumps({"total": row["a"] + row["b"], "label": "a+b"}))
        if code == TYPED:
            return ok(typed(int(body), (request.ext_fields or {}).get("want") or ""))
        return ok(body)  # WHO


class SlowProcessor(AsyncRequestProcessor):
    """SLOW: most rows answer at once; rows ending in "13" take SLOW_SECONDS."""

    def __init__(self, recorder: Recorder) -> None:
        self.recorder = recorder

    async def process_request(self, ctx: RequestContext, request: RemotingCommand
                              ) -> RemotingCommand:
        self.recorder.record(ctx, request)
        if (request.body or b"").endswith(b"13"):
            await trio.sleep(SLOW_SECONDS)
        return ok(request.body)


class ArrowProcessor(BatchProcessor):
    """BATCH_UPPER, BATCH_ENRICH, BATCH_SUM and BATCH_FAIL."""

    def __init__(self, recorder: Recorder, code: int) -> None:
        self.recorder = recorder
        self.code = code

    def process_request(self, ctx: RequestContext, request: RemotingCommand) -> RemotingCommand:
        self.recorder.record(ctx, request)
        return super().process_request(ctx, request)

    def process_batch(self, ctx: RequestContext, batch: Any) -> Any:
        import pyarrow as pa
        import pyarrow.compute as pc

        if self.code == BATCH_UPPER:
            return pa.RecordBatch.from_arrays([pc.utf8_upper(batch.column("value"))],
                                              names=["value"])
        if self.code == BATCH_ENRICH:
            return batch.append_column("up", pc.utf8_upper(batch.column("s")))
        if self.code == BATCH_SUM:
            total = pc.add(batch.column("a"), batch.column("b"))
            label = pa.array(["a+b"] * batch.num_rows)
            return pa.RecordBatch.from_arrays([total, label], names=["total", "label"])
        raise RuntimeError("this batch processor always fails")


def register(server: Any, recorder: Recorder) -> None:
    """Register every test processor on ``server``."""
    rows = RowProcessor(recorder)
    for code in (UPPER, FLAKY, LENGTH, JSON_SUM, WHO, TYPED):
        server.register_processor(code, rows)
    server.register_processor(SLOW, SlowProcessor(recorder))
    for code in (BATCH_UPPER, BATCH_ENRICH, BATCH_SUM, BATCH_FAIL):
        server.register_processor(code, ArrowProcessor(recorder, code))
