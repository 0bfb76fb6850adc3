"""A fleet of ``remoting serve`` processes on 127.0.0.1, and faults for them (by pid).

Used by the cluster tests and bench/cluster.py. Each server serves
`tests.cluster.fleet_service`; `Fleet.served` asks each how many rows it has served, and
`Fleet.hit_mid_job` picks the moment and the server for a SIGKILL or SIGSTOP, which that
server sends itself while it handles a row request (so rows are in flight when it lands).
"""

from __future__ import annotations

import json
import random
import signal
import time
from collections.abc import Callable
from pathlib import Path
from typing import Self

from codec import RemotingCommand
from remoting import STATS_REQUEST_CODE, RemotingClient, RemotingError
from tests.processes import Proc

from .fleet_service import FAULT, SERVED

LOOK_EVERY = 0.005  # seconds between two looks at the servers' progress


class Fleet:
    """``size`` server processes, each on an ephemeral port; stopped (by pid) on exit."""

    def __init__(self, size: int) -> None:
        self.procs: list[Proc] = []
        self.addresses: list[str] = []
        try:
            for _ in range(size):
                proc = Proc("--log-level", "error", "serve",
                            "tests.cluster.fleet_service:processors", "--port", "0")
                self.procs.append(proc)
                port = proc.expect(r"on 127\.0\.0\.1:(\d+)").group(1)
                self.addresses.append(f"127.0.0.1:{port}")
        except BaseException:
            self.close()
            raise

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        for proc in self.procs:
            if proc.popen.poll() is None:
                proc.popen.send_signal(signal.SIGCONT)  # a stopped one cannot take SIGTERM
            proc.stop()

    def _ask(self, client: RemotingClient, code: int) -> list[dict[str, int]]:
        """Each server's JSON answer to ``code`` ({} from one silent for 0.5 s: dead or stopped)."""
        out: list[dict[str, int]] = []
        for addr in self.addresses:
            try:
                response = client.invoke_sync(addr, RemotingCommand(code=code), timeout=0.5)
            except RemotingError:
                out.append({})
                continue
            out.append(json.loads(response.body or b"{}"))
        return out

    def stats(self, client: RemotingClient) -> list[dict[str, int]]:
        """Each server's ``{"rows": served, "peers": connections seen}``."""
        return [{"rows": s.get("rows", 0), "peers": s.get("peers", 0)}
                for s in self._ask(client, SERVED)]

    def served(self, client: RemotingClient) -> list[int]:
        """Rows served so far by each server."""
        return [s["rows"] for s in self.stats(client)]

    def processing(self, client: RemotingClient) -> list[int]:
        """Requests each server has handed to its processors and not answered yet, now.

        The statistics request itself is one of them: it is not counted.
        """
        return [max(0, s.get("processing", 1) - 1) for s in self._ask(client, STATS_REQUEST_CODE)]

    def hit_mid_job(self, rows: int, fault: int, stop_waiting: Callable[[], bool],
                    timeout: float = 600.0) -> tuple[int, str] | None:
        """Once a random 20-60% of ``rows`` are served, make one server take ``fault``.

        The victim is a random server, one with requests in its processors if there is one.
        It is armed (`fleet_service.FAULT`) and sends itself the signal while it handles its
        next row request, so rows are in flight to it when the signal lands; a signal sent
        from here could land between two of its batches. Returns (rows served when armed,
        address) once the fault has landed, or None if ``stop_waiting()`` said so first.
        """
        threshold = int(rows * random.uniform(0.2, 0.6))
        deadline = time.monotonic() + timeout
        with RemotingClient() as client:
            while True:
                if stop_waiting() or time.monotonic() > deadline:
                    return None
                served = sum(self.served(client))
                if served >= threshold:
                    break
                time.sleep(LOOK_EVERY)  # polling other processes' progress
            busy = [i for i, n in enumerate(self.processing(client)) if n > 0]
            victim = random.choice(busy or range(len(self.procs)))
            client.invoke_sync(self.addresses[victim],
                               RemotingCommand(code=FAULT, body=str(int(fault)).encode()),
                               timeout=5.0)
        while not _landed(self.procs[victim].popen.pid, fault):
            if stop_waiting() or time.monotonic() > deadline:
                return None
            time.sleep(LOOK_EVERY)
        return served, self.addresses[victim]


def _landed(pid: int, fault: int) -> bool:
    """Whether process ``pid`` is gone (SIGKILL) or stopped (SIGSTOP)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()[0]
    except FileNotFoundError:
        return True
    return state in ("Z", "X") if fault == signal.SIGKILL else state in ("T", "t")
