"""Send one Arrow batch worth of row requests through a blocking client (no pyspark here).

Theory of operation:
- Rows go out through `RemotingClient.invoke_many`: one hand-off to the trio thread per chunk,
  at most ``max_in_flight`` requests in flight, results in row order. Each request has its own
  deadline inside trio.
- Chunks grow (``max_in_flight``, then x4 each time) so that a server that accepts but never
  answers costs one timeout per batch, not one per window: a chunk that got no response at all
  ends the batch for that address, and the rows not yet sent get the chunk's error.
- Rows that were never sent (connect failed, or skipped as above) are safe to resend, so they
  fail over to the next address. Rows that were sent and failed are not resent: the server may
  have processed them (at-least-once is the caller's business, not ours).
- Each batch starts on a different address (rotated per batch and per process), which spreads
  the load of many workers over the addresses.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Final

from codec import RemotingCommand, ResponseCode, SerializeType

from .._errors import (
    RemotingConnectError,
    RemotingError,
    RemotingSendRequestError,
    RemotingTimeoutError,
)

if TYPE_CHECKING:
    from collections.abc import Sequence

    from ..blocking import RemotingClient

__all__ = ["CallReport", "CallSpec", "Outcome", "call_bodies", "error_of"]

Outcome = RemotingCommand | RemotingError | None  # None: the row was null, nothing was sent

CHUNK_GROWTH: Final = 4  # first chunk is one window; each next one is 4x larger


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
    """

    addresses: tuple[str, ...]
    code: int
    timeout: float
    max_in_flight: int
    header: tuple[tuple[str, str], ...] = ()
    serialize_type: SerializeType = SerializeType.JSON

    def __post_init__(self) -> None:
        if not self.addresses:
            raise ValueError("at least one server address is needed")
        for addr in self.addresses:
            host, sep, port = addr.rpartition(":")
            if not sep or not host or not port.isdigit():
                raise ValueError(f"address must be 'host:port', got {addr!r}")
        if self.timeout <= 0:
            raise ValueError("timeout must be > 0 seconds")
        if self.max_in_flight < 1:
            raise ValueError("max_in_flight must be >= 1")


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
    """What one batch cost: for metrics callbacks."""

    requests: int = 0
    seconds: float = 0.0


def call_bodies(client: RemotingClient, spec: CallSpec, bodies: Sequence[bytes | None],
                batch_no: int = 0, report: CallReport | None = None) -> list[Outcome]:
    """Send one request per non-None body; return one outcome per body, in order.

    Never raises for a failed row: its outcome is the `RemotingError` (or the non-SUCCESS
    response). Raises `RemotingError` only if the client itself is closed.
    """
    outcomes: list[Outcome] = [None] * len(bodies)
    positions = [i for i, body in enumerate(bodies) if body is not None]
    if not positions:
        return outcomes
    code = spec.code
    header = dict(spec.header) if spec.header else None
    serialize_type = spec.serialize_type
    requests = [
        RemotingCommand(code=code, body=bodies[i], serialize_type=serialize_type,
                        ext_fields=None if header is None else dict(header))
        for i in positions
    ]
    n_addr = len(spec.addresses)
    first = (batch_no + os.getpid()) % n_addr
    pending = list(range(len(requests)))  # indexes into requests still to (re)send
    started = time.perf_counter()
    sent = 0
    for attempt in range(n_addr):
        addr = spec.addresses[(first + attempt) % n_addr]
        batch = [requests[k] for k in pending]
        results, unsent = _send_chunked(client, addr, batch, spec)
        sent += len(batch) - len(unsent)
        for k, result in zip(pending, results, strict=True):
            outcomes[positions[k]] = result
        pending = [pending[j] for j in unsent]
        if not pending:
            break
    if report is not None:
        report.requests += sent
        report.seconds += time.perf_counter() - started
    return outcomes


def _send_chunked(client: RemotingClient, addr: str, requests: list[RemotingCommand],
                  spec: CallSpec) -> tuple[list[RemotingCommand | RemotingError], list[int]]:
    """Send ``requests`` to ``addr`` in growing chunks; return results and unsent indexes."""
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
        if start < n and not any(isinstance(r, RemotingCommand) for r in got):
            # Nothing came back: do not feed a dead or stalled server the rest of the batch.
            skipped = _skipped_error(got[-1], addr, spec.timeout)
            results.extend([skipped] * (n - start))
            unsent.extend(range(start, n))
            break
        size *= CHUNK_GROWTH
    return results, unsent


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
