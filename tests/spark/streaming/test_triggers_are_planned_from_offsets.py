"""What a trigger of the streaming source reads, and how its range becomes tasks: bookkeeping
with no I/O (`remoting.spark._streaming._offsets`), checked without Spark or sockets."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from remoting.spark._streaming._offsets import (
    StreamOffset,
    resolve_start,
    split_range,
    trigger_end,
)


def test_a_trigger_reads_what_is_readable_bounded_by_the_limit_and_the_target() -> None:
    assert trigger_end(100, 1_000) == 1_000
    assert trigger_end(100, 1_000, max_messages=250) == 350
    assert trigger_end(100, 1_000, max_messages=5_000) == 1_000
    assert trigger_end(100, 1_000, target=600) == 600
    assert trigger_end(100, 1_000, max_messages=250, target=300) == 300


def test_a_trigger_never_goes_back_and_reads_nothing_when_nothing_is_new() -> None:
    assert trigger_end(100, 100) == 100
    assert trigger_end(100, 40) == 100  # readable below start: a deferred message before it
    assert trigger_end(100, 1_000, target=100) == 100  # AvailableNow reached its end


@given(start=st.integers(0, 10**6), width=st.integers(0, 10**6),
       per=st.integers(1, 50_000))
def test_a_range_splits_into_consecutive_tasks_of_at_most_the_size(
        start: int, width: int, per: int) -> None:
    ranges = split_range(start, start + width, per)

    covered = [o for a, b in ranges for o in (a, b)]
    assert (covered[0], covered[-1]) == (start, start + width) if width else ranges == []
    assert all(b1 == a2 for (_, b1), (a2, _) in zip(ranges, ranges[1:], strict=False))
    sizes = [b - a for a, b in ranges]
    assert all(0 < s <= per for s in sizes)
    assert not sizes or max(sizes) - min(sizes) <= 1  # equal sizes, within one


def test_starting_offsets_resolve_against_the_topic() -> None:
    assert resolve_start("earliest", 20, 90) == 20
    assert resolve_start("latest", 20, 90) == 90
    assert resolve_start(50, 20, 90) == 50
    assert resolve_start(5, 20, 90) == 20  # let go already: the earliest held
    assert resolve_start(500, 20, 90) == 90


def test_an_offset_survives_the_checkpoints_json_and_names_its_topic() -> None:
    offset = StreamOffset("events", 42, "reports")
    no_group = StreamOffset("events", 42)

    assert StreamOffset.from_json(offset.to_json(), "events") == offset
    assert offset.at(50) == StreamOffset("events", 50, offset.group)
    assert "group" not in no_group.to_json()
    assert StreamOffset.from_json(no_group.to_json(), "events") == no_group
    # a checkpoint written before groups were optional names the one made for its query
    old = StreamOffset.from_json({"topic": "events", "offset": 7, "group": "spark-0a"}, "events")
    assert old.group == "spark-0a"


def test_a_checkpoint_of_another_topic_or_another_source_is_refused_clearly() -> None:
    with pytest.raises(ValueError, match="reading topic 'orders', not 'events'"):
        StreamOffset.from_json({"topic": "orders", "offset": 3, "group": "g"}, "events")
    with pytest.raises(ValueError, match="not the remoting source's"):
        StreamOffset.from_json({"partition-0": 17}, "events")

