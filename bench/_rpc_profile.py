"""Record processes with py-spy, and summarize a ``--format raw`` (collapsed stacks) file:
where the samples went.

    .venv/bin/python bench/_rpc_profile.py /tmp/rpc-profile/rpc-pool-tasks64-server.raw [top]
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Iterator

RATE = int(os.environ.get("PY_SPY_RATE", "200"))  # samples per second
ATTACH_SECONDS = 1.0  # py-spy's time to attach before the recorded work starts


def py_spy() -> str:
    """Return the py-spy program (on PATH or beside this Python), or exit saying how to get it."""
    found = shutil.which("py-spy") or os.path.join(os.path.dirname(sys.executable), "py-spy")
    if not os.path.exists(found):
        raise SystemExit("py-spy not found: .venv/bin/pip install py-spy")
    return found


@contextlib.contextmanager
def recording(pids: dict[str, int], stem: str) -> Iterator[dict[str, str]]:
    """Record each process of ``pids`` ({role: pid}) while the block runs, into
    ``<stem>-<role>.raw``; yield {role: path}."""
    spy = py_spy()
    os.makedirs(os.path.dirname(stem) or ".", exist_ok=True)
    paths = {role: f"{stem}-{role}.raw" for role in pids}
    spies = [subprocess.Popen(
        [spy, "record", "--pid", str(pid), "--rate", str(RATE), "--threads", "--format", "raw",
         "--nonblocking", "-o", paths[role]], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        for role, pid in pids.items()]
    time.sleep(ATTACH_SECONDS)
    try:
        yield paths
    finally:
        for sp in spies:
            sp.send_signal(signal.SIGINT)  # py-spy writes what it has and ends
        for sp, (role, path) in zip(spies, paths.items(), strict=True):
            _, err = sp.communicate(timeout=60)
            if not os.path.exists(path):
                print(f"py-spy failed for the {role}: {err.decode(errors='replace')}",
                      file=sys.stderr)

_FRAME = re.compile(r"^(?P<func>.*?) \((?P<file>[^()]*?)(?::\d+)?\)$")


def _short_file(path: str) -> str:
    for marker in ("/site-packages/", "/lib/python3"):
        if marker in path:
            return path.split(marker, 1)[1]
    return os.path.relpath(path, os.getcwd()) if path.startswith("/") else path


def _name(frame: str) -> str:
    m = _FRAME.match(frame)
    if m is None:
        return frame
    return f"{m['func']} ({_short_file(m['file'])})"


def summarize(path: str, top: int = 25, rate: float = 0.0, seconds: float = 0.0) -> None:
    """Print the sample shares: per thread, self time and inclusive time per function.

    With ``rate`` (samples/s) and ``seconds`` (recorded), also how busy each thread was.
    """
    self_c: Counter[str] = Counter()
    incl_c: Counter[str] = Counter()
    threads: Counter[str] = Counter()
    total = 0
    with open(path) as f:
        for line in f:
            line = line.rstrip("\n")
            if not line:
                continue
            stack, _, count_s = line.rpartition(" ")
            try:
                count = int(count_s)
            except ValueError:
                continue
            frames = stack.split(";")
            thread = "?"
            while frames and (frames[0].startswith("process ") or frames[0].startswith("thread ")):
                if frames[0].startswith("thread "):
                    thread = frames[0]
                frames.pop(0)
            total += count
            threads[thread] += count
            names = [_name(fr) for fr in frames]
            if names:
                self_c[names[-1]] += count
            for n in set(names):
                incl_c[n] += count
    if not total:
        print("  no samples")
        return
    print(f"  {total} samples (non-idle threads); shares below are of these samples")
    if rate and seconds:
        print("  samples / (rate x seconds) per thread: " + ", ".join(
            f"{t.removeprefix('thread ')} {c / (rate * seconds):.0%}"
            for t, c in threads.most_common(8)))
    elif len(threads) > 1:
        print("  by thread: " + ", ".join(
            f"{t.removeprefix('thread ')} {c / total:.0%}" for t, c in threads.most_common(8)))
    print("  top self time:")
    for n, c in self_c.most_common(top):
        print(f"    {c / total:6.1%}  {n}")
    print("  top inclusive time:")
    for n, c in incl_c.most_common(top):
        print(f"    {c / total:6.1%}  {n}")


if __name__ == "__main__":
    summarize(sys.argv[1], int(sys.argv[2]) if len(sys.argv) > 2 else 25)
