"""``remoting bus --acl FILE``: who may use a bus server, as a TOML file.

RocketMQ's plain ACL accounts (an access key, its secret, the request codes it may call:
``plain_acl.yml``), each with the bus addresses it may consume at and send to::

    allow_anonymous = false            # serve requests without an AccessKey (default: no)

    [accounts.shop]
    secret_key = "shop-secret"
    consume = ["price"]                # exact addresses
    send_regex = ['.*']                # regexes that match a whole address
    # codes = [32300, 32303]           # the request codes it may call (default: all)

    [accounts.customer]
    secret_key = "customer-secret"
    send = ["price"]

    [anyone]                           # every other key, and requests without one
    send = ["news"]

The file is read once, at start; a mistake stops the command with a message that names the
key at fault. Secrets are never printed.
"""

from __future__ import annotations

import re
import tomllib
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .._security._acl import AclServerRPCHook
    from ..bus import AddressPermissions

__all__ = ["read_acl_file"]

_TOP = {"allow_anonymous", "accounts", "anyone"}
_ADDRESSES = ("consume", "consume_regex", "send", "send_regex")
_ACCOUNT = {"secret_key", "codes", *_ADDRESSES}


def read_acl_file(path: str) -> tuple[AclServerRPCHook, dict[str, AddressPermissions]]:
    """Return the ACL hook and the bus permissions that the TOML file at ``path`` describes.

    Raises:
        ValueError: the file cannot be read, is not TOML, or holds an unknown key or a value
            of the wrong type (the message names it).
    """
    from .._security._acl import AclServerRPCHook, Credential
    from ..bus import AddressPermissions

    try:
        config = tomllib.loads(Path(path).read_text(encoding="utf-8"))
    except OSError as exc:
        raise ValueError(f"--acl {path}: {exc.strerror or exc}") from None
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise ValueError(f"--acl {path}: not TOML: {exc}") from None
    _known(path, "", config, _TOP)
    accounts = config.get("accounts", {})
    if not isinstance(accounts, dict) or not accounts:
        raise ValueError(f"--acl {path}: [accounts.NAME] tables are needed, one per access "
                         "key")
    credentials: dict[str, str | Credential] = {}
    permissions: dict[str, AddressPermissions] = {}
    for key, account in accounts.items():
        where = f"accounts.{key}"
        if not isinstance(account, dict):
            raise ValueError(f"--acl {path}: {where} must be a table")
        _known(path, where, account, _ACCOUNT)
        secret = account.get("secret_key")
        if not isinstance(secret, str) or not secret:
            raise ValueError(f"--acl {path}: {where}.secret_key must be a non-empty string")
        codes = account.get("codes")
        if codes is not None and (not isinstance(codes, list) or not all(
                isinstance(c, int) and not isinstance(c, bool) for c in codes)):
            raise ValueError(f"--acl {path}: {where}.codes must be a list of request codes")
        credentials[key] = Credential(secret, None if codes is None else frozenset(codes))
        permissions[key] = _addresses(path, where, account, AddressPermissions)
    anyone = config.get("anyone", {})
    if not isinstance(anyone, dict):
        raise ValueError(f"--acl {path}: [anyone] must be a table")
    _known(path, "anyone", anyone, set(_ADDRESSES))
    permissions["*"] = _addresses(path, "anyone", anyone, AddressPermissions)
    anonymous = config.get("allow_anonymous", False)
    if not isinstance(anonymous, bool):
        raise ValueError(f"--acl {path}: allow_anonymous must be true or false")
    return AclServerRPCHook(credentials, allow_anonymous=anonymous), permissions


def _known(path: str, where: str, table: dict[str, Any], known: set[str]) -> None:
    unknown = sorted(set(table) - known)
    if unknown:
        prefix = f"{where}." if where else ""
        raise ValueError(f"--acl {path}: unknown key {prefix}{unknown[0]} (known: "
                         f"{', '.join(sorted(known))})")


def _addresses(path: str, where: str, table: dict[str, Any],
               make: type[AddressPermissions]) -> AddressPermissions:
    lists: dict[str, list[str | re.Pattern[str]]] = {"consume": [], "send": []}
    for name in _ADDRESSES:
        entries = table.get(name, [])
        if not isinstance(entries, list) or not all(isinstance(e, str) for e in entries):
            raise ValueError(f"--acl {path}: {where}.{name} must be a list of strings")
        operation = name.removesuffix("_regex")
        for entry in entries:
            if name.endswith("_regex"):
                try:
                    lists[operation].append(re.compile(entry))
                except re.error as exc:
                    raise ValueError(f"--acl {path}: {where}.{name}: {entry!r} is no regex: "
                                     f"{exc}") from None
            else:
                lists[operation].append(entry)
    try:
        return make(consume=lists["consume"], send=lists["send"])
    except (TypeError, ValueError) as exc:
        raise ValueError(f"--acl {path}: {where}: {exc}") from None
