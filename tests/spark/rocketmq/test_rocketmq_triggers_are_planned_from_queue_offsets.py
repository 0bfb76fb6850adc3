"""The ``rocketmq`` source's bookkeeping without Spark or a broker: offsets as JSON per
topic, broker and queue (Kafka's shape), options' offsets (-2 earliest, -1 latest), each
trigger's ends (``maxMessagesPerTrigger`` shared exactly, ``Trigger.AvailableNow``'s bound,
new queues from 0), and ranges cut into partitions (``minPartitions``,
``messagesPerPartition``)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from remoting.spark._streaming._rocketmq._offsets import (
    QueueKey,
    Segment,
    given_offsets,
    offsets_from_json,
    offsets_json,
    plan_partitions,
    resolve,
    trigger_ends,
)

A0, A1, B0 = ("T", "broker-a", 0), ("T", "broker-a", 1), ("T", "broker-b", 0)


def test_offsets_are_json_per_topic_broker_and_queue_and_read_back() -> None:
    offsets = {A0: 120, A1: 98, B0: 7, ("U", "broker-a", 3): 1}
    raw = offsets_json(offsets)
    assert raw == {"T": {"broker-a": {"0": 120, "1": 98}, "broker-b": {"0": 7}},
                   "U": {"broker-a": {"3": 1}}}
    assert offsets_from_json(raw, ["T", "U"]) == offsets
    with pytest.raises(ValueError, match="reading U offsets, not topics T"):
        offsets_from_json(raw, ["T"])
    with pytest.raises(ValueError, match="not the rocketmq source's"):
        offsets_from_json({"topic": "T", "offset": 3, "group": "g"}, ["T"])


def test_offsets_options_take_words_or_json_with_or_without_the_topic_level() -> None:
    assert given_offsets("startingOffsets", " Earliest ", ["T"]) == "earliest"
    assert given_offsets("startingOffsets", '{"broker-a": {"0": 5, "1": -2}}', ["T"]) == {
        A0: 5, A1: -2}
    assert given_offsets("endingOffsets", '{"T": {"broker-b": {"0": -1}}}', ["T", "U"]) == {
        B0: -1}
    for bad, says in (("soon", "earliest, latest or JSON"),
                      ('{"broker-a": {"x": 1}}', "queue ids are digits"),
                      ('{"V": {"broker-a": {"0": 1}}}', "topics the source does not read"),
                      ('{"broker-a": {"0": -3}}', "offsets are >= 0")):
        with pytest.raises(ValueError, match=says):
            given_offsets("startingOffsets", bad, ["T"])


def test_options_offsets_resolve_within_each_queues_bounds() -> None:
    earliest, latest = {A0: 10, A1: 0, B0: 0}, {A0: 100, A1: 50, B0: 0}
    assert resolve("earliest", earliest, latest, "earliest") == {A0: 10, A1: 0, B0: 0}
    assert resolve("latest", earliest, latest, "earliest") == latest
    # named queues as given (held to their bounds), -2 and -1, and others by default
    assert resolve({A0: 3, A1: -1}, earliest, latest, "earliest") == {A0: 10, A1: 50, B0: 0}
    assert resolve({A0: 500}, earliest, latest, "latest") == {A0: 100, A1: 50, B0: 0}


def test_a_trigger_reads_to_the_ends_and_a_new_queue_from_zero() -> None:
    start = {A0: 10, A1: 20}
    assert trigger_ends(start, {A0: 15, A1: 20, B0: 4}) == {A0: 15, A1: 20, B0: 4}
    # a queue whose broker did not answer keeps its offset
    assert trigger_ends(start, {A0: 15}) == {A0: 15, A1: 20}


def test_max_messages_per_trigger_is_shared_by_what_each_queue_has_exactly() -> None:
    ends = trigger_ends({A0: 0, A1: 0, B0: 0}, {A0: 700, A1: 200, B0: 100}, 100)
    assert ends == {A0: 70, A1: 20, B0: 10}
    uneven = trigger_ends({A0: 0, A1: 0, B0: 0}, {A0: 1, A1: 1, B0: 1}, 2)
    assert sum(uneven.values()) == 2 and uneven == {A0: 1, A1: 1, B0: 0}


@given(st.dictionaries(st.sampled_from([A0, A1, B0]), st.integers(0, 1000), min_size=1),
       st.integers(1, 3000))
def test_shares_never_pass_the_limit_or_a_queues_end(latest: dict[QueueKey, int],
                                                    limit: int) -> None:
    ends = trigger_ends({}, latest, limit)
    assert sum(ends.values()) == min(limit, sum(latest.values()))
    assert all(0 <= ends[k] <= latest[k] for k in latest)


def test_available_now_reads_no_further_than_the_ends_it_found_first() -> None:
    target = {A0: 50}
    assert trigger_ends({A0: 40}, {A0: 90, A1: 30}, None, target) == {A0: 50, A1: 0}
    assert trigger_ends({A0: 50}, {A0: 90}, None, target) == {A0: 50}


def test_partitions_are_of_equal_sizes_and_split_large_queue_ranges() -> None:
    segments = [Segment("T", "broker-a", 0, 0, 1000), Segment("T", "broker-a", 1, 5, 5),
                Segment("T", "broker-b", 0, 100, 200)]
    one = plan_partitions(segments, 1, 10_000)
    assert one == [[Segment("T", "broker-a", 0, 0, 1000), Segment("T", "broker-b", 0, 100,
                                                                  200)]]
    four = plan_partitions(segments, 4, 10_000)
    assert [sum(s.size for s in part) for part in four] == [275, 275, 275, 275]
    assert four[3] == [Segment("T", "broker-a", 0, 825, 1000),
                       Segment("T", "broker-b", 0, 100, 200)]
    assert len(plan_partitions(segments, 1, 300)) == 4  # 1,100 offsets, 300 at most each
    assert plan_partitions([Segment("T", "broker-a", 0, 3, 3)], 2, 10) == []


@given(st.lists(st.integers(0, 500), min_size=1, max_size=6), st.integers(1, 8),
       st.integers(1, 700))
def test_partitions_cover_every_offset_once(sizes: list[int], minimum: int,
                                            per_partition: int) -> None:
    segments = [Segment("T", "broker-a", i, 10, 10 + size) for i, size in enumerate(sizes)]
    parts = plan_partitions(segments, minimum, per_partition)
    covered = sorted((s.queue_id, o) for part in parts for s in part
                     for o in range(s.start, s.end))
    assert covered == sorted((i, o) for i, size in enumerate(sizes)
                             for o in range(10, 10 + size))
    assert all(sum(s.size for s in part) <= per_partition for part in parts)
    if sum(sizes):
        assert len(parts) >= min(minimum, sum(sizes))
