"""A queue's pulled messages and a group's offsets, without sockets: the offset committed is
never past a message still waiting, the thresholds pause pulls, orderly takes in order, and
offsets files round trip. Consumers check their arguments before connecting."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from remoting.rocketmq import LitePullConsumer, MessageQueue, PushConsumer
from remoting.rocketmq._message_codec import decode_messages
from remoting.rocketmq._offsets import OffsetTable, dump_file, load_file
from remoting.rocketmq._process_queue import ProcessQueue

from .factories import stored_message


def _messages(offsets: list[int], size: int = 10) -> list:  # type: ignore[type-arg]
    data = b"".join(stored_message(queue_offset=o, body=b"x" * size) for o in offsets)
    messages, error = decode_messages(data, "b")
    assert error is None
    return messages


@given(st.integers(1, 60), st.data())
def test_the_commit_offset_is_the_lowest_message_still_waiting(n: int, data: st.DataObject
                                                               ) -> None:
    pq = ProcessQueue()
    messages = _messages(list(range(100, 100 + n)))
    pq.put(messages)
    order = data.draw(st.permutations(messages))
    handled: set[int] = set()
    for m in order:
        offset = pq.remove([m])
        handled.add(m.queue_offset)
        waiting = [o for o in range(100, 100 + n) if o not in handled]
        assert offset == (min(waiting) if waiting else 100 + n)
    assert pq.count == 0 and pq.size == 0


def test_thresholds_pause_a_queue_and_handling_resumes_it() -> None:
    pq = ProcessQueue(max_messages=3, max_bytes=10**6, max_span=5)
    ms = _messages([0, 1, 2, 3])
    pq.put(ms)
    assert pq.over_threshold(orderly=False) == "messages"
    pq.remove(ms[1:])
    assert pq.over_threshold(orderly=False) is None
    pq.put(_messages([10]))  # offset 0 still waits: a span of 10
    assert pq.over_threshold(orderly=False) == "span"
    assert pq.over_threshold(orderly=True) is None  # orderly handles in order: no span limit
    big = ProcessQueue(max_bytes=100)
    big.put(_messages([0, 1], size=60))
    assert big.over_threshold(orderly=False) == "bytes"


def test_orderly_takes_in_order_and_a_failure_puts_the_message_back() -> None:
    pq = ProcessQueue()
    pq.put(_messages([5, 6, 7]))
    [first] = pq.take(1)
    assert first.queue_offset == 5 and pq.commit_offset() == 5
    pq.retry([first])
    assert pq.take(1)[0].queue_offset == 5  # again, before 6
    assert pq.commit() == 6
    assert [m.queue_offset for m in pq.take(2)] == [6, 7] and pq.commit() == 8


def test_messages_put_twice_count_once() -> None:
    pq = ProcessQueue()
    assert pq.put(_messages([1, 2])) == 2
    assert pq.put(_messages([2, 3])) == 1 and pq.count == 3


def test_offsets_move_forward_and_say_what_changed() -> None:
    table = OffsetTable()
    q = MessageQueue("t", "b", 0)
    table.update(q, 5)
    table.update(q, 3)  # backwards: ignored
    assert table.read(q) == 5 and table.changed() == [(q, 5)]
    table.stored(q, 5)
    assert table.changed() == []
    table.update(q, 2, increase_only=False)  # a seek
    assert table.changed() == [(q, 2)]


def test_an_offsets_file_round_trips_and_a_foreign_file_is_refused(tmp_path: Path) -> None:
    path = str(tmp_path / "g" / "offsets.json")
    q = MessageQueue("t", "b", 1)
    assert load_file(path) == {}
    dump_file(path, [(q, 42)])
    assert load_file(path) == {q: 42}
    (tmp_path / "bad.json").write_text('{"offsets": [{"topic": 1}]}')
    with pytest.raises(ValueError, match="not an offsets file"):
        load_file(str(tmp_path / "bad.json"))


async def _async_handler(message: object) -> None:
    return None


@pytest.mark.parametrize(("kwargs", "error"), [
    ({"handler": _async_handler}, TypeError),
    ({"handler": "not callable"}, TypeError),
    ({"group": ""}, ValueError),
    ({"topic": "bad topic"}, ValueError),
    ({"consume_from": "yesterday"}, ValueError),
    ({"pull_batch": 0}, ValueError),
    ({"access_key": "ak"}, ValueError),
    ({"expression": "||"}, ValueError),
])
def test_a_push_consumer_checks_its_arguments_before_connecting(
        kwargs: dict[str, object], error: type[Exception]) -> None:
    args: dict[str, object] = {"group": "g", "topic": "t", "handler": print, **kwargs}
    with pytest.raises(error):
        PushConsumer(["127.0.0.1:1"], args.pop("group"), args.pop("topic"),  # type: ignore[arg-type]
                     **args)  # type: ignore[arg-type]


def test_a_lite_pull_consumer_checks_its_arguments_and_needs_start() -> None:
    with pytest.raises(ValueError, match="max_poll_messages"):
        LitePullConsumer(["127.0.0.1:1"], "g", "t", max_poll_messages=0)
    consumer = LitePullConsumer(["127.0.0.1:1"], "g", "t")
    from remoting.rocketmq import RocketMQError

    with pytest.raises(RocketMQError, match="not running"):
        consumer.poll(0)
