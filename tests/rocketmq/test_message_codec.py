"""RocketMQ's message layouts, read and written as Java's MessageDecoder does: bytes a real
4.9.8 broker sent, round trips, compressed bodies, and hostile bytes (no sockets)."""

from __future__ import annotations

import struct
import zlib

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from remoting.rocketmq import MalformedResponseError
from remoting.rocketmq._message_codec import (
    decode_messages,
    decompress,
    encode_batch,
    offset_msg_id,
    parse_properties,
    properties_string,
)

from .factories import DATA, stored_message


def test_a_real_brokers_pull_answer_decodes_with_ids_tags_keys_and_properties() -> None:
    body = (DATA / "pull_body_broker_4_9_8.bin").read_bytes()
    messages, error = decode_messages(body, "broker-a")
    assert error is None
    assert len(messages) == 32
    first = messages[0]
    assert first.msg_id == "22BE3D732150DF0151EA8E5655C60000"  # the UNIQ_KEY it was sent with
    assert first.tags == "a" and first.keys == ["k1", "k2"]
    assert first.properties["x"] == "y" and first.properties["CLUSTER"] == "DefaultCluster"
    assert first.body == b"hello" and first.topic == "T1" and first.queue_offset == 0
    assert first.offset_msg_id == "7F0000010000B2B9000000000006AD38"
    assert first.store_host == "127.0.0.1:45753"
    assert [m.queue_offset for m in messages] == list(range(32))
    assert all(m.broker_name == "broker-a" and m.queue_id == 0 for m in messages)
    assert all(m.commit_log_offset > 0 and m.store_timestamp >= m.born_timestamp
               for m in messages)


def test_every_truncation_of_a_real_answer_keeps_the_whole_messages_before_it() -> None:
    body = (DATA / "pull_body_broker_4_9_8.bin").read_bytes()
    whole, _ = decode_messages(body, "b")
    ends = []
    pos = 0
    for m in whole:
        pos += m.store_size
        ends.append(pos)
    for cut in range(0, len(body), 7):
        messages, error = decode_messages(body[:cut], "b")
        complete = sum(1 for e in ends if e <= cut)
        assert len(messages) == complete
        assert (error is None) == (cut in ends or cut == 0)
        assert [m.msg_id for m in messages] == [m.msg_id for m in whole[:complete]]


_TEXT = st.characters(exclude_categories=["Cs"], exclude_characters="\x01\x02")


@given(topic=st.text(_TEXT, min_size=1, max_size=40).filter(lambda t: len(t.encode()) <= 127),
       body=st.binary(max_size=300),
       props=st.dictionaries(st.text(_TEXT, min_size=1, max_size=10),
                             st.text(_TEXT, min_size=1, max_size=20), max_size=5),
       offset=st.integers(0, 2**62), reconsume=st.integers(0, 100), compress=st.booleans(),
       v6=st.booleans())
@settings(max_examples=150, deadline=None)
def test_stored_messages_round_trip(topic: str, body: bytes, props: dict[str, str],
                                    offset: int, reconsume: int, compress: bool,
                                    v6: bool) -> None:
    host = ("::1", 10911) if v6 else ("127.0.0.1", 10911)
    data = stored_message(topic=topic, body=body, properties=props, queue_offset=offset,
                          reconsume_times=reconsume, compress=compress, store_host=host)
    data += stored_message(topic="second", body=b"x")
    messages, error = decode_messages(data, "b")
    assert error is None and len(messages) == 2
    m = messages[0]
    assert (m.topic, m.body, m.queue_offset, m.reconsume_times) == (topic, body, offset,
                                                                   reconsume)
    assert m.properties == props
    assert m.msg_id == props.get("UNIQ_KEY", m.offset_msg_id)  # else the broker's id
    assert m.store_host == ("[0000:0000:0000:0000:0000:0000:0000:0001]:10911" if v6
                            else "127.0.0.1:10911")
    assert messages[1].body == b"x"


@given(st.binary(max_size=400))
@settings(max_examples=300, deadline=None)
def test_garbage_gives_messages_or_a_documented_error_and_nothing_else(data: bytes) -> None:
    messages, error = decode_messages(data, "b")
    assert error is None or isinstance(error, MalformedResponseError)
    assert isinstance(messages, list)


@pytest.mark.parametrize(("change", "what"), [
    ({"magic": 12345}, "magic code"),
    ({"total_size": 10**9}, "total size"),
    ({"total_size": -4}, "total size"),
])
def test_a_malformed_message_is_named_with_its_position(change: dict[str, int],
                                                        what: str) -> None:
    good = stored_message(body=b"one")
    messages, error = decode_messages(good + stored_message(**change), "b")  # type: ignore[arg-type]
    assert len(messages) == 1
    assert error is not None and what in str(error) and f"byte {len(good)}" in str(error)


def test_a_body_that_does_not_inflate_is_a_malformed_message() -> None:
    bad = bytearray(stored_message(body=b"x" * 100, compress=True))
    bad[88 + 3] ^= 0xFF  # inside the compressed body (after the 88 fixed bytes)
    messages, error = decode_messages(bytes(bad), "b")
    assert messages == [] and error is not None and "inflate" in str(error)


def test_a_compression_bomb_is_refused_past_the_limit() -> None:
    with pytest.raises(MalformedResponseError, match="past 1000 bytes"):
        decompress(zlib.compress(b"\0" * 100_000), 0x1 | (0x3 << 8), limit=1000)


def test_zlib_bodies_of_older_clients_with_no_type_bits_inflate() -> None:
    assert decompress(zlib.compress(b"abc" * 1000), 0x1) == b"abc" * 1000


def test_an_unknown_compression_type_is_refused() -> None:
    with pytest.raises(MalformedResponseError, match="compression type 5"):
        decompress(b"xx", 0x1 | (0x5 << 8))


@given(st.dictionaries(st.text(_TEXT, min_size=1), st.text(_TEXT, min_size=1), max_size=8))
def test_properties_round_trip(props: dict[str, str]) -> None:
    assert parse_properties(properties_string(props)) == props


def test_properties_with_an_empty_name_or_value_are_skipped_as_java_skips_them() -> None:
    assert parse_properties("a\x01\x02\x01b\x02c\x01d\x02e") == {"c": "d"}
    assert properties_string({"k": "v", "x": "y"}) == "k\x01v\x02x\x01y"


def test_a_batch_body_has_java_s_encode_message_layout() -> None:
    body = encode_batch([(b"abc", "TAGS\x01t", 0), (b"", "", 7)])
    size = 4 + 4 + 4 + 4 + 4 + 3 + 2 + 6
    assert body[:size] == struct.pack(">iiiii", size, 0, 0, 0, 3) + b"abc" + struct.pack(
        ">h", 6) + b"TAGS\x01t"
    assert body[size:] == struct.pack(">iiiii", 22, 0, 0, 7, 0) + struct.pack(">h", 0)


def test_a_brokers_message_id_is_its_store_address_port_and_commit_offset() -> None:
    assert offset_msg_id(bytes([127, 0, 0, 1]), 10911, 0x6AD38) == \
        "7F00000100002A9F000000000006AD38"
