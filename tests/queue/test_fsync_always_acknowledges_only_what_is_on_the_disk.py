"""With ``fsync="always"`` a publish is acknowledged only once its records are on the disk:
publishes that share one fsync (a group commit) all get its failure, not only the one that
ran it, and the retry of a keyed publish is not answered "duplicate" before the first's
records are on the disk.

The disk is the one thing faked: the broker's fsync (`fsync_paths`) is replaced by a gate
this test opens, and fails when told to, as a failing disk controller would.
"""

from __future__ import annotations

import errno
import threading
from pathlib import Path

import pytest
import trio
import trio.testing

from codec import ResponseCode
from remoting.queue import QueueError, QueueService, _broker

from .trio_served import serve_trio


class GatedDisk:
    """The first ``GATED`` fsync calls wait until the test lets each end, with success or
    EIO; later ones (the service closing) succeed at once."""

    GATED = 2

    def __init__(self) -> None:
        self.started = 0
        self._lock = threading.Lock()
        self._outcomes: dict[int, tuple[threading.Event, list[bool]]] = {}

    def _slot(self, call: int) -> tuple[threading.Event, list[bool]]:
        with self._lock:
            return self._outcomes.setdefault(call, (threading.Event(), [True]))

    def end(self, call: int, ok: bool) -> None:
        """Let fsync call number ``call`` (from 1) end, failing unless ``ok``."""
        gate, outcome = self._slot(call)
        outcome[0] = ok
        gate.set()

    async def running(self, calls: int) -> None:
        """Wait (bounded) until ``calls`` fsync calls have started in worker threads, and
        every task is blocked (the publishes sent meanwhile wait for an fsync)."""
        with trio.fail_after(20):
            while self.started < calls:  # noqa: ASYNC110 - bounded poll of worker threads
                await trio.sleep(0.001)
        await trio.testing.wait_all_tasks_blocked()

    def __call__(self, paths: list[Path]) -> None:
        with self._lock:
            self.started += 1
            call = self.started
        if call > self.GATED:
            return
        gate, outcome = self._slot(call)
        if not gate.wait(30):
            raise AssertionError(f"fsync call {call} was never let go")
        if not outcome[0]:
            raise OSError(errno.EIO, "Input/output error")


@pytest.fixture
def disk(monkeypatch: pytest.MonkeyPatch) -> GatedDisk:
    gated = GatedDisk()
    monkeypatch.setattr(_broker, "fsync_paths", gated)
    return gated


async def test_every_publish_sharing_a_failed_fsync_is_told(
        nursery: trio.Nursery, tmp_path: Path, disk: GatedDisk) -> None:
    addr, q = await serve_trio(nursery, QueueService(tmp_path, fsync="always"))
    outcomes: dict[str, int | QueueError] = {}

    async def publish(name: str) -> None:
        try:
            outcomes[name] = await q.publish(addr, "t", name.encode())
        except QueueError as exc:
            outcomes[name] = exc

    with trio.fail_after(20):
        async with trio.open_nursery() as publishes:
            publishes.start_soon(publish, "first")
            await disk.running(1)
            publishes.start_soon(publish, "second")
            publishes.start_soon(publish, "third")
            await disk.running(1)  # both wait for the next fsync
            assert disk.started == 1 and not outcomes
            disk.end(1, ok=True)
            disk.end(2, ok=False)  # the one fsync that covers the second and third fails
    assert disk.started == 2  # one fsync for both: a group commit
    assert outcomes["first"] == 0
    for name in ("second", "third"):
        failed = outcomes[name]
        assert isinstance(failed, QueueError), (name, failed)
        assert failed.code == ResponseCode.FLUSH_DISK_TIMEOUT
        assert "their fsync failed (Input/output error)" in str(failed)


async def test_a_retried_keyed_publish_waits_for_the_first_ones_fsync(
        nursery: trio.Nursery, tmp_path: Path, disk: GatedDisk) -> None:
    addr, q = await serve_trio(nursery, QueueService(tmp_path, fsync="always"))
    answered: list[str] = []

    async def publish(name: str) -> None:
        await q.publish(addr, "t", b"body", key="order-17")
        answered.append(name)

    with trio.fail_after(20):
        async with trio.open_nursery() as publishes:
            publishes.start_soon(publish, "first")
            await disk.running(1)
            publishes.start_soon(publish, "retry")
            await disk.running(1)
            assert answered == []  # not "duplicate: done" while the first is not on the disk
            disk.end(1, ok=True)
            disk.end(2, ok=True)
    assert sorted(answered) == ["first", "retry"]
    assert (await q.offsets(addr, "t")).end == 1  # the retry appended nothing
