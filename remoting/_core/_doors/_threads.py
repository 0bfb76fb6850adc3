"""Everything that crosses between an endpoint's loop thread and other threads.

Theory of operation (the concurrency model, docs/architecture.md):
- The loop thread owns all transport state: sockets, connections, outbound queues, the response
  table, permits, processor bookkeeping. No other thread changes it, but in three places made
  safe by construction: a connection's send gate (`Sender`), registrations (`Dispatcher`:
  tables replaced, never mutated) and a client's address list (`ChannelTable`, under its
  lock); docs/architecture.md lists every path.
- Other threads reach the loop through one door, the `Inbox`: ``post(fn, arg)`` appends to a
  deque (thread-safe by CPython's documented guarantee) and asks trio to run one drain soon,
  unless a drain is already due. Everything posted before a drain runs is handled by it, so a
  burst of calls from threads, or of results from a pool, costs the loop one wake-up.
- The drain flag is a benign race: two threads may both schedule a drain (one runs empty); a
  post never goes unseen, because the drain clears the flag before it empties the deque.
  Once the loop has ended (trio refuses the drain), what is left is refused instead: each
  item's ``refuse`` runs in the thread that finds the loop gone (a call fails its future), so
  no post is lost when threads post while the loop ends.
- What leaves the loop for other threads: completed futures (a lock a waiting thread blocks on,
  see `_future`), user callbacks (the `CallbackRunner`'s threads), channel events (`_events`).
- `mark_own_thread` labels the threads an endpoint starts (pool and callback threads): a
  shutdown called from one of them must not wait for itself.
- Calls from threads handed to the loop go through `_thread_calls`. The one shortcut, a pool
  thread's lone reply, is the dispatcher's: it sends through the connection's send gate
  (`Sender`), the one lock a thread shares with a trio connection's state. (A thread-driven
  client has no loop for its calls: `_thread_driver`.)
"""

from __future__ import annotations

import _thread
import threading
from collections import deque
from time import monotonic
from typing import TYPE_CHECKING, Any, Final, TypeVar

from ..._log import log

if TYPE_CHECKING:
    from collections.abc import Callable

    import trio

__all__ = ["CallbackRunner", "Inbox", "in_own_thread", "mark_own_thread"]

T = TypeVar("T")

CALLBACKS_CLOSE_SECONDS: Final = 5.0  # how long shutdown waits for callbacks still running
_OWN: Final = threading.local()  # .owner: whose pools or callbacks this thread runs


def mark_own_thread(owner: object) -> None:
    """Label the calling thread as one that ``owner`` started (and whose shutdown joins it)."""
    _OWN.owner = owner


def in_own_thread(owner: object) -> bool:
    """True in a thread that ``owner`` started (see `mark_own_thread`)."""
    return getattr(_OWN, "owner", None) is owner


class Inbox:
    """Thread-safe hand-off of ``fn(arg)`` calls into the loop thread, batched."""

    __slots__ = ("_items", "_scheduled", "_token")

    def __init__(self) -> None:
        self._token: trio.lowlevel.TrioToken | None = None
        self._items: deque[tuple[Callable[[Any], object], Any,
                                 Callable[[Any], object] | None]] = deque()
        self._scheduled = False

    def open(self, token: trio.lowlevel.TrioToken) -> None:
        """Start accepting posts for the loop of ``token`` (called on the loop thread)."""
        self._token = token

    def post(self, fn: Callable[[Any], object], arg: Any,
             refuse: Callable[[Any], object] | None = None) -> None:
        """Run ``fn(arg)`` on the loop thread soon (from any thread). If the loop ends before
        it can, this raises, or (when the end is found by another thread's post) ``refuse(arg)``
        runs in that thread instead (None: the post is dropped).

        Raises:
            RuntimeError: the loop has not started or has ended (nothing was posted).
        """
        token = self._token
        if token is None:
            raise RuntimeError("the endpoint's loop is not running")
        entry = (fn, arg, refuse)
        self._items.append(entry)
        if not self._scheduled:
            self._scheduled = True
            try:
                token.run_sync_soon(self._drain)
            except BaseException:  # trio.RunFinishedError: no drain will come
                try:
                    self._items.remove(entry)  # ours is refused by raising
                    ran = False
                except ValueError:  # the loop's last drain took it: it ran
                    ran = True
                self._token = None
                self._refuse_left()  # other threads' posts made meanwhile
                if not ran:
                    raise
        elif self._token is None:  # the loop ended after another thread scheduled a drain
            self._refuse_left()

    def _refuse_left(self) -> None:
        """Refuse everything posted that no drain will run (each item once: popleft)."""
        items = self._items
        while items:
            try:
                _, arg, refuse = items.popleft()
            except IndexError:  # another thread took the last one
                return
            if refuse is not None:
                try:
                    refuse(arg)
                except Exception:
                    log.error("inbox.refuse_failed", exc_info=True)

    def call(self, fn: Callable[[], T], timeout: float) -> T:
        """Run ``fn()`` on the loop thread and return its result, blocking the calling thread
        (not the loop's) for at most ``timeout`` seconds.

        Raises:
            RuntimeError: the loop is not running, or did not run ``fn`` in time.
            Whatever ``fn`` raised.
        """
        done = _thread.allocate_lock()
        done.acquire()
        box: list[tuple[bool, Any]] = []

        def run(_: object) -> None:
            try:
                box.append((True, fn()))
            except BaseException as exc:
                box.append((False, exc))
            finally:
                done.release()

        def refuse(_: object) -> None:
            box.append((False, RuntimeError("the endpoint's loop has ended")))
            done.release()

        self.post(run, None, refuse)
        if not done.acquire(timeout=timeout):
            raise RuntimeError(f"the endpoint's loop did not answer within {timeout}s")
        ok, value = box[0]
        if not ok:
            raise value
        return value  # type: ignore[no-any-return]

    def _drain(self) -> None:
        self._scheduled = False  # first: an item appended after this line schedules a new drain
        items = self._items
        while items:
            try:
                fn, arg, _ = items.popleft()
            except IndexError:  # a thread refusing what is left took it (the loop is ending)
                return
            try:
                fn(arg)
            except Exception:  # one bad hand-off must not take the event loop down
                log.error("inbox.failed", fn=getattr(fn, "__qualname__", repr(fn)),
                          exc_info=True)


def _run_job(fn: Callable[..., object], args: tuple[Any, ...]) -> None:
    try:
        fn(*args)
    except BaseException:  # (a user callback's errors are logged by `_future`, its own)
        _job_failed(fn)


def _job_failed(fn: Callable[..., object]) -> None:
    log.error("callback_job.failed", job=getattr(fn, "__qualname__", type(fn).__name__),
              exc_info=True)


def _run_late(fn: Callable[..., object], args: tuple[Any, ...]) -> None:
    """Run ``fn(*args)`` on a thread of its own (a callback completed on the loop thread after
    the runner closed: a callback must never run on, or block, the event loop)."""
    threading.Thread(target=_run_job, args=(fn, args), name="remoting-late-callback",
                     daemon=True).start()


class CallbackRunner:
    """The threads that run user callbacks, never on the event loop nor on the thread that
    read their answer (RocketMQ's ``callbackExecutor``): up to ``threads`` daemon threads,
    started as callbacks come and none is idle.

    A job costs one hold of ``_lock`` to queue it (and to wake a sleeping thread, if one
    sleeps) and a lock-free pop to take it: nothing is made per job but its tuple (no
    `concurrent.futures.Future`, no condition). Threads take one job at a time, so a callback
    that blocks holds up only its own thread. After `close`, jobs run in the thread that
    submits them (on a thread of their own if that is the loop's).
    """

    def __init__(self, name: str, threads: int, owner: object) -> None:
        self._name = name
        self._threads = threads
        self._owner = owner
        self._lock = threading.Lock()
        self._jobs: deque[tuple[Callable[..., object], tuple[Any, ...]]] = deque()
        self._idle: list[_thread.LockType] = []  # the wake-up locks of sleeping threads
        self._workers: list[threading.Thread] = []
        self._started = 0  # threads started (their names' numbers)
        self._closed = False
        self.loop_thread_id: int | None = None  # set by the endpoint: never run callbacks there

    def submit(self, fn: Callable[..., object], *args: Any) -> None:
        """Run ``fn(*args)`` on a callback thread; after `close`, here (on a thread of its
        own if here is the loop thread). Exceptions are logged, never raised."""
        with self._lock:
            if not self._closed:
                self._jobs.append((fn, args))
                if self._idle:
                    self._idle.pop().release()
                    return
                if len(self._workers) >= self._threads or self._start_worker():
                    return
                if self._workers:  # no thread more: the running ones take it
                    return
                left = list(self._jobs)  # no thread at all: they run here
                self._jobs.clear()
            else:
                left = [(fn, args)]
        for job, job_args in left:
            self._run_after_close(job, job_args)

    def _run_after_close(self, fn: Callable[..., object], args: tuple[Any, ...]) -> None:
        if threading.get_ident() == self.loop_thread_id:
            _run_late(fn, args)
        else:
            _run_job(fn, args)

    def _start_worker(self) -> bool:
        """Start one more thread (under ``_lock``); False if the system refused it."""
        worker = threading.Thread(target=self._work, name=f"{self._name}_{self._started}",
                                  daemon=True)
        self._started += 1
        try:
            worker.start()
        except RuntimeError as exc:  # can't start new thread (a limit of the system's)
            log.warning("callback_thread.start_failed", threads=len(self._workers),
                        error=str(exc))
            return False
        self._workers.append(worker)
        return True

    def _work(self) -> None:
        mark_own_thread(self._owner)
        wake = _thread.allocate_lock()
        wake.acquire()  # held while nothing woke this thread
        jobs, lock, idle = self._jobs, self._lock, self._idle
        while True:
            try:
                fn, args = jobs.popleft()  # (thread-safe: CPython's deque guarantee)
            except IndexError:
                with lock:
                    if jobs:  # queued since the pop
                        continue
                    if self._closed:  # nothing left: the thread ends
                        return
                    idle.append(wake)
                wake.acquire()  # released by whoever pops ``wake`` from ``idle``
                continue
            try:
                fn(*args)
            except BaseException:  # (a user callback's errors are logged by `_future`)
                _job_failed(fn)
            del fn, args  # the job's references go now, not at the next job

    def close(self, timeout: float = CALLBACKS_CLOSE_SECONDS) -> None:
        """Run the callbacks still queued, then stop the threads; wait ``timeout`` seconds at
        most for that (a callback that never returns must not hang shutdown: its thread is
        left to finish, logged as ``callbacks.still_running``). Later callbacks run at once
        in the thread that completes or registers them."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            idle = self._idle[:]  # (emptied in place: the threads hold the list)
            self._idle.clear()
            workers = list(self._workers)
        for wake in idle:  # each finds the queue empty and `_closed` set, and ends
            wake.release()
        deadline = monotonic() + timeout
        me = threading.current_thread()
        for worker in workers:
            if worker is not me:  # (a callback shutting its client down)
                worker.join(max(0.0, deadline - monotonic()))
        if any(w.is_alive() for w in workers if w is not me):
            log.warning("callbacks.still_running", seconds=timeout,
                        hint="a callback has not returned; shutdown goes on without it")
