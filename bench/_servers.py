"""Peer servers the benchmarks start for a run: a free port, a CPU, a clock of their CPU time.

bench/queue.py starts Debian's ``redis-server`` and bench/bus.py its ``nats-server`` through
`server_process`: on a free port of 127.0.0.1, with a temporary directory of its own, pinned
to a CPU (every thread it starts inherits it), stopped by its pid when the run ends.
"""

from __future__ import annotations

import contextlib
import os
import socket
import subprocess
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path

START_SECONDS = 20.0  # a peer that does not answer within this long has failed to start
START_ATTEMPTS = 5  # a free port may be taken between choosing it and the peer binding it


def free_port() -> int:
    """A TCP port of 127.0.0.1 that nothing listens on now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def cpu_seconds(pid: int) -> float:
    """CPU time of every thread of ``pid`` so far (seconds)."""
    total = 0
    for task in Path(f"/proc/{pid}/task").iterdir():
        with contextlib.suppress(OSError, ValueError, IndexError):
            total += int((task / "schedstat").read_text().split()[0])
    return total / 1e9


def cpus() -> tuple[int | None, int | None]:
    """The server's CPU and the client's: the first two this process may use."""
    allowed = sorted(os.sched_getaffinity(0))
    return (allowed[0], allowed[1]) if len(allowed) >= 2 else (None, None)


def listening(port: int) -> bool:
    """Whether something accepts TCP connections on ``port`` of 127.0.0.1."""
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=1.0):
            return True
    except OSError:
        return False


@contextlib.contextmanager
def server_process(name: str, command: Callable[[int, str], list[str]], *, cpu: int | None,
                   ready: Callable[[int], bool] = listening) -> Iterator[tuple[int, int]]:
    """Run a peer server on a free port of 127.0.0.1; yield (port, pid); stop it by its pid.

    Args:
        name: the server's name, for the error when it does not start.
        command: builds the command line from the port and a temporary directory of the
            server's own (its data, and its log at ``<dir>/log``, shown when it fails).
        cpu: the CPU the server and all its threads run on (``None``: any).
        ready: whether the server answers on the port yet.

    Raises:
        SystemExit: the server did not answer within ``START_SECONDS``, ``START_ATTEMPTS``
            times.
    """
    with tempfile.TemporaryDirectory(prefix=f"bench-{name}-") as tmp:
        for _attempt in range(START_ATTEMPTS):
            port = free_port()
            process = subprocess.Popen(
                command(port, tmp), cwd=tmp,
                preexec_fn=None if cpu is None else (lambda: os.sched_setaffinity(0, {cpu})),
                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            deadline = time.monotonic() + START_SECONDS
            while process.poll() is None and time.monotonic() < deadline:
                if ready(port):
                    break
                time.sleep(0.05)
            else:
                if process.poll() is None:  # still silent at the deadline
                    process.kill()
                    process.wait()
                continue
            break
        else:
            log = Path(tmp, "log")
            tail = log.read_text(errors="replace")[-2000:] if log.exists() else "(no log)"
            raise SystemExit(f"{name} did not start; the end of its log:\n{tail}")
        try:
            yield port, process.pid
        finally:
            process.terminate()
            try:
                process.wait(15)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
