"""`Connection`: the one owner of a socket. One transport, one decoder, a reader and a writer task.

Theory of operation:
- Everything here runs on the loop thread. The connection talks to its owner (the endpoint)
  through `ConnectionOwner` only: a request or a response arrived, a read was handled, the
  connection closed.
- Reading: each command a read completes is handed to the owner synchronously (requests on
  one connection are pipelined). Frames to send meanwhile are only queued ("holding"), then
  leave in one send, and the owner is told (`read_done`) so that it hands the read's requests
  to processor pools together. Once the connection is closed (a misbehaving peer, a codec
  error, a processor's ``close``), nothing more of what it sent is decoded: the rest of the
  read is dropped with it.
- An async processor runs its first step in the reader (no task switch). If it suspends, the
  reader keeps it: a suspended coroutine belongs to the task that ran it. A new reader task
  takes over and this one finishes the processor (`Suspension.finish`).
- Sending is the `Sender`'s (queue, writer task, send gate): ``send``, ``flush`` and
  ``send_from_thread`` here are its methods.
- Back-pressure: above the high water mark, senders wait (`Sender.wait_writable`) and a
  server's reader pauses until the queue is under the low water mark. A client's never
  pauses: it reads responses, which drain the server (both pausing would deadlock); it drops
  the requests it reads meanwhile that need an answer instead (`Dispatcher.route`), so its
  queue stays bounded too. With ``max_requests_per_connection`` requests in processing, the
  next request is held and reads pause; answers read before it still count.
- A frame still incomplete ``partial_frame_timeout`` seconds after it began closes the
  connection, however the bytes trickle in (slowloris).
- Any failure of the transport, or a codec error, closes this connection only; the owner then
  fails its pending requests at once (RocketMQ ``failFast``).
- It is a `ConnectionCore` (shared with the thread driver: the lifecycle, the decoder and
  the frame in progress, the bounds on the peer) driven by a reader task. Its lifecycle
  (open, going away, closing, closed) is written only here (`close`, `go_away`, `run`'s
  end); the `Sender` keeps a copy of ``closed`` and of whether calls are taken, under its
  gate, for the threads that send.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Literal, Protocol

import trio

from codec import FLAG_RESPONSE, CodecError

from ..._log import log
from .._sansio._connection_core import RECEIVE_BYTES, ConnectionCore
from ._sender import Sender

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable

    from codec import RemotingCommand

    from ..._config import ConnectionSettings
    from ..._observability._statistics import Counters
    from ._transport import Transport

__all__ = ["Connection", "ConnectionOwner", "Suspension"]


class Suspension(Protocol):
    """An async processor that suspended in its first step, owned by the reader that ran it."""

    def finish(self) -> Awaitable[None]:
        """Run it to the end and deliver its response."""
        ...


class ConnectionOwner(Protocol):
    """What a connection tells its owner, and nothing else."""

    def request_received(self, conn: Connection, request: RemotingCommand
                         ) -> Suspension | None:
        """Dispatch a request; a `Suspension` must be finished by the calling task."""
        ...

    def response_received(self, conn: Connection, response: RemotingCommand) -> None:
        """Complete the call ``response`` answers."""
        ...

    def read_done(self, conn: Connection) -> None:
        """Every command of one read was handed over."""
        ...

    def reader_started(self) -> None:
        """The calling task reads a connection from now on (it runs async processors' first
        steps: `_first_step`)."""
        ...

    def connection_closed(self, conn: Connection) -> None:
        """The connection is closed and its transport released."""
        ...


class Connection(ConnectionCore):
    """A live connection to a peer, owned by an endpoint (see the module docstring)."""

    def __init__(
        self, transport: Transport, remote_addr: str, owner: ConnectionOwner,
        config: ConnectionSettings, counters: Counters, *,
        role: Literal["client", "server"], addr_key: str | None = None,
        max_processing: int = 0,
        call_on_loop: Callable[[Callable[[], object]], bool] = lambda fn: False,
    ) -> None:
        self._now = trio.lowlevel.current_clock().current_time  # the loop's clock, bound once
        super().__init__(remote_addr, config, self._now(), role=role, addr_key=addr_key,
                         max_processing=max_processing)
        self._transport = transport
        self.sender = sender = Sender(
            transport, counters, high_water=self.high_water,
            low_water=config.write_buffer_low_water_mark, on_failure=self.failed,
            call_on_loop=call_on_loop, now=self._now)
        # the sender's methods are the connection's: no wrapper call on the hot path
        self.send = sender.send
        self.flush = sender.flush
        self.send_from_thread = sender.send_from_thread
        self.wait_writable = sender.wait_writable
        self.wait_flushed = sender.wait_flushed
        self.outbound = sender.outbound
        self._owner = owner
        self._call_on_loop = call_on_loop
        self._on_request = owner.request_received
        self._on_response: Callable[[Connection, RemotingCommand], None] = (
            owner.response_received)
        self._counters = counters
        self._resume_reading: trio.Event | None = None  # set when processing falls below max
        self._held: RemotingCommand | None = None  # a request read at max_processing
        self._on_idle: Callable[[Connection], None] | None = None  # see divert_responses
        self._nursery: trio.Nursery | None = None

    def __repr__(self) -> str:
        return f"<Connection #{self.id} {self.remote_addr}{' closed' if self.closed else ''}>"

    @property
    def tls_version(self) -> str | None:
        """The TLS version in use, or None for plain TCP."""
        return self._transport.tls_version

    @property
    def queued_bytes(self) -> int:
        """Bytes queued for sending, or being sent, and not yet taken by the socket."""
        return self.sender.outbound.size

    @property
    def last_activity(self) -> float:
        """When this connection last received or sent (the loop's clock)."""
        return max(self.last_read, self.sender.last_sent)

    # ------------------------------------------------------------------ receiving

    def divert_responses(self, fn: Callable[[Connection, RemotingCommand], None],
                         on_idle: Callable[[Connection], None]) -> None:
        """Hand the responses of the reads to come to ``fn`` instead of the owner, and call
        ``on_idle(self)`` each time none of its requests is left in processing."""
        self._on_response = fn
        self._on_idle = on_idle

    def processing_done(self) -> None:
        """One of this connection's requests finished processing."""
        self.processing -= 1
        resume = self._resume_reading
        if resume is not None and self.processing < self.max_processing:
            self._resume_reading = None
            resume.set()
        if self._on_idle is not None and not self.processing:
            self._on_idle(self)

    def hold(self) -> bool:
        """Only queue from now on (a burst of replies); True if this call began holding."""
        if self.sender.holding:
            return False
        self.sender.holding = True
        return True

    def flush_held(self) -> None:
        """End a burst begun with `hold`: send what was queued."""
        self.sender.holding = False
        self.flush()

    async def _read(self) -> None:
        self._owner.reader_started()
        pause_reading = self.role == "server"
        while True:
            suspension = self._dispatch_buffered()
            if suspension is not None:
                await self._hand_over(suspension)
                return
            if self._held is not None and self.processing >= self.max_processing:
                self._resume_reading = resume = trio.Event()  # reads pause: back-pressure
                await resume.wait()
                self.reading_resumed(self._now())  # no peer's delay: its clocks restart
                continue
            if pause_reading and self.sender.outbound.size > self.high_water:
                await self.wait_writable()
                self.reading_resumed(self._now())
            if not await self._receive():
                return

    def _dispatch_buffered(self) -> Suspension | None:
        """Hand every complete command buffered to the owner; flush what they queued."""
        decoder = self._decoder
        limit = self.max_processing
        on_request = self._on_request
        on_response = self._on_response
        sender = self.sender
        state = self.state
        sender.holding = True
        decoded = 0
        try:
            held = self._held  # a request that came while ``limit`` were in processing
            if held is not None:
                if self.processing >= limit or state.closed:
                    return None
                self._held = None
                suspension = on_request(self, held)
                if suspension is not None:
                    return suspension
            # closed by what a command did (misbehaving, a processor's close): read no further
            while not state.closed and (cmd := decoder.next_command()) is not None:
                decoded += 1
                # answers are taken at the limit too: a call back waits on one
                if cmd.flag & FLAG_RESPONSE:
                    on_response(self, cmd)
                elif limit and self.processing >= limit:
                    self._held = cmd
                    break
                else:
                    suspension = on_request(self, cmd)
                    if suspension is not None:
                        return suspension
            return None
        finally:
            sender.holding = False
            sender.read_handled()
            if decoded or held is not None:
                self._owner.read_done(self)
                if sender.outbound:
                    sender.flush()
            self.read_handled(bool(decoded))

    async def _hand_over(self, suspension: Suspension) -> None:
        try:
            assert self._nursery is not None
            self._nursery.start_soon(self._guard, self._read, "read")
        finally:
            await suspension.finish()

    async def _receive(self) -> bool:
        """Receive once into the decoder; False if the connection is to end."""
        stall_at = self.stall_at
        if stall_at is None:
            count = await self._receive_once()
        else:
            count = -1
            with trio.move_on_at(stall_at):
                count = await self._receive_once()
            if count < 0:
                self.stalled()
                return False
        if not count:
            self.close(self.eof_reason())
            return False
        self._counters.bytes_read += count
        self.received(self._now())
        return True

    async def _receive_once(self) -> int:
        """Receive into the decoder: the rest of a large frame straight into place (a pooled
        buffer), else a chunk. Return the byte count (0: end of stream)."""
        transport = self._transport
        into = self.receive_buffer(transport.receives_into)
        if into is None:
            data = await transport.receive(RECEIVE_BYTES)
            if data:
                self._decoder.feed(data)
            return len(data)
        count = await transport.receive_into(into)
        if count:
            self._decoder.buffer_updated(count)
        return count

    # ------------------------------------------------------------------ lifecycle

    async def run(self) -> None:
        """Serve the connection until it closes; the owner is told in every case."""
        try:
            if not self.closed:
                async with trio.open_nursery() as nursery:
                    self._nursery = nursery
                    nursery.start_soon(self._guard, self.sender.run_writer, "write")
                    await self._guard(self._read, "read")
        finally:
            self.state.handle("close")  # if nothing closed it before: shut down
            callbacks = self.sender.shut()
            if self._resume_reading is not None:
                self._resume_reading.set()
            for fn in callbacks:
                fn()
            self.forget_lent()
            with trio.CancelScope(shield=True):
                try:
                    await self._transport.aclose()
                except (trio.BrokenResourceError, trio.ClosedResourceError, OSError):
                    pass
            self.state.handle("released")
            self._owner.connection_closed(self)
            log.info("connection.closed", conn_id=self.id, peer=self.remote_addr,
                     role=self.role, reason=self.close_reason or "shut down")

    async def _guard(self, fn: Callable[[], Awaitable[None]], what: str) -> None:
        try:
            await fn()
        except CodecError as exc:
            self.codec_failed(exc)
        except (trio.BrokenResourceError, trio.ClosedResourceError, OSError) as exc:
            self.failed(what, exc)
        except Exception as exc:  # a bug (ours or a hook's): lose this connection, not all
            log.error("connection.failed", conn_id=self.id, peer=self.remote_addr,
                      during=what, exc_info=True)
            self.close(f"{what} failed: {exc!r}", broken=True)

    def request_close(self, reason: str) -> bool:
        """Close from any thread (on the loop thread, through the inbox); False if the loop
        has ended (the connection is closed then anyway)."""
        return self._call_on_loop(lambda: self.close(reason))

    def go_away(self) -> None:
        """The peer answered GO_AWAY: take no new call here (nor from a thread, nor one
        waiting for room, `Sender.refuse_calls`); what is on it finishes. Loop thread."""
        if self.state.handle("go_away"):
            self.sender.refuse_calls()

    def close(self, reason: str = "closed locally", *, broken: bool = False) -> None:
        """Close the connection (idempotent, sync; the first close counts: its reason, and
        whether it ``broken``); pending requests fail right after."""
        if not self.state.handle("close", reason, broken=broken):
            return
        if self._nursery is not None:
            self._nursery.cancel_scope.cancel()
        self.sender.closed = True  # no thread sends any more (set under the gate at run's end)
        self.sender.wake_all()
        if self._resume_reading is not None:
            self._resume_reading.set()
