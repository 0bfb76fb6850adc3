"""Pull answers decoded into Arrow columns at array speed (`messages_batch`) give what the
message-by-message decoder gives (`decode_messages`, then `messages_to_batch`): a real
broker's answer, generated messages of every kind (compressed bodies, IPv6 hosts, odd and
repeated properties, text that is not UTF-8), windows and tag filters, truncations and
garbage (no sockets)."""

from __future__ import annotations

from typing import Any

import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from remoting.rocketmq import MalformedResponseError
from remoting.rocketmq._arrow_codec import ARROW_SCHEMA, messages_batch, messages_to_batch
from remoting.rocketmq._message_codec import decode_messages

from .factories import DATA, stored_message

REAL = (DATA / "pull_body_broker_4_9_8.bin").read_bytes()


def rows(batch: pa.RecordBatch) -> list[dict[str, Any]]:
    """The batch as dicts, each message's properties as a dict (a repeated name keeps its
    last value in both decoders; only the map's order of entries may differ)."""
    out: list[dict[str, Any]] = batch.to_pylist()
    for row in out:
        row["properties"] = dict(row["properties"])
    return out


def oracle(bodies: list[bytes], windows: list[tuple[int, int]] | None = None,
           tags: frozenset[str] = frozenset()) -> tuple[list[dict[str, Any]], bool]:
    messages = []
    failed = False
    for i, body in enumerate(bodies):
        got, error = decode_messages(body, "broker-a")
        if windows is not None:
            got = [m for m in got if windows[i][0] <= m.queue_offset < windows[i][1]]
        messages += got
        if error is not None:
            failed = True
            break
    if tags:
        messages = [m for m in messages if m.tags in tags]
    return rows(messages_to_batch(messages, "broker-a")), failed


def test_a_real_brokers_answer_decodes_as_message_by_message() -> None:
    batch, error = messages_batch([REAL], None, "broker-a")

    assert error is None and batch.schema == ARROW_SCHEMA and batch.num_rows == 32
    assert rows(batch) == oracle([REAL])[0]
    first = batch.slice(0, 1).to_pylist()[0]
    assert first["msg_id"] == "22BE3D732150DF0151EA8E5655C60000"
    assert (first["tags"], first["keys"], first["body"]) == ("a", ["k1", "k2"], b"hello")
    assert dict(first["properties"])["x"] == "y"


def test_every_truncation_keeps_the_whole_messages_before_it_with_an_error() -> None:
    for cut in range(0, len(REAL), 37):
        batch, error = messages_batch([REAL[:cut]], None, "broker-a")
        expected, failed = oracle([REAL[:cut]])
        assert rows(batch) == expected
        assert (error is not None) == failed
        assert error is None or isinstance(error, MalformedResponseError)


properties = st.dictionaries(
    st.sampled_from(["TAGS", "KEYS", "UNIQ_KEY", "a", "région", "WAIT", "k k"]),
    st.text(st.characters(exclude_characters="\x01\x02", exclude_categories=["Cs"]),
             max_size=12), max_size=5)
raw_properties = st.lists(st.sampled_from(["TAGS\x01t1", "TAGS\x01t2", "KEYS\x01a  b",
                                           "\x01v", "k\x01", "k\x01v\x01w", "", "x\x01y",
                                           "WAIT\x01true", "UNIQ_KEY\x01ID1"]), max_size=6)
message = st.fixed_dictionaries({
    "body": st.binary(max_size=60),
    "compress": st.booleans(),
    "properties": st.one_of(properties, raw_properties),
    "topic": st.sampled_from(["T", "Tópico", "%RETRY%g"]),
    "ipv6": st.integers(0, 12),
})


def build(spec: dict[str, Any], offset: int) -> bytes:
    props = spec["properties"]
    raw = None if isinstance(props, dict) else "\x02".join(props)
    data = stored_message(
        topic=spec["topic"], body=spec["body"], queue_offset=offset,
        commit_offset=1000 + offset, compress=spec["compress"],
        properties=props if raw is None else None,
        store_host=("::1", 10911) if spec["ipv6"] == 0 else ("127.0.0.1", 10911))
    if raw is None:
        return data
    # the same message with its raw properties string in place of the empty one
    return _with_properties(data, raw.encode())


def _with_properties(data: bytes, props: bytes) -> bytes:
    import struct

    head = data[:-2]  # the empty properties' length field ends the message
    out = head + struct.pack(">h", len(props)) + props
    return struct.pack(">i", len(out)) + out[4:]


@settings(max_examples=150, deadline=None)
@given(st.lists(message, min_size=1, max_size=12), st.integers(1, 4), st.data())
def test_generated_messages_decode_as_message_by_message(
        specs: list[dict[str, Any]], answers: int, data: st.DataObject) -> None:
    encoded = [build(spec, i) for i, spec in enumerate(specs)]
    size = -(-len(encoded) // answers)
    bodies = [b"".join(encoded[i:i + size]) for i in range(0, len(encoded), size)]
    windows = [(i, i + size - data.draw(st.integers(0, 1)))
               for i in range(0, len(encoded), size)]
    tags = data.draw(st.sampled_from([frozenset(), frozenset({"t1"}), frozenset({"t2", "x"})]))

    batch, error = messages_batch(bodies, windows, "broker-a", tags)

    expected, failed = oracle(bodies, windows, tags)
    assert error is None and not failed
    assert rows(batch) == expected


def test_properties_that_are_not_utf8_decode_as_the_slow_path_does() -> None:
    good = stored_message(queue_offset=0, properties={"TAGS": "a"})
    bad = _with_properties(stored_message(queue_offset=1), b"TAGS\x01\xff\xfe")
    batch, error = messages_batch([good + bad], None, "broker-a")
    assert error is None
    assert rows(batch) == oracle([good + bad])[0]
    assert batch.column("tags").to_pylist() == ["a", "\ufffd\ufffd"]


def test_a_body_that_does_not_inflate_stops_the_batch_at_that_message() -> None:
    good = stored_message(queue_offset=0, body=b"x" * 100, compress=True)
    broken = stored_message(queue_offset=1, body=b"not zlib", sys_flag=0x1 | (0x3 << 8))

    batch, error = messages_batch([good + broken + good], None, "broker-a")

    assert isinstance(error, MalformedResponseError) and "does not inflate" in str(error)
    assert batch.column("body").to_pylist() == [b"x" * 100]


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=400))
def test_garbage_gives_messages_or_an_error_and_nothing_else(data: bytes) -> None:
    batch, error = messages_batch([data], None, "broker-a")
    assert isinstance(batch, pa.RecordBatch) and batch.schema == ARROW_SCHEMA
    assert error is None or isinstance(error, MalformedResponseError)
    assert rows(batch) == oracle([data])[0]


def test_the_compressed_bodies_of_each_answer_inflate_to_a_bounded_total(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """decode_messages' bound, per answer: two answers of two bodies that each inflate to the
    whole budget together are read; an answer of three stops before its third."""
    from remoting.rocketmq import _arrow_codec, _message_codec

    budget = 3 * 1024 * 1024  # the rule at a size a test can afford
    monkeypatch.setattr(_message_codec, "MAX_INFLATED_BYTES", budget)
    monkeypatch.setattr(_arrow_codec, "MAX_INFLATED_BYTES", budget)

    def answer(first: int, count: int) -> bytes:
        return b"".join(stored_message(topic="t", body=b"\x00" * (budget // 2), compress=True,
                                       queue_offset=i, properties={"UNIQ_KEY": f"K{i}"})
                        for i in range(first, first + count))

    batch, error = messages_batch([answer(0, 2), answer(2, 2)], None, "broker-a")
    assert error is None and batch.column("queue_offset").to_pylist() == [0, 1, 2, 3]
    assert {len(b) for b in batch.column("body").to_pylist()} == {budget // 2}
    batch, error = messages_batch([answer(0, 3)], None, "broker-a")
    assert batch.column("queue_offset").to_pylist() == [0, 1]
    assert error is not None and "inflates past" in str(error)
