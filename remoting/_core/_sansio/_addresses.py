"""`AddressList`: the addresses a client's ``addr=None`` calls go to (SPEC 6.6), sans-I/O; and
what an address is (`split_addr`, `parse_addr`).

As RocketMQ's ``getAndCreateNameserverChannel``: the current address is used while it works;
otherwise the addresses are tried round-robin from a random start, and the first that
connects becomes the current one. An address that answers GO_AWAY stops being the current one
and is tried last (`move_off`); an address that connects after the list no longer holds it
is not made current. Both drivers use it, each under its own lock (`ChannelTable`,
`ThreadChannels`: the list may be replaced from any thread); it does no I/O and takes no
lock itself.
"""

from __future__ import annotations

import random
from typing import Final

from ..._errors import RemotingConnectError

__all__ = ["NO_ADDRESS", "AddressList", "parse_addr", "split_addr"]

NO_ADDRESS: Final = ("no address given and the address list is empty "
                     "(call update_name_server_address_list)")


def split_addr(addr: object) -> tuple[str, int]:
    """Split ``"host:port"`` (or ``"[v6]:port"``) at the last colon; the port is 1-65535.

    Raises:
        ValueError: the address is not of that form; the message says what is wrong.
    """
    if not isinstance(addr, str):
        raise ValueError(f"address must be a 'host:port' string, got {addr!r}")
    if any(c.isspace() for c in addr):
        raise ValueError(f"address must be 'host:port' without spaces, got {addr!r}")
    host, sep, port = addr.rpartition(":")
    if not sep or not host or not (port.isascii() and port.isdigit()):
        raise ValueError(f"address must be 'host:port', got {addr!r}")
    if not 0 < int(port) < 65536:
        raise ValueError(f"the port must be 1-65535, got {addr!r}")
    if "[" in host or "]" in host:  # only as one pair around the whole host: "[v6]"
        if not (host[0] == "[" and host[-1] == "]" and len(host) > 2
                and host.count("[") == host.count("]") == 1):
            raise ValueError(f"address must be 'host:port' or '[v6]:port', got {addr!r}")
        host = host[1:-1]
    return host, int(port)


def parse_addr(addr: str) -> tuple[str, int]:
    """`split_addr` for a call: a bad address fails the call as a connect error.

    Raises:
        RemotingConnectError: the address is not ``"host:port"`` with a port 1-65535.
    """
    try:
        return split_addr(addr)
    except ValueError as exc:
        raise RemotingConnectError(addr if isinstance(addr, str) else repr(addr),
                                   str(exc)) from None



class AddressList:
    """The address list of ``addr=None`` calls, and which address is current."""

    __slots__ = ("_next", "addresses", "current")

    def __init__(self) -> None:
        self.addresses: list[str] = []  # replaced, never mutated (readers take one snapshot)
        self._next = 0
        self.current: str | None = None

    def set(self, addrs: list[str]) -> None:
        """Replace the list (the caller checked each address); a new list starts at a random
        address, and the current one is kept if it is still in it."""
        # the same list again changes nothing, as RocketMQ's updateNameServerAddressList
        # replaces only a list that changed (clients send it again periodically)
        if addrs != self.addresses:
            self.addresses = list(addrs)
            # a random start, as RocketMQ's namesrvIndex (initialised from a random int):
            # clients given the same list spread over its servers instead of all taking the
            # first
            self._next = random.randrange(len(addrs)) if addrs else 0
            if self.current not in self.addresses:
                self.current = None

    def order(self) -> list[str]:
        """Return the addresses to try, in order: the current one first, then the others
        round-robin (each call starts one further)."""
        servers = self.addresses
        order: list[str] = [] if self.current is None else [self.current]
        n = len(servers)
        for _ in range(n):
            addr = servers[self._next % n]
            self._next += 1
            if addr not in order:
                order.append(addr)
        return order

    def chose(self, addr: str) -> None:
        """``addr`` connected: it is the current address from now on, unless the list no
        longer holds it (replaced while it connected: never current again)."""
        if addr in self.addresses:
            self.current = addr

    def move_off(self, addr: str | None) -> None:
        """``addr`` is draining (GO_AWAY): ``addr=None`` calls go to the next address."""
        if addr is not None and addr == self.current:
            self.current = None
            servers = self.addresses
            if addr in servers:  # tried last now, as after a connect failure
                self._next = servers.index(addr) + 1
