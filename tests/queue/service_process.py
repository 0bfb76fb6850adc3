"""`QueueProcess`: a ``remoting queue`` command in a child process, its address and pid."""

from __future__ import annotations

import os
import signal
from pathlib import Path

from ..processes import Proc


class QueueProcess:
    """``remoting queue`` with the given options; ``addr`` once it serves. With
    ``file_size_limit``, its files cannot grow past that many bytes (`file_size_limited`);
    with ``log_level``, ``remoting --log-level`` that."""

    def __init__(self, *options: str, file_size_limit: int | None = None,
                 log_level: str | None = None) -> None:
        if log_level is not None:  # an option of ``remoting``, before the command
            self.proc = Proc("--log-level", log_level, "queue", "--port", "0", *options)
        elif file_size_limit is None:
            self.proc = Proc("queue", "--port", "0", *options)
        else:
            self.proc = Proc(str(file_size_limit), "queue", "--port", "0", *options,
                             module="tests.queue.file_size_limited")
        match = self.proc.expect(r"serving queue on (\S+) \(pid (\d+)\)", timeout=60)
        self.addr = match.group(1)
        self.pid = int(match.group(2))

    def threads(self) -> int:
        """The process's thread count now."""
        return int(self._status("Threads"))

    def rss_bytes(self, peak: bool = False) -> int:
        """Its resident memory now, or its peak."""
        return int(self._status("VmHWM" if peak else "VmRSS").split()[0]) * 1024

    def _status(self, field: str) -> str:
        for line in Path(f"/proc/{self.pid}/status").read_text().splitlines():
            if line.startswith(field + ":"):
                return line.split(":", 1)[1].strip()
        raise KeyError(field)

    def kill(self) -> None:
        """SIGKILL: no shutdown at all."""
        os.kill(self.pid, signal.SIGKILL)
        self.proc.popen.wait(20)
        self.proc.stop()

    def stop(self) -> str:
        """SIGTERM, wait; return its stderr."""
        self.proc.stop()
        return self.proc.stderr
