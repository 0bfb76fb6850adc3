"""TLS with `trio.SSLStream` (SPEC 8): contexts, the client handshake, the server's mode, and
the subject of the peer's certificate.

Permissive mode tells TLS from plaintext by peeking (MSG_PEEK) at the first byte of a new
connection: 0x16 is a TLS handshake record. Nothing is consumed, so a plaintext peer's first
frame is read normally. Keys are loaded with a password callback, so OpenSSL never prompts a
terminal for the pass phrase of an encrypted key.
"""

from __future__ import annotations

import socket
import ssl
from typing import TYPE_CHECKING, Any, Final, TypeVar

import trio

from .._errors import Files, RemotingStartError, translate

if TYPE_CHECKING:
    from collections.abc import Callable

    from .._config import ClientConfig, ServerConfig

__all__ = ["certificate_subject", "client_context", "peer_certificate_subject", "server_context",
           "tls_client_stream", "tls_server_stream"]

TLS_HANDSHAKE_RECORD: Final = 0x16
# RFC 4514's short names; other attributes keep the name Python's ssl gives them.
_SHORT_NAMES: Final = {
    "commonName": "CN", "localityName": "L", "stateOrProvinceName": "ST",
    "organizationName": "O", "organizationalUnitName": "OU", "countryName": "C",
    "streetAddress": "STREET", "domainComponent": "DC", "userId": "UID",
}
T = TypeVar("T")


def server_context(config: ServerConfig) -> ssl.SSLContext | None:
    """Build the server's context, or None when TLS is disabled.

    Raises:
        ValueError: TLS is on but the certificate or key file is not configured.
        RemotingStartError: a certificate, key or CA file cannot be read or is not PEM, or the
            key is encrypted and ``tls_key_password`` is missing or wrong.
    """
    if config.tls_mode == "disabled":
        return None
    if not config.tls_cert_file or not config.tls_key_file:
        raise ValueError(
            f"tls_mode={config.tls_mode!r} needs tls_cert_file and tls_key_file"
        )
    auth = config.client_auth()  # "none" unless tls_ca_file is set (checked by the config)
    ca = config.tls_ca_file
    ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    _load_chain(ctx, config.tls_cert_file, config.tls_key_file, config.tls_key_password)
    if auth != "none":
        assert ca is not None
        _load("tls_ca_file", (ca,), lambda: ctx.load_verify_locations(ca))
        ctx.verify_mode = ssl.CERT_OPTIONAL if auth == "optional" else ssl.CERT_REQUIRED
    return ctx


def client_context(config: ClientConfig) -> ssl.SSLContext | None:
    """Build the client's context, or None when ``use_tls`` is off.

    Raises:
        ValueError: a key file without a certificate file.
        RemotingStartError: a certificate, key or CA file cannot be read or is not PEM, or the
            key is encrypted and ``tls_key_password`` is missing or wrong.
    """
    if not config.use_tls:
        return None
    cert, key, ca = config.tls_cert_file, config.tls_key_file, config.tls_ca_file
    if key and not cert:  # it was ignored: the client connected without a certificate
        raise ValueError("tls_key_file needs tls_cert_file (the client certificate)")
    # With a CA file, only that CA is trusted (not the system's as well).
    ctx = _load("tls_ca_file", (ca,), lambda: ssl.create_default_context(cafile=ca))
    ctx.check_hostname = config.tls_check_hostname and config.tls_verify
    if not config.tls_verify:
        ctx.verify_mode = ssl.CERT_NONE
    if cert:
        _load_chain(ctx, cert, key, config.tls_key_password)
    return ctx


class _NoPassword(Exception):
    """Raised by the password callback: the key is encrypted and no password was given."""


def _load_chain(ctx: ssl.SSLContext, cert: str, key: str | None,
                password: str | None) -> None:
    """Load the certificate chain and its key; never prompt for a pass phrase.

    OpenSSL asks a terminal for the pass phrase of an encrypted key when no password is
    given (a server start that hangs); a callback that raises instead makes the missing
    password an error.
    """
    asked = False

    def give_password() -> str:
        nonlocal asked
        asked = True
        if password is None:
            raise _NoPassword
        return password

    option = "tls_cert_file / tls_key_file" if key else (
        "tls_cert_file (no tls_key_file: the key must then be in the same file)")
    key_file = key or cert
    try:
        _load(option, (cert, key),
              lambda: ctx.load_cert_chain(cert, key, password=give_password))
    except _NoPassword:
        raise RemotingStartError(
            None, f"the private key {key_file!r} is encrypted: give its password as "
                  "tls_key_password (tls.server.keyPassword / tls.client.keyPassword)"
        ) from None
    except RemotingStartError as exc:
        cause = exc.__cause__
        if (not asked or not isinstance(cause, ssl.SSLError)
                or cause.reason == "KEY_VALUES_MISMATCH"):  # decrypted: another certificate's
            raise
        raise RemotingStartError(
            None, f"the private key {key_file!r} is encrypted and tls_key_password does not "
                  "decrypt it; check the password"
        ) from cause


def _load(option: str, files: tuple[str | None, ...], load: Callable[[], T]) -> T:
    """Return ``load()``; turn its bare OS or OpenSSL error into one that names the files
    (the one missing, when one is). The address is not the problem: the error has none."""
    try:
        return load()
    except OSError as exc:  # ssl.SSLError is one too
        raise translate(exc, "start", None, files=Files(option, files)) from exc


async def tls_client_stream(stream: trio.SocketStream, ctx: ssl.SSLContext, host: str,
                            config: ClientConfig) -> trio.SSLStream[trio.SocketStream]:
    """Wrap ``stream`` and complete the handshake (inside the connect timeout).

    Raises:
        ssl.SSLError, trio.BrokenResourceError, OSError: the handshake failed (certificate,
            protocol, or a plaintext peer); the socket is closed. The caller maps these.
    """
    tls = trio.SSLStream(stream, ctx, server_hostname=config.tls_server_hostname or host)
    try:
        await tls.do_handshake()
    except BaseException:  # a failure, the connect timeout or shutdown: close the socket
        with trio.CancelScope(shield=True):
            await stream.aclose()
        raise
    return tls


async def tls_server_stream(stream: trio.SocketStream, ctx: ssl.SSLContext | None,
                            mode: str) -> trio.abc.Stream | None:
    """Apply the server's TLS mode to a new connection; None means close it.

    Returns the stream to serve: plaintext, or TLS after a completed handshake.
    """
    if ctx is None:
        return stream
    if mode == "permissive":
        try:
            first = await stream.socket.recv(1, socket.MSG_PEEK)
        except OSError:  # reset before its first byte (a health check closing with RST)
            return None
        if not first or first[0] != TLS_HANDSHAKE_RECORD:
            return stream
    tls = trio.SSLStream(stream, ctx, server_side=True)
    try:
        await tls.do_handshake()
    except (trio.BrokenResourceError, ssl.SSLError, OSError):
        return None
    return tls


def peer_certificate_subject(stream: trio.abc.Stream) -> str | None:
    """Return the subject of the verified certificate the peer presented, as RFC 4514
    (most specific first, ``"CN=client.example,O=Example"``), or None."""
    if not isinstance(stream, trio.SSLStream):
        return None
    return certificate_subject(stream.getpeercert())


def certificate_subject(cert: dict[str, Any] | None) -> str | None:
    """The subject of ``cert`` (``getpeercert()``'s dict: ``{}`` when it was not verified,
    None when absent) as RFC 4514, or None."""
    if not cert:
        return None
    rdns = cert.get("subject", ())
    return ",".join(
        "+".join(f"{_SHORT_NAMES.get(name, name)}={_rfc4514_escape(value)}"
                 for name, value in rdn)
        for rdn in reversed(rdns)
    )


def _rfc4514_escape(value: str) -> str:
    last = len(value) - 1
    return "".join(
        "\\00" if c == "\0" else "\\" + c if (
            c in ',+"\\<>;' or (i == 0 and c in "# ") or (i == last and c == " ")) else c
        for i, c in enumerate(value))
