"""Seed frames, structure-aware mutations and the decoder oracle shared by the fuzzers.

Used by the in-process mutation loop (`run_mutation_fuzz`), the atheris harness
(``atheris_decoder.py``, as its seed corpus and custom mutator) and the live fuzz test (as the
source of hostile frames). Everything is driven by a `random.Random`, so a failure reproduces
from its seed and index.

Frame layout (SPEC 1): int32 length | byte serialize type | 24-bit header length | header |
body. The raw helpers use `struct` rather than the codec, so a codec bug cannot hide itself
in the bytes we mutate.
"""

from __future__ import annotations

import random
import struct
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Final

from codec import (
    DEFAULT_MAX_FRAME_BYTES,
    FLAG_ONEWAY,
    FLAG_RESPONSE,
    CodecError,
    FrameDecoder,
    LanguageCode,
    RemotingCommand,
    SerializeType,
    encode_frame,
)

_PREFIX: Final = struct.Struct(">iI")
_I32: Final = struct.Struct(">i")
_I16: Final = struct.Struct(">h")

# max_frame_bytes values a decoder is built with: tiny limits make a mutated length prefix
# fail fast, the default makes it wait for more bytes (the "need more data" state).
FRAME_LIMITS: Final = (64, 300, 64 * 1024, DEFAULT_MAX_FRAME_BYTES)

INTERESTING_32: Final = (
    0, 1, 3, 4, 5, 7, 8, 0x7F, 0x80, 0xFF, 0x100, 0xFFFF, 0x10000, 0xFFFFFF, 0x1000000,
    0x7FFFFFFF, -1, -2, -0x80000000, DEFAULT_MAX_FRAME_BYTES - 4, DEFAULT_MAX_FRAME_BYTES - 3,
)
INTERESTING_16: Final = (0, 1, 0x7F, 0x80, 0xFF, 0x7FFF, -1, -0x8000)
INTERESTING_BYTES: Final = (0x00, 0x01, 0x7F, 0x80, 0xFF, 0x22, 0x27, 0x5C, 0x7B, 0x7D, 0xC0,
                            0xED, 0xF4)
# JSON fragments that exercise the lenient parser and the field coercions.
JSON_TOKENS: Final = (
    b"null", b"true", b"false", b"0", b"-1", b"1.5", b"1e400", b"-0", b"2147483648",
    b"-2147483649", b"99999999999999999999999", b'""', b'"x"', b"'x'", b"[]", b"{}",
    b'"\\ud800"', b'"\\u0000"', b'"\\x"', b"[1,[2,{}]]", b"{'a':{}}", b"NaN", b"Infinity",
    b"\xff", b"\xed\xa0\x80", b"'", b'"', b"{", b"}", b":", b",", b"\\",
)

# --------------------------------------------------------------------------- seeds


def seed_commands() -> list[RemotingCommand]:
    """Return valid commands of both serializations covering every header field."""
    cmds: list[RemotingCommand] = []
    for st in SerializeType:
        cmds += [
            RemotingCommand(code=0, opaque=0, serialize_type=st),
            RemotingCommand(code=10, opaque=42, serialize_type=st,
                            ext_fields={"topic": "TopicTest", "queueId": "3", "flagOn": "true"},
                            body=bytes(range(128))),
            RemotingCommand(code=0, flag=FLAG_RESPONSE, opaque=7, remark="héllo ✓\n\x7f\u2028",
                            ext_fields={"k": "v", "e": "", "n": None}, body=b"hello",
                            serialize_type=st, language=LanguageCode.JAVA, version=475),
            RemotingCommand(code=34, flag=FLAG_ONEWAY, opaque=-5, body=b"{}", serialize_type=st,
                            language=LanguageCode.GO),
            RemotingCommand(code=-32768, version=32767, opaque=2**31 - 1, flag=-(2**31),
                            remark="", ext_fields={}, serialize_type=st),
            RemotingCommand(code=105, opaque=3, serialize_type=st,
                            ext_fields={f"key{i}": "v" * i for i in range(12)}),
        ]
    cmds.append(RemotingCommand(code=2**31 - 1, version=-(2**31), opaque=9))  # JSON-only range
    return cmds


def raw_frame(header: bytes, body: bytes = b"", serialize_type: int = 0) -> bytes:
    """Return a frame whose lengths are right for ``header`` and ``body``."""
    word = ((serialize_type & 0xFF) << 24) | (len(header) & 0xFFFFFF)
    return _PREFIX.pack(4 + len(header) + len(body), word) + header + body


def binary_header(code: int = 10, opaque: int = 1, flag: int = 0, remark: bytes = b"",
                  ext: list[tuple[bytes, bytes]] | None = None) -> bytes:
    """Return a ROCKETMQ header built by hand."""
    entries = b"".join(_I16.pack(len(k)) + k + _I32.pack(len(v)) + v for k, v in ext or [])
    return (struct.pack(">hBhii", code, 0, 0, opaque, flag) + _I32.pack(len(remark)) + remark
            + _I32.pack(len(entries)) + entries)


def seed_frames() -> list[bytes]:
    """Return whole valid frames (both serializations) plus hand-made lenient/odd ones."""
    frames = [encode_frame(cmd) for cmd in seed_commands()]
    frames += [
        raw_frame(b"{code:1,'opaque':2,extFields:{'a':5,'b':[true,null,{'c':1.5e3}]}}"),
        raw_frame(b'{"code":"12","opaque":" 3 ","flag":1.0,"language":"JAVA",'
                  b'"serializeTypeCurrentRPC":"JSON","version":null}', b"body"),
        raw_frame(b'{"code":1,"extFields":{"k":"v"},"remark":"\\u00e9\\n"}'),
        raw_frame(binary_header(remark=b"OK", ext=[(b"key", b"value"), (b"k2", b"")]),
                  serialize_type=1),
        raw_frame(binary_header(flag=FLAG_RESPONSE, ext=[(b"", b"x")]), b"\x00" * 16,
                  serialize_type=1),
    ]
    return frames


# --------------------------------------------------------------------------- mutations


def _frame_starts(data: bytes) -> list[int]:
    """Return the offsets where length prefixes say frames start (best effort)."""
    starts: list[int] = []
    pos = 0
    while pos + 4 <= len(data) and len(starts) < 16:
        starts.append(pos)
        (length,) = _I32.unpack_from(data, pos)
        if length < 4:
            break
        pos += 4 + length
    return starts or [0]


def _put(data: bytearray, offset: int, packed: bytes) -> None:
    if offset < 0 or offset >= len(data):
        return
    data[offset : offset + len(packed)] = packed[: max(0, len(data) - offset)]


def _flip_bits(rng: random.Random, data: bytearray) -> None:
    for _ in range(rng.randint(1, 8)):
        if data:
            data[rng.randrange(len(data))] ^= 1 << rng.randrange(8)


def _set_bytes(rng: random.Random, data: bytearray) -> None:
    for _ in range(rng.randint(1, 4)):
        if data:
            data[rng.randrange(len(data))] = (rng.choice(INTERESTING_BYTES) if rng.random() < 0.6
                                              else rng.randrange(256))


def _insert(rng: random.Random, data: bytearray) -> None:
    at = rng.randint(0, len(data))
    if rng.random() < 0.5:
        data[at:at] = rng.randbytes(rng.randint(1, 16))
    else:
        data[at:at] = rng.choice(JSON_TOKENS)


def _delete(rng: random.Random, data: bytearray) -> None:
    if data:
        at = rng.randrange(len(data))
        del data[at : at + rng.randint(1, 16)]


def _tweak_length(rng: random.Random, data: bytearray) -> None:
    start = rng.choice(_frame_starts(bytes(data)))
    if start + 4 > len(data):
        return
    (length,) = _I32.unpack_from(data, start)
    choice = rng.random()
    if choice < 0.5:
        new = length + rng.choice((-9, -5, -2, -1, 1, 2, 5, 64))
    else:
        new = rng.choice(INTERESTING_32)
    _put(data, start, _I32.pack(max(-(2**31), min(2**31 - 1, new))))


def _tweak_header_word(rng: random.Random, data: bytearray) -> None:
    start = rng.choice(_frame_starts(bytes(data)))
    if start + 8 > len(data):
        return
    length, word = _PREFIX.unpack_from(data, start)
    st = word >> 24
    hl = word & 0xFFFFFF
    if rng.random() < 0.3:
        st = rng.choice((0, 1, 2, 0x16, 0x7F, 0xFF))
    else:
        hl = rng.choice((0, 1, hl - 1, hl + 1, length - 4, length - 3, 0xFFFFFF, hl * 2)) \
            & 0xFFFFFF
    _put(data, start + 4, struct.pack(">I", (st << 24) | hl))


def _tweak_inner_length(rng: random.Random, data: bytearray) -> None:
    """Overwrite an int16/int32 inside a header (ROCKETMQ remark/ext/key/value lengths)."""
    start = rng.choice(_frame_starts(bytes(data)))
    if start + 8 >= len(data):
        return
    offset = start + 8 + rng.choice((13, 17, 21, 23, 25, rng.randrange(0, 64)))
    if rng.random() < 0.5:
        _put(data, offset, _I32.pack(rng.choice(INTERESTING_32)))
    else:
        _put(data, offset, _I16.pack(rng.choice(INTERESTING_16)))


def _json_token(rng: random.Random, data: bytearray) -> None:
    """Replace a JSON token (between delimiters) by another, then fix the frame's lengths."""
    start = rng.choice(_frame_starts(bytes(data)))
    if start + 8 > len(data) or data[start + 4] != 0:
        _insert(rng, data)
        return
    length, word = _PREFIX.unpack_from(data, start)
    header_end = min(len(data), start + 8 + (word & 0xFFFFFF))
    header = bytes(data[start + 8 : header_end])
    if not header:
        return
    cuts = [i for i, b in enumerate(header) if b in b':,{}[]']
    if len(cuts) < 2:
        return
    i = rng.randrange(len(cuts) - 1)
    a, b = cuts[i] + 1, cuts[i + 1]
    new_header = header[:a] + rng.choice(JSON_TOKENS) + header[b:]
    body = bytes(data[header_end : start + 4 + max(length, 4)])
    data[start : start + 4 + max(length, 4)] = raw_frame(new_header, body, 0)


def _splice(rng: random.Random, data: bytearray, others: list[bytes]) -> None:
    other = rng.choice(others)
    a = rng.randint(0, len(data))
    b = rng.randint(0, len(other))
    data[a:] = other[b:] if rng.random() < 0.5 else other[:b]


def _fix_lengths(data: bytearray) -> None:
    """Make the first frame's length fields consistent again, so the header parser runs."""
    if len(data) < 8:
        return
    header_length = _PREFIX.unpack_from(data, 0)[1] & 0xFFFFFF
    st = data[4]
    header_length = min(header_length, len(data) - 8)
    _put(data, 0, _PREFIX.pack(len(data) - 4, ((st & 0xFF) << 24) | header_length))


Mutator = Callable[[random.Random, bytearray], None]
MUTATORS: Final[tuple[Mutator, ...]] = (
    _flip_bits, _set_bytes, _insert, _delete, _tweak_length, _tweak_header_word,
    _tweak_inner_length, _json_token,
)


def mutate(rng: random.Random, data: bytes, others: list[bytes]) -> bytes:
    """Return ``data`` after 1 to 4 random mutations (splices draw on ``others``)."""
    out = bytearray(data)
    for _ in range(rng.choice((1, 1, 1, 2, 2, 3, 4))):
        if rng.random() < 0.1:
            _splice(rng, out, others)
        else:
            rng.choice(MUTATORS)(rng, out)
    if rng.random() < 0.3:
        _fix_lengths(out)
    return bytes(out)


def random_stream(rng: random.Random, seeds: list[bytes]) -> bytes:
    """Return 1 to 4 frames, valid or mutated, or plain random bytes."""
    roll = rng.random()
    if roll < 0.08:
        return rng.randbytes(rng.randint(0, 64))
    parts = []
    for _ in range(rng.choice((1, 1, 1, 2, 2, 3, 4))):
        frame = rng.choice(seeds)
        parts.append(frame if rng.random() < 0.15 else mutate(rng, frame, seeds))
    return b"".join(parts)


def chunking(rng: random.Random, data: bytes) -> list[bytes]:
    """Split ``data`` as a socket might: whole, byte by byte, or at random offsets."""
    roll = rng.random()
    if roll < 0.25 or len(data) < 2:
        return [data]
    if roll < 0.35 and len(data) <= 400:
        return [data[i : i + 1] for i in range(len(data))]
    cuts = sorted({rng.randrange(1, len(data)) for _ in range(rng.randint(1, 8))})
    bounds = [0, *cuts, len(data)]
    return [data[a:b] for a, b in zip(bounds, bounds[1:], strict=False)]


# --------------------------------------------------------------------------- the oracle


def _fields(cmd: RemotingCommand) -> tuple[object, ...]:
    # A JSON header without "opaque" gets a fresh one from the global counter (as Java's field
    # initialiser does), so the opaque of a JSON command is not a function of the bytes.
    opaque = cmd.opaque if cmd.serialize_type is SerializeType.ROCKETMQ else None
    return (cmd.code, cmd.language, cmd.version, opaque, cmd.flag, cmd.remark,
            cmd.ext_fields, cmd.body, cmd.serialize_type)


@dataclass
class Outcome:
    commands: list[tuple[object, ...]]
    error: type[CodecError] | None


def decode_stream(chunks: list[bytes], max_frame_bytes: int) -> Outcome:
    """Feed ``chunks`` to a FrameDecoder; return its commands and the CodecError type, if any.

    Anything but a command, None or a CodecError escapes (that is the failure we look for),
    and a CodecError must be raised again by the next call (the documented sticky state).
    """
    decoder = FrameDecoder(max_frame_bytes)
    commands: list[tuple[object, ...]] = []
    for chunk in chunks:
        decoder.feed(chunk)
        try:
            while (cmd := decoder.next_command()) is not None:
                if not isinstance(cmd, RemotingCommand):
                    raise AssertionError(f"next_command returned {cmd!r}")
                commands.append(_fields(cmd))
        except CodecError as exc:
            try:
                decoder.next_command()
            except CodecError as again:
                if type(again) is not type(exc):
                    raise AssertionError(f"error changed: {exc!r} then {again!r}") from None
            else:
                raise AssertionError(f"decoder recovered after {exc!r}") from None
            return Outcome(commands, type(exc))
    return Outcome(commands, None)


def check_input(data: bytes, chunks: list[bytes], max_frame_bytes: int) -> Outcome:
    """Decode ``data`` whole and as ``chunks``: only commands/None/CodecError, same result."""
    whole = decode_stream([data], max_frame_bytes)
    if len(chunks) > 1:
        split = decode_stream(chunks, max_frame_bytes)
        if split != whole:
            raise AssertionError(
                f"chunking changed the result: whole={whole} chunked={split} "
                f"cuts={[len(c) for c in chunks]}"
            )
    return whole


@dataclass
class FuzzReport:
    inputs: int
    seconds: float
    commands: int
    errors: dict[str, int]

    @property
    def rate(self) -> float:
        return self.inputs / self.seconds if self.seconds else 0.0


def run_mutation_fuzz(n: int, seed: int, *, time_limit: float | None = None) -> FuzzReport:
    """Run ``n`` seeded random/mutated streams through the oracle (stops at ``time_limit``).

    Raises:
        AssertionError: an input broke the invariant; the message holds the seed, the index
            and the bytes (hex) to reproduce it.
    """
    rng = random.Random(seed)
    seeds = seed_frames()
    errors: dict[str, int] = {}
    commands = 0
    start = time.perf_counter()
    done = 0
    for i in range(n):
        data = random_stream(rng, seeds)
        chunks = chunking(rng, data)
        limit = rng.choice(FRAME_LIMITS)
        try:
            outcome = check_input(data, chunks, limit)
        except Exception as exc:
            raise AssertionError(
                f"seed={seed} input #{i} max_frame_bytes={limit} data={data.hex()} "
                f"cuts={[len(c) for c in chunks]}: {exc!r}"
            ) from exc
        commands += len(outcome.commands)
        if outcome.error is not None:
            errors[outcome.error.__name__] = errors.get(outcome.error.__name__, 0) + 1
        done = i + 1
        if time_limit is not None and not done % 1000 and \
                time.perf_counter() - start > time_limit:
            break
    return FuzzReport(done, time.perf_counter() - start, commands, errors)
