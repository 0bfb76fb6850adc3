"""The callback threads (`CallbackRunner`): each job runs once, on one of at most ``threads``
threads of the client's own, one job at a time per thread (a callback that blocks holds up
only its own thread); jobs queued at shutdown still run, and later ones run where they are
submitted (never on the loop thread)."""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Iterator

import pytest

from remoting._core._doors._threads import CallbackRunner, in_own_thread

from ..logs import capture_logs

WAIT = 5.0


@pytest.fixture
def runner() -> Iterator[CallbackRunner]:
    runner = CallbackRunner("test-callback", 2, owner="owner")
    yield runner
    runner.close(timeout=WAIT)


def test_every_job_runs_once_on_at_most_threads_threads_of_the_runner(
    runner: CallbackRunner,
) -> None:
    seen: Counter[int] = Counter()
    names: set[str] = set()
    own: list[bool] = []
    lock = threading.Lock()
    all_done = threading.Event()
    n = 2000

    def job(i: int) -> None:
        with lock:
            seen[i] += 1
            names.add(threading.current_thread().name)
            own.append(in_own_thread("owner"))
            if len(own) == n:
                all_done.set()

    def submit_every_fourth(k: int) -> None:
        for i in range(k, n, 4):
            runner.submit(job, i)

    submitters = [threading.Thread(target=submit_every_fourth, args=(k,)) for k in range(4)]
    for t in submitters:
        t.start()
    for t in submitters:
        t.join(WAIT)
    assert all_done.wait(WAIT)
    assert seen == Counter(range(n))
    assert all(own)
    assert 1 <= len(names) <= 2
    assert all(name.startswith("test-callback_") for name in names)


def test_a_blocked_job_holds_up_only_its_own_thread(runner: CallbackRunner) -> None:
    gate, entered = threading.Event(), threading.Event()
    ran: list[int] = []
    ten = threading.Event()

    def blocked() -> None:
        entered.set()
        gate.wait(WAIT)

    def quick(i: int) -> None:
        ran.append(i)
        if len(ran) == 10:
            ten.set()

    runner.submit(blocked)
    assert entered.wait(WAIT)
    for i in range(10):
        runner.submit(quick, i)
    try:
        assert ten.wait(WAIT), "jobs queued behind a blocked one waited for it"
        assert ran == list(range(10))  # in order, on the one other thread
    finally:
        gate.set()


def test_jobs_queued_at_close_run_before_it_returns_and_later_ones_run_in_the_caller(
) -> None:
    runner = CallbackRunner("test-callback", 1, owner=object())
    gate, entered = threading.Event(), threading.Event()
    ran: list[tuple[int, str]] = []

    def job(i: int) -> None:
        if i == 0:
            entered.set()
            gate.wait(WAIT)
        ran.append((i, threading.current_thread().name))

    for i in range(5):
        runner.submit(job, i)
    assert entered.wait(WAIT)
    threading.Timer(0.05, gate.set).start()
    runner.close(timeout=WAIT)
    assert [i for i, _ in ran] == [0, 1, 2, 3, 4]
    assert {name for _, name in ran} == {"test-callback_0"}
    runner.submit(job, 5)  # closed: runs here, now
    assert ran[-1] == (5, threading.current_thread().name)


def test_after_close_a_job_submitted_on_the_loop_thread_runs_on_a_thread_of_its_own() -> None:
    runner = CallbackRunner("test-callback", 1, owner=object())
    runner.close()
    runner.loop_thread_id = threading.get_ident()  # as if this thread ran the loop
    done = threading.Event()
    where: list[str] = []

    def job() -> None:
        where.append(threading.current_thread().name)
        done.set()

    runner.submit(job)
    assert done.wait(WAIT)
    assert where == ["remoting-late-callback"]


def test_a_job_that_raises_is_logged_and_its_thread_goes_on(runner: CallbackRunner) -> None:
    done = threading.Event()

    def bad() -> None:
        raise ValueError("a bug")

    with capture_logs() as events:
        runner.submit(bad)
        runner.submit(done.set)
        assert done.wait(WAIT)
    failed = [e for e in events if e["event"] == "callback_job.failed"]
    assert len(failed) == 1 and failed[0]["job"].endswith("bad")


def test_close_called_from_a_job_does_not_wait_for_its_own_thread() -> None:
    runner = CallbackRunner("test-callback", 1, owner=object())
    returned = threading.Event()

    def close_here() -> None:
        runner.close(timeout=30)
        returned.set()

    runner.submit(close_here)
    assert returned.wait(WAIT), "close() in a job waited for its own thread"


def test_a_job_runs_in_the_submitting_thread_when_no_callback_thread_can_start(
        monkeypatch: pytest.MonkeyPatch) -> None:
    runner = CallbackRunner("test-callback", 2, owner=object())

    def refused(self: threading.Thread) -> None:
        raise RuntimeError("can't start new thread")

    monkeypatch.setattr(threading.Thread, "start", refused)
    where: list[str] = []
    with capture_logs() as events:
        runner.submit(lambda: where.append(threading.current_thread().name))
    monkeypatch.undo()
    runner.close()
    assert where == [threading.current_thread().name]
    assert [e["event"] for e in events] == ["callback_thread.start_failed"]
