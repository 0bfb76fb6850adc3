"""Send one Arrow batch worth of row requests through a blocking client (no pyspark here).

Theory of operation:
- Rows go out through `RemotingClient.invoke_many`: one hand-off to the trio thread per chunk,
  at most ``max_in_flight`` requests in flight, results in row order. Each request has its own
  deadline inside trio.
- Chunks grow (``max_in_flight``, then x4 each time) so that a server that accepts but never
  answers costs one timeout per batch, not one per window: a chunk that got no response at all
  ends the batch for that address, and the rows not yet sent get the chunk's error.
- Rows that were never sent (connect failed, or skipped as above) are safe to resend, so they
  fail over to the next address, and so are rows a server refused with SYSTEM_BUSY, and rows
  a draining server answered GO_AWAY (also after the client's one resend): it processed none
  of them. A busy or draining answer also moves the rest of the batch on, and a draining
  server cools down as a dead one does. When every address answered busy, the batch
  backs off (50 ms, doubling up to 1 s) and goes round again, within one request timeout.
- Rows that were sent and then lost (timeout, broken connection) may have been processed:
  they are resent to the next address only for an ``idempotent`` processor; otherwise each
  row is sent at most once per call.
- Each batch starts on a different address (rotated per batch of the process, offset by its
  pid), which spreads the load of many workers over the addresses, also when every task is
  one batch; an address that failed is skipped for a
  cool-down (`_fleet.Cooldowns`), so later batches do not pay its timeout again.
"""

from __future__ import annotations

import itertools
import os
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Final

from codec import RemotingCommand, ResponseCode, SerializeType, next_opaque

from .._checks import blocking_call, request_code, seconds
from .._core._sansio._addresses import split_addr
from .._errors import (
    RemotingConnectError,
    RemotingError,
    RemotingSendRequestError,
    RemotingTimeoutError,
)
from ._fleet import COOLDOWNS, Cooldowns

if TYPE_CHECKING:
    from collections.abc import Sequence

    from ..blocking import RemotingClient

__all__ = ["CallReport", "CallSpec", "Outcome", "call_bodies", "error_of"]

Outcome = RemotingCommand | RemotingError | None  # None: the row was null, nothing was sent

CHUNK_GROWTH: Final = 4  # first chunk is one window; each next one is 4x larger
DEFAULT_COOLDOWN: Final = 10.0  # seconds a dead, refusing or stalled server is skipped
BUSY_BACKOFF: Final = 0.05  # first pause when every server answered SYSTEM_BUSY (doubles)
BUSY_BACKOFF_MAX: Final = 1.0

_TURNS = itertools.count()  # this process's batches: each starts at the next address


@dataclass(frozen=True, slots=True, kw_only=True)
class CallSpec:
    """Where and how row requests go (picklable: it travels inside the UDF).

    Attributes:
        addresses: ``"host:port"`` of the servers, tried in rotation.
        code: the request code.
        timeout: seconds per request, enforced inside trio.
        max_in_flight: requests in flight per worker process at most.
        header: ext fields copied into every request.
        serialize_type: how request headers are written (the server answers in kind);
            ``ROCKETMQ`` (binary) costs about half of ``JSON`` to encode and decode.
        idempotent: rows lost to a timeout or a broken connection are resent to another
            address (the processor may then see a row twice).
        cooldown: seconds a failed address is skipped by this worker process.
    """

    addresses: tuple[str, ...]
    code: int
    timeout: float
    max_in_flight: int
    header: tuple[tuple[str, str], ...] = ()
    serialize_type: SerializeType = SerializeType.JSON
    idempotent: bool = False
    cooldown: float = DEFAULT_COOLDOWN

    def __post_init__(self) -> None:
        if not self.addresses:
            raise ValueError("at least one server address is needed")
        for addr in self.addresses:
            split_addr(addr)  # ValueError saying what is wrong with it
        request_code(self.code)  # an int32, as on the wire
        seconds("timeout", self.timeout, above=True)  # NaN failed every row in the executors
        if self.max_in_flight < 1:
            raise ValueError("max_in_flight must be >= 1")
        seconds("cooldown", self.cooldown)


def error_of(outcome: Outcome) -> tuple[int, str] | None:
    """Return ``(code, remark)`` for a failed row, or None for a success or a null row.

    Transport failures get RocketMQ's client-side pseudo codes: ``RPC_TIME_OUT`` (-1006) for
    timeouts, ``RPC_SEND_TO_CHANNEL_FAILED`` (-1004) for connect and send failures,
    ``RPC_UNKNOWN`` (-1000) otherwise.
    """
    if outcome is None:
        return None
    if isinstance(outcome, RemotingCommand):
        if outcome.code == ResponseCode.SUCCESS:
            return None
        return int(outcome.code), outcome.remark or ""
    if isinstance(outcome, RemotingTimeoutError):
        return int(ResponseCode.RPC_TIME_OUT), str(outcome)
    if isinstance(outcome, RemotingConnectError | RemotingSendRequestError):
        return int(ResponseCode.RPC_SEND_TO_CHANNEL_FAILED), str(outcome)
    return int(ResponseCode.RPC_UNKNOWN), str(outcome)


@dataclass(slots=True)
class CallReport:
    """What one batch cost, and the addresses skipped after it: for metrics callbacks."""

    requests: int = 0
    seconds: float = 0.0
    cooling: tuple[str, ...] = ()


@blocking_call("remoting.spark's UDF calls (call_bodies)",
               "the UDF in a Spark job (it runs in Spark's Python workers), or "
               "remoting.open_client() and `await client.invoke_many(...)`")
def call_bodies(client: RemotingClient, spec: CallSpec, bodies: Sequence[bytes | None],
                turn: int | None = None, report: CallReport | None = None,
                cooldowns: Cooldowns = COOLDOWNS) -> list[Outcome]:
    """Send one request per non-None body; return one outcome per body, in order.

    The batch starts at address ``(turn + pid) % len(addresses)``; ``turn`` is by default
    this process's next batch number, so the batches of a worker process (of all its tasks,
    however short) go round the addresses.

    Never raises for a failed row: its outcome is the `RemotingError` (or the non-SUCCESS
    response). Raises `RemotingError` only if the client itself is closed.
    """
    outcomes: list[Outcome] = [None] * len(bodies)
    positions = [i for i, body in enumerate(bodies) if body is not None]
    if not positions:
        return outcomes
    header = dict(spec.header) if spec.header else None
    requests = [
        RemotingCommand(code=spec.code, body=bodies[i], serialize_type=spec.serialize_type,
                        ext_fields=None if header is None else dict(header))
        for i in positions
    ]
    if turn is None:
        turn = next(_TURNS)
    first = (turn + os.getpid()) % len(spec.addresses)
    pending = list(range(len(requests)))  # indexes into requests still to (re)send
    started = time.monotonic()
    backoff = BUSY_BACKOFF
    sent = 0
    while True:
        for addr in cooldowns.order(spec.addresses, first, time.monotonic()):
            results, went_out, retry = _send_chunked(
                client, addr, [requests[k] for k in pending], spec)
            sent += went_out
            _learn(cooldowns, addr, results, spec)
            for k, result in zip(pending, results, strict=True):
                outcomes[positions[k]] = result
            pending = [pending[j] for j in retry]
            if not pending:
                break
            for k in pending:  # a resent request is a new call: a late answer must not match it
                requests[k].opaque = next_opaque()
        if not pending or not any(_busy(outcomes[positions[k]]) for k in pending):
            break
        if time.monotonic() + backoff > started + spec.timeout:
            break  # every server stayed busy for a whole request timeout: report it
        time.sleep(backoff)  # every server was busy: back off before another round
        backoff = min(backoff * 2, BUSY_BACKOFF_MAX)
    if report is not None:
        report.requests += sent
        now = time.monotonic()
        report.seconds += now - started
        report.cooling = tuple(a for a in cooldowns.cooling(now) if a in spec.addresses)
    return outcomes


def _send_chunked(client: RemotingClient, addr: str, requests: list[RemotingCommand],
                  spec: CallSpec) -> tuple[list[RemotingCommand | RemotingError], int, list[int]]:
    """Send ``requests`` to ``addr`` in growing chunks.

    Returns the results, how many requests went out, and the indexes to resend elsewhere:
    rows never sent, rows a busy server refused, and with ``spec.idempotent`` rows lost to a
    timeout or a broken connection. A chunk with a busy answer, or with no answer at all, ends
    the batch for ``addr``.
    """
    results: list[RemotingCommand | RemotingError] = []
    unsent: list[int] = []
    n = len(requests)
    size = spec.max_in_flight
    start = 0
    while start < n:
        chunk = requests[start:start + size]
        got = client.invoke_many(addr, chunk, timeout=spec.timeout, limit=spec.max_in_flight)
        results.extend(got)
        unsent.extend(start + j for j, r in enumerate(got) if isinstance(r, RemotingConnectError))
        start += len(chunk)
        if start < n:
            refused = next((r for r in got if _busy(r) or _went_away(r)), None)
            if refused is not None or not any(isinstance(r, RemotingCommand) for r in got):
                # A busy or draining server gets no more of this batch, nor a dead or stalled
                # one.
                rest = refused if refused is not None else _skipped_error(got[-1], addr,
                                                                          spec.timeout)
                results.extend([rest] * (n - start))
                unsent.extend(range(start, n))
                break
        size *= CHUNK_GROWTH
    skipped = set(unsent)
    retry = [j for j, r in enumerate(results)
             if j in skipped or _busy(r) or _went_away(r) or (spec.idempotent and _lost(r))]
    return results, n - len(unsent), retry


def _busy(result: Outcome) -> bool:
    return isinstance(result, RemotingCommand) and result.code == ResponseCode.SYSTEM_BUSY


def _went_away(result: Outcome) -> bool:
    """Answered GO_AWAY (a draining server; as data when the client does not resend): not
    processed, safe to send elsewhere."""
    if isinstance(result, RemotingSendRequestError):
        return result.going_away
    return isinstance(result, RemotingCommand) and result.code == ResponseCode.GO_AWAY


def _lost(result: RemotingCommand | RemotingError) -> bool:
    """Sent, and then lost to a timeout or a broken connection: maybe processed, maybe not."""
    return (isinstance(result, RemotingTimeoutError | RemotingSendRequestError)
            and not _went_away(result))


def _learn(cooldowns: Cooldowns, addr: str, results: list[RemotingCommand | RemotingError],
           spec: CallSpec) -> None:
    """Cool ``addr`` down if its last result was a transport failure or GO_AWAY (a draining
    server); else it is healthy."""
    last = results[-1]
    if _went_away(last):
        cooldowns.failed(addr, time.monotonic(), spec.cooldown, "GO_AWAY")
    elif isinstance(last, RemotingCommand):
        cooldowns.answered(addr)
    elif isinstance(last, RemotingConnectError | RemotingTimeoutError | RemotingSendRequestError):
        cooldowns.failed(addr, time.monotonic(), spec.cooldown, type(last).__name__)


def _skipped_error(last: RemotingCommand | RemotingError, addr: str, timeout: float
                   ) -> RemotingError:
    if isinstance(last, RemotingTimeoutError):
        return RemotingTimeoutError(
            addr, timeout, "response (not sent: earlier requests timed out)")
    if isinstance(last, RemotingConnectError):
        return last
    if isinstance(last, RemotingSendRequestError):
        return RemotingSendRequestError(addr, f"not sent: earlier requests failed ({last})")
    return RemotingError(f"not sent: earlier requests to {addr} failed ({last})", addr)
