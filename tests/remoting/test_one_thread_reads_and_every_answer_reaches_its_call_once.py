"""The read role's invariants (`_read_role`), on a real connection over 127.0.0.1 with many
threads waiting at once: exactly one thread reads at a time; every answer reaches its call
exactly once; the role is handed on only to a follower whose call is not done; a follower
leaves woken by its call's completion or by the hand-off; nobody is left holding the role
or queued, whatever the order the answers come in and however they are cut into reads, and
with threads whose waits end before their answers come. The followers one read answered are
woken in turn (the wake chain), each once, by the reader or a follower leaving, also when
one of them raises as it wakes; a follower whose sleep raises leaves the queue. Counts, no
clock (waits far longer than the tests' bounds where only a wake may end them)."""

from __future__ import annotations

import random
import socket
import struct
import threading
from collections import Counter, deque
from time import monotonic
from typing import Any

import pytest

from codec import RemotingCommand, ResponseCode, encode_frame
from remoting import ClientConfig
from remoting._core._calling import _future
from remoting._core._calling._future import ResponseFuture, ThreadWaiter
from remoting._core._thread_driver._read_role import Awaited, ReadRole
from remoting._core._thread_driver._socket_io import SocketIO, dial
from remoting._core._thread_driver._thread_connection import ThreadConnection

THREADS = 24
ROUNDS = 12
WAIT = 30.0  # a bound on a hang, never reached when the role is handed on as it must be


class Owner:
    """The connection's owner: completes the calls its answers are to (on the reading
    thread), counting each completion and each answer nobody asked for."""

    serves_requests = False

    def __init__(self) -> None:
        self.calls: dict[int, ResponseFuture] = {}
        self.completed: Counter[int] = Counter()
        self.orphans = 0
        self.progress = threading.Condition()

    def responses_received(self, conn: ThreadConnection, responses: list[RemotingCommand]
                           ) -> None:
        for response in responses:
            fut = self.calls.get(response.opaque)
            if fut is None or not fut._complete(response):
                self.orphans += 1
                continue
            with self.progress:
                self.completed[response.opaque] += 1
                self.progress.notify_all()

    def wait_completed(self, opaques: list[int]) -> None:
        with self.progress:
            assert self.progress.wait_for(
                lambda: all(self.completed[o] for o in opaques), WAIT)

    def requests_received(self, conn: ThreadConnection, requests: list[RemotingCommand]
                          ) -> None:
        raise AssertionError("the peer sends no requests")

    def background_wanted(self, conn: ThreadConnection) -> None:
        pass

    def flush_soon(self, conn: ThreadConnection) -> None:
        pass

    def connection_closed(self, conn: ThreadConnection) -> None:
        pass


class CountingRole(ReadRole):
    """The read role, counting who holds it and what each hand-off was to."""

    __slots__ = ("calls", "changed", "followed", "handed", "handed_to_done", "inside",
                 "most_inside", "note", "readers", "threads")

    def __init__(self, mutex: threading.Lock, state: Any) -> None:
        super().__init__(mutex, state)
        self.note = threading.Lock()  # guards the counts below only
        self.changed = threading.Condition(self.note)  # a thread followed
        self.calls: dict[ThreadWaiter, Awaited] = {}
        self.threads: dict[ThreadWaiter, int] = {}  # each waiter's thread
        self.handed = 0
        self.handed_to_done = 0
        self.inside = 0
        self.most_inside = 0
        self.new_round()

    def new_round(self) -> None:
        self.followed: set[int] = set()  # threads that queued as followers this round
        self.readers: set[int] = set()  # threads that read this round

    def lead_or_follow(self, waiter: ThreadWaiter, call: Awaited) -> bool:
        with self.note:
            self.calls[waiter] = call
            self.threads[waiter] = threading.get_ident()
        led = super().lead_or_follow(waiter, call)
        if not led:
            with self.changed:
                self.followed.add(threading.get_ident())
                self.changed.notify_all()
        return led

    def pass_on(self) -> ThreadWaiter | None:  # (the connection's mutex is held)
        follower = super().pass_on()
        if follower is not None:
            with self.note:
                self.handed += 1
                if self.calls[follower].done():
                    self.handed_to_done += 1
        return follower


def connected(owner: Owner) -> tuple[ThreadConnection, CountingRole, socket.socket]:
    """A thread-driven connection to a peer on 127.0.0.1, with a counting read role; the
    peer's socket, to send it answers."""
    with socket.create_server(("127.0.0.1", 0)) as listener:
        sock = dial("127.0.0.1", listener.getsockname()[1], monotonic() + WAIT)
        peer, _ = listener.accept()
    conn = ThreadConnection(SocketIO(sock), "127.0.0.1", owner, ClientConfig())
    role = CountingRole(conn._mutex, conn.state)
    conn._read = role
    read_once = conn._read_once

    def counted_read_once(until: float) -> None:
        with role.note:
            role.inside += 1
            role.most_inside = max(role.most_inside, role.inside)
            role.readers.add(threading.get_ident())
        try:
            read_once(until)
        finally:
            with role.note:
                role.inside -= 1

    conn._read_once = counted_read_once  # type: ignore[method-assign]
    return conn, role, peer


def answer(fut: ResponseFuture) -> bytes:
    response = RemotingCommand.create_response(ResponseCode.SUCCESS)
    response.opaque = fut.opaque
    return encode_frame(response)


def send_cut(peer: socket.socket, frames: list[bytes], rng: random.Random) -> None:
    """Send ``frames`` cut at random places (a frame may span reads, a read many frames)."""
    data = b"".join(frames)
    at = 0
    while at < len(data):
        n = rng.randint(1, 3 * len(frames[0]))
        peer.sendall(data[at:at + n])
        at += n


def waiting(conn: ThreadConnection, futs: list[ResponseFuture], until: list[float]
            ) -> list[threading.Thread]:
    threads = [threading.Thread(target=conn.wait, args=(fut, end), daemon=True)
               for fut, end in zip(futs, until, strict=True)]
    for thread in threads:
        thread.start()
    return threads


def calls_for(conn: ThreadConnection, owner: Owner, n: int) -> list[ResponseFuture]:
    futs = []
    for _ in range(n):
        fut = ResponseFuture(RemotingCommand.create_request(1), "127.0.0.1", WAIT)
        fut.conn = conn
        owner.calls[fut.opaque] = fut
        futs.append(fut)
    return futs


def wait_all_waiting(role: CountingRole, n: int) -> int:
    """Wait until one of ``n`` threads reads and the others follow; return the reader's
    thread."""
    with role.changed:
        assert role.changed.wait_for(
            lambda: len(role._followers) == n - 1 and len(role.readers) == 1, WAIT)
        (reader,) = role.readers
        return reader


def test_one_reader_hands_on_to_a_waiting_thread_and_wakes_the_others_by_completion(
) -> None:
    """Each round: every thread waits; the answers of half the followers come first (their
    threads are woken by their completion), then the reader's own alone (it leaves: the role
    goes to a follower still waiting), then the rest."""
    owner = Owner()
    conn, role, peer = connected(owner)
    rng = random.Random(37)
    try:
        woken_by_completion = 0
        for _ in range(ROUNDS):
            role.new_round()
            futs = calls_for(conn, owner, THREADS)
            threads = waiting(conn, futs, [monotonic() + WAIT] * THREADS)
            by_thread = {t.ident: f for t, f in zip(threads, futs, strict=True)}
            leader = wait_all_waiting(role, THREADS)
            followers = [f for t, f in by_thread.items() if t != leader]
            first = followers[: len(followers) // 2]
            send_cut(peer, [answer(f) for f in first], rng)
            owner.wait_completed([f.opaque for f in first])
            own = by_thread[leader]
            send_cut(peer, [answer(own)], rng)  # the reader's own: it stops reading
            owner.wait_completed([own.opaque])
            rest = [f for f in followers if f not in first]
            rng.shuffle(rest)
            send_cut(peer, [answer(f) for f in rest], rng)
            for thread in threads:
                thread.join(WAIT)
                assert not thread.is_alive(), "a thread was left waiting"
            assert all(f.done() and f.cause is None for f in futs)
            with role.note:
                first_threads = {t for t, f in by_thread.items() if f in first}
                # answered while they followed: woken by their completion, they never read
                assert first_threads <= role.followed - role.readers
                woken_by_completion += len(first_threads)
    finally:
        peer.close()
        conn.close()
    assert role.most_inside == 1  # exactly one reader at a time
    assert sorted(owner.completed.values()) == [1] * (THREADS * ROUNDS) and not owner.orphans
    assert role.handed >= ROUNDS  # each round's first reader hands on
    assert role.handed_to_done == 0  # never to a thread whose answer it read
    assert woken_by_completion == ROUNDS * ((THREADS - 1) // 2)
    assert role.holder is None and not role._followers


@pytest.mark.parametrize("seed", range(4))
def test_any_order_any_cut_and_waits_that_end_early_keep_the_invariants(seed: int) -> None:
    """Answers in any order, cut anywhere; a third of the threads stop waiting before their
    answer (their calls are still answered once, by whoever reads then)."""
    rng = random.Random(seed)
    owner = Owner()
    conn, role, peer = connected(owner)
    everything: list[ResponseFuture] = []
    try:
        for _ in range(ROUNDS):
            futs = calls_for(conn, owner, THREADS)
            everything += futs
            now = monotonic()
            until = [now + (rng.uniform(0, 0.02) if rng.random() < 0.33 else WAIT)
                     for _ in futs]
            threads = waiting(conn, futs, until)
            order = list(futs)
            rng.shuffle(order)
            send_cut(peer, [answer(f) for f in order], rng)
            for thread in threads:
                thread.join(WAIT)
                assert not thread.is_alive(), "a thread was left waiting"
        leftover = [f for f in everything if not f.done()]
        if leftover:  # answered after every thread had stopped waiting: one more reader
            conn.wait(leftover[-1], monotonic() + WAIT)
            for fut in leftover:
                conn.wait(fut, monotonic() + WAIT)
    finally:
        peer.close()
        conn.close()
    assert role.most_inside == 1
    assert all(f.done() for f in everything)
    assert sorted(owner.completed.values()) == [1] * len(everything) and not owner.orphans
    assert role.handed_to_done == 0
    assert role.holder is None and not role._followers


def test_a_frame_header_alone_is_no_answer() -> None:
    """(The harness's own check: a cut frame completes nothing until its last byte.)"""
    owner = Owner()
    conn, role, peer = connected(owner)
    try:
        (fut,) = calls_for(conn, owner, 1)
        frame = answer(fut)
        peer.sendall(frame[:4])
        conn.wait(fut, monotonic() + 0.05)
        assert not fut.done() and struct.unpack(">i", frame[:4])[0] == len(frame) - 4
        peer.sendall(frame[4:])
        conn.wait(fut, monotonic() + WAIT)
        assert fut.done() and owner.completed[fut.opaque] == 1
    finally:
        peer.close()
        conn.close()


class RecordingChain(deque[ThreadWaiter]):
    """The read role's wake chain, noting which thread took each waiter out to wake it."""

    def __init__(self) -> None:
        super().__init__()
        self.taken: list[tuple[int, ThreadWaiter]] = []

    def popleft(self) -> ThreadWaiter:
        waiter = super().popleft()
        self.taken.append((threading.get_ident(), waiter))
        return waiter


def chained_round(conn: ThreadConnection, role: CountingRole, owner: Owner,
                  peer: socket.socket, futs: list[ResponseFuture]
                  ) -> tuple[list[threading.Thread], list[BaseException], int]:
    """Start a thread waiting for each of ``futs``; once one reads and the others follow,
    send every follower's answer in one write. Return the threads, what they raised, and
    the reader's thread."""
    raised: list[BaseException] = []

    def wait(fut: ResponseFuture) -> None:
        try:  # (waits far longer than the test's bound: only a wake ends them in time)
            conn.wait(fut, monotonic() + 10 * WAIT)
        except BaseException as exc:  # noqa: BLE001 (the test looks at it)
            raised.append(exc)

    threads = [threading.Thread(target=wait, args=(fut,), daemon=True) for fut in futs]
    for thread in threads:
        thread.start()
    reader = wait_all_waiting(role, len(futs))
    by_thread = {t.ident: f for t, f in zip(threads, futs, strict=True)}
    peer.sendall(b"".join(answer(f) for t, f in by_thread.items() if t != reader))
    return threads, raised, reader


def end_round(threads: list[threading.Thread], futs: list[ResponseFuture], reader: int,
              peer: socket.socket) -> None:
    """Every follower of a `chained_round` leaves (woken, long before its wait ends); then
    the reader's answer ends the reader's wait too."""
    for thread in threads:
        if thread.ident != reader:
            thread.join(WAIT)
            assert not thread.is_alive(), "a chained follower was left waiting"
    peer.sendall(answer(futs[[t.ident for t in threads].index(reader)]))
    for thread in threads:
        thread.join(WAIT)
        assert not thread.is_alive()


def test_the_followers_one_read_answered_wake_one_another() -> None:
    """The followers a read answers are woken one after another: the reader wakes one, and
    each of them, leaving its wait, wakes the next; every one leaves, once, and nobody stays
    chained."""
    owner = Owner()
    conn, role, peer = connected(owner)
    chain = role._chain = RecordingChain()
    try:
        futs = calls_for(conn, owner, THREADS)
        threads, raised, reader = chained_round(conn, role, owner, peer, futs)
        waiters = {w: t for w, t in role.threads.items() if t != reader}
        end_round(threads, futs, reader, peer)
    finally:
        peer.close()
        conn.close()
    assert not raised
    assert sorted(owner.completed.values()) == [1] * THREADS and not owner.orphans
    woken = [w for _, w in chain.taken]
    assert len(woken) == len(set(woken)) and set(woken) <= set(waiters)
    takers = {t for t, _ in chain.taken}
    assert takers <= set(waiters.values()) | {reader}  # the reader, or a follower leaving
    assert len(takers - {reader}) >= THREADS // 2  # chained followers woke the others
    assert not chain and not role._chained and not role._followers and role.holder is None


class RaisesOnceDone(ResponseFuture):
    """A call whose waiting thread raises as soon as it looks at it done (an exception in
    a chained thread, where it leaves its wait)."""

    def done(self) -> bool:
        if self._done:
            raise KeyboardInterrupt("in the woken thread")
        return False


def test_a_chained_follower_that_raises_as_it_wakes_still_wakes_the_next() -> None:
    """A thread of the chain whose wait ends with an exception (here KeyboardInterrupt, as
    it looks at its call) still wakes the next: every other follower leaves."""
    owner = Owner()
    conn, role, peer = connected(owner)
    try:
        futs = calls_for(conn, owner, THREADS)
        bad = [RaisesOnceDone(f.request, "127.0.0.1", WAIT) for f in futs[:: 3]]
        for fut, old in zip(bad, futs[:: 3], strict=True):
            fut.conn = conn
            del owner.calls[old.opaque]
            owner.calls[fut.opaque] = fut
        futs = bad + [f for f in futs if f not in futs[:: 3]]
        threads, raised, reader = chained_round(conn, role, owner, peer, futs)
        end_round(threads, futs, reader, peer)
    finally:
        peer.close()
        conn.close()
    assert len(raised) == len(bad)
    assert all(isinstance(exc, KeyboardInterrupt) for exc in raised)
    assert sorted(owner.completed.values()) == [1] * THREADS and not owner.orphans
    assert not role._chain and not role._chained and not role._followers


class InterruptedWaiter(ThreadWaiter):
    """A thread's waiter whose sleep is cut by KeyboardInterrupt (a signal, in the main
    thread)."""

    __slots__ = ()

    def sleep(self, seconds: float) -> None:
        raise KeyboardInterrupt("while following")


def test_a_follower_whose_sleep_raises_leaves_the_queue_and_is_never_handed_the_role(
) -> None:
    """A follower whose sleep ends with an exception is out of the queue when it leaves:
    the reader, leaving, hands the role to the next follower instead of to a thread gone
    (which would leave the connection with a holder that never reads)."""
    owner = Owner()
    conn, role, peer = connected(owner)
    raised: list[BaseException] = []
    claimed = threading.Event()
    try:
        lead, bad, *rest = calls_for(conn, owner, THREADS)

        def reader() -> None:
            assert conn.claim_read()
            claimed.set()
            conn.wait(lead, monotonic() + WAIT, reading=True)

        def interrupted() -> None:
            _future._THREAD.waiter = InterruptedWaiter()
            try:
                conn.wait(bad, monotonic() + WAIT)
            except KeyboardInterrupt as exc:
                raised.append(exc)

        first = threading.Thread(target=reader, daemon=True)
        first.start()
        assert claimed.wait(WAIT)
        gone = threading.Thread(target=interrupted, daemon=True)
        gone.start()
        gone.join(WAIT)
        assert raised and not gone.is_alive()
        threads = waiting(conn, rest, [monotonic() + WAIT] * len(rest))
        with role.changed:
            assert role.changed.wait_for(lambda: len(role._followers) == len(rest), WAIT)
        peer.sendall(answer(lead))  # the reader leaves: the role goes to a follower
        first.join(WAIT)
        assert not first.is_alive()
        peer.sendall(b"".join(answer(f) for f in [*rest, bad]))
        for thread in threads:
            thread.join(WAIT)
            assert not thread.is_alive(), "the role went to a thread gone: nobody read"
        owner.wait_completed([bad.opaque])
    finally:
        peer.close()
        conn.close()
    assert sorted(owner.completed.values()) == [1] * THREADS and not owner.orphans
    assert role.handed >= 1 and role.holder is None and not role._followers


def test_a_read_nested_in_a_read_gives_the_outer_read_its_deferred_wakes_back() -> None:
    """A callback run inline on a reading thread may read another connection: its read's
    deferral ends by setting the outer read's back, so the outer read's later completions
    are still woken in turn (they went out at once, out of turn, before)."""
    outer: list[ThreadWaiter] = []
    inner: list[ThreadWaiter] = []
    first, second = ThreadWaiter(), ThreadWaiter()
    assert _future.defer_thread_wakes(outer) is None
    try:
        before = _future.defer_thread_wakes(inner)  # the nested read
        _future._wake_all([first])
        _future.defer_thread_wakes(before)
        _future._wake_all([second])  # the outer read, after the nested one
    finally:
        _future.defer_thread_wakes(None)
    assert inner == [first] and outer == [second]
