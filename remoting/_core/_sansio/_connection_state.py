"""What both drivers share about one connection: its lifecycle as one transition table (h11's
``_state.py`` style), the bounds put on a peer's unexpected answers, and why a peer hung up.

Theory of operation:
- A connection is in one `Lifecycle` state; `ConnectionState.handle` applies an event through
  `TRANSITIONS` and returns whether the state changed. The table names every event a state
  takes, those that leave it where it is included: a second ``close`` (whoever sends it: a
  failed read or write, a codec error, the application, shutdown; the first counts, and its
  reason and whether it broke are kept with it) and a GO_AWAY read while the connection
  closes. An event the table does not name for a state (``released`` before a close or
  twice, a GO_AWAY after the release) is a bug of the driver: `ConnectionStateError`, and
  nothing changes (h11's ``LocalProtocolError``).
- OPEN: takes new calls, reads and sends. GOING_AWAY: the peer answered GO_AWAY; no new call
  goes there, but the calls already on it finish there and answers to the peer's own
  requests still go out. CLOSING: nothing more is read or sent; the socket is being shut (a
  thread driver waits for the threads using it to leave before it releases the socket).
  CLOSED: released; its pending calls have failed.
- The table is sync bookkeeping with no I/O; each driver applies it under its own rule (the
  trio driver's `Connection` on the loop thread, the thread driver's `ThreadConnection` under
  its mutex). Every other module asks the state; none writes it.
- Besides the state, it keeps the history the state forgets: the first CLOSE's reason and
  whether it broke, and ``told_go_away`` (a GO_AWAY before the close: a trio connection's
  calls, cut off by a close that followed GO_AWAY, still go elsewhere rather than failing).
- What is not lifecycle stays with the reader that owns it: a trio connection's read pause
  (``processing`` at ``max_processing``, the request held meanwhile), its sender's
  ``holding`` (a read being handled) and the counters a peer is judged by.
"""

from __future__ import annotations

import enum
import itertools
from typing import TYPE_CHECKING, Final, Literal, Protocol

from ..._log import log

if TYPE_CHECKING:
    from codec import RemotingCommand

__all__ = ["MAX_UNEXPECTED", "TRANSITIONS", "ConnectionState", "ConnectionStateError", "Event",
           "Lifecycle", "described", "eof_reason", "next_connection_id", "note_orphan"]

# Responses matching no call that one connection may send beyond the calls given up on it
# (timed out or cancelled: their late answers are expected) before it is closed.
MAX_UNEXPECTED: Final = 100
# Why a server may close a client's connection before answering, plaintext / TLS.
_LIMITS: Final = "or it refuses more connections (max_connections, max_connections_per_ip)"
CLOSED_AT_ONCE: Final = ("; it may require TLS (ClientConfig.use_tls), " + _LIMITS,
                         "; it may require a client certificate (ClientConfig.tls_cert_file), "
                         + _LIMITS)

next_connection_id: Final = itertools.count(1).__next__  # one numbering for both drivers


class Lifecycle(enum.Enum):
    """The states of a connection (see the module docstring)."""

    OPEN = "open"
    GOING_AWAY = "going away"
    CLOSING = "closing"
    CLOSED = "closed"


Event = Literal["go_away", "close", "released"]

# Every event each state takes; one that leaves the state where it is changes nothing.
TRANSITIONS: Final[dict[Lifecycle, dict[Event, Lifecycle]]] = {
    Lifecycle.OPEN: {"go_away": Lifecycle.GOING_AWAY, "close": Lifecycle.CLOSING},
    # another call answered GO_AWAY in the same read: told once is enough
    Lifecycle.GOING_AWAY: {"go_away": Lifecycle.GOING_AWAY, "close": Lifecycle.CLOSING},
    # a GO_AWAY read just before another thread closed it; the first close counts
    Lifecycle.CLOSING: {"go_away": Lifecycle.CLOSING, "close": Lifecycle.CLOSING,
                        "released": Lifecycle.CLOSED},
    # a close asked for once it is gone (a channel handle kept by the application)
    Lifecycle.CLOSED: {"close": Lifecycle.CLOSED},
}


class ConnectionStateError(RuntimeError):
    """An event a connection's state cannot take: a bug of the driver that sent it (h11's
    ``LocalProtocolError``). The state is left as it was."""

    def __init__(self, state: Lifecycle, event: Event) -> None:
        super().__init__(f"a connection {state.value} cannot take {event!r}")
        self.state = state
        self.event = event


class ConnectionState:
    """One connection's lifecycle state, why it closed, and whether it broke.

    ``takes_calls``, ``going_away``, ``usable``, ``closed`` and ``released`` are what the
    state implies,
    kept as plain attributes (set at each transition, read on every call).
    """

    __slots__ = ("broken", "closed", "going_away", "reason", "released", "state",
                 "takes_calls", "told_go_away", "usable")

    def __init__(self) -> None:
        self.reason: str | None = None  # why it closed (the first CLOSE's)
        self.broken = False  # it closed on a failure (transport, codec), not on purpose
        self.told_go_away = False  # the peer answered GO_AWAY (kept once it closed)
        self._enter(Lifecycle.OPEN)

    def _enter(self, state: Lifecycle) -> None:
        self.state = state
        self.takes_calls = state is Lifecycle.OPEN  # new calls may be sent on it
        self.going_away = state is Lifecycle.GOING_AWAY  # the peer answered GO_AWAY
        self.usable = state is Lifecycle.OPEN or state is Lifecycle.GOING_AWAY  # reads, sends
        self.closed = not self.usable  # from the first CLOSE on
        self.released = state is Lifecycle.CLOSED  # its socket is let go, its calls failed

    def handle(self, event: Event, reason: str | None = None, *, broken: bool = False) -> bool:
        """Apply ``event``; return True if the state changed (False: an event the state takes
        and stays, a second close).

        Raises:
            ConnectionStateError: the state does not take ``event`` (nothing changes).
        """
        new = TRANSITIONS[self.state].get(event)
        if new is None:
            raise ConnectionStateError(self.state, event)
        if new is self.state:
            return False
        if event == "close":
            self.reason = reason
            self.broken = broken
        elif event == "go_away":
            self.told_go_away = True
        self._enter(new)
        return True

    def __repr__(self) -> str:
        return f"<ConnectionState {self.state.value}>"


class PeerJudged(Protocol):
    """What `note_orphan` reads and changes on a connection."""

    id: int
    remote_addr: str
    orphans: int
    abandoned: int

    @property
    def closed(self) -> bool: ...

    def close(self, reason: str = ...) -> None: ...


def note_orphan(conn: PeerJudged, response: RemotingCommand) -> None:
    """A response read from ``conn`` matched no call: log it sparingly (the 1st, 2nd, 4th,
    8th...), and close ``conn`` once such responses exceed its given-up calls by
    `MAX_UNEXPECTED` (a peer flooding us with answers nobody asked for)."""
    conn.orphans += 1
    n = conn.orphans
    if n & (n - 1) == 0:
        log.warning("response.orphaned", opaque=response.opaque, code=response.code,
                    peer=conn.remote_addr, orphaned_on_connection=n)
    if n > conn.abandoned + MAX_UNEXPECTED and not conn.closed:  # one event per close
        log.warning("connection.misbehaving", conn_id=conn.id, peer=conn.remote_addr,
                    orphaned=n, given_up=conn.abandoned)
        conn.close(f"{n} responses matched no call (only {conn.abandoned} calls were "
                   "given up on)")


def described(exc: BaseException) -> str:
    """Say what a stream error was in words: its message, else its cause's (trio's
    ``BrokenResourceError()`` carries none of its own), else its kind."""
    return str(exc) or str(exc.__cause__ or "") or type(exc).__name__


def eof_reason(*, mid_frame: bool, got_data: bool, client: bool, tls: bool) -> str:
    """Why the peer closed: mid-frame, before a client got any answer (with a hint at what a
    server refuses that way), or plainly."""
    if mid_frame:
        return "peer closed the connection mid-frame"
    if not got_data and client:
        return "the server closed the connection before answering" + CLOSED_AT_ONCE[tls]
    return "peer closed the connection"
