"""Subprocess entry points for bench/rpc.py: the servers and the clients it measures.

Every function here runs in a process of its own started by bench/rpc.py (multiprocessing,
"spawn"). Each process pins itself to one CPU first (before any thread exists, so every thread
it starts inherits the pin) and sets the library's loggers to WARNING.

Servers: ``server_main(kind, cpu, conn)`` sends ``("ready", port)``, serves until the parent
sends anything (or closes the pipe), then shuts down cleanly and returns.
Clients: ``client_main(kind, addr, modes, params, cpu, conn)`` runs the modes in order against
``addr`` and sends ``("ok", {mode: result})`` or ``("error", traceback)``.
"""

from __future__ import annotations

import contextlib
import gc
import itertools
import logging
import os
import struct
import threading
import time
import traceback
from collections import deque
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from functools import partial
from typing import Any

CODE = 100  # any request code: the servers register a default processor
TIMEOUT = 30.0  # generous: a timeout in a benchmark is a failure, not a data point
WINDOW = 64  # requests in flight for the pipelined cases
RECEIVE_BYTES = 256 * 1024  # same as remoting._connection.RECEIVE_BYTES
BIG_FRAME_LIMIT = 64 * 1024 * 1024
_HDR = struct.Struct(">II")  # raw framing: length (bytes after it), header word
_LEN = struct.Struct(">I").unpack_from


# ---------------------------------------------------------------------- process setup


# CPU seconds spent in the cyclic GC; the thread CPU clock at the start of the current
# collection (collections run under the GIL, one at a time, in the allocating thread).
_gc_seconds = [0.0, 0.0]


def _gc_timer(phase: str, info: dict[str, int]) -> None:
    if phase == "start":
        _gc_seconds[1] = time.thread_time()
    else:
        _gc_seconds[0] += time.thread_time() - _gc_seconds[1]


def _setup(cpu: int | None) -> None:
    if cpu is not None and hasattr(os, "sched_setaffinity"):
        os.sched_setaffinity(0, {cpu})
    gc.callbacks.append(_gc_timer)
    logging.getLogger("remoting").setLevel(logging.WARNING)


# ---------------------------------------------------------------------- servers


def server_main(kind: str, cpu: int | None, conn: Any) -> None:
    """Serve ``kind`` ("raw", "grpc", "ours-async", "ours-pool") until told to stop."""
    _setup(cpu)
    if kind == "grpc":
        _grpc_server(conn)
        return
    import trio

    if kind == "raw":
        trio.run(_raw_server, conn)
    elif kind in ("ours-async", "ours-pool"):
        trio.run(_ours_server, kind, conn)
    else:
        raise ValueError(f"unknown server kind {kind!r}")


async def _wait_stop(conn: Any) -> None:
    import trio

    try:
        await trio.to_thread.run_sync(conn.recv, abandon_on_cancel=True)
    except EOFError:  # the parent went away: stop too
        pass


async def _ours_server(kind: str, conn: Any) -> None:
    import trio

    from processors import AsyncEchoProcessor, EchoProcessor
    from remoting import ServerConfig, TrioRemotingServer

    server = TrioRemotingServer(ServerConfig(bind_address="127.0.0.1",
                                             max_frame_bytes=BIG_FRAME_LIMIT))
    if kind == "ours-async":
        server.register_default_processor(AsyncEchoProcessor())
    else:
        server.register_default_processor(EchoProcessor())  # default pool: 4 threads
    async with trio.open_nursery() as nursery:
        port = await nursery.start(server.serve)
        conn.send(("ready", port, os.getpid()))
        await _wait_stop(conn)
        nursery.cancel_scope.cancel()


async def _raw_echo(stream: Any) -> None:
    """Echo every complete frame back; all frames completed by one read go in one send."""
    import trio

    buf = bytearray()
    try:
        while True:
            data = await stream.receive_some(RECEIVE_BYTES)
            if not data:
                return
            buf += data
            size = len(buf)
            pos = 0
            while size - pos >= 8:
                end = pos + 4 + _LEN(buf, pos)[0]
                if end > size:
                    break
                pos = end
            if pos == size:  # only whole frames buffered (the usual case): send them all
                out, buf = buf, bytearray()
                await stream.send_all(out)
            elif pos:
                out = buf[:pos]
                del buf[:pos]
                await stream.send_all(out)
    except (trio.BrokenResourceError, trio.ClosedResourceError):
        return
    finally:
        await stream.aclose()


async def _raw_server(conn: Any) -> None:
    import trio

    listeners = await trio.open_tcp_listeners(0, host="127.0.0.1")
    port = listeners[0].socket.getsockname()[1]
    async with trio.open_nursery() as nursery:
        nursery.start_soon(partial(trio.serve_listeners, _raw_echo, listeners))
        conn.send(("ready", port, os.getpid()))
        await _wait_stop(conn)
        nursery.cancel_scope.cancel()


GRPC_METHOD = "/bench.Echo/Echo"
GRPC_SERVER_THREADS = 64
GRPC_OPTIONS = [
    ("grpc.max_receive_message_length", BIG_FRAME_LIMIT),
    ("grpc.max_send_message_length", BIG_FRAME_LIMIT),
]


def _grpc_echo(request: bytes, context: Any) -> bytes:
    return request


def _grpc_server(conn: Any) -> None:
    from concurrent.futures import ThreadPoolExecutor

    import grpc

    # No (de)serializers: the handler gets and returns the raw bytes (identity).
    handler = grpc.method_handlers_generic_handler(
        "bench.Echo", {"Echo": grpc.unary_unary_rpc_method_handler(_grpc_echo)}
    )
    server = grpc.server(ThreadPoolExecutor(max_workers=GRPC_SERVER_THREADS),
                         options=GRPC_OPTIONS)
    server.add_generic_rpc_handlers((handler,))
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    try:
        conn.send(("ready", port, os.getpid()))
        try:
            conn.recv()
        except EOFError:
            pass
    finally:
        server.stop(grace=None).wait(10)


# ---------------------------------------------------------------------- clients


def client_main(kind: str, addr: str, modes: list[str], params: dict[str, Any],
                cpu: int | None, conn: Any) -> None:
    """Run ``modes`` with the ``kind`` client against ``addr``; send the results back.

    Each result is a dict: ``n`` operations, ``wall`` seconds, and per operation the CPU time
    of the client and of the server process (``cli_us``, ``srv_us``) and their run-queue wait
    (``cli_wait_us``, ``srv_wait_us``: runnable but not running, i.e. CPU contention), the
    client's CPU time in the cyclic garbage collector (``cli_gc_us``); plus
    ``p50``/``p99``/``mean`` (µs) for latency, ``rps`` for pipelined modes, ``mibs`` for 1 MiB.
    """
    _setup(cpu)
    report(conn, partial(_client, kind, addr, modes, params))


def _client(kind: str, addr: str, modes: list[str], params: dict[str, Any]) -> dict[str, Any]:
    if kind == "blocking":
        return _ours_blocking_client(addr, modes, params)
    if kind == "grpc":
        return _grpc_client(addr, modes, params)
    import trio

    if kind == "trio":
        return trio.run(_ours_trio_client, addr, modes, params)  # type: ignore[no-any-return]
    if kind == "raw":
        return trio.run(_raw_client, addr, modes, params)  # type: ignore[no-any-return]
    raise ValueError(f"unknown client kind {kind!r}")


def report(conn: Any, run: Callable[[], dict[str, Any]]) -> None:
    """Send ``run()``'s results, or its traceback, to the parent."""
    try:
        out = run()
    except BaseException:
        conn.send(("error", traceback.format_exc()))
        return
    conn.send(("ok", out))


def _sched(pid: int | None) -> tuple[int, int] | None:
    """Return (ns on CPU, ns waiting on a run queue) summed over the threads of ``pid``."""
    if pid is None:
        return None
    run = wait = 0
    try:
        tids = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return None
    for tid in tids:
        try:
            with open(f"/proc/{pid}/task/{tid}/schedstat") as f:
                a, b, _ = f.read().split()
        except (OSError, ValueError):
            continue  # the thread ended meanwhile
        run += int(a)
        wait += int(b)
    return run, wait


def _switches(pid: int) -> tuple[int, int]:
    """Return (voluntary, involuntary) context switches summed over the threads of ``pid``."""
    vol = invol = 0
    try:
        tids = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return 0, 0
    for tid in tids:
        try:
            with open(f"/proc/{pid}/task/{tid}/status") as f:
                for line in f:
                    if line.startswith("voluntary_ctxt_switches"):
                        vol += int(line.split()[1])
                    elif line.startswith("nonvoluntary_ctxt_switches"):
                        invol += int(line.split()[1])
        except (OSError, ValueError):
            continue  # the thread ended meanwhile
    return vol, invol


class _Meter:
    """Wall time, and CPU and run-queue time of this process and the server, for one section.

    Threads that end inside the section are not counted (grpcio's and ours live long).
    """

    def __init__(self, server_pid: int | None) -> None:
        self.pids = (os.getpid(), server_pid)

    def __enter__(self) -> _Meter:
        self._s0 = [_sched(pid) for pid in self.pids]
        self._cs0 = _switches(self.pids[0])
        self._gc0 = _gc_seconds[0]
        self._t0 = time.perf_counter()
        return self

    def __exit__(self, *exc: object) -> None:
        self.wall = time.perf_counter() - self._t0
        self.gc = _gc_seconds[0] - self._gc0
        self._s1 = [_sched(pid) for pid in self.pids]
        self._cs1 = _switches(self.pids[0])

    def result(self, n: int, **extra: float) -> dict[str, float]:
        out: dict[str, float] = {"n": n, "wall": self.wall, "cli_gc_us": self.gc * 1e6 / n,
                                 "cli_vcs": (self._cs1[0] - self._cs0[0]) / n,
                                 "cli_ivcs": (self._cs1[1] - self._cs0[1]) / n}
        for who, a, b in zip(("cli", "srv"), self._s0, self._s1, strict=True):
            if a is not None and b is not None:
                out[f"{who}_us"] = (b[0] - a[0]) / 1000.0 / n
                out[f"{who}_wait_us"] = (b[1] - a[1]) / 1000.0 / n
        out.update(extra)
        return out


def _latency(samples_ns: list[int]) -> dict[str, float]:
    s = sorted(samples_ns)
    n = len(s)

    def q(p: float) -> float:
        return s[min(n - 1, int(p * n))] / 1000.0

    return {"p50": q(0.50), "p99": q(0.99), "mean": sum(s) / n / 1000.0}


def _check(response: Any, size: int) -> None:
    if isinstance(response, BaseException):
        raise RuntimeError(f"call failed: {response!r}")
    if response.code != 0 or len(response.body or b"") != size:
        raise RuntimeError(f"bad echo: code={response.code} remark={response.remark!r}")


class _Runner:
    """The measuring loops shared by all clients, for sync (blocking, grpcio) code."""

    def __init__(self, p: dict[str, Any]) -> None:
        self.p = p
        self.server_pid = p.get("server_pid")

    def latency(self, call: Any, payload: Any) -> dict[str, float]:
        p = self.p
        for _ in range(p["warm_lat"]):
            call(payload)
        pc = time.perf_counter_ns
        samples = []
        with _Meter(self.server_pid) as m:
            for _ in range(p["n_lat"]):
                t0 = pc()
                call(payload)
                samples.append(pc() - t0)
        return m.result(p["n_lat"], **_latency(samples))

    def pipelined(self, fn: Any, n: int, warm: int) -> dict[str, float]:
        fn(warm)
        if self.p.get("duration"):  # profiling: keep the load on for a while
            done = 0
            with _Meter(self.server_pid) as m:
                t0 = time.perf_counter()
                while time.perf_counter() - t0 < self.p["duration"]:
                    fn(n)
                    done += n
            return m.result(done, rps=done / m.wall)
        with _Meter(self.server_pid) as m:
            fn(n)
        return m.result(n, rps=n / m.wall)

    def mib(self, call: Any, payload: Any, size: int) -> dict[str, float]:
        p = self.p
        for _ in range(p["warm_mib"]):
            call(payload)
        with _Meter(self.server_pid) as m:
            for _ in range(p["n_mib"]):
                call(payload)
        return m.result(p["n_mib"], mibs=p["n_mib"] * size / (1 << 20) / m.wall)


class _AsyncRunner(_Runner):
    """The same loops for trio code."""

    async def latency(self, call: Any, payload: Any) -> dict[str, float]:  # type: ignore[override]
        p = self.p
        for _ in range(p["warm_lat"]):
            await call(payload)
        pc = time.perf_counter_ns
        samples = []
        with _Meter(self.server_pid) as m:
            for _ in range(p["n_lat"]):
                t0 = pc()
                await call(payload)
                samples.append(pc() - t0)
        return m.result(p["n_lat"], **_latency(samples))

    async def pipelined(self, fn: Any, n: int, warm: int) -> dict[str, float]:  # type: ignore[override]
        await fn(warm)
        if self.p.get("duration"):
            done = 0
            with _Meter(self.server_pid) as m:
                t0 = time.perf_counter()
                while time.perf_counter() - t0 < self.p["duration"]:
                    await fn(n)
                    done += n
            return m.result(done, rps=done / m.wall)
        with _Meter(self.server_pid) as m:
            await fn(n)
        return m.result(n, rps=n / m.wall)

    async def mib(self, call: Any, payload: Any, size: int) -> dict[str, float]:  # type: ignore[override]
        p = self.p
        for _ in range(p["warm_mib"]):
            await call(payload)
        with _Meter(self.server_pid) as m:
            for _ in range(p["n_mib"]):
                await call(payload)
        return m.result(p["n_mib"], mibs=p["n_mib"] * size / (1 << 20) / m.wall)


async def _ours_trio_client(addr: str, modes: list[str], p: dict[str, Any]) -> dict[str, Any]:
    import trio

    import remoting
    from remoting import ClientConfig, RemotingCommand

    create = RemotingCommand.create_request
    body = b"x" * p["body"]
    big = b"\xab" * p["big"]
    run = _AsyncRunner(p)
    out: dict[str, Any] = {}
    async with remoting.open_client(ClientConfig(max_frame_bytes=BIG_FRAME_LIMIT)) as c:

        async def call(b: bytes) -> None:
            _check(await c.invoke_sync(addr, create(CODE, body=b), TIMEOUT), len(b))

        async def tasks64(n: int) -> None:
            remaining = n

            async def worker() -> None:
                nonlocal remaining
                while remaining > 0:
                    remaining -= 1
                    await call(body)

            async with trio.open_nursery() as nursery:
                for _ in range(WINDOW):
                    nursery.start_soon(worker)

        async def window64(n: int) -> None:
            q: deque[Any] = deque()
            for _ in range(n):
                if len(q) >= WINDOW:
                    _check(await q.popleft().wait(), len(body))
                q.append(await c.invoke_async(addr, create(CODE, body=body), TIMEOUT))
            while q:
                _check(await q.popleft().wait(), len(body))

        async def many64(n: int) -> None:
            requests = [create(CODE, body=body) for _ in range(n)]
            for r in await c.invoke_many(addr, requests, TIMEOUT, limit=WINDOW):
                _check(r, len(body))

        pipelined = {"tasks64": tasks64, "window64": window64, "many64": many64}
        for mode in modes:
            if mode == "latency":
                out[mode] = await run.latency(call, body)
            elif mode in pipelined:
                out[mode] = await run.pipelined(pipelined[mode], p["n_tput"], p["warm_tput"])
            elif mode == "mib":
                out[mode] = await run.mib(call, big, len(big))
            else:
                raise ValueError(f"unknown mode {mode!r} for the trio client")
    return out


def _ours_blocking_client(addr: str, modes: list[str], p: dict[str, Any]) -> dict[str, Any]:
    from remoting import ClientConfig, RemotingClient, RemotingCommand

    create = RemotingCommand.create_request
    body = b"x" * p["body"]
    big = b"\xab" * p["big"]
    run = _Runner(p)
    out: dict[str, Any] = {}
    with contextlib.ExitStack() as stack:
        io = {"io": p["io"]} if "io" in p else {}  # (a checkout before issue 22 has none)
        c = stack.enter_context(RemotingClient(ClientConfig(max_frame_bytes=BIG_FRAME_LIMIT,
                                                            **io)))

        def call(b: bytes) -> None:
            _check(c.invoke_sync(addr, create(CODE, body=b), TIMEOUT), len(b))

        def many64(n: int) -> None:
            requests = [create(CODE, body=body) for _ in range(n)]
            for r in c.invoke_many(addr, requests, TIMEOUT, limit=WINDOW):
                _check(r, len(body))

        # 64 threads sharing the client, each looping invoke_sync; made once, so that the
        # meter counts their CPU time (it counts the threads alive at both ends of a section)
        pool = ThreadPoolExecutor(WINDOW, thread_name_prefix="bench-caller")
        stack.callback(pool.shutdown)

        def threads64(n: int) -> None:
            remaining = [n]
            lock = threading.Lock()

            def worker() -> None:
                while True:
                    with lock:
                        if remaining[0] <= 0:
                            return
                        remaining[0] -= 1
                    call(body)

            for f in [pool.submit(worker) for _ in range(WINDOW)]:
                f.result()

        def window64(n: int) -> None:  # invoke_async with a callback, 64 in flight
            room = threading.Semaphore(WINDOW)
            done = threading.Semaphore(0)
            failed: list[BaseException] = []

            def on_done(fut: Any) -> None:
                try:
                    _check(fut.result(0), len(body))
                except BaseException as exc:
                    failed.append(exc)
                room.release()
                done.release()

            for _ in range(n):
                room.acquire()
                c.invoke_async(addr, create(CODE, body=body), TIMEOUT, callback=on_done)
            for _ in range(n):
                done.acquire()
            if failed:
                raise failed[0]

        pipelined = {"many64": many64, "threads64": threads64, "window64": window64}
        for mode in modes:
            if mode == "latency":
                out[mode] = run.latency(call, body)
            elif mode in pipelined:
                out[mode] = run.pipelined(pipelined[mode], p["n_tput"], p["warm_tput"])
            elif mode == "mib":
                out[mode] = run.mib(call, big, len(big))
            else:
                raise ValueError(f"unknown mode {mode!r} for the blocking client")
    return out


class _RawReader:
    """Reads whole frames (4-byte length + rest) from a trio stream."""

    def __init__(self, stream: Any) -> None:
        self.stream = stream
        self.buf = bytearray()

    async def frame_length(self) -> int:
        """Wait for the next whole frame, consume it, return its size (prefix included)."""
        buf = self.buf
        while True:
            if len(buf) >= 8:
                end = 4 + _LEN(buf, 0)[0]
                if len(buf) >= end:
                    del buf[:end]
                    return end
            data = await self.stream.receive_some(RECEIVE_BYTES)
            if not data:
                raise RuntimeError("raw server closed the connection")
            buf += data

    async def count_frames(self) -> int:
        """Read once (waiting if needed); consume and count the whole frames buffered."""
        data = await self.stream.receive_some(RECEIVE_BYTES)
        if not data:
            raise RuntimeError("raw server closed the connection")
        buf = self.buf
        buf += data
        size = len(buf)
        pos = 0
        k = 0
        while size - pos >= 8:
            end = pos + 4 + _LEN(buf, pos)[0]
            if end > size:
                break
            pos = end
            k += 1
        if pos:
            del buf[:pos]
        return k


async def _raw_client(addr: str, modes: list[str], p: dict[str, Any]) -> dict[str, Any]:
    import trio

    host, _, port = addr.rpartition(":")
    stream = await trio.open_tcp_stream(host, int(port))  # trio sets TCP_NODELAY
    reader = _RawReader(stream)
    run = _AsyncRunner(p)

    def make(body: bytes) -> bytes:
        return _HDR.pack(4 + len(body), 0) + body  # header word 0: serialize 0, no header

    frame = make(b"x" * p["body"])
    big = make(b"\xab" * p["big"])

    async def roundtrip(f: bytes) -> None:
        await stream.send_all(f)
        if await reader.frame_length() != len(f):
            raise RuntimeError("raw echo: wrong frame size")

    async def pipelined(n: int) -> None:
        sent = min(WINDOW, n)
        await stream.send_all(frame * sent)
        done = 0
        while done < n:
            k = await reader.count_frames()
            done += k
            more = min(k, n - sent)
            if more:
                await stream.send_all(frame if more == 1 else frame * more)
                sent += more

    out: dict[str, Any] = {}
    async with stream:
        for mode in modes:
            if mode == "latency":
                out[mode] = await run.latency(roundtrip, frame)
            elif mode == "pipe64":
                out[mode] = await run.pipelined(pipelined, p["n_tput"], p["warm_tput"])
            elif mode == "mib":
                out[mode] = await run.mib(roundtrip, big, p["big"])
            else:
                raise ValueError(f"unknown mode {mode!r} for the raw client")
    return out


def _grpc_client(addr: str, modes: list[str], p: dict[str, Any]) -> dict[str, Any]:
    import grpc

    body = b"x" * p["body"]
    big = b"\xab" * p["big"]
    run = _Runner(p)
    out: dict[str, Any] = {}
    with grpc.insecure_channel(addr, options=GRPC_OPTIONS) as channel:
        grpc.channel_ready_future(channel).result(timeout=10)
        stub = channel.unary_unary(GRPC_METHOD)  # no serializers: bytes in, bytes out

        def call(b: bytes) -> None:
            if len(stub(b, timeout=TIMEOUT)) != len(b):
                raise RuntimeError("grpc echo: wrong size")

        def threads64(n: int) -> None:
            counter = itertools.count()
            errors: list[BaseException] = []

            def worker() -> None:
                try:
                    while next(counter) < n:
                        call(body)
                except BaseException as exc:
                    errors.append(exc)

            threads = [threading.Thread(target=worker) for _ in range(WINDOW)]
            for t in threads:
                t.start()
            for t in threads:
                t.join()
            if errors:
                raise errors[0]

        def futures64(n: int) -> None:
            sem = threading.Semaphore(WINDOW)
            errors: list[BaseException] = []

            def done(f: Any) -> None:
                exc = f.exception()
                if exc is not None:
                    errors.append(exc)
                elif len(f.result()) != len(body):
                    errors.append(RuntimeError("grpc echo: wrong size"))
                sem.release()

            for _ in range(n):
                sem.acquire()
                stub.future(body, timeout=TIMEOUT).add_done_callback(done)
            for _ in range(WINDOW):
                sem.acquire()
            if errors:
                raise errors[0]

        pipelined = {"threads64": threads64, "futures64": futures64}
        for mode in modes:
            if mode == "latency":
                out[mode] = run.latency(call, body)
            elif mode in pipelined:  # grpcio is ~40x slower than the rest: keep it short
                out[mode] = run.pipelined(pipelined[mode], max(WINDOW, p["n_tput"] // 4),
                                          max(WINDOW, p["warm_tput"] // 4))
            elif mode == "mib":
                out[mode] = run.mib(call, big, len(big))
            else:
                raise ValueError(f"unknown mode {mode!r} for the grpc client")
    return out
