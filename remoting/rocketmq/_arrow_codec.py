"""Pull answers' bodies into Arrow columns at array speed (numpy and pyarrow; imported by the
Spark source only, never by ``import remoting.rocketmq``).

The layout is `_message_codec`'s (Java's ``MessageDecoder``). Where a message starts is known
only from the one before (TOTALSIZE): that is the one pass per message, a `struct` unpack
each. Everything else is done per column for all the messages at once:

- the fixed fields (queue id, offsets, sysflag, timestamps, store host, body length) are
  gathered with numpy at their places from each message's start;
- the bodies, topics and properties are cut from the received bytes without a Python object
  per message: an Arrow array over the bytes whose offsets alternate between a value's start
  and end (a value, then the bytes up to the next value) is taken at its even entries, one
  copy in C++;
- the properties (``name\\x01value\\x02...``) are split with numpy on their bytes into a
  ``map<string, string>``: a pair with an empty name or value is skipped, a value is what
  follows the first ``\\x01``, as `parse_properties` reads them; ``TAGS``, ``KEYS`` (split on
  spaces, empty keys dropped) and ``UNIQ_KEY`` are taken from the pairs, and a message
  without ``UNIQ_KEY`` gets the broker's id (store host, port and commit-log offset in hex);
- a compressed body is the only work per message (inflated, `decompress`).

Messages whose hosts are IPv6 (another layout of the fixed part), or whose topic or
properties are not UTF-8, go through `decode_messages` and Python lists instead, with the
same result. A malformed message ends the batch: those before it are returned with the
error, as `decode_messages` does.
"""

from __future__ import annotations

import struct
from typing import TYPE_CHECKING, Final

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from numpy.lib.stride_tricks import as_strided

from .._arrow_slices import slices as _slices
from ._errors import MalformedResponseError
from ._message import KEY_SEPARATOR, KEYS, TAGS, UNIQ_KEY
from ._message_codec import (
    BORNHOST_V6,
    COMPRESSED,
    MAGIC_CODE,
    MAX_INFLATED_BYTES,
    STOREHOST_V6,
    decode_messages,
    decompress,
)

if TYPE_CHECKING:
    from collections.abc import Sequence

    import numpy.typing as npt

    from ._message import Message

    Int = npt.NDArray[np.int64]

__all__ = ["ARROW_SCHEMA", "messages_batch"]

ARROW_SCHEMA: Final = pa.schema([
    pa.field("body", pa.binary(), False),
    pa.field("topic", pa.string(), False),
    pa.field("broker_name", pa.string(), False),
    pa.field("queue_id", pa.int32(), False),
    pa.field("queue_offset", pa.int64(), False),
    pa.field("msg_id", pa.string(), False),
    pa.field("tags", pa.string()),
    pa.field("keys", pa.list_(pa.field("element", pa.string(), False)), False),
    pa.field("properties", pa.map_(pa.string(), pa.field("value", pa.string(), False)), False),
    pa.field("born_timestamp", pa.timestamp("ms", tz="UTC"), False),
    pa.field("store_timestamp", pa.timestamp("ms", tz="UTC"), False),
])
EMPTY: Final = pa.RecordBatch.from_pylist([], schema=ARROW_SCHEMA)

# where the fixed fields of a message with IPv4 hosts are, from its start
_MAGIC, _QUEUE_ID, _QUEUE_OFFSET, _COMMIT_OFFSET, _SYSFLAG = 4, 12, 20, 28, 36
_BORN_TS, _STORE_TS, _STORE_HOST, _BODY_LEN, _BODY = 40, 56, 64, 84, 88
_TOTAL: Final = struct.Struct(">i")
_SMALLEST: Final = _BODY + 3  # a message with an empty body, topic and properties
_HEX: Final = np.array([f"{i:02X}".encode() for i in range(256)], dtype="S2").view(np.uint16)
_EIGHT: Final = np.arange(8)



def messages_batch(bodies: Sequence[bytes], windows: Sequence[tuple[int, int]] | None,
                   broker_name: str, tags: frozenset[str] = frozenset()
                   ) -> tuple[pa.RecordBatch, MalformedResponseError | None]:
    """Return the messages of pull answers' ``bodies`` as one batch of `ARROW_SCHEMA`, and
    the error that stopped reading (None: every message was read).

    Args:
        bodies: answers' bodies, in offset order.
        windows: for each body, the queue offsets ``[a, b)`` of it to keep (None: all).
        broker_name: the broker the answers came from.
        tags: keep only messages of these tags (empty: every message), as a consumer checks
            the broker's filtering by tag hash.
    """
    data = bodies[0] if len(bodies) == 1 else b"".join(bodies)
    starts, error = _starts(data)
    if not len(starts):
        return EMPTY, error
    layout = _Layout(data, starts)
    if layout.ipv6:
        return _slow(data, bodies, windows, broker_name, tags)
    whole, bad = layout.whole()
    if whole < len(starts):
        layout, error = _Layout(data, starts[:whole]), bad
        if not whole:
            return EMPTY, error
    try:
        batch = _columns(layout, broker_name, _answer_ends(bodies))
    except MalformedResponseError:  # a body that does not inflate: read up to it
        batch = None
    if batch is None:  # or not UTF-8 where text is due
        return _slow(data, bodies, windows, broker_name, tags)
    keep = _kept(batch, layout.starts, bodies, windows, tags)
    if keep is not None:
        batch = batch.filter(keep)
    return batch, error


def _starts(data: bytes) -> tuple[Int, MalformedResponseError | None]:
    """Return where each message starts (the pass per message), and what stopped it."""
    size = len(data)
    starts: list[int] = []
    append = starts.append
    unpack = _TOTAL.unpack_from
    pos = 0
    error = None
    try:
        while pos < size:
            (total,) = unpack(data, pos)
            if total < _SMALLEST:
                error = _malformed(pos, f"a total size of {total}")
                break
            append(pos)
            pos += total
    except struct.error:  # fewer than 4 bytes left
        error = _malformed(pos, "a message shorter than its fixed fields")
    if pos > size:  # the last one runs past the answer
        pos = starts.pop()
        error = _malformed(pos, f"a message of {pos} bytes with {size - pos} left")
    return np.array(starts, dtype=np.int64), error


class _Layout:
    """The fixed fields of messages starting at ``starts`` in ``data`` (each at least
    `_SMALLEST` bytes, inside ``data``), read at their places for all at once.

    Big-endian integers at any byte are read through views of ``data`` whose rows are the
    4 (or 8) bytes from each byte on (overlapping windows, no copy): a gather of one
    element per message.
    """

    def __init__(self, data: bytes, starts: Int) -> None:
        self.data = data
        self.starts = starts
        self.u8 = u8 = np.frombuffer(data, dtype=np.uint8)
        self._i4 = as_strided(u8, shape=(len(u8) - 3, 4), strides=(1, 1)).view(">i4")[:, 0]
        self._i8 = as_strided(u8, shape=(len(u8) - 7, 8), strides=(1, 1)).view(">i8")[:, 0]
        self.sys_flag = self.int32(_SYSFLAG)
        self.ipv6 = bool((self.sys_flag & (BORNHOST_V6 | STOREHOST_V6)).any())
        self.stops = np.append(starts[1:], len(data))
        self.body_at = starts + _BODY
        self.body_end = self.body_at + self.int32(_BODY_LEN)
        # clamped into the message: a bad length reads its own bytes, never another's
        self.topic_len = u8[np.clip(self.body_end, starts, self.stops - 1)].astype(np.int64)
        self.props_at = self.body_end + 3 + self.topic_len
        self.props_len = (u8[np.clip(self.props_at - 2, starts, self.stops - 1)].astype(
            np.int64) << 8) | u8[np.clip(self.props_at - 1, starts, self.stops - 1)]

    def int32(self, at: int) -> Int:
        return self._i4[self.starts + at].astype(np.int64)

    def int64(self, at: int) -> Int:
        return self._i8[self.starts + at].astype(np.int64)

    def whole(self) -> tuple[int, MalformedResponseError | None]:
        """Return how many messages (from the first) are whole, and the error of the first
        that is not."""
        magic_ok = self.int32(_MAGIC) == MAGIC_CODE
        bad = ~magic_ok | (self.body_end < self.body_at) | (self.body_end + 3 > self.stops) | (
            self.topic_len > 127) | (self.props_len > 32767) | (
            self.props_at + self.props_len > self.stops)
        if not bad.any():
            return len(self.starts), None
        first = int(np.flatnonzero(bad)[0])
        reason = ("a magic code other than 4.x's" if not magic_ok[first]
                  else "a body, topic or properties past the message's end")
        return first, _malformed(int(self.starts[first]), reason)


def _answer_ends(bodies: Sequence[bytes]) -> Int:
    """Where each answer's body ends in the bodies joined."""
    return np.cumsum(np.fromiter((len(b) for b in bodies), dtype=np.int64, count=len(bodies)))


def _columns(layout: _Layout, broker_name: str, answer_ends: Int) -> pa.RecordBatch | None:
    """Return the messages of ``layout`` (each whole) as a batch; None if a topic or the
    properties are not UTF-8.

    Raises:
        MalformedResponseError: a compressed body does not inflate, or the compressed bodies
            of one answer inflate past `MAX_INFLATED_BYTES` together (`decode_messages`'
            bound; its reading then says which message).
    """
    n = len(layout.starts)
    buffer = pa.py_buffer(layout.data)
    topics = _slices(buffer, layout.body_end + 1, layout.body_end + 1 + layout.topic_len,
                     pa.string())
    texts = _slices(buffer, layout.props_at, layout.props_at + layout.props_len, pa.string())
    try:
        topics.validate(full=True)
        texts.validate(full=True)
    except pa.ArrowInvalid:
        return None
    properties, tags, keys, uniq = _properties(texts, n)
    bodies = _slices(buffer, layout.body_at, layout.body_end, pa.binary())
    compressed = np.flatnonzero(layout.sys_flag & COMPRESSED)
    if len(compressed):
        bodies = _inflated(bodies, compressed, layout.sys_flag, layout.starts, answer_ends)
    stamp = pa.timestamp("ms", tz="UTC")
    return pa.RecordBatch.from_arrays([
        bodies, topics, pa.repeat(pa.scalar(broker_name, pa.string()), n),
        pa.array(layout.int32(_QUEUE_ID).astype(np.int32)),
        pa.array(layout.int64(_QUEUE_OFFSET)),
        _message_ids(uniq, layout), tags, keys, properties,
        pa.array(layout.int64(_BORN_TS)).cast(stamp),
        pa.array(layout.int64(_STORE_TS)).cast(stamp),
    ], schema=ARROW_SCHEMA)


def _inflated(bodies: pa.Array, rows: Int, sys_flag: Int, starts: Int, answer_ends: Int
              ) -> pa.Array:
    """Return ``bodies`` with those of ``rows`` inflated (a Python call each), those of one
    answer `MAX_INFLATED_BYTES` at most together."""
    out = []
    answers = np.searchsorted(answer_ends, starts[rows], side="right").tolist()
    spent: dict[int, int] = {}
    for row, answer in zip(rows.tolist(), answers, strict=True):
        left = MAX_INFLATED_BYTES - spent.get(answer, 0)
        try:
            body = decompress(bodies[row].as_py(), int(sys_flag[row]), left)
        except MalformedResponseError as exc:
            raise _malformed(int(starts[row]), str(exc)) from exc
        spent[answer] = spent.get(answer, 0) + len(body)
        out.append(body)
    mask = np.zeros(len(bodies), dtype=bool)
    mask[rows] = True
    return pc.replace_with_mask(bodies, pa.array(mask), pa.array(out, pa.binary()))


def _message_ids(uniq: pa.Array, layout: _Layout) -> pa.Array:
    """Return each message's ``msg_id``: its UNIQ_KEY, else its broker id (``offset_msg_id``:
    its store host, port and commit-log offset, 16 bytes, in upper-case hex)."""
    if not uniq.null_count:
        return uniq
    missing = np.flatnonzero(uniq.is_null().to_numpy(zero_copy_only=False))
    at = layout.starts[missing]
    u8 = layout.u8
    raw = np.concatenate([u8[(at + _STORE_HOST)[:, None] + _EIGHT],
                          u8[(at + _COMMIT_OFFSET)[:, None] + _EIGHT]], axis=1)
    text = np.ascontiguousarray(_HEX[raw])  # two bytes a byte: 32 a message
    offsets = np.arange(0, 32 * len(at) + 1, 32, dtype=np.int32)
    ids = pa.Array.from_buffers(pa.string(), len(at), [None, pa.py_buffer(offsets),
                                                       pa.py_buffer(text.tobytes())])
    mask = np.zeros(len(uniq), dtype=bool)
    mask[missing] = True
    return pc.replace_with_mask(uniq, pa.array(mask), ids)


def _properties(texts: pa.Array, n: int
                ) -> tuple[pa.Array, pa.Array, pa.Array, pa.Array]:
    """Return the properties map, the TAGS, KEYS (a list) and UNIQ_KEY of each message."""
    values_buffer = texts.buffers()[2]
    row_offsets = np.frombuffer(texts.buffers()[1], dtype=np.int32)[
        texts.offset:texts.offset + n + 1].astype(np.int64)
    if values_buffer is None or row_offsets[-1] == row_offsets[0]:
        strings = pa.array([], pa.string())
        props = pa.MapArray.from_arrays(pa.array(np.zeros(n + 1, np.int32)), strings, strings)
        nulls = pa.nulls(n, pa.string())
        return (props.cast(ARROW_SCHEMA.field("properties").type), nulls,
                _key_lists(nulls, n), nulls)
    u8 = np.frombuffer(values_buffer, dtype=np.uint8)
    first, last = int(row_offsets[0]), int(row_offsets[-1])
    region = u8[first:last]
    pair_seps = np.flatnonzero(region == 2) + first
    name_seps = np.flatnonzero(region == 1) + first
    # a message's pairs run from its start, and from after each \x02, to the next \x02 or
    # its end; two sorted runs merged (a stable sort finds the runs), row starts first
    begins = np.concatenate([row_offsets[:-1], pair_seps + 1])
    merged = np.argsort(begins, kind="stable")
    begins = begins[merged]
    ends = np.sort(np.concatenate([row_offsets[1:], pair_seps]), kind="stable")
    rows = np.cumsum(merged < n) - 1
    some = ends > begins
    begins, ends, rows = begins[some], ends[some], rows[some]
    cut = _first_marks(begins, ends, name_seps, last)  # each pair's first \x01
    valid = (cut > begins) & (cut + 1 < ends)
    begins, ends, cut, rows = begins[valid], ends[valid], cut[valid], rows[valid]
    names = _slices(values_buffer, begins, cut, pa.string())
    encoded = names.dictionary_encode()
    codes = encoded.indices.to_numpy(zero_copy_only=False).astype(np.int64)
    dictionary = encoded.dictionary.to_pylist()
    kept = _last_of_each_name(rows, codes, len(dictionary))
    if kept is not None:  # a name twice in a message: its last value, as a dict keeps it
        begins, ends, cut, rows, codes = (a[kept] for a in (begins, ends, cut, rows, codes))
        names = names.filter(pa.array(kept))
    map_offsets = np.zeros(n + 1, np.int32)
    np.cumsum(np.bincount(rows, minlength=n), out=map_offsets[1:])
    values = _slices(values_buffer, cut + 1, ends, pa.string())
    props = pa.MapArray.from_arrays(pa.array(map_offsets), names, values).cast(
        ARROW_SCHEMA.field("properties").type)
    tags, keys, uniq = (_named(values, rows, codes == dictionary.index(name)
                               if name in dictionary else None, n)
                        for name in (TAGS, KEYS, UNIQ_KEY))
    return props, tags, _key_lists(keys, n), uniq


def _last_of_each_name(rows: Int, codes: Int, distinct: int
                       ) -> npt.NDArray[np.bool_] | None:
    """Return which pairs to keep so that each message has a name once: its last pair of it,
    as a dict keeps the last value (a batch sent by Java or by us carries ``WAIT`` twice:
    the message's and the batch's); None when no message has a name twice."""
    keys = rows * distinct + codes
    order = np.argsort(keys, kind="stable")  # pairs of one message and name, in order
    ordered = keys[order]
    last = np.append(ordered[1:] != ordered[:-1], True)
    if last.all():
        return None
    keep = np.empty(len(keys), dtype=bool)
    keep[order] = last
    return keep


def _first_marks(begins: Int, ends: Int, marks: Int, none: int) -> Int:
    """Return, for each span ``[begins[i], ends[i])`` (sorted, disjoint), the first of
    ``marks`` (sorted) at or after its start, else ``none``. Properties as producers write
    them have one mark (``\x01``) in each pair: then the k-th mark is the k-th pair's."""
    if len(marks) == len(begins) and bool(((marks >= begins) & (marks < ends)).all()):
        return marks
    return np.append(marks, none)[np.searchsorted(marks, begins)]


def _named(values: pa.Array, rows: Int, hit_mask: npt.NDArray[np.bool_] | None, n: int
           ) -> pa.Array:
    """Return each message's value of the property whose pairs ``hit_mask`` marks (null
    where it has none; the last one where it has two)."""
    if hit_mask is None:
        return pa.nulls(n, pa.string())
    hit = np.flatnonzero(hit_mask)
    pick = np.full(n, -1, dtype=np.int64)
    pick[rows[hit]] = hit
    return values.take(pa.array(pick, mask=pick < 0))


def _key_lists(keys: pa.Array, n: int) -> pa.Array:
    """Return ``KEYS`` values split on spaces into lists, empty keys dropped (none: [])."""
    split = pc.split_pattern(keys.fill_null(""), KEY_SEPARATOR)
    flat = split.flatten()
    lengths = pc.binary_length(flat).to_numpy(zero_copy_only=False)
    list_offsets = split.offsets.to_numpy().astype(np.int64)
    if lengths.all():
        kept, new_offsets = flat, list_offsets
    else:
        nonempty = lengths > 0
        kept = flat.filter(pa.array(nonempty))
        before = np.concatenate([[0], np.cumsum(nonempty)])
        new_offsets = before[list_offsets - list_offsets[0]]
    return pa.ListArray.from_arrays(pa.array(new_offsets.astype(np.int32)), kept).cast(
        ARROW_SCHEMA.field("keys").type)


def _kept(batch: pa.RecordBatch, starts: Int, bodies: Sequence[bytes],
          windows: Sequence[tuple[int, int]] | None, tags: frozenset[str]
          ) -> pa.Array | None:
    """Return the mask of messages in their answer's window and of the wanted tags (None:
    all of them)."""
    keep = None
    if windows is not None and len(starts):
        answer = np.searchsorted(_answer_ends(bodies), starts, side="right")
        bounds = np.array(windows, dtype=np.int64).reshape(-1, 2)
        offsets = batch.column("queue_offset").to_numpy()
        inside = (offsets >= bounds[answer, 0]) & (offsets < bounds[answer, 1])
        if not inside.all():
            keep = pa.array(inside)
    if tags:
        wanted = pc.fill_null(pc.is_in(batch.column("tags"), pa.array(sorted(tags))), False)
        keep = wanted if keep is None else pc.and_(keep, wanted)
    return keep


def _slow(data: bytes, bodies: Sequence[bytes], windows: Sequence[tuple[int, int]] | None,
          broker_name: str, tags: frozenset[str]
          ) -> tuple[pa.RecordBatch, MalformedResponseError | None]:
    """`messages_batch` through `decode_messages`: a Python object per message."""
    messages: list[Message] = []
    error = None
    pieces = [(data, None)] if windows is None else list(zip(bodies, windows, strict=True))
    for piece, window in pieces:
        got, error = decode_messages(piece, broker_name)
        messages += [m for m in got if window is None
                     or window[0] <= m.queue_offset < window[1]]
        if error is not None:
            break
    if tags:
        messages = [m for m in messages if m.tags in tags]
    return messages_to_batch(messages, broker_name), error


def messages_to_batch(messages: Sequence[Message], broker_name: str) -> pa.RecordBatch:
    """Return ``messages`` as a batch of `ARROW_SCHEMA` (Python lists: the slow path, and
    the oracle of the fast one's tests)."""
    return pa.RecordBatch.from_arrays([
        pa.array([m.body for m in messages], pa.binary()),
        pa.array([m.topic for m in messages], pa.string()),
        pa.array([broker_name] * len(messages), pa.string()),
        pa.array([m.queue_id for m in messages], pa.int32()),
        pa.array([m.queue_offset for m in messages], pa.int64()),
        pa.array([m.msg_id for m in messages], pa.string()),
        pa.array([m.tags for m in messages], pa.string()),
        pa.array([m.keys for m in messages], ARROW_SCHEMA.field("keys").type),
        pa.array([list(m.properties.items()) for m in messages],
                 ARROW_SCHEMA.field("properties").type),
        pa.array([m.born_timestamp for m in messages], pa.int64()).cast(
            pa.timestamp("ms", tz="UTC")),
        pa.array([m.store_timestamp for m in messages], pa.int64()).cast(
            pa.timestamp("ms", tz="UTC")),
    ], schema=ARROW_SCHEMA)


def _malformed(at: int, what: str) -> MalformedResponseError:
    return MalformedResponseError(f"the message at byte {at} of a pull's answer is malformed: "
                                  f"{what}")
