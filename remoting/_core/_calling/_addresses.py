"""`AddressList`: the addresses a client's ``addr=None`` calls go to (SPEC 6.6), sans-I/O.

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

__all__ = ["AddressList"]


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
