"""`Message` (what handlers and requesters receive), `OutboundMessage` (what outbound
interceptors see), and `Replier`, the part of a bus that carries a message's answers."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal, Protocol

from .._checks import outside_trio, request_code
from .._steps import drive, drive_async
from ._wire import DEFAULT_TIMEOUT, body_of, headers_of, timeout_of

if TYPE_CHECKING:
    from .._steps import Steps
    from ._wire import Kind

__all__ = ["Message", "MessageKind", "OutboundKind", "OutboundMessage", "Replier"]

MessageKind = Literal["send", "publish", "request", "reply"]
OutboundKind = Literal["send", "publish", "request", "reply", "fail"]


class Replier(Protocol):
    """Where a message's answers go: the bus that delivered it (its own reply registrations,
    or the bus server's through the client's connection)."""

    def send_reply(self, reply_address: str, body: bytes, headers: dict[str, str],
                   failure: tuple[int, str] | None) -> None:
        """Answer (or, with ``failure``, fail) the message of ``reply_address``; never waits."""
        ...

    def replying(self, reply_address: str, body: bytes, headers: dict[str, str],
                 timeout: float, *, blocking: bool) -> Steps[Message]:
        """Answer the message of ``reply_address`` and wait for the answer to that (steps,
        driven by a thread if ``blocking``, else by a trio task).

        Raises:
            RuntimeError: driven by the face that did not deliver the message.
        """
        ...


class Message:
    """A message as its handler receives it, or a reply as its requester receives it.

    Attributes:
        address: where it was sent (a reply's: its reply address).
        body: its bytes.
        headers: its headers (str to str); a handler may change them.
        kind: ``"send"``, ``"publish"``, ``"request"`` or ``"reply"``.
        reply_address: where its answer goes: set when its sender waits for one (a request,
            or a reply sent with ``reply_and_request``), else None.
    """

    __slots__ = ("_replier", "address", "answered", "body", "headers", "kind", "reply_address")

    def __init__(self, *, address: str, body: bytes, headers: dict[str, str],
                 kind: MessageKind, reply_address: str | None = None,
                 replier: Replier | None = None) -> None:
        self.address = address
        self.body = body
        self.headers = headers
        self.kind = kind
        self.reply_address = reply_address
        self._replier = replier
        self.answered = False  # reply, fail or reply_and_request was called

    def __repr__(self) -> str:
        return (f"<Message {self.kind} to {self.address!r}, {len(self.body)} bytes"
                f"{', awaits a reply' if self.reply_address else ''}>")

    @property
    def is_send(self) -> bool:
        """False for a published message (Vert.x's ``isSend``)."""
        return self.kind != "publish"

    def reply(self, body: bytes | bytearray | memoryview | None = None,
              headers: dict[str, str] | None = None) -> None:
        """Answer this message, from any thread or task; never waits (as Vert.x's ``reply``).

        Does nothing for a message whose sender waits for no answer. A reply that comes too
        late (the requester timed out or went away) is dropped and counted
        (``expired_replies`` in the bus server's statistics).

        Raises:
            TypeError, ValueError: ``body`` or ``headers`` is not bytes / a dict of str.
        """
        body, headers = body_of(body), headers_of(headers)
        if self.reply_address is not None and self._replier is not None:
            self.answered = True
            self._replier.send_reply(self.reply_address, body, headers, None)

    def fail(self, code: int, message: str) -> None:
        """Fail this message: its requester's call raises ``ReplyFailure`` of kind
        ``"RECIPIENT_FAILURE"`` with ``code`` and ``message`` (Vert.x's ``fail``). Never
        waits; does nothing for a message whose sender waits for no answer.

        Raises:
            TypeError, ValueError: ``code`` is not an int32, or ``message`` not a str.
        """
        request_code(code)
        if not isinstance(message, str):
            raise TypeError(f"message must be a str, got {type(message).__name__}")
        if self.reply_address is not None and self._replier is not None:
            self.answered = True
            self._replier.send_reply(self.reply_address, b"", {}, (code, message))

    def reply_and_request(self, body: bytes | bytearray | memoryview | None = None,
                          headers: dict[str, str] | None = None, *,
                          timeout: float = DEFAULT_TIMEOUT) -> Message:
        """Answer this message and wait for the answer to the answer (blocking faces: a
        handler's thread, or any thread but the event loop's).

        Returns the requester's reply, a `Message` it may answer in turn.

        Raises:
            ReplyFailure: the reply address expired (NO_HANDLERS), no answer came in
                ``timeout`` seconds (TIMEOUT), or the requester failed it.
            ValueError: this message awaits no reply; a bad argument (also TypeError).
            RuntimeError: called on an event loop's thread (use `reply_and_request_async`).
        """
        outside_trio("Message.reply_and_request",
                     "`await message.reply_and_request_async(...)`")
        return drive(self._replying(body, headers, timeout, blocking=True))

    async def reply_and_request_async(self, body: bytes | bytearray | memoryview | None = None,
                                      headers: dict[str, str] | None = None, *,
                                      timeout: float = DEFAULT_TIMEOUT) -> Message:
        """`reply_and_request` for a trio task (handlers of trio faces)."""
        return await drive_async(self._replying(body, headers, timeout, blocking=False))

    def _replying(self, body: object, headers: object, timeout: object, *, blocking: bool
                  ) -> Steps[Message]:
        replier = self._replier_for_reply()
        checked = body_of(body), headers_of(headers), timeout_of(timeout)
        self.answered = True
        return replier.replying(self.reply_address, *checked,  # type: ignore[arg-type]
                                blocking=blocking)

    def _replier_for_reply(self) -> Replier:
        if self.reply_address is None or self._replier is None:
            raise ValueError(f"this {self.kind} message awaits no reply")
        return self._replier


@dataclass(slots=True, kw_only=True)
class OutboundMessage:
    """A message about to leave a bus, as outbound interceptors see it (they may change its
    body and headers).

    Attributes:
        kind: ``"send"``, ``"publish"``, ``"request"``, ``"reply"`` (``reply`` and
            ``reply_and_request``) or ``"fail"``.
        address: where it goes (a reply's: the reply address).
        body: its bytes.
        headers: its headers.
    """

    kind: OutboundKind
    address: str
    body: bytes
    headers: dict[str, str]



def delivered(kind: Kind, address: str, body: bytes, headers: dict[str, str],
              reply_address: str | None, replier: Replier | None) -> Message:
    """Return the `Message` a handler receives."""
    return Message(address=address, body=body, headers=headers, kind=kind,
                   reply_address=reply_address, replier=replier)
