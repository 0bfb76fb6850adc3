"""Decode frames: `decode_frame` for one whole frame, `FrameDecoder` for a byte stream.

Theory of operation (FrameDecoder):
- ``feed`` only appends to a buffer; ``next_command`` parses at most one frame.
- Every check that bounds memory runs on the 4-byte prefix alone, before a body is buffered:
  negative length, length under 4, ``length + 4 > max_frame_bytes``. The 8-byte prefix then
  checks the serialize type, ``header_length <= length - 4`` (RocketMQ ``decode``) and
  ``header_length <= max_header_bytes``: parsing a header costs time in proportion to its
  bytes (a relaxed-JSON header about 0.6 s per MB, bench/header_cost.py), so this bounds
  what one frame can cost its reader before any of it is buffered.
- Once a `CodecError` is raised the stream is desynchronised: the decoder keeps raising it and
  the owner must close the connection.
- Large frames can skip the growing buffer: once a frame's 8-byte prefix is buffered and valid,
  ``missing_bytes`` says how much of it is still to come, and ``get_buffer`` hands out memory
  (the caller's, never longer than the frame's rest) for the caller to receive into,
  reporting each fill with ``buffer_updated`` (the ``asyncio.BufferedProtocol`` pattern).
  Memory shorter than the rest is allowed: once it is full, the next ``get_buffer`` takes
  larger memory and copies the bytes received so far to its start, so a caller can let what
  it commits grow with what arrives. The frame is then the buffered head plus that memory,
  and ``next_command`` copies header and body out of the two once. ``feed`` stays valid
  meanwhile: it fills the same memory (growing it as needed), and bytes past the frame's end
  wait in ``_after`` until the frame has been returned.
"""

from __future__ import annotations

import struct
from typing import TYPE_CHECKING, Final

from ._codes import SerializeType
from ._errors import CodecError, HeaderTooLargeError, MalformedFrameError
from ._frame_checks import header_word_error, length_error, sniff_foreign_protocol
from ._header_binary import decode_binary_header
from ._header_json import decode_json_header
from ._native import adopt_doc, speedups

if TYPE_CHECKING:
    from ._command import RemotingCommand

__all__ = ["DEFAULT_MAX_FRAME_BYTES", "DEFAULT_MAX_HEADER_BYTES", "FrameDecoder", "decode_frame"]

DEFAULT_MAX_FRAME_BYTES: Final = 16 * 1024 * 1024  # RocketMQ NettyDecoder FRAME_MAX_LENGTH
# RocketMQ's headers are small: the largest field of any of them, a message's properties, is
# refused by the broker over 32,767 characters (Short.MAX_VALUE), so a SEND_MESSAGE header
# with such properties (ASCII) still fits. The bound matters because parsing costs time per
# byte, most for relaxed JSON (a list of numbers; bench/header_cost.py): at 64 KiB one frame
# costs its reader tens of milliseconds at worst, where a 16 MiB header cost seconds.
DEFAULT_MAX_HEADER_BYTES: Final = 64 * 1024
_PREFIX_UNPACK: Final = struct.Struct(">iI").unpack_from  # length, header word
_LENGTH_UNPACK: Final = struct.Struct(">i").unpack_from
_COMPACT_AT: Final = 64 * 1024  # drop consumed bytes once this many have piled up

def _build(st_byte: int, header: bytes, body: bytes | None) -> RemotingCommand:
    if st_byte == 0:
        return decode_json_header(header, body, _JSON)
    return decode_binary_header(header, body, _ROCKETMQ)


_JSON: Final = SerializeType.JSON
_ROCKETMQ: Final = SerializeType.ROCKETMQ


def decode_frame(data: bytes | bytearray | memoryview) -> RemotingCommand:
    """Decode exactly one whole frame (length prefix included).

    Raises:
        MalformedFrameError: truncated data, trailing bytes, or an invalid frame.
        UnsupportedSerializeTypeError: unknown serialize type byte.
    """
    if not isinstance(data, bytes | bytearray | memoryview):  # bytes(12) is 12 zero bytes
        raise TypeError(f"data must be bytes, bytearray or memoryview, got "
                        f"{type(data).__name__}")
    data = bytes(data)
    if len(data) < 8:
        foreign = sniff_foreign_protocol(data)
        if foreign is not None:
            raise foreign
        raise MalformedFrameError(f"frame truncated: {len(data)} bytes, at least 8 needed")
    length, word = _PREFIX_UNPACK(data, 0)
    if length < 4 or length > _MAX_LENGTH_FIELD:
        raise length_error(length, data[:4], 2**31)
    if length + 4 != len(data):
        foreign = sniff_foreign_protocol(data)
        if foreign is not None:
            raise foreign
        raise MalformedFrameError(
            f"frame length field says {length + 4} bytes in all, got {len(data)}"
        )
    header_length = word & 0xFFFFFF
    st_byte = word >> 24
    if header_length > length - 4 or st_byte > 1:
        raise header_word_error(word, length, data[:4])
    body = data[8 + header_length :] or None
    return _build(st_byte, data[8 : 8 + header_length], body)


_MAX_LENGTH_FIELD: Final = 2**31 - 4  # largest length with length + 4 <= 2**31


class FrameDecoder:
    """Incremental decoder for a stream of frames (sans-I/O).

    Usage: ``decoder.feed(chunk)``, then call ``decoder.next_command()`` until it returns None.
    Any split of the stream gives the same commands.
    """

    # Buffer: ``_buf[_pos:]`` are the bytes not yet decoded. When nothing is buffered, ``feed``
    # keeps the caller's ``bytes`` as the buffer instead of copying it (the common case: a
    # recv() chunk holding whole frames); a partial frame is moved into a bytearray that
    # later chunks are appended to, and its consumed prefix is dropped every _COMPACT_AT bytes.
    # While ``_rest`` is set (see get_buffer), ``_buf[_pos:]`` is the head of one frame (8 bytes
    # or more) and ``_rest[:_filled]`` its next bytes, of the ``_rest_bytes`` that follow the
    # head; ``_after`` holds bytes fed past its end.
    __slots__ = ("_after", "_buf", "_error", "_filled", "_pos", "_rest", "_rest_bytes",
                 "max_frame_bytes", "max_header_bytes")

    def __init__(self, max_frame_bytes: int = DEFAULT_MAX_FRAME_BYTES,
                 max_header_bytes: int = DEFAULT_MAX_HEADER_BYTES) -> None:
        for name, value in (("max_frame_bytes", max_frame_bytes),
                            ("max_header_bytes", max_header_bytes)):
            if isinstance(value, bool) or not isinstance(value, int):
                raise TypeError(f"{name} must be an int, got {value!r}")
        if max_frame_bytes < 8:
            raise ValueError("max_frame_bytes must be at least 8")
        if max_header_bytes < 0:
            raise ValueError("max_header_bytes must be at least 0")
        self.max_frame_bytes = max_frame_bytes
        self.max_header_bytes = max_header_bytes
        self._buf: bytes | bytearray = b""
        self._pos = 0
        self._error: CodecError | None = None
        self._rest: memoryview | None = None  # memory for the frame's rest (or its start)
        self._rest_bytes = 0  # how long the frame's rest is
        self._filled = 0
        self._after: list[bytes] = []

    @property
    def buffered_bytes(self) -> int:
        """Bytes received but not yet returned as commands."""
        if self._rest is None:
            return len(self._buf) - self._pos
        return (len(self._buf) - self._pos + self._filled
                + sum(len(chunk) for chunk in self._after))

    @property
    def missing_bytes(self) -> int:
        """Bytes still to receive to complete the frame in progress.

        0 unless the frame's 8-byte prefix is buffered and valid: no frame in progress, its
        prefix incomplete or one `next_command` rejects, or a complete frame not yet returned.
        """
        if self._rest is not None:
            return self._rest_bytes - self._filled
        buf = self._buf
        pos = self._pos
        available = len(buf) - pos
        if available < 8 or self._error is not None:
            return 0
        length, word = _PREFIX_UNPACK(buf, pos)
        if (length < 4 or length + 4 > self.max_frame_bytes
                or word & 0xFFFFFF > length - 4 or word >= 0x2000000
                or word & 0xFFFFFF > self.max_header_bytes):
            return 0
        missing: int = 4 + length - available
        return missing if missing > 0 else 0

    @property
    def holds_buffer(self) -> bool:
        """True while memory from `get_buffer` is in use (until its frame is returned)."""
        return self._rest is not None

    @property
    def buffer_room(self) -> int:
        """Bytes the memory in use can still take: 0 if there is none or it is full."""
        rest = self._rest
        return 0 if rest is None else len(rest) - self._filled

    def get_buffer(self, memory: bytearray | None = None) -> memoryview:
        """Return writable memory for the next bytes of the frame in progress.

        For receiving a large frame in place (as `asyncio.BufferedProtocol.get_buffer`): the
        first call sets aside memory for the rest of the frame, the start of ``memory`` if
        given (so that a caller can reuse one buffer for many frames), else a new bytearray
        of exactly `missing_bytes`; later calls return the part not yet filled. Write received
        bytes at the start of the returned memory, then call `buffer_updated` with their
        count. The memory ends where the frame ends, so no byte of the next frame can land in
        it. ``memory`` may be shorter than the frame's rest: once it is full, the next call
        takes new memory (``memory``, else a new bytearray for the whole rest) and copies the
        bytes received so far to its start, so that a caller can commit memory as bytes
        arrive (doubling it each time costs about one extra copy of the frame in all). Once
        the frame is complete, `next_command` returns it, copying its header and body out
        once, where feeding chunk by chunk would have grown a buffer and then copied it.

        Args:
            memory: used only when the decoder needs memory (the first call, or the memory in
                use is full, see `buffer_room`), else ignored; longer than the bytes already
                received into the memory in use. The decoder holds it until it moves to other
                memory or `next_command` has returned this frame (or raised): after that the
                caller may reuse it.

        Raises:
            RuntimeError: `missing_bytes` is 0: no frame in progress with a valid 8-byte
                prefix, or the frame is complete (call `next_command`).
            ValueError: ``memory`` cannot hold more than the bytes already received into the
                memory in use (any empty ``memory``).
        """
        rest = self._rest
        if rest is None:
            missing = self.missing_bytes
            if not missing:
                raise RuntimeError("no frame in progress is missing bytes")
            self._rest_bytes = missing
            self._filled = 0
            rest = self._move_rest(bytearray(missing) if memory is None else memory)
        elif self._filled == len(rest):
            if self._filled == self._rest_bytes:
                raise RuntimeError("no frame in progress is missing bytes")
            rest = self._move_rest(bytearray(self._rest_bytes) if memory is None else memory)
        return rest[self._filled :]

    def _move_rest(self, memory: bytearray | memoryview) -> memoryview:
        """Make ``memory`` the memory in use, the bytes received so far copied to its start."""
        filled = self._filled
        if len(memory) <= filled:
            raise ValueError(f"memory of {len(memory)} bytes cannot hold more than the "
                             f"{filled} already received")
        rest = memoryview(memory)[: self._rest_bytes]
        old = self._rest
        if old is not None:
            rest[:filled] = old[:filled]
            old.release()  # the caller's memory is free again
        self._rest = rest
        return rest

    def buffer_updated(self, nbytes: int) -> None:
        """Record that ``nbytes`` were written at the start of the last `get_buffer` memory.

        Raises:
            ValueError: no buffer is in use, or ``nbytes`` is negative or more than it holds.
        """
        rest = self._rest
        if rest is None or not 0 <= nbytes <= len(rest) - self._filled:
            raise ValueError(f"buffer_updated({nbytes}) does not fit the buffer in use")
        self._filled += nbytes

    def feed(self, data: bytes | bytearray | memoryview) -> None:
        """Append received bytes (copied unless ``data`` is immutable ``bytes``).

        Raises:
            TypeError: ``data`` is not bytes, a bytearray or a memoryview.
        """
        if type(data) is not bytes and not isinstance(data, bytearray | memoryview):
            raise TypeError(f"data must be bytes, bytearray or memoryview, got "
                            f"{type(data).__name__}")
        if self._rest is not None:
            self._feed_rest(data)
            return
        buf = self._buf
        if not buf:  # nothing buffered (next_command resets to b"" and 0 when drained)
            self._buf = data if type(data) is bytes else bytes(data)
            return
        pos = self._pos
        if isinstance(buf, bytes):
            # the first partial frame: from here a bytearray grows in place (amortised)
            grown = bytearray(memoryview(buf)[pos:])
            grown += data
            self._buf = grown
            self._pos = 0
        else:
            if pos >= _COMPACT_AT:
                del buf[:pos]
                self._pos = 0
            buf += data  # bytearray: in place

    def next_command(self) -> RemotingCommand | None:
        """Return the next complete command, or None if more bytes are needed.

        Raises:
            CodecError: the stream is not valid; the same error is raised again on every call.
        """
        # Sticky: after a bad frame the stream's framing is lost (no resync is possible in a
        # length-prefixed protocol), so the connection must close, as RocketMQ's
        # NettyDecoder closes the channel on a decode failure.
        if self._error is not None:
            raise self._error
        buf = self._buf
        pos = self._pos
        available = len(buf) - pos
        if available < 8:
            if available >= 4:
                # Reject a bad length prefix as soon as it is complete, before anything else.
                (length,) = _LENGTH_UNPACK(buf, pos)
                if length < 4 or length + 4 > self.max_frame_bytes:
                    self._error = length_error(
                        length, bytes(buf[pos : pos + 4]), self.max_frame_bytes
                    )
                    raise self._error
            return None
        # RocketMQ's NettyDecoder is a LengthFieldBasedFrameDecoder(16 MiB, 0, 4, 0, 4): the
        # limit counts the prefix too, hence ``length + 4``
        length, word = _PREFIX_UNPACK(buf, pos)
        if length < 4 or length + 4 > self.max_frame_bytes:
            self._error = length_error(length, bytes(buf[pos : pos + 4]), self.max_frame_bytes)
            raise self._error
        header_length = word & 0xFFFFFF
        if header_length > length - 4 or word >= 0x2000000:  # serialize type byte > 1
            self._error = header_word_error(word, length, bytes(buf[pos : pos + 4]))
            raise self._error
        if header_length > self.max_header_bytes:
            self._error = HeaderTooLargeError(header_length, self.max_header_bytes)
            raise self._error
        if available < 4 + length:
            if self._rest is None or self._filled < self._rest_bytes:
                return None
            return self._assemble(length, header_length, word)
        end = pos + 4 + length
        start = pos + 8 + header_length
        if type(buf) is bytes:
            header = buf[pos + 8 : start]
            body = buf[start:end] if end > start else None
        else:  # one copy each (slicing a bytearray first would copy twice)
            with memoryview(buf) as view:
                header = bytes(view[pos + 8 : start])
                body = bytes(view[start:end]) if end > start else None
        if end == len(buf):
            self._buf = b""
            self._pos = 0
        else:
            self._pos = end
        try:
            if word < 0x1000000:  # serialize type byte 0
                return decode_json_header(header, body, _JSON)
            return decode_binary_header(header, body, _ROCKETMQ)
        except CodecError as exc:
            self._error = exc
            raise

    def _feed_rest(self, data: bytes | bytearray | memoryview) -> None:
        """Feed while a `get_buffer` buffer is in use: fill it, keep what is past the frame."""
        rest = self._rest
        assert rest is not None
        filled = self._filled
        room = len(rest) - filled
        if room < len(data) and len(rest) < self._rest_bytes:  # grow, as received bytes do
            rest = self._move_rest(bytearray(min(self._rest_bytes,
                                                 max(2 * filled, filled + len(data)))))
            room = len(rest) - filled
        n = min(room, len(data))
        if n:
            rest[filled : filled + n] = memoryview(data)[:n]
            self._filled = filled + n
            if n == len(data):
                return
            data = memoryview(data)[n:]
        self._after.append(bytes(data))

    def _assemble(self, length: int, header_length: int, word: int) -> RemotingCommand:
        """Return the frame made of ``_buf[_pos:]`` and the full ``_rest``; then reset."""
        rest = self._rest
        assert rest is not None
        start = 8 + header_length  # offsets in the frame
        end = 4 + length
        with memoryview(self._buf) as whole:
            head = whole[self._pos :]
            header = _span(head, rest, 8, start)
            body = _span(head, rest, start, end) if end > start else None
            head.release()
        rest.release()  # the caller's memory is free again
        self._buf = b""
        self._pos = 0
        self._rest = None
        self._filled = 0
        self._rest_bytes = 0
        if self._after:
            after, self._after = self._after, []
            for chunk in after:
                self.feed(chunk)
        try:
            if word < 0x1000000:  # serialize type byte 0
                return decode_json_header(header, body, _JSON)
            return decode_binary_header(header, body, _ROCKETMQ)
        except CodecError as exc:
            self._error = exc
            raise


def _span(head: memoryview, tail: memoryview, start: int, end: int) -> bytes:
    """Return bytes ``start:end`` of ``head`` followed by ``tail``, copying each byte once."""
    split = len(head)
    if end <= split:
        return bytes(head[start:end])
    if start >= split:
        return bytes(tail[start - split : end - split])
    return b"".join((head[start:], tail[: end - split]))


# The compiled fast path (codec/_native.py): a whole frame in the buffer, decoded in C with no
# Python frame in between; every other case (a frame received in place, a prefix alone, every
# error) goes to the Python method above, which stays the specification (tests compare them).
python_next_command: Final = FrameDecoder.next_command
if speedups is not None:
    speedups.bind_decoder(FrameDecoder, CodecError, python_next_command)
    FrameDecoder.next_command = speedups.decoder_method()  # type: ignore[method-assign]
    adopt_doc(FrameDecoder.next_command, python_next_command, method=True)
