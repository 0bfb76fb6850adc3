"""`ConnectionCore`, the connection both drivers drive, with no I/O: bytes pushed in, commands
pulled out; the frame in progress and its stall, answers nobody asked for, bytes that are not
our protocol and a failed read each close it once, with their reason. Both driver's
connection classes are one (`Connection`, `ThreadConnection`)."""

from __future__ import annotations

import struct
from dataclasses import dataclass

from codec import RemotingCommand, ResponseCode, encode_frame
from remoting._core._sansio._connection_core import RECEIVE_INTO_MIN_BYTES, ConnectionCore
from remoting._core._sansio._connection_state import MAX_UNEXPECTED, Lifecycle
from remoting._core._thread_driver._thread_connection import ThreadConnection
from remoting._core._trio_driver._connection import Connection


@dataclass
class Settings:
    max_frame_bytes: int = 16 * 1024 * 1024
    max_header_bytes: int = 64 * 1024
    write_buffer_high_water_mark: int = 1 << 20
    write_buffer_low_water_mark: int = 1 << 19
    partial_frame_timeout: float = 5.0


class Core(ConnectionCore):
    """A core whose driver only notes its closes."""

    def __init__(self, tls: bool = False) -> None:
        super().__init__("peer:1", Settings(), 100.0, role="client", addr_key="peer:1",
                         max_processing=0)
        self.closes: list[tuple[str, bool]] = []
        self._tls = tls

    @property
    def tls_version(self) -> str | None:
        return "TLSv1.3" if self._tls else None

    def close(self, reason: str = "closed locally", *, broken: bool = False) -> None:
        if self.state.handle("close", reason, broken=broken):
            self.closes.append((reason, broken))


def test_both_drivers_connections_are_a_connection_core() -> None:
    assert issubclass(Connection, ConnectionCore)
    assert issubclass(ThreadConnection, ConnectionCore)


def test_bytes_pushed_in_give_commands_and_a_frame_begun_is_timed_from_its_read() -> None:
    core = Core()
    frame = encode_frame(RemotingCommand.create_response(ResponseCode.SUCCESS))
    assert core.receive_buffer(receives_into=True) is None  # nothing large in progress
    core._decoder.feed(frame + frame[:5])
    core.received(101.0)
    assert core._decoder.next_command() is not None
    assert core._decoder.next_command() is None
    core.read_handled(decoded=True)
    assert core.stall_at == 101.0 + 5.0  # the frame begun in that read
    core._decoder.feed(frame[5:])
    core.received(103.0)
    assert core._decoder.next_command() is not None
    core.read_handled(decoded=True)
    assert core.stall_at is None  # nothing in progress
    assert core.last_read == 103.0 and core.closes == []


def test_the_rest_of_a_large_frame_is_received_in_place() -> None:
    core = Core()
    body = RECEIVE_INTO_MIN_BYTES * 4
    # a quarter of it in: memory grows with what the peer sent, not with what it announced
    core._decoder.feed(struct.pack(">iI", 4 + 2 + body, 2) + b"{}" + bytes(body // 4))
    core.received(100.0)
    core.read_handled(decoded=False)
    assert core.rest_in_place
    assert core.receive_buffer(receives_into=False) is None  # the transport cannot
    into = core.receive_buffer(receives_into=True)
    assert into is not None and len(into) >= RECEIVE_INTO_MIN_BYTES


def test_a_stalled_frame_closes_once_with_its_reason() -> None:
    core = Core()
    core._decoder.feed(b"\x00\x00\x00")
    core.received(100.0)
    core.read_handled(decoded=False)
    assert core.stall_at == 105.0
    core.stalled()
    core.stalled()
    assert core.closes == [("partial frame not completed within 5.0s", False)]


def test_answers_nobody_asked_for_close_it_beyond_the_calls_given_up() -> None:
    core = Core()
    core.abandoned = 3
    answer = RemotingCommand.create_response(ResponseCode.SUCCESS)
    for _ in range(3 + MAX_UNEXPECTED):
        core.orphaned(answer)
    assert core.closes == []
    core.orphaned(answer)
    core.orphaned(answer)
    assert len(core.closes) == 1 and "matched no call" in core.closes[0][0]


def test_a_foreign_protocol_and_a_failed_read_say_why_in_words() -> None:
    core = Core()
    core._decoder.feed(b"GET / HTTP/1.1\r\n\r\n")
    try:
        core._decoder.next_command()
    except Exception as exc:  # the codec's error
        core.codec_failed(exc)  # type: ignore[arg-type]
    assert core.closes == [("not our protocol: HTTP/1", True)]
    failed = Core()
    failed.failed("read", ConnectionResetError(104, "Connection reset by peer"))
    assert failed.closes == [("read failed: [Errno 104] Connection reset by peer", True)]
    assert failed.state.state is Lifecycle.CLOSING and failed.broken


def test_a_tls_client_refused_before_any_answer_is_told_what_a_server_may_want() -> None:
    core = Core(tls=True)
    core.failed("read", OSError("the server's alert"))
    (reason, broken), = core.closes
    assert reason.startswith("the server ended the TLS connection before answering")
    assert "client certificate" in reason and broken


def test_a_read_noted_in_one_call_with_its_time_plans_the_next_read() -> None:
    """The thread driver notes a read it decoded whole in one call (`read_handled` with the
    read's time): the same bookkeeping as `received` then `read_handled`."""
    core = Core()
    frame = encode_frame(RemotingCommand.create_response(ResponseCode.SUCCESS))
    core._decoder.feed(frame + frame[:5])
    assert core._decoder.next_command() is not None
    assert core._decoder.next_command() is None
    core.read_handled(decoded=True, received_at=101.0)
    assert core.last_read == 101.0 and core.stall_at == 106.0
    assert not core.rest_in_place  # a few bytes missing: the next read takes a chunk
    core.reading_resumed(110.0)  # paused by us: the frame's clock restarts
    assert core.stall_at == 115.0
    core._decoder.feed(frame[5:])
    assert core._decoder.next_command() is not None
    core.read_handled(decoded=True, received_at=111.0)
    assert core.stall_at is None and not core.rest_in_place and core.last_read == 111.0
    # a large frame begun: its rest goes into place, a borrowed buffer given back once done
    body = RECEIVE_INTO_MIN_BYTES * 2
    core._decoder.feed(struct.pack(">iI", 4 + 2 + body, 2) + b"{}" + bytes(body // 2))
    core.read_handled(decoded=False, received_at=112.0)
    assert core.rest_in_place and core.stall_at == 117.0
    into = core.receive_buffer(receives_into=True)
    assert into is not None
    into[: len(into)] = bytes(len(into))
    core._decoder.buffer_updated(len(into))
    while core._decoder.missing_bytes:  # (the memory may grow as the frame's bytes arrive)
        core.read_handled(decoded=False, received_at=113.0)
        into = core.receive_buffer(receives_into=True)
        assert into is not None
        core._decoder.buffer_updated(len(into))
    assert core._decoder.next_command() is not None
    core.read_handled(decoded=True, received_at=114.0)
    assert core._lent is None and not core.rest_in_place and core.stall_at is None


def test_no_partial_frame_timeout_means_no_stall() -> None:
    core = Core()
    core._partial_frame_timeout = 0.0
    core._decoder.feed(b"\x00\x00\x00")
    core.read_handled(decoded=False, received_at=100.0)
    assert core.stall_at is None
