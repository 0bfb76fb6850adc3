"""`Proc`: a child process (the ``remoting`` command, or another module) whose output is read
with deadlines."""

from __future__ import annotations

import os
import queue
import re
import signal
import subprocess
import sys
import threading
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


class Proc:
    """A child process whose stdout lines are read with deadlines."""

    def __init__(self, *args: str, cwd: Path = ROOT, env: dict[str, str] | None = None,
                 module: str = "remoting") -> None:
        env = dict(os.environ, PYTHONPATH=str(ROOT), **(env or {}))
        self.popen = subprocess.Popen([sys.executable, "-m", module, *args], cwd=cwd,
                                      env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                      text=True)
        self.lines: queue.Queue[str] = queue.Queue()
        self.seen: list[str] = []
        self._pump_thread = threading.Thread(target=self._pump, daemon=True)
        self._pump_thread.start()

    def _pump(self) -> None:
        assert self.popen.stdout is not None
        for line in self.popen.stdout:
            self.lines.put(line)

    def expect_all(self, pattern: str, count: int = 1, timeout: float = 20
                   ) -> list[re.Match[str]]:
        """Return the first ``count`` matches among all lines so far, waiting for more."""
        while True:
            # finditer: lines of several processes sharing the pipe may have run together
            matches = [m for line in self.seen for m in re.finditer(pattern, line)]
            if len(matches) >= count:
                return matches[:count]
            self.seen.append(self.lines.get(timeout=timeout))

    def expect(self, pattern: str, timeout: float = 20) -> re.Match[str]:
        return self.expect_all(pattern, 1, timeout)[0]

    def stop(self) -> int:
        if self.popen.poll() is None:
            self.popen.send_signal(signal.SIGTERM)
        try:
            code = self.popen.wait(20)
        except subprocess.TimeoutExpired:
            self.popen.kill()
            code = self.popen.wait()
        self._pump_thread.join(5)
        assert self.popen.stdout is not None and self.popen.stderr is not None
        self.popen.stdout.close()
        self.stderr = self.popen.stderr.read()
        self.popen.stderr.close()
        return code
