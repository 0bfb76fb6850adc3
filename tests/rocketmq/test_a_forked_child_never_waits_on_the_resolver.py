"""A process that imported remoting.rocketmq can fork (``os.fork``, multiprocessing's fork,
``subprocess`` with a ``preexec_fn``, Spark's worker daemon) while its other threads resolve
names: the child, where only the forking thread exists, runs no name lookup before it goes on.

A lookup there can wait forever on glibc's resolver lock, held at the fork by another thread
inside ``getaddrinfo``, and with it a parent waiting for the child's ``exec``: CI's
tests/rocketmq run hung so, in ``Broker.restart``'s ``subprocess.Popen`` (a child of the test
process stuck in ``remoting.rocketmq._ids``'s after-fork handler, in ``getaddrinfo``, for
over an hour). Here an audit hook in a fresh interpreter makes any lookup in a forked child
end that child with a code of its own, which the parent then sees: no timing, no luck."""

from __future__ import annotations

import subprocess
import sys

from tests.hangs import HANG_SECONDS

LOOKED_UP = 97  # the exit code of a forked child that resolved a name before exec

SCRIPT = f"""
import os, subprocess, sys

parent = os.getpid()

def hook(event, args):
    if event.startswith(("socket.getaddrinfo", "socket.gethostby", "socket.gethostname")) \\
            and os.getpid() != parent:
        os._exit({LOOKED_UP})

sys.addaudithook(hook)
import remoting.rocketmq  # noqa: F401  (its modules register their after-fork handlers)

spawned = subprocess.run([sys.executable, "-c", "pass"], preexec_fn=lambda: None).returncode
pid = os.fork()
if pid == 0:
    os._exit(0)
forked = os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1])
print(spawned, forked)
"""


def test_a_forked_child_resolves_no_name_before_it_goes_on() -> None:
    done = subprocess.run([sys.executable, "-c", SCRIPT], capture_output=True, text=True,
                          timeout=HANG_SECONDS, check=True)
    spawned, forked = map(int, done.stdout.split())
    assert (spawned, forked) == (0, 0), (
        f"a forked child resolved a name (exit {LOOKED_UP}): spawn {spawned}, fork {forked}")
