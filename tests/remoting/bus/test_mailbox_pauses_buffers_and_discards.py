"""`Mailbox` (sans-I/O): a consumer's buffer, as Vert.x's ``HandlerRegistration``: one drain
at a time, in order; ``pause`` keeps messages, ``resume`` hands the kept ones out first; at
most ``max_buffered`` held, the one in the handler included; beyond that a message is
discarded; and at most ``max_bytes`` of them (one larger message alone)."""

from __future__ import annotations

from remoting._bus._mailbox import Mailbox

BIG = 1 << 40  # no bound of bytes, for the tests of counts


def test_the_first_message_starts_a_drain_and_the_next_queue_behind_it() -> None:
    box: Mailbox[int] = Mailbox(10, BIG)
    assert box.offer(1, 1) == "start"
    assert box.offer(2, 1) == "queued"
    assert box.take() == 1
    box.done()
    assert box.take() == 2
    box.done()
    assert box.take() is None and not box.running
    assert box.offer(3, 1) == "start"  # the drain ended: a new one starts


def test_a_paused_mailbox_keeps_messages_and_resume_starts_a_drain_for_them() -> None:
    box: Mailbox[int] = Mailbox(10, BIG)
    box.pause()
    assert [box.offer(i, 1) for i in range(3)] == ["queued"] * 3
    assert not box.running and box.buffered == 3
    assert box.resume() is True and box.running
    assert [box.take() for _ in range(3)] == [0, 1, 2]


def test_pausing_mid_drain_ends_it_after_the_running_message() -> None:
    box: Mailbox[int] = Mailbox(10, BIG)
    box.offer(1, 1)
    box.offer(2, 1)
    assert box.take() == 1
    box.pause()
    box.done()
    assert box.take() is None and not box.running
    assert box.resume() is True  # the kept message needs a drain
    assert box.take() == 2


def test_resume_with_a_drain_running_or_nothing_kept_starts_nothing() -> None:
    box: Mailbox[int] = Mailbox(10, BIG)
    assert box.resume() is False
    box.offer(1, 1)
    box.pause()
    assert box.resume() is False  # the drain that offer started still runs


def test_beyond_max_buffered_a_message_is_full_counting_the_one_in_the_handler() -> None:
    box: Mailbox[int] = Mailbox(2, BIG)
    box.offer(1, 1)
    assert box.take() == 1  # in the handler: still held
    assert box.offer(2, 1) == "queued"
    assert box.offer(3, 1) == "full"
    assert box.held == 2 and box.buffered == 1
    box.done()
    assert box.offer(3, 1) == "queued"


def test_clear_returns_what_was_kept() -> None:
    box: Mailbox[int] = Mailbox(5, BIG)
    box.pause()
    for i in range(3):
        box.offer(i, 1)
    assert box.clear() == [0, 1, 2] and box.buffered == 0


def test_a_mailbox_holds_at_most_max_bytes_the_running_message_included() -> None:
    box: Mailbox[str] = Mailbox(100, 10)
    box.pause()
    assert [box.offer(m, 4) for m in "abc"] == ["queued", "queued", "full"]  # 8, then 12 > 10
    assert box.held_bytes == 8
    assert box.offer("d", 2) == "queued" and box.held_bytes == 10
    box.resume()
    assert box.take() == "a"  # in the handler: still held
    assert box.offer("e", 1) == "full" and box.held_bytes == 10
    box.done()
    assert box.held_bytes == 6 and box.offer("e", 4) == "queued"
    assert box.clear() == ["b", "d", "e"] and box.held_bytes == 0


def test_one_message_larger_than_max_bytes_is_taken_alone() -> None:
    box: Mailbox[str] = Mailbox(100, 10)
    assert box.offer("huge", 50) == "start" and box.held_bytes == 50
    assert box.offer("small", 1) == "full"  # nothing beside it
    assert box.take() == "huge"
    box.done()
    assert box.take() is None and box.held_bytes == 0
    assert box.offer("small", 1) == "start"


def test_a_lower_max_bytes_keeps_what_is_held() -> None:
    box: Mailbox[str] = Mailbox(100, 10)
    box.pause()
    box.offer("a", 4)
    box.offer("b", 4)
    box.max_bytes = 2
    assert box.buffered == 2 and box.offer("c", 1) == "full"
