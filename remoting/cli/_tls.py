"""The TLS options of the commands (servers and clients): one argument group, here; and a
client command's started client.

A client command turns TLS on with any ``--tls*`` option. ``--tls-properties`` reads RocketMQ's
``tls.properties`` (``tls.server.*`` for ``serve``; ``tls.enable`` and ``tls.client.*``
otherwise); an option given on the command line wins over the file, as a config field does.
"""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING, Literal

if TYPE_CHECKING:
    import argparse

    from ..blocking import RemotingClient

__all__ = ["Side", "add_tls_options", "started_client", "tls_problem", "tls_settings",
           "tls_worker_argv"]

Side = Literal["client", "server"]

# option -> config field, for the options that take a value
_COMMON = {"tls_properties": "tls_properties_file", "tls_ca": "tls_ca_file",
           "tls_cert": "tls_cert_file", "tls_key": "tls_key_file",
           "tls_key_password": "tls_key_password"}
_SERVER = {"tls_mode": "tls_mode", "tls_client_auth": "tls_client_auth"}
_CLIENT = {"tls_server_name": "tls_server_hostname"}


def add_tls_options(parser: argparse.ArgumentParser, side: Side) -> None:
    """Add the TLS group for a server (``serve``) or a client command."""
    group = parser.add_argument_group(
        "TLS", "RocketMQ's TLS settings (docs/security.md)" + (
            "" if side == "server" else "; any --tls* option turns TLS on"))
    group.add_argument("--tls-properties", metavar="FILE",
                       help="RocketMQ's tls.properties (" + (
                           "tls.server.* keys" if side == "server"
                           else "tls.enable, tls.client.* and tls.test.mode.enable keys")
                       + "); options given here win over it")
    if side == "server":
        group.add_argument("--tls-mode", choices=("disabled", "permissive", "enforcing"),
                           help="plaintext only, both on one port, or TLS only "
                                "(default: disabled)")
        group.add_argument("--tls-client-auth", choices=("none", "optional", "require"),
                           help="ask clients for a certificate signed by --tls-ca (default: "
                                "require when --tls-ca is given, else none)")
    else:
        group.add_argument("--tls", action="store_true",
                           help="connect with TLS, trusting the system's CAs")
    group.add_argument("--tls-ca", metavar="FILE",
                       help="CA file that signs the client certificates accepted"
                       if side == "server" else "CA file that signs the server's certificate")
    group.add_argument("--tls-cert", metavar="FILE",
                       help="the server's certificate chain (PEM)" if side == "server"
                       else "a client certificate (PEM), for servers that ask for one")
    group.add_argument("--tls-key", metavar="FILE", help="its private key (PEM)")
    group.add_argument("--tls-key-password", metavar="PASSWORD",
                       help="the password of an encrypted --tls-key (other local users can "
                            "read a command line: prefer the keyPassword of --tls-properties)")
    if side == "client":
        group.add_argument("--tls-server-name", metavar="NAME",
                           help="the name the server's certificate must carry (default: the "
                                "host dialled)")
        group.add_argument("--tls-no-verify", action="store_true",
                           help="accept any server certificate (for tests only: anyone on the "
                                "path can read and change the traffic)")


def tls_settings(args: argparse.Namespace, side: Side) -> dict[str, object]:
    """Return the config fields the TLS options give (those not given are left out, so the
    properties file or the defaults fill them)."""
    names = _COMMON | (_SERVER if side == "server" else _CLIENT)
    settings: dict[str, object] = {
        field: getattr(args, option) for option, field in names.items()
        if getattr(args, option) is not None}
    if side == "client":
        if args.tls_no_verify:
            settings["tls_verify"] = False
        if args.tls or args.tls_no_verify or settings:
            settings["use_tls"] = True
    return settings


def tls_problem(config: object) -> str | None:
    """Return why a ``serve`` config would not do what its options ask, else None."""
    if getattr(config, "tls_mode", None) == "disabled" and getattr(config, "tls_cert_file", None):
        return ("a TLS certificate is given but TLS is disabled: give --tls-mode permissive or "
                "enforcing (or tls.server.mode in the --tls-properties file)")
    return None


def tls_worker_argv(args: argparse.Namespace) -> list[str]:
    """Return the TLS options of ``serve`` again, for its worker processes."""
    argv: list[str] = []
    for option in (*_COMMON, *_SERVER):
        value = getattr(args, option)
        if value is not None:
            argv += ["--" + option.replace("_", "-"), value]
    return argv


def started_client(args: argparse.Namespace) -> RemotingClient | None:
    """Return a started client with a client command's TLS options, or None after printing
    why it cannot start (a bad option or TLS file) on stderr."""
    from .._config import ClientConfig
    from ..blocking import RemotingClient

    try:
        config = ClientConfig(**tls_settings(args, "client"))  # type: ignore[arg-type]
        return RemotingClient(config).start()
    except (ValueError, TypeError, OSError) as exc:  # RemotingStartError is an OSError
        command = " ".join(part for part in (args.command, getattr(args, "queue_tool", None))
                           if part)
        print(f"remoting {command}: {exc}", file=sys.stderr)
        return None
