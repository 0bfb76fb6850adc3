"""Who this client is: its address, its client id, and the message ids it gives
(Java's ``MessageClientIDSetter`` and ``ClientConfig.buildMQClientId``).

A message id (``UNIQ_KEY``) is 16 bytes in upper-case hex: the client's IPv4 address (4),
the low 16 bits of the pid (2), a number fixed per process (4: Java's class loader's hash
code; here a random one), the milliseconds since the start of the current month in local
time (4), and a counter shared by the process's producers (2). Java consumers and
RocketMQ's tools read the address, pid and time back out of it.
"""

from __future__ import annotations

import itertools
import os
import random
import socket
import struct
import threading
import time
from typing import Final

__all__ = ["UniqueIds", "client_id", "local_ip", "new_message_id"]


def _candidates() -> list[str]:
    try:
        infos = socket.getaddrinfo(socket.gethostname(), None, socket.AF_INET)
    except OSError:
        return []
    seen: list[str] = []
    for info in infos:
        address = str(info[4][0])
        if address not in seen:
            seen.append(address)
    return seen


def local_ip() -> str:
    """Return this host's IPv4 address as Java's client picks it (RemotingUtil
    .getLocalAddress): the first that is not loopback and not 192.168.*, else the last
    non-loopback one, else 127.0.0.1. Resolved from the host name; nothing is sent."""
    found = [a for a in _candidates() if not a.startswith("127.")]
    for address in found:
        if not address.startswith("192.168"):
            return address
    return found[-1] if found else "127.0.0.1"


def _ip_bytes() -> bytes:
    found = [a for a in _candidates() if not a.startswith(("127.", "0.", "255."))]
    if found:
        return socket.inet_aton(found[0])
    # MessageClientIDSetter.createFakeIP: four bytes of the time
    return struct.pack(">q", int(time.time() * 1000))[4:]


_instances = itertools.count()


def client_id(ip: str, instance_name: str | None) -> str:
    """Return a client id as Java 4.9.8 builds it: ``ip@pid#n`` (Java: ``ip@pid#nanotime``),
    or ``ip@instance_name`` when one is given. Each client of a process has its own (the
    broker keeps a group's members by client id)."""
    if instance_name:
        return f"{ip}@{instance_name}"
    return f"{ip}@{os.getpid()}#{time.monotonic_ns()}{next(_instances)}"


class UniqueIds:
    """Makes message ids (``createUniqID``); one per process, any thread."""

    _FIXED_LEN: Final = 10

    def __init__(self, ip: bytes, pid: int, salt: int) -> None:
        self._prefix = (ip + struct.pack(">HI", pid & 0xFFFF, salt & 0xFFFFFFFF)).hex().upper()
        self._counter = itertools.count()
        self._lock = threading.Lock()
        self._start_ms = 0
        self._next_start_ms = 0

    def _month(self, now_ms: int) -> None:
        with self._lock:
            if now_ms < self._next_start_ms:
                return
            t = time.localtime(now_ms / 1000)
            start = time.mktime((t.tm_year, t.tm_mon, 1, 0, 0, 0, 0, 0, -1))
            year, month = (t.tm_year + 1, 1) if t.tm_mon == 12 else (t.tm_year, t.tm_mon + 1)
            following = time.mktime((year, month, 1, 0, 0, 0, 0, 0, -1))
            self._start_ms = int(start * 1000)
            self._next_start_ms = int(following * 1000)

    def new(self, now_ms: int | None = None) -> str:
        """Return a new message id (``now_ms``: the time to put in it, default now)."""
        if now_ms is None:
            now_ms = time.time_ns() // 1_000_000
        if now_ms >= self._next_start_ms:
            self._month(now_ms)
        diff = now_ms - self._start_ms
        if -1_000_000 < diff < 0:  # the clock went back a little (NTP): as Java
            diff = 0
        counter = next(self._counter) & 0xFFFF
        return f"{self._prefix}{diff & 0xFFFFFFFF:08X}{counter:04X}"


def _process_ids(ip: bytes) -> UniqueIds:
    return UniqueIds(ip, os.getpid(), random.getrandbits(32))


# The host's address in message ids, resolved once, at import: a forked child keeps it
_IP: Final = _ip_bytes()
_ids = _process_ids(_IP)


def new_message_id() -> str:
    """Return a new message id of this process."""
    return _ids.new()


def _forget_in_child() -> None:
    """Give a forked child its own pid, salt and counter in message ids.

    It runs in the child right after ``fork`` (``os.fork``, multiprocessing's fork, a
    ``subprocess`` with ``preexec_fn``), where only the forking thread exists: it must not
    resolve a name or take a lock another thread of the parent may have held at that
    instant (glibc's resolver's, held by a thread inside ``getaddrinfo``), or the child
    waits forever, and with it a parent waiting for the child's ``exec``. So it keeps the
    address resolved at import.
    """
    global _ids
    _ids = _process_ids(_IP)


os.register_at_fork(after_in_child=_forget_in_child)
