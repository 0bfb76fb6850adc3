"""A fault-injecting TCP proxy in trio, for tests on 127.0.0.1 only.

    proxy = FaultProxy(server_port)
    port = await nursery.start(proxy.serve)          # listens on 127.0.0.1:0
    proxy.fault = Fault(latency=0.02, jitter=0.03)   # applies to connections accepted from now
    proxy.fault = Fault(reset_after_frames=2)        # RST (SO_LINGER 0) in the middle of frame 3
    proxy.fault = Fault(stall_after_frames=1)        # half-open: stop forwarding, keep sockets
    proxy.fault = Fault(drop=0.05, duplicate=0.05)   # each answer lost or sent twice, at random
    proxy.heal()                                     # pass-through again (stalled links stay)

Theory of operation:
- Each accepted connection is a `_Link` to a fresh connection to the target, with one reader
  and one writer task per direction joined by a memory channel. The reader stamps each chunk
  with its due time (now + latency + jitter, never earlier than the previous chunk's, so order
  is kept); the writer sleeps until then and sends it, whole or one byte per send.
- A link starts with the `Fault` in force when it was accepted; `FaultProxy.heal` clears it on
  live links too (the network is healthy again), but a stalled link stays stalled.
- Resets and stalls count frames of the remoting protocol (4-byte big-endian length prefix) in
  ``direction``: ``*_after_frames`` whole frames pass, then half of the next one, then the fault
  happens. That puts it in the middle of a frame, the worst place for the peer's decoder.
- Reset: both sockets get SO_LINGER(on, 0) and are closed, so both peers see a RST. Stall: both
  directions stop forwarding and the sockets stay open until the proxy stops (``serve`` is
  cancelled), so neither peer gets an EOF: a half-open connection.
- Drop and duplicate: in ``direction``, the stream is cut into whole frames (the same length
  prefix) and each frame is dropped, or forwarded twice, with its probability; a frame
  forwarded keeps its place in the byte order.
"""

from __future__ import annotations

import random
import socket
import struct
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, Literal

import trio
import trio.lowlevel

__all__ = ["Fault", "FaultProxy", "proxy_thread"]

RECEIVE_BYTES = 64 * 1024
_LINGER_RESET = struct.pack("ii", 1, 0)


@dataclass(frozen=True, kw_only=True)
class Fault:
    """What the proxy does to a connection (the default forwards untouched).

    Attributes:
        latency: seconds added to every chunk, both directions.
        jitter: plus a uniform random delay in [0, jitter); the byte order is kept.
        bytewise: deliver one byte per send.
        reset_after_frames: in ``direction``, forward this many whole frames and half of the
            next, then reset both sides (SO_LINGER 0).
        stall_after_frames: the same count, then stop forwarding both ways without closing.
        drop: in ``direction``, the probability that a whole frame is not forwarded.
        duplicate: in ``direction``, the probability that a whole frame is forwarded twice.
        direction: ``"down"`` (server to client) or ``"up"`` (client to server).
    """

    latency: float = 0.0
    jitter: float = 0.0
    bytewise: bool = False
    reset_after_frames: int | None = None
    stall_after_frames: int | None = None
    drop: float = 0.0
    duplicate: float = 0.0
    direction: Literal["up", "down"] = "down"


class _FrameCutter:
    """Find the offset, in a byte stream, of the middle of frame number ``after`` (0-based)."""

    def __init__(self, after: int) -> None:
        self.after = after
        self.frames = 0
        self.seen = 0
        self.prefix = bytearray()
        self.remaining = 0
        self.cut_at: int | None = None  # absolute offset

    def feed(self, data: bytes) -> int | None:
        """Account for ``data``; return where to cut inside it, or None."""
        base = self.seen
        self.seen += len(data)
        i = 0
        while i < len(data) and self.cut_at is None:
            if self.remaining:
                step = min(self.remaining, len(data) - i)
                self.remaining -= step
                i += step
                continue
            take = data[i : i + 4 - len(self.prefix)]
            self.prefix += take
            i += len(take)
            if len(self.prefix) == 4:
                (length,) = struct.unpack(">i", self.prefix)
                self.prefix.clear()
                body = max(length, 0)
                if self.frames == self.after:
                    self.cut_at = base + i - 4 + max(1, (4 + body) // 2)
                self.frames += 1
                self.remaining = body
        if self.cut_at is not None and base <= self.cut_at < self.seen:
            return self.cut_at - base
        return None


def _whole_frames(buffer: bytearray, fault: Fault, rng: random.Random) -> bytes:
    """Take the whole frames out of ``buffer``; return them as forwarded: each dropped, or
    sent twice, with the fault's probabilities (the rest of a frame stays in ``buffer``)."""
    out = bytearray()
    while len(buffer) >= 4:
        (length,) = struct.unpack(">i", buffer[:4])
        size = 4 + max(length, 0)
        if len(buffer) < size:
            break
        frame = bytes(buffer[:size])
        del buffer[:size]
        roll = rng.random()
        if roll < fault.drop:
            continue
        out += frame
        if roll < fault.drop + fault.duplicate:
            out += frame
    return bytes(out)


class _Link:
    def __init__(self, proxy: FaultProxy, client: trio.SocketStream, server: trio.SocketStream,
                 fault: Fault) -> None:
        self.proxy = proxy
        self.client = client
        self.server = server
        self.fault = fault
        self.stalled = False
        self.scope: trio.CancelScope | None = None

    async def run(self) -> None:
        with trio.CancelScope() as self.scope:
            async with trio.open_nursery() as nursery:
                for direction, src, dst in (("up", self.client, self.server),
                                            ("down", self.server, self.client)):
                    send, receive = trio.open_memory_channel[Any](1024)
                    nursery.start_soon(self._read, direction, src, send)
                    nursery.start_soon(self._write, dst, receive)

    async def _read(self, direction: str, src: trio.SocketStream,
                    out: trio.MemorySendChannel[Any]) -> None:
        accepted_with = self.fault
        after = accepted_with.reset_after_frames
        if after is None:
            after = accepted_with.stall_after_frames
        cutter = _FrameCutter(after) if after is not None else None
        rng = self.proxy.rng
        last_due = 0.0
        frames = bytearray()  # bytes of a frame not yet whole (drop / duplicate faults)
        async with out:
            while True:
                try:
                    data = await src.receive_some(RECEIVE_BYTES)
                except (trio.BrokenResourceError, trio.ClosedResourceError):
                    data = b""
                if self.stalled:
                    await trio.sleep_forever()
                if not data:
                    await out.send(("eof", 0.0, b""))
                    return
                fault = self.fault  # heal() may have replaced it
                due = trio.current_time() + fault.latency + (
                    rng.uniform(0, fault.jitter) if fault.jitter else 0.0)
                due = last_due = max(due, last_due)
                if (fault.drop or fault.duplicate) and fault.direction == direction:
                    frames.extend(data)
                    data = _whole_frames(frames, fault, rng)
                    if not data:
                        continue
                cut = cutter.feed(data) if cutter is not None else None
                if cut is None or fault.direction != direction or (
                        fault.reset_after_frames is None and fault.stall_after_frames is None):
                    await out.send(("data", due, data))
                    continue
                await out.send(("data", due, data[:cut]))
                await out.send(("reset" if fault.reset_after_frames is not None else "stall",
                                due, b""))
                await trio.sleep_forever()

    async def _write(self, dst: trio.SocketStream, items: trio.MemoryReceiveChannel[Any]
                     ) -> None:
        async with items:
            async for kind, due, data in items:
                await trio.sleep_until(due)
                if self.stalled:
                    await trio.sleep_forever()
                try:
                    if kind == "data":
                        if self.fault.bytewise:
                            for i in range(len(data)):
                                await dst.send_all(data[i : i + 1])
                                await trio.lowlevel.checkpoint()
                        else:
                            await dst.send_all(data)
                    elif kind == "eof":
                        await dst.send_eof()
                    elif kind == "reset":
                        await self.reset()
                    else:
                        self.stalled = True
                        self.proxy.stalls += 1
                        await trio.sleep_forever()
                except (trio.BrokenResourceError, trio.ClosedResourceError):
                    self.close()  # a peer went away: let the other one see it too

    def close(self) -> None:
        """End the link; `FaultProxy._handle` closes both sockets."""
        assert self.scope is not None
        self.scope.cancel()

    async def reset(self) -> None:
        """Abort both sides with a RST and end the link."""
        self.proxy.resets += 1
        for stream in (self.client, self.server):
            try:
                stream.socket.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, _LINGER_RESET)
            except OSError:
                pass
            await stream.aclose()
        self.close()


class FaultProxy:
    """Forward 127.0.0.1:<port> to a target, injecting the current `Fault`.

    Attributes:
        fault: the fault applied to connections accepted from now on.
        accepted: connections accepted so far.
        resets, stalls: faults carried out so far.
    """

    def __init__(self, target_port: int, target_host: str = "127.0.0.1", *, seed: int = 0
                 ) -> None:
        self.target = (target_host, target_port)
        self.fault = Fault()
        self.port: int | None = None
        self.accepted = 0
        self.resets = 0
        self.stalls = 0
        self.rng = random.Random(seed)
        self._links: set[_Link] = set()

    def heal(self) -> None:
        """Forward untouched from now on, on live links too (stalled ones stay stalled)."""
        self.fault = Fault()
        for link in self._links:
            link.fault = Fault()

    async def serve(self, *, task_status: Any = trio.TASK_STATUS_IGNORED) -> None:
        """Listen on 127.0.0.1:0 until cancelled; ``task_status.started(port)``."""
        listeners = await trio.open_tcp_listeners(0, host="127.0.0.1")
        self.port = listeners[0].socket.getsockname()[1]
        async with trio.open_nursery() as nursery:
            await nursery.start(trio.serve_listeners, self._handle, listeners)
            task_status.started(self.port)

    async def _handle(self, client: trio.SocketStream) -> None:
        self.accepted += 1
        fault = self.fault
        try:
            server = await trio.open_tcp_stream(*self.target)
        except OSError:
            await client.aclose()
            return
        link = _Link(self, client, server, fault)
        self._links.add(link)
        try:
            await link.run()
        finally:
            self._links.discard(link)
            with trio.CancelScope(shield=True):
                await client.aclose()
                await server.aclose()


@contextmanager
def proxy_thread(target_port: int, fault: Fault, *, seed: int = 0) -> Iterator[FaultProxy]:
    """Run a `FaultProxy` to ``target_port`` on a thread of its own, for tests whose clients
    are threads; it stops (and its thread ends) when the block exits."""
    proxy = FaultProxy(target_port, seed=seed)
    proxy.fault = fault
    started = threading.Event()
    handles: dict[str, Any] = {}

    async def main() -> None:
        handles["token"] = trio.lowlevel.current_trio_token()
        async with trio.open_nursery() as nursery:
            handles["scope"] = nursery.cancel_scope
            await nursery.start(proxy.serve)
            started.set()

    thread = threading.Thread(target=trio.run, args=(main,), name="fault-proxy", daemon=True)
    thread.start()
    if not started.wait(10):
        raise RuntimeError("the fault proxy did not start")
    try:
        yield proxy
    finally:
        handles["token"].run_sync_soon(handles["scope"].cancel)
        thread.join(10)
