"""RocketMQ's TLS properties file (``tls.properties``), read as Java reads it, mapped onto our
config fields.

RocketMQ reads the file named by ``-Dtls.config.file`` with ``java.util.Properties.load``
(TlsHelper.extractTlsConfigFromFile), so this module follows that format: ISO 8859-1 text,
``key=value``, ``key: value`` or ``key value``, ``#`` and ``!`` comments, backslash line
continuations and escapes (``\\t``, ``\\n``, ``\\uXXXX``...). A value keeps its trailing
whitespace, as in Java.

Where we differ from Java on purpose (docs/security.md lists each key):

- a key missing from the file leaves our field at its default, and our defaults verify
  certificates; Java defaults ``tls.test.mode.enable`` to true and ``tls.client.authServer``
  to false, which accept any server certificate;
- a value Java would silently replace by its default (``tls.server.mode=ENFORCING`` becomes
  permissive there, ``tls.client.authServer=yes`` false) is a `ValueError` naming the key;
- ``tls.server.mode`` and ``tls.enable`` are also read from the file (Java reads them only as
  ``-D`` system properties);
- a server never serves a self-signed certificate: ``tls.test.mode.enable`` does not apply to
  it, and ``tls.server.authClient`` is not read (a client certificate is always verified
  against ``tls.server.trustCertPath``).
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Final, Literal

from ._errors import Files, translate

if TYPE_CHECKING:
    from os import PathLike

__all__ = ["parse_properties", "tls_fields"]

# The keys of TlsSystemConfig (RocketMQ 4.9.8) each side reads, and our field for each.
SERVER_PATHS: Final = {
    "tls.server.certPath": "tls_cert_file",
    "tls.server.keyPath": "tls_key_file",
    "tls.server.keyPassword": "tls_key_password",
    "tls.server.trustCertPath": "tls_ca_file",
}
CLIENT_PATHS: Final = {
    "tls.client.certPath": "tls_cert_file",
    "tls.client.keyPath": "tls_key_file",
    "tls.client.keyPassword": "tls_key_password",
    "tls.client.trustCertPath": "tls_ca_file",
}
TLS_MODES: Final = ("disabled", "permissive", "enforcing")  # TlsMode names (exact, as Java)
CLIENT_AUTH: Final = ("none", "optional", "require")  # Netty ClientAuth, any case (as Java)

_ESCAPES: Final = {"t": "\t", "n": "\n", "r": "\r", "f": "\f"}
_WHITESPACE: Final = " \t\f"
_LINE_BREAK: Final = re.compile(r"\r\n|\r|\n")


def parse_properties(text: str) -> dict[str, str]:
    """Return the keys and values of ``text`` as ``java.util.Properties.load`` reads them.

    Raises:
        ValueError: a malformed ``\\uXXXX`` escape (Java raises IllegalArgumentException).
    """
    result: dict[str, str] = {}
    lines = _LINE_BREAK.split(text)
    i = 0
    while i < len(lines):
        line = lines[i].lstrip(_WHITESPACE)
        i += 1
        if not line or line[0] in "#!":
            continue
        while _continues(line) and i < len(lines):  # an odd number of trailing backslashes
            line = line[:-1] + lines[i].lstrip(_WHITESPACE)
            i += 1
        if _continues(line):  # a continuation at the end of the text: dropped, as Java does
            line = line[:-1]
        key, value = _split(line)
        result[_unescape(key)] = _unescape(value)
    return result


def _continues(line: str) -> bool:
    return (len(line) - len(line.rstrip("\\"))) % 2 == 1


def _split(line: str) -> tuple[str, str]:
    """Split a logical line into key and value, as ``Properties.load0``: the key ends at the
    first unescaped ``=``, ``:`` or whitespace; then whitespace and at most one ``=`` or ``:``
    (if the key did not end with one) are skipped."""
    i, escaped, separated = 0, False, False
    while i < len(line):
        c = line[i]
        if not escaped and c in "=:":
            separated = True
            break
        if not escaped and c in _WHITESPACE:
            break
        escaped = c == "\\" and not escaped
        i += 1
    key, j = line[:i], i + 1
    while j < len(line):
        c = line[j]
        if c not in _WHITESPACE:
            if separated or c not in "=:":
                break
            separated = True
        j += 1
    return key, line[j:]


def _unescape(text: str) -> str:
    if "\\" not in text:
        return text
    out: list[str] = []
    i = 0
    while i < len(text):
        c = text[i]
        if c != "\\" or i + 1 == len(text):
            out.append(c)
            i += 1
            continue
        c = text[i + 1]
        if c == "u":
            digits = text[i + 2:i + 6]
            if len(digits) < 4 or not all(d in "0123456789abcdefABCDEF" for d in digits):
                raise ValueError(f"malformed \\uxxxx escape: {text[i:i + 6]!r}")
            out.append(chr(int(digits, 16)))
            i += 6
            continue
        out.append(_ESCAPES.get(c, c))
        i += 2
    return "".join(out)


def read_properties(path: str | PathLike[str], owner: str) -> dict[str, str]:
    """Read the file at ``path`` (ISO 8859-1, as Java's ``Properties.load(InputStream)``).

    Raises:
        RemotingStartError: the file cannot be read.
        ValueError: a malformed escape, naming the file.
    """
    try:
        with open(path, encoding="latin-1") as f:
            text = f.read()
    except OSError as exc:
        raise translate(exc, "start", None, files=Files(
            f"{owner}.tls_properties_file", (str(path),), parsed=False)) from exc
    try:
        return parse_properties(text)
    except ValueError as exc:
        raise ValueError(f"{owner}.tls_properties_file {str(path)!r}: {exc}") from None


def tls_fields(path: str | PathLike[str], role: Literal["client", "server"]
               ) -> dict[str, object]:
    """Return our config fields, from the TLS keys of the properties file at ``path``.

    Only the keys present (and not empty, as Java's ``isNullOrEmpty``) give a field.

    Raises:
        RemotingStartError: the file cannot be read.
        ValueError: a value neither we nor Java would read as meant, naming the key and file.
    """
    owner = "ServerConfig" if role == "server" else "ClientConfig"
    props = read_properties(path, owner)
    where = f"in {owner}.tls_properties_file {str(path)!r}"

    def choice(key: str, allowed: tuple[str, ...], value: str) -> str:
        if value not in allowed:
            raise ValueError(f"{key}={value!r} {where} must be one of {', '.join(allowed)}")
        return value

    def boolean(key: str) -> bool | None:
        value = props.get(key)
        if value is None:
            return None
        if value.lower() not in ("true", "false"):  # Java reads anything else as false
            raise ValueError(f"{key}={value!r} {where} must be true or false")
        return value.lower() == "true"

    paths = SERVER_PATHS if role == "server" else CLIENT_PATHS
    fields: dict[str, object] = {
        name: props[key] for key, name in paths.items() if props.get(key)}
    if role == "server":
        if props.get("tls.server.mode"):
            fields["tls_mode"] = choice("tls.server.mode", TLS_MODES, props["tls.server.mode"])
        # Java's default is none, also when tls.server.trustCertPath is given.
        auth = props.get("tls.server.need.client.auth", "").strip().lower() or "none"
        fields["tls_client_auth"] = choice("tls.server.need.client.auth", CLIENT_AUTH, auth)
        return fields
    enable = boolean("tls.enable")
    if enable is not None:
        fields["use_tls"] = enable
    # TlsHelper.buildSslContext(forClient): test mode trusts any certificate; otherwise
    # tls.client.authServer decides.
    test_mode, auth_server = boolean("tls.test.mode.enable"), boolean("tls.client.authServer")
    if test_mode:
        fields["tls_verify"] = False
    elif auth_server is not None:
        fields["tls_verify"] = auth_server
    return fields
