"""Golden vectors produced by the real Java RocketMQ code (tests/codec/data/golden-vectors.txt)."""

from __future__ import annotations

import pytest

from codec import RemotingCommand, SerializeType, decode_frame, encode_frame
from codec._header_json import encode_json_header
from tests.factories import (
    GoldenVector,
    bytewise,
    command_fields,
    decode_chunks,
    load_golden_vectors,
)

VECTORS = load_golden_vectors()
ALT_VECTORS = [v for v in VECTORS if v.alt_frames]


def vector_id(vector: GoldenVector) -> str:
    return vector.name


def java_fields(v: GoldenVector) -> dict[str, object]:
    j = v.java
    return {
        "code": j.code, "language": j.language, "version": j.version, "opaque": j.opaque,
        "flag": j.flag, "remark": j.remark, "ext_fields": j.ext_fields, "body": j.body,
        "serialize_type": j.serialize_type,
    }


def test_golden_vector_file_has_every_kind_of_vector() -> None:
    names = {v.name for v in VECTORS}
    assert len(VECTORS) == 16
    for st in ("json", "rocketmq"):
        for kind in ("request_minimal", "request_one_extfield", "response_remark_ext_body",
                     "oneway_body_only", "unicode_remark_empty_value", "custom_header",
                     "python_language_version", "acl_signed"):
            assert f"{st}_{kind}" in names
    assert {v.name for v in ALT_VECTORS} == {"json_acl_signed", "rocketmq_acl_signed"}


@pytest.mark.parametrize("vector", VECTORS, ids=vector_id)
def test_golden_vector_parts_are_consistent(vector: GoldenVector) -> None:
    # Guards the parser in tests/factories.py, not the codec.
    frame = vector.frame
    assert frame[8 : 8 + len(vector.header)] == vector.header
    assert frame[8 + len(vector.header) :] == vector.body
    assert frame[4] == vector.serialize_type
    if vector.header_json is not None:
        assert vector.header_json.encode("utf-8") == vector.header


@pytest.mark.parametrize("vector", VECTORS, ids=vector_id)
def test_golden_frame_decodes_as_java_decoded_it(vector: GoldenVector) -> None:
    cmd = decode_frame(vector.frame)
    assert command_fields(cmd) == java_fields(vector)
    assert cmd.is_response is vector.java.response
    assert cmd.is_oneway is vector.java.oneway


@pytest.mark.parametrize("vector", VECTORS, ids=vector_id)
def test_golden_frame_decodes_the_same_whole_and_byte_by_byte(vector: GoldenVector) -> None:
    whole, _ = decode_chunks([vector.frame])
    trickled, decoder = decode_chunks(bytewise(vector.frame))
    assert [command_fields(c) for c in whole] == [java_fields(vector)]
    assert [command_fields(c) for c in trickled] == [java_fields(vector)]
    assert decoder.buffered_bytes == 0


@pytest.mark.parametrize("vector", VECTORS, ids=vector_id)
def test_golden_command_re_encodes_to_the_java_frame(vector: GoldenVector) -> None:
    decoded = decode_frame(vector.frame)
    built = RemotingCommand(**java_fields(vector))  # type: ignore[arg-type]
    for cmd in (decoded, built):
        nulls = [k for k, v in (cmd.ext_fields or {}).items() if v is None]
        if nulls and cmd.serialize_type is SerializeType.ROCKETMQ:
            # Java decodes an empty value as null and skips null values when it encodes
            # (mapSerialize): re-encoded, the entry is gone, as it is in Java. The frame
            # Java wrote came from empty strings, and those encode to it byte for byte.
            again = decode_frame(encode_frame(cmd)).ext_fields or {}
            assert not any(k in again for k in nulls)
            cmd = cmd.with_opaque(cmd.opaque)
            cmd.ext_fields = {k: "" if v is None else v
                              for k, v in (cmd.ext_fields or {}).items()}
        frame = encode_frame(cmd)
        if vector.ext_key_count <= 1:
            assert frame.hex() == vector.frame.hex()
        else:
            # Multi-key maps follow Java HashMap order: compare as dictionaries.
            assert len(frame) == len(vector.frame)
            assert frame[:8] == vector.frame[:8]
            assert command_fields(decode_frame(frame)) == java_fields(vector)


@pytest.mark.parametrize(
    "vector", [v for v in VECTORS if v.serialize_type is SerializeType.JSON], ids=vector_id
)
def test_golden_json_header_text_matches_fastjson(vector: GoldenVector) -> None:
    header = encode_json_header(decode_frame(vector.frame)).decode("utf-8")
    if vector.ext_key_count <= 1:
        assert header == vector.header_json
    else:
        assert len(header) == len(vector.header_json or "")


@pytest.mark.parametrize("vector", ALT_VECTORS, ids=vector_id)
def test_rocketmq_4_9_8_frames_decode_identically(vector: GoldenVector) -> None:
    (alt,) = vector.alt_frames
    assert alt != vector.frame  # only the HashMap order differs
    assert len(alt) == len(vector.frame)
    assert command_fields(decode_frame(alt)) == command_fields(decode_frame(vector.frame))
    assert command_fields(decode_frame(alt)) == java_fields(vector)
