"""`AddressTable`: handlers by address, chosen round-robin for a send (Vert.x's
``handlerMap`` and ``Handlers.choose``).

Sans-I/O and not thread-safe: its owner holds the bus lock around every call. Invariants: an
address is in the table only while it has a handler; a handler is at most once under an
address; the rotation is strict: n sends over n handlers reach each once, and a handler
removed from the rotation does not make the one after it skip a turn.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Generic, TypeVar

if TYPE_CHECKING:
    from collections.abc import Callable

__all__ = ["AddressTable"]

H = TypeVar("H")


class AddressTable(Generic[H]):
    """Handlers by address, with a round-robin choice per address."""

    __slots__ = ("_handlers", "_next")

    def __init__(self) -> None:
        self._handlers: dict[str, list[H]] = {}
        self._next: dict[str, int] = {}  # the index choose() tries first, per address

    def __len__(self) -> int:
        """The number of addresses with at least one handler."""
        return len(self._handlers)

    def count(self) -> int:
        """The number of handlers, over all addresses."""
        return sum(len(handlers) for handlers in self._handlers.values())

    def add(self, address: str, handler: H) -> bool:
        """Add ``handler`` at ``address`` (last in the rotation); False if already there."""
        handlers = self._handlers.setdefault(address, [])
        if handler in handlers:
            return False
        handlers.append(handler)
        self._next.setdefault(address, 0)
        return True

    def remove(self, address: str, handler: H) -> bool:
        """Remove ``handler`` from ``address``; False if it was not there."""
        handlers = self._handlers.get(address)
        if handlers is None or handler not in handlers:
            return False
        index = handlers.index(handler)
        del handlers[index]
        if not handlers:
            del self._handlers[address]
            del self._next[address]
        elif index < self._next[address]:
            self._next[address] -= 1  # the handler that was next stays next
        elif self._next[address] >= len(handlers):
            self._next[address] = 0
        return True

    def choose(self, address: str, skip: Callable[[H], bool] | None = None) -> H | None:
        """Return the next handler of ``address`` in the rotation and move past it; None if
        it has none (``skip``: handlers to pass over, as if absent)."""
        handlers = self._handlers.get(address)
        if not handlers:
            return None
        n = len(handlers)
        start = self._next[address]
        for i in range(n):
            index = (start + i) % n
            handler = handlers[index]
            if skip is None or not skip(handler):
                self._next[address] = (index + 1) % n
                return handler
        return None

    def handlers(self) -> list[H]:
        """Return every handler, over all addresses."""
        return [h for handlers in self._handlers.values() for h in handlers]

    def addresses(self) -> list[str]:
        """Return the addresses that have a handler."""
        return list(self._handlers)

    def all(self, address: str) -> list[H]:
        """Return the handlers of ``address`` (a copy), in rotation order from the first."""
        return list(self._handlers.get(address, ()))
