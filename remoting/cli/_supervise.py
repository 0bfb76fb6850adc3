"""``remoting serve --workers N``: worker processes sharing one port, and their supervisor.

The parent reserves the port with a bound, non-listening SO_REUSEPORT socket and starts that
many worker processes (``remoting serve ... --reuse-port``), each listening on the same port
(the kernel spreads connections across them). Each worker has a status pipe (``--status-fd``):
it writes ``ready`` once serving, or the one-line usage error that stopped it before (a factory
that cannot be loaded, a metrics port in use...). A worker that exits with 2 before it was
ready stops the command with that line and exit status 2, as one ``remoting serve`` would: it
would fail the same way on every restart. A worker that dies after it served is restarted;
one that dies before serving is restarted too, but a slot whose workers die before serving
three times in a row (a crash at start-up) stops the command with exit status 1. The
parent stops them all on SIGTERM or SIGINT.
"""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Final

from .._core._listen import reserve_port
from ._signals import stopped_by_signals
from ._telemetry import TelemetryOptions

if TYPE_CHECKING:
    from collections.abc import Callable, Iterable, Sequence

    from .._config import ServerConfig

__all__ = ["WorkerStatus", "supervise"]

RESTART_BACKOFF: Final = 0.5  # seconds between restarts of a crashing worker
STOP_TIMEOUT: Final = 10.0
MAX_EARLY_EXITS: Final = 3  # a worker slot that never serves this often in a row: give up
READY: Final = b"ready\n"
REFUSED: Final = b"error "


class WorkerStatus:
    """A worker's end of its status pipe (none when run alone: errors then go to stderr)."""

    def __init__(self, fd: int | None) -> None:
        self._fd = fd

    def ready(self) -> None:
        """Tell the supervisor that this worker serves."""
        self._say(READY)

    def refuse(self, line: str) -> int:
        """Report a usage error (to the supervisor, else on stderr); return exit status 2."""
        if self._fd is None:
            print(line, file=sys.stderr)
        else:
            self._say(REFUSED + line.encode("utf-8", "replace") + b"\n")
        return 2

    def _say(self, data: bytes) -> None:
        fd, self._fd = self._fd, None
        if fd is None:
            return
        try:
            with open(fd, "wb") as pipe:  # closes it: one message per worker
                pipe.write(data)
        except OSError:  # the supervisor is gone
            pass


@dataclass
class _Worker:
    """A worker process and the read end of its status pipe."""

    proc: subprocess.Popen[bytes]
    status_fd: int
    said: bytes = b""

    @property
    def ready(self) -> bool:
        return self.said.startswith(READY)

    def read_status(self) -> None:
        """Take what the worker wrote on its status pipe so far (never blocks)."""
        while self.status_fd >= 0:
            try:
                chunk = os.read(self.status_fd, 4096)
            except BlockingIOError:
                return
            if not chunk:
                self.close()
            self.said += chunk

    def refusal(self) -> str:
        """The line saying why the worker stopped before it served."""
        if self.said.startswith(REFUSED):
            return self.said[len(REFUSED):].decode("utf-8", "replace").strip()
        return f"remoting serve: worker {self.proc.pid} exited with 2 before it served"

    def close(self) -> None:
        if self.status_fd >= 0:
            os.close(self.status_fd)
            self.status_fd = -1


def _launch(argv: list[str]) -> _Worker:
    read_fd, write_fd = os.pipe()
    os.set_blocking(read_fd, False)
    try:
        proc = subprocess.Popen([*argv, "--status-fd", str(write_fd)], pass_fds=(write_fd,))
    except BaseException:
        os.close(read_fd)
        raise
    finally:
        os.close(write_fd)  # the worker holds the only write end: EOF when it exits
    print(f"worker {proc.pid} started", flush=True)
    return _Worker(proc, read_fd)


def _watch(workers: dict[int, _Worker], launch: Callable[[int], _Worker],
           stop: threading.Event) -> int:
    """Restart workers that die after serving until ``stop``; return the exit status."""
    early_exits = dict.fromkeys(workers, 0)  # per slot: exits in a row before serving
    while not stop.wait(0.2):
        for i, worker in list(workers.items()):
            code = worker.proc.poll()
            worker.read_status()  # after poll: an exited worker's last words are all there
            if code is None or stop.is_set():
                continue
            if code == 2 and not worker.ready:
                print(worker.refusal(), file=sys.stderr, flush=True)
                return 2
            early_exits[i] = 0 if worker.ready else early_exits[i] + 1
            if early_exits[i] >= MAX_EARLY_EXITS:
                print(f"remoting serve: workers exited with {code} before serving, "
                      f"{MAX_EARLY_EXITS} times in a row; stopping (run the same command "
                      f"without --workers to see why)", file=sys.stderr, flush=True)
                return 1
            print(f"worker {worker.proc.pid} exited with {code}; restarting", flush=True)
            worker.close()
            time.sleep(RESTART_BACKOFF)
            workers[i] = launch(i)
    return 0


def _stop_all(workers: Iterable[_Worker]) -> None:
    workers = list(workers)
    for worker in workers:
        if worker.proc.poll() is None:
            worker.proc.terminate()
    deadline = time.monotonic() + STOP_TIMEOUT
    for worker in workers:
        try:
            worker.proc.wait(max(0.1, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            worker.proc.kill()
            worker.proc.wait()
        worker.close()


def supervise(spec: str, config: ServerConfig, workers: int,
              stop: threading.Event | None = None,
              telemetry: TelemetryOptions | None = None,
              worker_options: Sequence[str] = ()) -> int:
    """Run ``workers`` processes on one port; restart the ones that die after serving;
    return 0 on stop, 2 if a worker stopped on a usage error before it served.
    ``worker_options`` are more ``serve`` options for every worker (its TLS options)."""
    stop = stop or threading.Event()
    holder = reserve_port(config.bind_address, config.listen_port)
    port = holder.getsockname()[1]
    argv = [sys.executable, "-m", "remoting", "serve", spec, "--port", str(port),
            "--bind", config.bind_address, "--reuse-port", *worker_options]

    options = telemetry or TelemetryOptions()

    def launch(i: int) -> _Worker:
        return _launch(argv + options.worker_argv(i) if options.wanted else argv)

    running: dict[int, _Worker] = {}
    try:
        with stopped_by_signals(stop):  # before the line that says it serves
            print(f"serving {spec} on {config.bind_address}:{port} with {workers} workers",
                  flush=True)
            for i in range(workers):
                running[i] = launch(i)
            return _watch(running, launch, stop)
    finally:
        _stop_all(running.values())
        holder.close()
