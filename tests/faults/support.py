"""Helpers for the fault and soak tests: id-echo processors, a call ledger, a server process."""

from __future__ import annotations

import os
import queue
import signal
import subprocess
import sys
import threading
import time
from collections import Counter
from pathlib import Path
from typing import IO

from codec import RemotingCommand, ResponseCode
from processors import AsyncRequestProcessor, RequestContext, RequestProcessor

REPO_ROOT = Path(__file__).resolve().parents[2]

ID_ECHO = 21  # sync processor on a pool thread
ASYNC_ID_ECHO = 22  # processor on the event loop


class Seen:
    """Thread-safe count of the ids a server processed; wait for a set of them."""

    def __init__(self) -> None:
        self.counts: Counter[bytes] = Counter()
        self._cond = threading.Condition()

    def add(self, key: bytes) -> None:
        with self._cond:
            self.counts[key] += 1
            self._cond.notify_all()

    def wait_for(self, keys: set[bytes], timeout: float) -> bool:
        """Block (a thread) until every key was seen at least once."""
        with self._cond:
            return self._cond.wait_for(lambda: all(self.counts[k] for k in keys), timeout)


def echo_response(request: RemotingCommand) -> RemotingCommand:
    response = RemotingCommand.create_response(ResponseCode.SUCCESS)
    response.body = request.body
    return response


class IdEcho(RequestProcessor):
    """Echo the body (a unique id) and count each id it processed."""

    def __init__(self, seen: Seen) -> None:
        self.seen = seen

    def process_request(self, ctx: RequestContext, request: RemotingCommand) -> RemotingCommand:
        self.seen.add(request.body or b"")
        return echo_response(request)


class AsyncIdEcho(AsyncRequestProcessor):
    def __init__(self, seen: Seen) -> None:
        self.seen = seen

    async def process_request(self, ctx: RequestContext, request: RemotingCommand
                              ) -> RemotingCommand:
        self.seen.add(request.body or b"")
        return echo_response(request)


class Ledger:
    """How each call ended, by id: completions are counted, so a double completion shows."""

    def __init__(self) -> None:
        self.outcomes: dict[bytes, list[object]] = {}
        self.elapsed: dict[bytes, float] = {}
        self._cond = threading.Condition()

    def record(self, key: bytes, outcome: object, elapsed: float) -> None:
        with self._cond:
            self.outcomes.setdefault(key, []).append(outcome)
            self.elapsed[key] = max(self.elapsed.get(key, 0.0), elapsed)
            self._cond.notify_all()

    def wait_for(self, keys: set[bytes], timeout: float) -> bool:
        with self._cond:
            return self._cond.wait_for(lambda: keys <= self.outcomes.keys(), timeout)


def vm_rss_kib(pid: int) -> int:
    """Return a process's resident set size in KiB (Linux /proc)."""
    with open(f"/proc/{pid}/status", encoding="ascii") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    raise RuntimeError(f"no VmRSS for pid {pid}")


class ServerProcess:
    """A remoting server in a child process (``tests.faults.server_process``).

    The child prints ``PORT <n>`` once listening and one line per event; it answers
    ``stats`` on stdin with a ``STATS {...}`` line. `kill` ends it by its pid with SIGKILL.
    """

    def __init__(self, *args: str) -> None:
        self.args = args
        self.proc: subprocess.Popen[str] | None = None
        self.port: int | None = None
        self.lines: queue.Queue[str] = queue.Queue()
        self._pump_thread: threading.Thread | None = None

    def start(self, timeout: float = 20.0) -> int:
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "tests.faults.server_process", *self.args],
            cwd=REPO_ROOT, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
            env={**os.environ, "PYTHONUNBUFFERED": "1"},
        )
        assert self.proc.stdout is not None
        self._pump_thread = threading.Thread(target=self._pump, args=(self.proc.stdout,),
                                             daemon=True)
        self._pump_thread.start()
        line = self.expect("PORT ", timeout)
        self.port = int(line.split()[1])
        return self.port

    @property
    def pid(self) -> int:
        assert self.proc is not None
        return self.proc.pid

    @property
    def addr(self) -> str:
        return f"127.0.0.1:{self.port}"

    def _pump(self, stdout: IO[str]) -> None:
        with stdout:
            for line in stdout:
                self.lines.put(line.rstrip("\n"))
        self.lines.put("EOF")

    def _reaped(self) -> None:
        assert self.proc is not None
        if self.proc.stdin is not None:
            try:
                self.proc.stdin.close()
            except OSError:  # the child is gone: nothing to flush to
                pass
        if self._pump_thread is not None:
            self._pump_thread.join(10)  # it closes stdout at EOF

    def expect(self, prefix: str, timeout: float) -> str:
        """Return the next stdout line starting with ``prefix`` (others are skipped)."""
        deadline = time.monotonic() + timeout
        while True:
            try:
                line = self.lines.get(timeout=max(0.0, deadline - time.monotonic()))
            except queue.Empty:
                raise AssertionError(f"server process printed no {prefix!r} line") from None
            if line == "EOF":
                raise AssertionError(f"server process exited before printing {prefix!r}")
            if line.startswith(prefix):
                return line

    def command(self, text: str) -> None:
        assert self.proc is not None and self.proc.stdin is not None
        self.proc.stdin.write(text + "\n")
        self.proc.stdin.flush()

    def kill(self) -> None:
        """SIGKILL the child by its pid and reap it."""
        if self.proc is None:
            return
        if self.proc.poll() is None:
            os.kill(self.proc.pid, signal.SIGKILL)
            self.proc.wait(10)
        self._reaped()

    def stop(self, timeout: float = 15.0) -> None:
        """Ask the child to shut down (``quit``); SIGKILL it if it does not exit in time."""
        if self.proc is None:
            return
        if self.proc.poll() is not None:
            self._reaped()
            return
        try:
            self.command("quit")
            self.proc.wait(timeout)
        except (OSError, subprocess.TimeoutExpired):
            self.kill()
        else:
            self._reaped()
