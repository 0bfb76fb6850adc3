"""The bus on the wire: its request codes (32300-32399), their fields, and the checks of what
callers and peers hand in.

Every bus frame is an ordinary RocketMQ remoting command (docs/protocol.md, "The event bus"):
the fields below travel as ext fields, a message's headers as ext fields named ``h.<name>``,
its body as the body. A bus failure is a response with one of the failure codes, its
message in the remark and the recipient's code in ``failureCode``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from enum import IntEnum
from typing import TYPE_CHECKING, Final, Literal

from codec import CodecError, FrameDecoder, RemotingCommand, ResponseCode, encode_command
from codec._header_numbers import INT32_MAX, INT32_MIN, INT64_MAX, header_int

from ._failure import FAILURE_KINDS, NO_CODE, FailureKind, ReplyFailure

if TYPE_CHECKING:
    from codec import ExtFields

__all__ = [
    "DEFAULT_MAX_BUFFERED", "DEFAULT_MAX_BUFFERED_BYTES", "DEFAULT_MAX_CONSUMERS",
    "DEFAULT_MAX_HELD", "DEFAULT_MAX_HELD_BYTES", "DEFAULT_MAX_QUEUED", "DEFAULT_MAX_WAITING",
    "DEFAULT_TIMEOUT",
    "HEARTBEAT_SECONDS", "MAX_ADDRESS_BYTES", "MAX_CONSUMERS_PER_CONNECTION", "MAX_WINDOW",
    "TRANSPORT_MARGIN", "BadBusRequest", "BusCode", "Deliver", "FailureCode", "Forbidden", "Kind",
    "Register", "Reply", "ReplyKind", "Send", "address_of", "bad_request_response", "body_of",
    "count_of", "consumer_id_of", "credit_command", "credits_of", "deliver_command", "deliver_of",
    "MAX_DELIVER_MANY", "MAX_DELIVER_MANY_BYTES", "Taken", "deliver_many_command",
    "deliver_many_of", "taken_of", "taken_response",
    "failure_of", "failure_response", "forbidden_response", "headers_in", "headers_of",
    "heartbeat_command", "max_buffered_bytes_of", "max_buffered_of", "not_registered_response",
    "ok_response", "register_command", "register_of", "reply_command", "reply_in", "reply_of",
    "reply_response", "send_command", "send_of", "size_of", "timeout_of",
    "too_many_waiting_response", "unregister_command",
    "window_command", "window_of",
]


class BusCode(IntEnum):
    """The bus's request codes: ours, below int16's limit (the ROCKETMQ header carries codes as
    int16), apart from the stats code (32000) and the queue's (32100-32299)."""

    REGISTER = 32300  # client -> server: a consumer at an address, and its window
    UNREGISTER = 32301  # client -> server: that consumer is gone
    SEND = 32302  # client -> server: send, publish or request a message
    REPLY = 32303  # client -> server: answer a message (reply, reply and request, fail)
    CREDIT = 32304  # client -> server, oneway: a consumer finished that many messages
    HEARTBEAT = 32305  # client -> server, oneway: keeps an idle connection (and its consumers)
    WINDOW = 32306  # client -> server: a consumer's new max_buffered, and the credits it owes
    DELIVER = 32310  # server -> client: a message for one of its consumers
    # server -> client: messages for one of its consumers, in order, each a DELIVER frame in
    # the body (only to a client whose REGISTER said it takes them: ``many``)
    DELIVER_MANY = 32311


class FailureCode(IntEnum):
    """Response codes of a bus failure (and of a consumer a client no longer has)."""

    NO_HANDLERS = 32380
    TIMEOUT = 32381
    RECIPIENT_FAILURE = 32382
    NOT_REGISTERED = 32383  # a client refused a push: that consumer was unregistered


DEFAULT_TIMEOUT: Final = 30.0  # seconds; Vert.x DeliveryOptions.DEFAULT_TIMEOUT
DEFAULT_MAX_BUFFERED: Final = 1000  # Vert.x MessageConsumer.DEFAULT_MAX_BUFFERED_MESSAGES
# a consumer's bytes held (bodies and headers): what its server holds at most for one client
# connection's consumers (DEFAULT_MAX_HELD_BYTES), room for four messages of the largest frame
DEFAULT_MAX_BUFFERED_BYTES: Final = 64 * 1024 * 1024
DEFAULT_MAX_QUEUED: Final = 1000  # messages a bus server holds for one full remote consumer
# what a bus server keeps for its clients: remote consumers (about 2-3 kB each), and the
# messages held for one connection's consumers together (a few hundred bytes each beside
# their bodies): a flood of registrations, or a client with many consumers at one address
# that stops answering, costs the server at most these
DEFAULT_MAX_CONSUMERS: Final = 100_000
DEFAULT_MAX_HELD: Final = 100_000
# a client connection's sends and requests waiting for their outcome on the server (each an
# answer kept, and a reply-table entry for a request): they hold no processor, so the
# server's max_requests_per_connection does not bound them; this does, at its default
DEFAULT_MAX_WAITING: Final = 4096
DEFAULT_MAX_HELD_BYTES: Final = 64 * 1024 * 1024
MAX_WINDOW: Final = 1_000_000  # the largest max_buffered a consumer may announce
MAX_ADDRESS_BYTES: Final = 1024  # UTF-8 bytes; a bound on what a peer makes the server keep
MAX_CONSUMERS_PER_CONNECTION: Final = 10_000  # a bound on what one peer makes the server keep
# a bus call's transport timeout is the bus's deadline plus this: the server answers TIMEOUT
# first, so the transport's own timeout (which closes the connection, and with it the
# client's consumers) only fires when the bus server stopped answering
TRANSPORT_MARGIN: Final = 2.0
# a bus client with consumers sends a heartbeat this often: a connection idle for
# max_idle_seconds (120 s by default) is closed, and the server forgets its consumers with
# it (RocketMQ's clients beat every 30 s: heartbeatBrokerInterval)
HEARTBEAT_SECONDS: Final = 30.0
_MAX_MILLIS: Final = INT32_MAX  # a timeout's wire value, int32 milliseconds (~24.8 days)
HEADER_PREFIX: Final = "h."

Kind = Literal["send", "publish", "request"]
ReplyKind = Literal["reply", "request", "fail"]
_KINDS: Final = ("send", "publish", "request")
_REPLY_KINDS: Final = ("reply", "request", "fail")
# A DELIVER_MANY carries at most this many messages (the bundle of frames one write sends,
# remoting._core._sansio._outbound.BUNDLE_FRAMES) and, past its first, this many bytes of
# their frames: a batch stays a small part of any frame limit.
MAX_DELIVER_MANY: Final = 64
MAX_DELIVER_MANY_BYTES: Final = 1024 * 1024
# How a client's consumer took each message of a DELIVER_MANY (its answer's ``taken``):
# accepted, full (discarded), gone (no such consumer any more: the server routes it on).
Taken = Literal["a", "f", "g"]
_TAKEN_CHARS: Final = frozenset("afg")


class Forbidden(Exception):
    """A client's bus request that its access key may not make (answered NO_PERMISSION).

    Attributes:
        operation: ``"consume"`` or ``"send"``.
        access_key: the key that signed the request (None: none).
        address: the address it named.
    """

    def __init__(self, message: str, operation: str, access_key: str | None,
                 address: str) -> None:
        super().__init__(message)
        self.operation = operation
        self.access_key = access_key
        self.address = address


class BadBusRequest(Exception):
    """A peer's bus request lacks a field or carries a wrong one (answered INVALID_PARAMETER).

    Attributes:
        field: the field at fault (None: the message says what), which the log's pacing
            keys on: a peer is logged once per field, whatever values it tries.
    """

    def __init__(self, message: str, field: str | None = None) -> None:
        super().__init__(message)
        self.field = field


# ------------------------------------------------------------------ what callers hand in


def address_of(address: object, name: str = "address") -> str:
    """Return ``address`` if it is a usable bus address.

    Raises:
        TypeError: not a str.
        ValueError: empty, over `MAX_ADDRESS_BYTES` UTF-8 bytes, or not encodable.
    """
    if not isinstance(address, str):
        raise TypeError(f"{name} must be a str, got {type(address).__name__}")
    if not address:
        raise ValueError(f"{name} must not be empty")
    try:
        size = len(address.encode())
    except UnicodeEncodeError:
        raise ValueError(f"{name} cannot be encoded as UTF-8 (a lone surrogate?)") from None
    if size > MAX_ADDRESS_BYTES:
        raise ValueError(f"{name} is {size} bytes long; at most {MAX_ADDRESS_BYTES}")
    return address


def body_of(body: object) -> bytes:
    """Return ``body`` as bytes (None: empty).

    Raises:
        TypeError: not bytes, bytearray or memoryview.
    """
    if type(body) is bytes:
        return body
    if body is None:
        return b""
    if isinstance(body, bytes | bytearray | memoryview):
        return bytes(body)
    raise TypeError(f"body must be bytes, got {type(body).__name__} (encode it first)")


def headers_of(headers: object) -> dict[str, str]:
    """Return a copy of ``headers`` (None: none).

    Raises:
        TypeError: not a mapping of str to str.
        ValueError: an empty name.
    """
    if headers is None:
        return {}
    if not isinstance(headers, dict):
        raise TypeError(f"headers must be a dict of str to str, got {type(headers).__name__}")
    for key, value in headers.items():
        if not isinstance(key, str) or not isinstance(value, str):
            raise TypeError(f"headers must map str to str, got {key!r}: {value!r}")
        if not key:
            raise ValueError("a header name must not be empty")
    return dict(headers)


def timeout_of(timeout: object) -> float:
    """Return a bus timeout: seconds > 0 (infinity: no deadline).

    Raises:
        TypeError: not an int or float.
        ValueError: NaN, or not above 0.
    """
    if isinstance(timeout, bool) or not isinstance(timeout, int | float):
        raise TypeError(f"timeout must be a number of seconds, got {timeout!r}")
    if math.isnan(timeout) or timeout <= 0:
        raise ValueError(f"timeout must be a number of seconds > 0, got {timeout!r}")
    return float(timeout)


def count_of(name: str, value: object, low: int, high: int | None = None) -> int:
    """Return ``value`` if it is an int from ``low`` (to ``high``): a count a caller sets.

    Raises:
        TypeError: not an int (a bool is not a count).
        ValueError: out of range.
    """
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"{name} must be an int, got {value!r}")
    if high is not None and not low <= value <= high:
        raise ValueError(f"{name} must be from {low} to {high}, got {value}")
    if value < low:
        raise ValueError(f"{name} must be >= {low}, got {value}")
    return value


def max_buffered_of(max_buffered: object) -> int:
    """Return a consumer's ``max_buffered``: an int from 1 to `MAX_WINDOW`.

    Raises:
        TypeError, ValueError: it is not.
    """
    return count_of("max_buffered", max_buffered, 1, MAX_WINDOW)


def max_buffered_bytes_of(max_buffered_bytes: object) -> int:
    """Return a consumer's ``max_buffered_bytes``: an int >= 1.

    Raises:
        TypeError, ValueError: it is not.
    """
    return count_of("max_buffered_bytes", max_buffered_bytes, 1)


def size_of(body: bytes, headers: dict[str, str]) -> int:
    """What a message counts in a bound of bytes: its body and its headers (a message of
    an empty body and 64 KiB of headers is no small one)."""
    if not headers:
        return len(body)
    return len(body) + sum(len(k) + len(v) for k, v in headers.items())


# ------------------------------------------------------------------ building commands


def _ext(headers: dict[str, str], **fields: str | None) -> ExtFields:
    ext: ExtFields = {HEADER_PREFIX + k: v for k, v in headers.items()}
    ext.update((k, v) for k, v in fields.items() if v is not None)
    return ext


def _millis(timeout: float | None) -> str | None:
    if timeout is None or math.isinf(timeout):
        return None
    return str(min(_MAX_MILLIS, max(1, math.ceil(timeout * 1000))))


def send_command(kind: Kind, address: str, body: bytes, headers: dict[str, str],
                 timeout: float | None) -> RemotingCommand:
    """Return the SEND request of a message (``timeout``: None or infinite, no deadline)."""
    return RemotingCommand.create_request(
        BusCode.SEND, _ext(headers, address=address, kind=kind, timeoutMillis=_millis(timeout)),
        body)


def reply_command(kind: ReplyKind, reply_address: str, body: bytes, headers: dict[str, str],
                  timeout: float | None, failure_code: int | None = None,
                  failure_message: str | None = None) -> RemotingCommand:
    """Return the REPLY request that answers the message of ``reply_address``."""
    command = RemotingCommand.create_request(
        BusCode.REPLY, _ext(headers, replyAddress=reply_address, kind=kind,
                            timeoutMillis=_millis(timeout),
                            failureCode=None if failure_code is None else str(failure_code)),
        body)
    command.remark = failure_message
    return command


def deliver_command(consumer_id: int, kind: Kind, address: str, body: bytes,
                    headers: dict[str, str], reply_address: str | None) -> RemotingCommand:
    """Return the DELIVER push of a message to a client's consumer (oneway for a publish)."""
    # the message's trace context (when it has one) is also the push's own, so the client's
    # SERVER span of the push joins the message's trace: the server makes no CLIENT span
    # for its pushes (they go around its call interceptors, see _host)
    command = RemotingCommand.create_request(
        BusCode.DELIVER, _ext(headers, consumerId=str(consumer_id), address=address, kind=kind,
                              replyAddress=reply_address, traceparent=headers.get("traceparent"),
                              tracestate=headers.get("tracestate")), body)
    if kind == "publish":
        command.mark_oneway()
    return command


def deliver_many_command(consumer_id: int, delivers: list[RemotingCommand]
                         ) -> RemotingCommand:
    """Return the DELIVER_MANY push of ``delivers`` (DELIVER commands of one consumer, in
    order): their frames, one after the other, are its body."""
    return RemotingCommand.create_request(
        BusCode.DELIVER_MANY, {"consumerId": str(consumer_id), "count": str(len(delivers))},
        b"".join(encode_command(deliver) for deliver in delivers))


def taken_response(taken: str) -> RemotingCommand:
    """Return the answer to a DELIVER_MANY: how each of its messages was taken (`Taken`)."""
    response = RemotingCommand.create_response(ResponseCode.SUCCESS)
    response.ext_fields = {"taken": taken}
    return response


def register_command(consumer_id: int, address: str, window: int, held: int = 0, *,
                     many: bool = False) -> RemotingCommand:
    """Return the REGISTER of a consumer; ``held``: messages it holds already (registering
    again after a lost connection), which its window counts until they are credited;
    ``many``: its client takes DELIVER_MANY."""
    fields = {"consumerId": str(consumer_id), "address": address, "window": str(window)}
    if many:
        fields["many"] = "1"
    if held:
        fields["held"] = str(held)
    return RemotingCommand.create_request(BusCode.REGISTER, fields)


def unregister_command(consumer_id: int) -> RemotingCommand:
    return RemotingCommand.create_request(BusCode.UNREGISTER, {"consumerId": str(consumer_id)})


def window_command(consumer_id: int, window: int, credits: int) -> RemotingCommand:
    return RemotingCommand.create_request(BusCode.WINDOW, {
        "consumerId": str(consumer_id), "window": str(window), "credits": str(credits)})


def heartbeat_command() -> RemotingCommand:
    command = RemotingCommand.create_request(BusCode.HEARTBEAT)
    command.mark_oneway()
    return command


def credit_command(consumer_id: int, credits: int) -> RemotingCommand:
    command = RemotingCommand.create_request(BusCode.CREDIT, {
        "consumerId": str(consumer_id), "credits": str(credits)})
    command.mark_oneway()
    return command


def ok_response() -> RemotingCommand:
    """Return a SUCCESS response with nothing more to say."""
    return RemotingCommand.create_response(ResponseCode.SUCCESS)


def reply_response(address: str, body: bytes, headers: dict[str, str],
                   reply_address: str | None) -> RemotingCommand:
    """Return the response that carries a reply: its address (the reply address it was sent
    to), body and headers, and its own reply address when its sender awaits an answer."""
    response = RemotingCommand.create_response(ResponseCode.SUCCESS)
    response.ext_fields = _ext(headers, address=address, replyAddress=reply_address)
    response.body = body or None
    return response


def failure_response(failure: ReplyFailure) -> RemotingCommand:
    """Return the response that carries ``failure`` to the caller."""
    response = RemotingCommand.create_response(FailureCode[failure.kind], failure.message)
    if failure.code != NO_CODE:
        response.ext_fields = {"failureCode": str(failure.code)}
    return response


def bad_request_response(problem: BadBusRequest) -> RemotingCommand:
    """Return the answer to a bus request that lacks a field or carries a wrong one."""
    return RemotingCommand.create_response(ResponseCode.INVALID_PARAMETER,
                                           f"bad bus request: {problem}")


def forbidden_response(problem: Forbidden) -> RemotingCommand:
    """Return the answer to a bus request its access key may not make."""
    return RemotingCommand.create_response(ResponseCode.NO_PERMISSION, f"[bus] {problem}")


def too_many_waiting_response(waiting: int) -> RemotingCommand:
    """Return the answer to a send or request past a connection's ``max_waiting``."""
    return RemotingCommand.create_response(ResponseCode.SYSTEM_BUSY, (
        f"[bus] this connection has {waiting} sends and requests waiting for their outcome "
        "already, the server's most: wait for their answers"))


def not_registered_response() -> RemotingCommand:
    return RemotingCommand.create_response(FailureCode.NOT_REGISTERED,
                                           "no such consumer (it was unregistered)")


# ------------------------------------------------------------------ reading commands


def failure_of(response: RemotingCommand, address: str | None) -> ReplyFailure | None:
    """Return the failure ``response`` carries, or None for a SUCCESS.

    A code that is none of the bus's (the peer is no bus server: REQUEST_CODE_NOT_SUPPORTED,
    a busy server...) is a RECIPIENT_FAILURE that names it.
    """
    code = response.code
    if code == ResponseCode.SUCCESS:
        return None
    remark = response.remark or ""
    if FailureCode.NO_HANDLERS <= code <= FailureCode.RECIPIENT_FAILURE:
        kind: FailureKind = FAILURE_KINDS[code - FailureCode.NO_HANDLERS]
        failure_code = _int((response.ext_fields or {}).get("failureCode"), NO_CODE)
        return ReplyFailure(kind, remark, address=address, code=failure_code)
    return ReplyFailure("RECIPIENT_FAILURE", f"the bus server answered code {code} "
                        f"({remark or 'no remark'})", address=address)


def _int(text: str | None, default: int) -> int:
    if text is None:
        return default
    try:
        return header_int("failureCode", text, INT32_MIN, INT32_MAX)
    except ValueError:
        return default


def headers_in(ext: ExtFields | None) -> dict[str, str]:
    """Return the message headers carried by ``ext`` (an empty value may arrive as None)."""
    if not ext:
        return {}
    n = len(HEADER_PREFIX)
    return {k[n:]: v or "" for k, v in ext.items() if k.startswith(HEADER_PREFIX) and len(k) > n}


def _field(ext: ExtFields, name: str) -> str:
    value = ext.get(name)
    if not value:
        raise BadBusRequest(f"no {name}", name)
    return value


def _peer_address(ext: ExtFields, name: str = "address") -> str:
    try:
        return address_of(_field(ext, name), name)
    except (TypeError, ValueError) as exc:
        raise BadBusRequest(str(exc), name) from None


def _peer_int(ext: ExtFields, name: str, low: int, high: int) -> int:
    try:
        return header_int(name, _field(ext, name), low, high)
    except ValueError as exc:
        raise BadBusRequest(str(exc), name) from None


def _peer_timeout(ext: ExtFields) -> float | None:
    if ext.get("timeoutMillis") is None:
        return None
    return _peer_int(ext, "timeoutMillis", 1, _MAX_MILLIS) / 1000


@dataclass(frozen=True, slots=True)
class Send:
    """A SEND request as the server reads it."""

    kind: Kind
    address: str
    body: bytes
    headers: dict[str, str]
    timeout: float | None


@dataclass(frozen=True, slots=True)
class Reply:
    """A REPLY request as the server reads it."""

    kind: ReplyKind
    reply_address: str
    body: bytes
    headers: dict[str, str]
    timeout: float | None
    failure_code: int
    failure_message: str


@dataclass(frozen=True, slots=True)
class Register:
    """A REGISTER request as the server reads it."""

    consumer_id: int
    address: str
    window: int
    held: int
    many: bool = False  # the client takes DELIVER_MANY


@dataclass(frozen=True, slots=True)
class Deliver:
    """A DELIVER push as a client reads it."""

    consumer_id: int
    kind: Kind
    address: str
    body: bytes
    headers: dict[str, str]
    reply_address: str | None


def _kind(ext: ExtFields, kinds: tuple[str, ...]) -> str:
    kind = ext.get("kind")
    if kind not in kinds:
        raise BadBusRequest(f"kind must be one of {', '.join(kinds)}", "kind")
    return kind


def send_of(request: RemotingCommand) -> Send:
    """Read a SEND request.

    Raises:
        BadBusRequest: a field is missing or wrong.
    """
    ext = request.ext_fields or {}
    return Send(_kind(ext, _KINDS), _peer_address(ext), request.body or b"",  # type: ignore[arg-type]
                headers_in(ext), _peer_timeout(ext))


def reply_of(request: RemotingCommand) -> Reply:
    """Read a REPLY request.

    Raises:
        BadBusRequest: a field is missing or wrong.
    """
    ext = request.ext_fields or {}
    kind = _kind(ext, _REPLY_KINDS)
    code = (_peer_int(ext, "failureCode", INT32_MIN, INT32_MAX)
            if ext.get("failureCode") is not None else NO_CODE)
    return Reply(kind, _peer_address(ext, "replyAddress"), request.body or b"",  # type: ignore[arg-type]
                 headers_in(ext), _peer_timeout(ext), code, request.remark or "")


def register_of(request: RemotingCommand) -> Register:
    """Read a REGISTER request.

    Raises:
        BadBusRequest: a field is missing or wrong.
    """
    ext = request.ext_fields or {}
    held = 0 if ext.get("held") is None else _peer_int(ext, "held", 0, MAX_WINDOW)
    return Register(_peer_int(ext, "consumerId", 0, INT64_MAX), _peer_address(ext),
                    _peer_int(ext, "window", 1, MAX_WINDOW), held, ext.get("many") == "1")


def consumer_id_of(request: RemotingCommand) -> int:
    """Read the consumer id of an UNREGISTER or CREDIT request.

    Raises:
        BadBusRequest: it is missing or wrong.
    """
    return _peer_int(request.ext_fields or {}, "consumerId", 0, INT64_MAX)


def window_of(request: RemotingCommand) -> tuple[int, int]:
    """Read the window and the credits of a WINDOW request.

    Raises:
        BadBusRequest: they are missing or wrong.
    """
    ext = request.ext_fields or {}
    return _peer_int(ext, "window", 1, MAX_WINDOW), _peer_int(ext, "credits", 0, MAX_WINDOW)


def credits_of(request: RemotingCommand) -> int:
    """Read the credits of a CREDIT request.

    Raises:
        BadBusRequest: they are missing or wrong.
    """
    return _peer_int(request.ext_fields or {}, "credits", 1, MAX_WINDOW)


def deliver_of(request: RemotingCommand) -> Deliver:
    """Read a DELIVER push.

    Raises:
        BadBusRequest: a field is missing or wrong.
    """
    ext = request.ext_fields or {}
    reply_address = ext.get("replyAddress") or None
    return Deliver(_peer_int(ext, "consumerId", 0, INT64_MAX),
                   _kind(ext, _KINDS),  # type: ignore[arg-type]
                   _peer_address(ext), request.body or b"", headers_in(ext), reply_address)


def deliver_many_of(request: RemotingCommand) -> list[Deliver]:
    """Read a DELIVER_MANY push: its messages, in order, all for its one consumer.

    Raises:
        BadBusRequest: a field is missing or wrong; the body holds other than ``count``
            whole DELIVER frames of that consumer.
    """
    ext = request.ext_fields or {}
    consumer_id = _peer_int(ext, "consumerId", 0, INT64_MAX)
    count = _peer_int(ext, "count", 1, MAX_DELIVER_MANY)
    body = request.body or b""
    decoder = FrameDecoder(max_frame_bytes=max(8, len(body)))
    delivers = []
    try:
        decoder.feed(body)
        for _ in range(count):
            command = decoder.next_command()
            if command is None:
                raise BadBusRequest(f"the body holds fewer than count ({count}) messages",
                                    "count")
            if command.code != BusCode.DELIVER or command.is_response:
                raise BadBusRequest("a message of the body is no DELIVER", "body")
            deliver = deliver_of(command)
            if deliver.consumer_id != consumer_id:
                raise BadBusRequest("a message of the body is for another consumer",
                                    "consumerId")
            delivers.append(deliver)
    except CodecError as exc:
        raise BadBusRequest(f"a message of the body is no frame: {exc}", "body") from None
    if decoder.buffered_bytes:
        raise BadBusRequest(f"the body holds more than count ({count}) messages", "body")
    return delivers


def taken_of(response: RemotingCommand, count: int) -> str | None:
    """Return how each of the ``count`` messages of a DELIVER_MANY was taken (one `Taken`
    character each), from its SUCCESS answer; None if the answer does not say so."""
    taken = (response.ext_fields or {}).get("taken")
    if taken is None or len(taken) != count or not _TAKEN_CHARS.issuperset(taken):
        return None
    return taken


def reply_in(response: RemotingCommand) -> tuple[str | None, str | None]:
    """Return the address a reply was sent to and its own reply address (None: its sender
    awaits no answer), from its response."""
    ext = response.ext_fields or {}
    return ext.get("address") or None, ext.get("replyAddress") or None
