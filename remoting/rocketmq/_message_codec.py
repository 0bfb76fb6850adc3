"""RocketMQ's message layouts (Java's ``MessageDecoder``), sans-I/O.

- A pull's answer body is stored messages back to back, each: TOTALSIZE (int32), MAGICCODE,
  BODYCRC, QUEUEID, FLAG (int32s), QUEUEOFFSET, PHYSICALOFFSET (int64s), SYSFLAG (int32),
  BORNTIMESTAMP (int64), BORNHOST (4 or 16 address bytes + int32 port), STORETIMESTAMP
  (int64), STOREHOST (likewise), RECONSUMETIMES (int32), PREPARED TRANSACTION OFFSET (int64),
  BODY (int32 length + bytes), TOPIC (int8 length + UTF-8), PROPERTIES (int16 length + UTF-8),
  all big-endian. SYSFLAG bit 4 / 5 says the born / store host is IPv6; bit 0 that the body
  is compressed, bits 8-10 with what (0 and 3: zlib, 1: LZ4, 2: zstd).
- A batch send's body is messages back to back, each: TOTALSIZE, MAGICCODE (0), BODYCRC
  (0), FLAG (int32s), BODY (int32 length + bytes), PROPERTIES (int16 length + UTF-8)
  (``encodeMessage``).
- Properties are ``name\\x01value`` pairs joined by ``\\x02``; a pair with an empty name or
  value is skipped when read, as Java's ``string2messageProperties`` does.
- A broker's message id (``offset_msg_id``) is the store host's address and port and the
  commit-log offset, in upper-case hex (``createMessageId``).

A message that does not follow the layout raises `MalformedResponseError` naming where; the
messages before it are returned with the error (`decode_messages`), since a broker's answer
is read as far as it can be (Java's ``decodes`` stops at the first it cannot read).
"""

from __future__ import annotations

import struct
import zlib
from typing import TYPE_CHECKING, Final

from ._errors import MalformedResponseError
from ._message import UNIQ_KEY, Message

if TYPE_CHECKING:
    from collections.abc import Iterable, Mapping

__all__ = [
    "COMPRESSED",
    "MAGIC_CODE",
    "ZLIB_TYPE",
    "compress",
    "decode_messages",
    "decompress",
    "encode_batch",
    "offset_msg_id",
    "properties_string",
    "parse_properties",
]

MAGIC_CODE: Final = -626843481  # MessageDecoder.MESSAGE_MAGIC_CODE (4.x's layout)
COMPRESSED: Final = 0x1  # MessageSysFlag.COMPRESSED_FLAG
BORNHOST_V6: Final = 0x1 << 4
STOREHOST_V6: Final = 0x1 << 5
COMPRESSION_TYPE_MASK: Final = 0x7 << 8
ZLIB_TYPE: Final = 0x3 << 8  # MessageSysFlag.COMPRESSION_ZLIB_TYPE
DEFAULT_COMPRESS_LEVEL: Final = 5  # DefaultMQProducerImpl.compressLevel
# A compressed body inflates to at most this, and the compressed bodies of one pull's answer
# together too: a small hostile answer cannot make the client allocate gigabytes (a 306 KB
# answer of three bodies inflated to 300 MiB). The broker's own limit on a message is 4 MiB
# by default, and a pull answers 32 messages at most.
MAX_INFLATED_BYTES: Final = 256 * 1024 * 1024

# the fixed part of a stored message with IPv4 hosts, up to and including BODY's length
_FIXED_V4: Final = struct.Struct(">iiiiiqqiq4siq4siiqi")
_SYSFLAG_AT: Final = 36
_HEAD: Final = struct.Struct(">iiiiiqqiq")  # up to BORNTIMESTAMP (any hosts)
_HOST_V4: Final = struct.Struct(">4si")
_HOST_V6: Final = struct.Struct(">16si")
_MIDDLE: Final = struct.Struct(">q")
_TAIL: Final = struct.Struct(">iqi")  # RECONSUMETIMES, PREPARED OFFSET, BODY length
_INT: Final = struct.Struct(">i")
_SHORT: Final = struct.Struct(">h")
_BATCH_HEAD: Final = struct.Struct(">iiiii")


def properties_string(properties: Mapping[str, str]) -> str:
    """Return ``properties`` as RocketMQ writes them (``messageProperties2String``)."""
    return "\x02".join([f"{k}\x01{v}" for k, v in properties.items()])


def parse_properties(text: str) -> dict[str, str]:
    """Return the properties of RocketMQ's ``name\\x01value\\x02...`` string."""
    result: dict[str, str] = {}
    if not text:
        return result
    for pair in text.split("\x02"):
        name, sep, value = pair.partition("\x01")
        if name and value:  # string2messageProperties skips a pair with either empty
            result[name] = value
    return result


def offset_msg_id(host: bytes, port: int, commit_log_offset: int) -> str:
    """Return the broker's id of a stored message (``MessageDecoder.createMessageId``)."""
    return (host + struct.pack(">iq", port, commit_log_offset)).hex().upper()


def _host_text(address: bytes, port: int) -> str:
    if len(address) == 4:
        return f"{address[0]}.{address[1]}.{address[2]}.{address[3]}:{port}"
    groups = ":".join(address[i:i + 2].hex() for i in range(0, 16, 2))
    return f"[{groups}]:{port}"


def compress(body: bytes, level: int = DEFAULT_COMPRESS_LEVEL) -> bytes:
    """Return ``body`` compressed as Java's producer does by default (zlib, level 5)."""
    return zlib.compress(body, level)


def decompress(body: bytes, sys_flag: int, limit: int = MAX_INFLATED_BYTES) -> bytes:
    """Return a compressed body inflated, by the method its ``sys_flag`` names.

    Raises:
        MalformedResponseError: it does not inflate, inflates past ``limit`` bytes, or uses
            LZ4 / zstd without the ``lz4`` / ``zstandard`` package installed.
    """
    kind = (sys_flag & COMPRESSION_TYPE_MASK) >> 8
    if limit <= 0:  # (zlib's max_length 0 means no limit)
        raise MalformedResponseError(f"a compressed body inflates past {limit} bytes")
    try:
        if kind in (0, 3):  # CompressionType.findByValue: 0 (older clients) and 3 are zlib
            inflater = zlib.decompressobj()
            out = inflater.decompress(body, limit)
            if inflater.unconsumed_tail:
                raise MalformedResponseError(f"a compressed body inflates past {limit} bytes")
            return out
        if kind == 1:
            import lz4.frame  # type: ignore[import-not-found,unused-ignore]

            out = bytes(lz4.frame.decompress(body))
        elif kind == 2:
            import zstandard  # type: ignore[import-not-found,unused-ignore]

            out = bytes(zstandard.ZstdDecompressor().decompress(body, max_output_size=limit))
        else:
            raise MalformedResponseError(f"unknown compression type {kind} in sysFlag")
    except ImportError as exc:
        package = "lz4" if kind == 1 else "zstandard"
        raise MalformedResponseError(
            f"a body is compressed with {'LZ4' if kind == 1 else 'zstd'}: install the "
            f"{package!r} package to read it") from exc
    except (zlib.error, ValueError, RuntimeError) as exc:
        raise MalformedResponseError(f"a compressed body does not inflate: {exc}") from exc
    except Exception as exc:  # lz4's and zstandard's own error classes
        raise MalformedResponseError(f"a compressed body does not inflate: {exc}") from exc
    if len(out) > limit:
        raise MalformedResponseError(f"a compressed body inflates past {limit} bytes")
    return out


def decode_messages(data: bytes | memoryview, broker_name: str
                    ) -> tuple[list[Message], MalformedResponseError | None]:
    """Return the messages of a pull's answer body, and the error that stopped reading.

    Messages of the same answer share nothing; each one's body is its own bytes (inflated
    if it was compressed: `MAX_INFLATED_BYTES` at most, for the whole answer).
    ``broker_name`` is the broker the answer came from.
    """
    view = memoryview(data)
    end = len(view)
    pos = 0
    out: list[Message] = []
    append = out.append
    inflatable = MAX_INFLATED_BYTES
    try:
        while pos < end:
            message, pos = _decode_one(view, pos, end, broker_name, inflatable)
            if message.sys_flag & COMPRESSED:
                inflatable -= len(message.body)
            append(message)
    except MalformedResponseError as exc:
        return out, exc
    return out, None


def _decode_one(view: memoryview, start: int, end: int, broker_name: str,
                inflatable: int = MAX_INFLATED_BYTES) -> tuple[Message, int]:
    if end - start < _FIXED_V4.size:
        raise _malformed(start, "a message shorter than its fixed fields")
    (sys_flag,) = _INT.unpack_from(view, start + _SYSFLAG_AT)
    if not sys_flag & (BORNHOST_V6 | STOREHOST_V6):
        (total, magic, body_crc, queue_id, flag, queue_offset, commit_offset, sys_flag,
         born_ts, born_addr, born_port, store_ts, store_addr, store_port, reconsume,
         _prepared, body_len) = _FIXED_V4.unpack_from(view, start)
        pos = start + _FIXED_V4.size
    else:
        (total, magic, body_crc, queue_id, flag, queue_offset, commit_offset, sys_flag,
         born_ts) = _HEAD.unpack_from(view, start)
        pos = start + _HEAD.size
        born = _HOST_V6 if sys_flag & BORNHOST_V6 else _HOST_V4
        store = _HOST_V6 if sys_flag & STOREHOST_V6 else _HOST_V4
        if end - pos < born.size + 8 + store.size + _TAIL.size:
            raise _malformed(start, "a message shorter than its fixed fields")
        born_addr, born_port = born.unpack_from(view, pos)
        pos += born.size
        (store_ts,) = _MIDDLE.unpack_from(view, pos)
        pos += 8
        store_addr, store_port = store.unpack_from(view, pos)
        pos += store.size
        reconsume, _prepared, body_len = _TAIL.unpack_from(view, pos)
        pos += _TAIL.size
    if magic != MAGIC_CODE:
        raise _malformed(start, f"magic code {magic}, not {MAGIC_CODE}")
    stop = start + total
    if total <= 0 or stop > end:
        raise _malformed(start, f"a total size of {total} with {end - start} bytes left")
    if body_len < 0 or pos + body_len + 3 > stop:
        raise _malformed(start, f"a body length of {body_len} past the message's end")
    body = bytes(view[pos:pos + body_len])
    pos += body_len
    topic_len = view[pos]
    if topic_len > 127:  # a Java byte: a negative length
        raise _malformed(start, "a negative topic length")
    pos += 1
    if pos + topic_len + 2 > stop:
        raise _malformed(start, "a topic past the message's end")
    topic = str(view[pos:pos + topic_len], "utf-8", "replace")
    pos += topic_len
    (props_len,) = _SHORT.unpack_from(view, pos)
    pos += 2
    if props_len < 0 or pos + props_len > stop:
        raise _malformed(start, f"a properties length of {props_len} past the message's end")
    properties = parse_properties(str(view[pos:pos + props_len], "utf-8", "replace"))
    if sys_flag & COMPRESSED:
        try:
            body = decompress(body, sys_flag, inflatable)
        except MalformedResponseError as exc:
            raise _malformed(start, str(exc)) from exc
    offset_id = offset_msg_id(store_addr, store_port, commit_offset)
    message = Message(topic, body, properties, properties.get(UNIQ_KEY) or offset_id, offset_id,
                      broker_name, queue_id, queue_offset, commit_offset, reconsume, born_ts,
                      store_ts, _host_text(born_addr, born_port),
                      _host_text(store_addr, store_port), sys_flag, flag, total, body_crc)
    return message, stop


def _malformed(at: int, what: str) -> MalformedResponseError:
    return MalformedResponseError(f"the message at byte {at} of a pull's answer is malformed: "
                                  f"{what}")


def encode_batch(messages: Iterable[tuple[bytes, str, int]]) -> bytes:
    """Return a SEND_BATCH_MESSAGE body of ``(body, properties string, flag)`` messages
    (``MessageDecoder.encodeMessages``).

    Raises:
        ValueError: a message's properties are over 32,767 UTF-8 bytes (an int16 length).
    """
    parts: list[bytes] = []
    pack = _BATCH_HEAD.pack
    for body, properties, flag in messages:
        props = properties.encode("utf-8")
        if len(props) > 32767:
            raise ValueError(f"a message's properties are {len(props)} bytes, over 32,767")
        parts.append(pack(20 + len(body) + 2 + len(props), 0, 0, flag, len(body)))
        parts.append(body)
        parts.append(_SHORT.pack(len(props)))
        parts.append(props)
    return b"".join(parts)
