"""Builders for tests: commands, raw frames, golden vectors and hypothesis strategies.

In the spirit of h2's ``FrameFactory``: tests say what they need ("a JSON frame whose header
length exceeds the frame") and this module knows the byte layout. Raw builders here are
deliberately independent of ``codec`` (plain ``struct``), so a codec bug cannot hide itself in
the expected bytes.
"""

from __future__ import annotations

import re
import struct
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from hypothesis import strategies as st

from codec import (
    FrameDecoder,
    LanguageCode,
    RemotingCommand,
    SerializeType,
    encode_frame,
)

INT16_MIN, INT16_MAX = -(2**15), 2**15 - 1
INT32_MIN, INT32_MAX = -(2**31), 2**31 - 1

# --------------------------------------------------------------------------- commands


def make_command(**fields: object) -> RemotingCommand:
    """Return a request with a fixed opaque (tests must not depend on the global counter)."""
    values: dict[str, object] = {"code": 10, "opaque": 1}
    values.update(fields)
    return RemotingCommand(**values)  # type: ignore[arg-type]


def req(code: int, body: bytes | None = b"x", st: SerializeType = SerializeType.JSON,
        **ext: str) -> RemotingCommand:
    """Return a request of ``code`` with a fresh opaque (the one such helper of the suite)."""
    cmd = RemotingCommand.create_request(code, header=ext or None, body=body)
    cmd.serialize_type = st
    return cmd


def small_request(serialize_type: SerializeType = SerializeType.JSON) -> RemotingCommand:
    """The request bench/codec.py measures: 3 ext fields, a 128-byte body."""
    return make_command(
        code=10, opaque=42,
        ext_fields={"topic": "TopicTest", "queueId": "3", "flagOn": "true"},
        body=bytes(range(128)), serialize_type=serialize_type,
    )


def command_fields(cmd: RemotingCommand) -> dict[str, object]:
    """Return every field of ``cmd`` as a dict (readable assertion diffs)."""
    return {
        "code": cmd.code, "language": cmd.language, "version": cmd.version,
        "opaque": cmd.opaque, "flag": cmd.flag, "remark": cmd.remark,
        "ext_fields": cmd.ext_fields, "body": cmd.body, "serialize_type": cmd.serialize_type,
    }


def after_round_trip(cmd: RemotingCommand) -> dict[str, object]:
    """Return the fields ``cmd`` must have after encode + decode (the wire's normalisations).

    - an empty body is no body (Java: ``body == null`` for zero body bytes);
    - JSON: None ext values are omitted (fastjson skips null map values), an empty map stays;
    - ROCKETMQ: None ext values are skipped (as Java's ``mapSerialize``); length 0 decodes as
      null, so an empty remark or value becomes None and an empty map becomes None.
    """
    expected = command_fields(cmd)
    expected["body"] = cmd.body or None
    ext = cmd.ext_fields
    if cmd.serialize_type is SerializeType.JSON:
        if ext is not None:
            expected["ext_fields"] = {k: v for k, v in ext.items() if v is not None}
    else:
        expected["remark"] = cmd.remark or None
        kept = {k: v or None for k, v in (ext or {}).items() if v is not None}
        expected["ext_fields"] = kept or None
    return expected


# --------------------------------------------------------------------------- raw frames

_PREFIX = struct.Struct(">iI")


def header_word(serialize_type: int, header_length: int) -> int:
    """Return RocketMQ ``markProtocolType``: type in the high byte, length in the low 24 bits."""
    return ((serialize_type & 0xFF) << 24) | (header_length & 0xFFFFFF)


def raw_frame(
    header: bytes,
    body: bytes = b"",
    *,
    serialize_type: int = 0,
    length: int | None = None,
    header_length: int | None = None,
) -> bytes:
    """Return a frame with the given parts; ``length``/``header_length`` may lie on purpose."""
    if header_length is None:
        header_length = len(header)
    if length is None:
        length = 4 + len(header) + len(body)
    return _PREFIX.pack(length, header_word(serialize_type, header_length)) + header + body


def json_frame(header_text: str | bytes, body: bytes = b"") -> bytes:
    """Return a JSON frame carrying ``header_text`` verbatim (valid or not)."""
    header = header_text.encode("utf-8") if isinstance(header_text, str) else header_text
    return raw_frame(header, body, serialize_type=0)


def binary_header(
    *,
    code: int = 10,
    language: int = 0,
    version: int = 0,
    opaque: int = 1,
    flag: int = 0,
    remark: bytes = b"",
    ext: Sequence[tuple[bytes, bytes]] = (),
    remark_length: int | None = None,
    ext_length: int | None = None,
) -> bytes:
    """Return ROCKETMQ header bytes built by hand (lengths may lie on purpose)."""
    entries = b"".join(
        struct.pack(">h", len(k)) + k + struct.pack(">i", len(v)) + v for k, v in ext
    )
    return (
        struct.pack(">hBhii", code, language, version, opaque, flag)
        + struct.pack(">i", len(remark) if remark_length is None else remark_length) + remark
        + struct.pack(">i", len(entries) if ext_length is None else ext_length) + entries
    )


def rocketmq_frame(header: bytes, body: bytes = b"") -> bytes:
    return raw_frame(header, body, serialize_type=1)


# Preambles of protocols that sometimes reach a remoting port by mistake.
TLS_CLIENT_HELLO = bytes.fromhex("160301020001" "0001fc0303") + bytes(32)
HTTP2_PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"
HTTP1_REQUEST = b"GET / HTTP/1.1\r\nHost: localhost\r\n\r\n"


# --------------------------------------------------------------------------- streams


def decode_chunks(
    chunks: Iterable[bytes | bytearray | memoryview], max_frame_bytes: int | None = None
) -> tuple[list[RemotingCommand], FrameDecoder]:
    """Feed ``chunks`` one by one, draining commands after each; return them and the decoder."""
    decoder = FrameDecoder() if max_frame_bytes is None else FrameDecoder(max_frame_bytes)
    commands: list[RemotingCommand] = []
    for chunk in chunks:
        decoder.feed(chunk)
        while (cmd := decoder.next_command()) is not None:
            commands.append(cmd)
    return commands, decoder


def split_at(data: bytes, cuts: Iterable[int]) -> list[bytes]:
    """Split ``data`` at the given offsets (any order, duplicates and out-of-range ignored)."""
    points = sorted({c for c in cuts if 0 < c < len(data)})
    bounds = [0, *points, len(data)]
    return [data[a:b] for a, b in zip(bounds, bounds[1:], strict=False)]


def bytewise(data: bytes) -> list[bytes]:
    return [data[i : i + 1] for i in range(len(data))]


def encode_all(commands: Iterable[RemotingCommand]) -> bytes:
    return b"".join(encode_frame(cmd) for cmd in commands)


# --------------------------------------------------------------------------- golden vectors


# Produced by the real Java RocketMQ code; the protocol reference is beside them
# (tests/codec/data/SPEC.md).
DATA_DIR = Path(__file__).resolve().parent / "codec" / "data"
GOLDEN_VECTORS_PATH = DATA_DIR / "golden-vectors.txt"

_DECODES_AS = re.compile(
    r"code=(?P<code>-?\d+) opaque=(?P<opaque>-?\d+) flag=(?P<flag>-?\d+) "
    r"response=(?P<response>true|false) oneway=(?P<oneway>true|false) "
    r"lang=(?P<lang>\w+) version=(?P<version>-?\d+) serialize=(?P<serialize>\w+) "
    r"remark=(?P<remark><null>|\".*?\") ext=(?P<ext><null>|\{.*?\}) "
    r"bodyLen=(?P<body_len>-?\d+) body=.* bodyHex=(?P<body_hex>[0-9a-f]*)$"
)


@dataclass(frozen=True)
class JavaDecoded:
    """What Java's ``RemotingCommand.decode`` returned for a golden frame (``java_decodes_as``)."""

    code: int
    opaque: int
    flag: int
    response: bool
    oneway: bool
    language: LanguageCode
    version: int
    serialize_type: SerializeType
    remark: str | None
    ext_fields: dict[str, str | None] | None
    body: bytes | None


@dataclass(frozen=True)
class GoldenVector:
    name: str
    serialize_type: SerializeType
    frame: bytes
    header: bytes
    body: bytes
    java: JavaDecoded
    header_json: str | None = None
    alt_frames: tuple[bytes, ...] = field(default=())

    @property
    def ext_key_count(self) -> int:
        return len(self.java.ext_fields or {})


def _parse_java_map(text: str) -> dict[str, str | None] | None:
    # Java's HashMap.toString: "{k=v, k2=v2}"; a null value prints as "null", "" as nothing.
    if text == "<null>":
        return None
    inner = text[1:-1]
    result: dict[str, str | None] = {}
    for entry in inner.split(", ") if inner else []:
        key, _, value = entry.partition("=")
        result[key] = None if value == "null" else value
    return result


def parse_java_decodes_as(text: str) -> JavaDecoded:
    m = _DECODES_AS.fullmatch(text)
    if m is None:
        raise ValueError(f"unrecognised java_decodes_as line: {text!r}")
    remark = m["remark"]
    body = bytes.fromhex(m["body_hex"])
    if int(m["body_len"]) == -1:
        assert not body
    return JavaDecoded(
        code=int(m["code"]), opaque=int(m["opaque"]), flag=int(m["flag"]),
        response=m["response"] == "true", oneway=m["oneway"] == "true",
        language=LanguageCode[m["lang"]], version=int(m["version"]),
        serialize_type=SerializeType[m["serialize"]],
        remark=None if remark == "<null>" else remark[1:-1],
        ext_fields=_parse_java_map(m["ext"]),
        body=body if int(m["body_len"]) > 0 else None,
    )


def load_golden_vectors(path: Path = GOLDEN_VECTORS_PATH) -> list[GoldenVector]:
    """Parse ``golden-vectors.txt``: ``[name]`` sections of ``key: value`` lines."""
    sections: dict[str, dict[str, str]] = {}
    current: dict[str, str] | None = None
    for line in path.read_text(encoding="utf-8").splitlines():
        if not line or line.startswith("#"):
            continue
        if line.startswith("[") and line.endswith("]"):
            current = sections.setdefault(line[1:-1], {})
            continue
        key, sep, value = line.partition(": ")
        if not sep and line.endswith(":"):  # "body_hex: " with an empty value
            key, value = line[:-1], ""
        if current is not None:
            current[key] = value
    vectors = []
    for name, v in sections.items():
        alt = v.get("alt_frame_hex_4_9_8")
        vectors.append(GoldenVector(
            name=name,
            serialize_type=SerializeType[v["serialize_type"]],
            frame=bytes.fromhex(v["frame_hex"]),
            header=bytes.fromhex(v["header_hex"]),
            body=bytes.fromhex(v.get("body_hex", "")),
            java=parse_java_decodes_as(v["java_decodes_as"]),
            header_json=v.get("header_json"),
            alt_frames=(bytes.fromhex(alt),) if alt else (),
        ))
    return vectors


# --------------------------------------------------------------------------- strategies

languages = st.sampled_from(list(LanguageCode))
# Any text, control characters and astral planes included (hypothesis never generates lone
# surrogates by default: they cannot be encoded as UTF-8, by us or by Java).
texts = st.text(max_size=40)
int32s = st.integers(INT32_MIN, INT32_MAX)
int16s = st.integers(INT16_MIN, INT16_MAX)
ext_field_maps = st.dictionaries(texts, st.one_of(st.none(), texts), max_size=6)
bodies = st.one_of(st.none(), st.binary(max_size=300))


@st.composite
def commands(draw: st.DrawFn, serialize_type: SerializeType | None = None) -> RemotingCommand:
    """Any valid command for ``serialize_type`` (ROCKETMQ: int16 code/version, short keys)."""
    if serialize_type is None:
        serialize_type = draw(st.sampled_from(list(SerializeType)))
    narrow = serialize_type is SerializeType.ROCKETMQ
    return RemotingCommand(
        code=draw(int16s if narrow else int32s),
        language=draw(languages),
        version=draw(int16s if narrow else int32s),
        opaque=draw(int32s),
        flag=draw(int32s),
        remark=draw(st.one_of(st.none(), texts)),
        ext_fields=draw(st.one_of(st.none(), ext_field_maps)),
        body=draw(bodies),
        serialize_type=serialize_type,
    )
