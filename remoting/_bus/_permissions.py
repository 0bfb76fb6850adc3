"""Who may consume at, and send to, which addresses: `AddressPermissions` per ACL access key,
as Vert.x's bridge permits addresses (``PermittedOptions``: an address, or an address regex)
and RocketMQ's plain ACL permits topics per account.

A bus server with permissions (``EventBus(permissions={...})``) checks each client request
that registers a consumer (consume) or carries a message (send, publish, request: send)
against the entry of the access key that signed it, which the server's `AclServerRPCHook`
has verified; a key without an entry, and a request without a key (the ACL's
``allow_anonymous``), get the ``"*"`` entry, or nothing. Replies are not checked: only the
connection that holds a message may answer it (`ReplyTable.take`). The bus's own consumers
and messages (the server's code) are not checked either. Without permissions the bus is open
to every client that reaches it, as before (docs/security.md).

Sans-I/O: the check is a set lookup for exact addresses, then the regexes in order.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import Final, Literal

from ._wire import address_of

__all__ = ["ANY_KEY", "AddressPermissions", "Operation", "PermissionTable"]

ANY_KEY: Final = "*"  # the entry for every other access key, and for requests with none
Operation = Literal["consume", "send"]


class AddressPermissions:
    """The addresses one access key may consume at (register consumers) and send to (send,
    publish, request). Each is an exact address (a `str`) or a regex (a compiled
    `re.Pattern`) that must match the whole address.

    Raises:
        TypeError: an entry is neither a str nor a compiled pattern.
        ValueError: a str that is no valid address (empty, over 1024 UTF-8 bytes).
    """

    __slots__ = ("_consume", "_send")

    def __init__(self, *, consume: Iterable[str | re.Pattern[str]] = (),
                 send: Iterable[str | re.Pattern[str]] = ()) -> None:
        self._consume = _Addresses("consume", consume)
        self._send = _Addresses("send", send)

    def __repr__(self) -> str:
        return f"AddressPermissions(consume={self._consume!r}, send={self._send!r})"

    def allows(self, operation: Operation, address: str) -> bool:
        """True if ``operation`` (``"consume"`` or ``"send"``) is permitted at ``address``."""
        return (self._consume if operation == "consume" else self._send).match(address)


class _Addresses:
    __slots__ = ("_exact", "_patterns")

    def __init__(self, name: str, entries: Iterable[str | re.Pattern[str]]) -> None:
        if isinstance(entries, str | re.Pattern):
            raise TypeError(f"{name} must be a list of addresses and patterns, got one "
                            f"{type(entries).__name__}: wrap it in a list")
        exact: set[str] = set()
        patterns: list[re.Pattern[str]] = []
        for entry in entries:
            if isinstance(entry, re.Pattern):
                if not isinstance(entry.pattern, str):
                    raise TypeError(f"{name}: a pattern of bytes never matches an address")
                patterns.append(entry)
            elif isinstance(entry, str):
                exact.add(address_of(entry, name))
            else:
                raise TypeError(f"{name} entries are addresses (str) or re.compile(...) "
                                f"patterns, got {type(entry).__name__}")
        self._exact = frozenset(exact)
        self._patterns = tuple(patterns)

    def __repr__(self) -> str:
        return repr([*sorted(self._exact), *self._patterns])

    def match(self, address: str) -> bool:
        return address in self._exact or any(p.fullmatch(address) for p in self._patterns)


_NOTHING: Final = AddressPermissions()


class PermissionTable:
    """An `EventBus`'s permissions: an `AddressPermissions` per access key.

    Raises:
        TypeError: not a mapping of str to `AddressPermissions`.
    """

    __slots__ = ("_by_key", "_other")

    def __init__(self, permissions: Mapping[str, AddressPermissions]) -> None:
        if not isinstance(permissions, Mapping):
            raise TypeError("permissions must map access keys to AddressPermissions, got "
                            f"{type(permissions).__name__}")
        for key, entry in permissions.items():
            if not isinstance(key, str) or not key:
                raise TypeError(f"permissions: an access key must be a non-empty str, got "
                                f"{key!r}")
            if not isinstance(entry, AddressPermissions):
                raise TypeError(f"permissions[{key!r}] must be an AddressPermissions, got "
                                f"{type(entry).__name__}")
        self._by_key = dict(permissions)
        self._other = self._by_key.pop(ANY_KEY, _NOTHING)

    def allows(self, access_key: str | None, operation: Operation, address: str) -> bool:
        """True if ``access_key`` (None: a request without one) may do ``operation`` at
        ``address``."""
        entry = self._other if access_key is None else self._by_key.get(access_key, self._other)
        return entry.allows(operation, address)
