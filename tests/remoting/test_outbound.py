"""`Outbound`, a connection's queue of frames, as plain bookkeeping (no socket)."""

from __future__ import annotations

from remoting._core._sansio._outbound import FLUSH_FRAMES, Outbound


def test_frames_queue_as_pieces_in_order_and_count() -> None:
    out = Outbound()
    assert out.idle and not out
    assert out.add(b"aaa") == 1
    assert out.add((b"head", b"body" * 10)) == 2  # a large body stays its own piece
    assert out.pieces == [b"aaa", b"head", b"body" * 10]
    assert out.queued == out.size == 3 + 4 + 40
    assert not out.idle


def test_a_partial_send_keeps_the_rest_in_order_without_copying() -> None:
    out = Outbound()
    calls: list[int] = []
    out.add(b"0123456789", lambda: calls.append(1))
    out.add(b"abc", lambda: calls.append(2))
    assert out.sent(4) is None  # the callbacks wait until everything before them went out
    assert [bytes(p) for p in out.pieces] == [b"456789", b"abc"]
    assert isinstance(out.pieces[0], memoryview)
    assert out.queued == 9
    callbacks = out.sent(9)
    assert callbacks is not None and out.idle
    for fn in callbacks:
        fn()
    assert calls == [1, 2]


def test_a_take_counts_until_done_and_new_frames_queue_behind_it() -> None:
    out = Outbound()
    out.add(b"x" * 100)
    pieces, callbacks = out.take()
    assert pieces == [b"x" * 100] and callbacks == []
    assert not out and out.size == 100 and not out.idle  # in flight still counts
    out.add(b"y")
    assert out.size == 101
    out.taken_done()
    assert out.size == 1


def test_the_frame_count_says_when_to_flush_early() -> None:
    out = Outbound()
    counts = [out.add(b"f") for _ in range(FLUSH_FRAMES)]
    assert counts[-1] == FLUSH_FRAMES
    out.sent(out.queued)
    assert out.add(b"f") == 1  # counted again from an empty queue


def test_clear_drops_everything_and_returns_the_callbacks() -> None:
    out = Outbound()
    out.add(b"a", lambda: None)
    out.add_rest([memoryview(b"rest")], lambda: None)
    assert len(out.clear()) == 2
    assert out.idle and out.size == 0


def test_frames_queued_together_count_as_queued_one_by_one() -> None:
    frames = [b"aaa", b"bb", b"c"]
    together, alone = Outbound(), Outbound()
    assert together.add_many(frames) == 3
    for frame in frames:
        alone.add(frame)
    assert together.pieces == alone.pieces == frames
    assert (together.queued, together.frames) == (alone.queued, alone.frames) == (6, 3)
    mixed = Outbound()  # a large body among them keeps its two pieces, in order
    assert mixed.add_many([b"x", (b"head", b"body"), b"y"]) == 3
    assert mixed.pieces == [b"x", b"head", b"body", b"y"] and mixed.queued == 10
