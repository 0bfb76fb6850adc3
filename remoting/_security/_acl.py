"""ACL request signing, compatible with RocketMQ's AclClientRPCHook (SPEC 9).

Signature = Base64(HmacSHA1(secret_key, content)), where content is the UTF-8 of the ext field
values (not the keys) in key order (Java ``String.compareTo``, i.e. UTF-16 code units), with
``Signature`` left out, followed by the body.

Both sides sign the ext fields as the receiver decodes them, so that what is signed is what
travels. A None value is never sent (RocketMQSerializable.mapSerialize and fastjson leave null
values out), so the client leaves it out of the content too. A ROCKETMQ header sends an empty
value with length 0, which the receiver decodes as null (RocketMQSerializable.readStr); a value
received as null counts as the text "null", as the broker's ``StringBuilder.append`` writes it
(AclUtils.combineRequestContent), so the client signs an empty ROCKETMQ value as "null".
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import threading
from dataclasses import dataclass
from typing import TYPE_CHECKING, Final

from codec import ResponseCode, SerializeType

from .._hooks import AbortProcessError
from .._log import log

if TYPE_CHECKING:
    from collections.abc import Collection, Mapping

    from codec import ExtFields, RemotingCommand

__all__ = ["AclClientRPCHook", "AclServerRPCHook", "Credential", "sign"]

ACCESS_KEY: Final = "AccessKey"
SECURITY_TOKEN: Final = "SecurityToken"
SIGNATURE: Final = "Signature"
UNIQUE_KEY_QUERY: Final = "_UNIQUE_KEY_QUERY"  # excluded for version <= 399 (5.x server)
_MAX_COUNTED_CONNECTIONS: Final = 4096  # refusal counts kept, one per peer address


def _java_order(key: str) -> bytes:
    return key.encode("utf-16-be", "surrogatepass")


def as_received(ext_fields: ExtFields, serialize_type: SerializeType) -> ExtFields:
    """Return ``ext_fields`` as the peer will decode them from the wire.

    None values are not sent, in either serialization; a ROCKETMQ header writes an empty
    value with length 0, which the peer reads as null.
    """
    empty_is_null = serialize_type == SerializeType.ROCKETMQ
    return {k: (None if empty_is_null and v == "" else v)
            for k, v in ext_fields.items() if v is not None}


def signed_content(ext_fields: ExtFields, body: bytes | None,
                   exclude: Collection[str] = (SIGNATURE,)) -> bytes:
    """Return the bytes that are signed: values in Java key order, then the body.

    ``ext_fields`` are as received (see `as_received`): a None value was received as null and
    counts as the text "null". A lone surrogate (only a hostile or broken peer sends one)
    becomes ``?``, as Java's ``String.getBytes(UTF_8)`` writes it: never an exception.
    """
    parts = [
        (ext_fields[k] or ("null" if ext_fields[k] is None else "")).encode("utf-8", "replace")
        for k in sorted(ext_fields, key=_java_order) if k not in exclude
    ]
    if body:
        parts.append(body)
    return b"".join(parts)


def sign(secret_key: str, content: bytes) -> str:
    """Return Base64(HmacSHA1(secret_key, content)), as RocketMQ's AclSigner."""
    if not secret_key:
        raise ValueError("the secret key must not be empty")
    digest = hmac.new(secret_key.encode("utf-8"), content, hashlib.sha1).digest()
    return base64.b64encode(digest).decode("ascii")


class AclClientRPCHook:
    """Client hook: adds ``AccessKey``, optional ``SecurityToken`` and ``Signature``.

    It signs the ext fields as the server will decode them (a None value is not sent, so it
    is not signed). Register it last, so that no later hook changes what was signed, its
    ``serialize_type`` included.
    """

    def __init__(self, access_key: str, secret_key: str,
                 security_token: str | None = None) -> None:
        if not access_key or not secret_key:
            raise ValueError("AclClientRPCHook needs a non-empty access_key and secret_key")
        self.access_key = access_key
        self._secret_key = secret_key
        self.security_token = security_token

    def __repr__(self) -> str:
        return f"AclClientRPCHook(access_key={self.access_key!r}, secret_key=<hidden>)"

    def do_before_request(self, remote_addr: str, request: RemotingCommand) -> None:
        request.add_ext_field(ACCESS_KEY, self.access_key)
        if self.security_token is not None:
            request.add_ext_field(SECURITY_TOKEN, self.security_token)
        assert request.ext_fields is not None
        content = signed_content(as_received(request.ext_fields, request.serialize_type),
                                 request.body)
        request.add_ext_field(SIGNATURE, sign(self._secret_key, content))

    def do_after_response(self, remote_addr: str, request: RemotingCommand,
                          response: RemotingCommand | None) -> None:
        return None


@dataclass(frozen=True, slots=True)
class Credential:
    """A secret and the request codes its access key may call (None: every code)."""

    secret_key: str
    allowed_codes: frozenset[int] | None = None


class AclServerRPCHook:
    """Server hook: verifies the signature and the caller's permission for the code.

    A refused request gets NO_PERMISSION (16) with a remark saying why; the refusal is logged
    with the access key and the reason, never the secret.

    Args:
        credentials: access key -> secret, or -> `Credential` with allowed codes.
        allow_anonymous: serve requests without an ``AccessKey`` (RocketMQ does; we don't
            by default).
    """

    def __init__(self, credentials: Mapping[str, str | Credential], *,
                 allow_anonymous: bool = False) -> None:
        self._credentials = {
            ak: c if isinstance(c, Credential) else Credential(c) for ak, c in credentials.items()
        }
        self.allow_anonymous = allow_anonymous
        # refusals per connection (its remote address), for the log's pace; hooks run on
        # processor threads and the loop at once, hence the lock
        self._refused_on: dict[str, int] = {}
        self._refused_lock = threading.Lock()

    def __repr__(self) -> str:
        return f"AclServerRPCHook(access_keys={sorted(self._credentials)!r})"

    def _refuse(self, remote_addr: str, request: RemotingCommand, access_key: str | None,
                reason: str) -> AbortProcessError:
        # A key we do not know is the peer's text (any length, any characters): never logged.
        known = access_key if access_key in self._credentials else None
        unknown = {} if access_key is None or known else {"access_key_chars": len(access_key)}
        with self._refused_lock:
            counts = self._refused_on
            if len(counts) >= _MAX_COUNTED_CONNECTIONS and remote_addr not in counts:
                counts.clear()  # connections come and go: start over rather than grow
            refused = counts[remote_addr] = counts.get(remote_addr, 0) + 1
        if refused & (refused - 1) == 0:  # 1, 2, 4, 8...: a peer cannot flood the log
            log.warning("acl.refused", peer=remote_addr, code=request.code,
                        access_key=known, reason=reason, refused_on_connection=refused,
                        **unknown)
        return AbortProcessError(ResponseCode.NO_PERMISSION, f"[ACL] {reason}")

    def do_before_request(self, remote_addr: str, request: RemotingCommand) -> None:
        ext = request.ext_fields or {}
        access_key = ext.get(ACCESS_KEY)
        if access_key is None:
            if self.allow_anonymous:
                return
            raise self._refuse(remote_addr, request, None,
                               "no AccessKey: sign requests with AclClientRPCHook")
        credential = self._credentials.get(access_key)
        if credential is None:
            raise self._refuse(remote_addr, request, access_key, "unknown AccessKey")
        claimed = ext.get(SIGNATURE)
        if not claimed:
            raise self._refuse(remote_addr, request, access_key, "no Signature")
        exclude = (SIGNATURE, UNIQUE_KEY_QUERY) if request.version <= 399 else (SIGNATURE,)
        expected = sign(credential.secret_key, signed_content(ext, request.body, exclude))
        claimed_bytes = claimed.encode("utf-8", "replace")
        if not hmac.compare_digest(expected.encode("ascii"), claimed_bytes):
            if exclude != (SIGNATURE,) and hmac.compare_digest(
                sign(credential.secret_key, signed_content(ext, request.body)).encode("ascii"),
                claimed_bytes,
            ):
                pass  # an old client that signed _UNIQUE_KEY_QUERY too
            else:
                raise self._refuse(remote_addr, request, access_key, "signature mismatch")
        allowed = credential.allowed_codes
        if allowed is not None and request.code not in allowed:
            raise self._refuse(remote_addr, request, access_key,
                               f"AccessKey may not call request code {request.code}")

    def do_after_response(self, remote_addr: str, request: RemotingCommand,
                          response: RemotingCommand | None) -> None:
        return None
