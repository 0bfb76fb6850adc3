"""Summarize a py-spy ``--format raw`` (collapsed stacks) file: where the samples went.

    .venv/bin/python bench/_rpc_profile.py /tmp/rpc-profile/rpc-pool-tasks64-server.raw [top]
"""

from __future__ import annotations

import os
import re
import sys
from collections import Counter

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
