"""`ReplyFailure`: why a message got no handler, no reply in time, or a failure from its
recipient (Vert.x's ``ReplyException`` and ``ReplyFailure``)."""

from __future__ import annotations

from typing import Final, Literal

from .._errors import RemotingError

__all__ = ["FAILURE_KINDS", "NO_CODE", "BusPermissionError", "FailureKind", "ReplyFailure"]

FailureKind = Literal["NO_HANDLERS", "TIMEOUT", "RECIPIENT_FAILURE"]
FAILURE_KINDS: Final[tuple[FailureKind, ...]] = ("NO_HANDLERS", "TIMEOUT", "RECIPIENT_FAILURE")
NO_CODE: Final = -1  # Vert.x's failureCode() of a failure no recipient chose


class ReplyFailure(RemotingError):
    """A message was not delivered or not answered (Vert.x's ``ReplyException``).

    Attributes:
        kind: ``"NO_HANDLERS"``: no consumer was registered at the address (nothing was
            delivered); ``"TIMEOUT"``: no answer within the timeout (the message may still
            be handled); ``"RECIPIENT_FAILURE"``: the recipient failed it: its handler
            raised or called ``message.fail(code, message)``, its consumer was full, or it
            went away holding the message.
        code: the recipient's failure code (``message.fail``'s), or -1.
        message: the recipient's failure message, or what happened.
        address: the address the message was sent to (None for a reply).

    The bus and its connections are still usable afterwards.
    """

    def __init__(self, kind: FailureKind, message: str, *, address: str | None = None,
                 code: int = NO_CODE) -> None:
        self.kind = kind
        self.code = code
        self.message = message
        self.address = address
        super().__init__(f"{kind}: {message}")


class BusPermissionError(RemotingError):
    """The bus server refused to register a consumer or to take a message: the access key
    that signed the request may not consume at, or send to, that address (its `EventBus`
    ``permissions``), or may not call that bus code at all (its ACL credential).

    Nothing was registered or sent; the bus client, its connection and its other consumers
    go on. Retrying does not help: the server's operator grants addresses (docs/bus.md).

    Attributes:
        address: the address refused (None: a request that names none).
        remark: the server's reason.
    """

    def __init__(self, remark: str, addr: str | None = None, *,
                 address: str | None = None) -> None:
        self.address = address
        self.remark = remark
        super().__init__(f"the bus server at {addr} refused: {remark}", addr)
