"""Client and server settings: RocketMQ's NettyServerConfig / NettyClientConfig in snake_case.

Times are float seconds (RocketMQ uses milliseconds); defaults are RocketMQ's unless noted.
Configs are frozen and picklable, so a Spark job can ship one to its executors. Every field
is checked when a config is made: a wrong type raises TypeError, a wrong value ValueError,
naming the field (``_RULES``).
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field, fields
from typing import Any, Final, Literal, Protocol

from codec import DEFAULT_MAX_FRAME_BYTES, DEFAULT_MAX_HEADER_BYTES

from ._checks import seconds
from ._tls_properties import tls_fields

__all__ = ["ClientConfig", "ConnectionSettings", "ServerConfig"]


# Providers stay in the process that made them; a TLS properties file was read when the
# config was made, and its values travel in the fields it set.
_NOT_PICKLED = frozenset({"tracer_provider", "meter_provider", "tls_properties_file"})


def _cpu_count() -> int:
    return os.cpu_count() or 4


def _rebuild(cls: type[Any], values: dict[str, Any]) -> Any:
    return cls(**values)


# What each field accepts: ("int", minimum), ("seconds", minimum, strictly above), ("bool",),
# ("str",), ("path",) (str, os.PathLike or None), ("secret",) (str or None), ("name",) (str or
# None), ("port",) (an int; its range is checked when the server binds, as
# RemotingStartError), ("one of", values).
_RULES: Final[dict[str, tuple[Any, ...]]] = {
    "max_frame_bytes": ("int", 8), "max_header_bytes": ("int", 1024),
    "max_idle_seconds": ("seconds", 0.0, False),
    "scan_initial_delay": ("seconds", 0.0, False), "scan_period": ("seconds", 0.0, True),
    "scan_grace": ("seconds", 0.0, False), "precise_timeouts": ("bool",),
    "callback_executor_threads": ("int", 0), "write_buffer_high_water_mark": ("int", 0),
    "write_buffer_low_water_mark": ("int", 0), "default_processor_threads": ("int", 0),
    "processor_queue_capacity": ("int", 0), "partial_frame_timeout": ("seconds", 0.0, False),
    "telemetry": ("bool",),
    "listen_port": ("port",), "bind_address": ("str",), "server_async_semaphore_value": ("int", 1),
    "server_oneway_semaphore_value": ("int", 1), "shutdown_grace_seconds": ("seconds", 0.0, False),
    "backlog": ("int", 0), "reuse_port": ("bool",), "max_connections": ("int", 0),
    "max_connections_per_ip": ("int", 0), "max_requests_per_connection": ("int", 1),
    "tls_mode": ("one of", ("disabled", "permissive", "enforcing")),
    "tls_cert_file": ("path",), "tls_key_file": ("path",), "tls_ca_file": ("path",),
    "tls_key_password": ("secret",), "tls_properties_file": ("path",),
    "tls_client_auth": ("one of", (None, "none", "optional", "require")),
    "tls_handshake_timeout": ("seconds", 0.0, True), "tls_verify": ("bool",),
    "connect_timeout": ("seconds", 0.0, True), "client_async_semaphore_value": ("int", 1),
    "client_oneway_semaphore_value": ("int", 1), "close_socket_if_timeout": ("bool",),
    "enable_reconnect_for_go_away": ("bool",), "use_tls": ("bool",),
    "tls_server_hostname": ("name",), "tls_check_hostname": ("bool",),
    "io": ("one of", ("threads", "loop")),
}


def _problem(value: Any, rule: tuple[Any, ...]) -> tuple[type[Exception], str] | None:
    """Return (exception class, what is expected) if ``value`` breaks ``rule``, else None."""
    kind = rule[0]
    if kind == "int" or kind == "port":
        expected = "an int" if kind == "port" else f"an int >= {rule[1]}"
        if isinstance(value, bool) or not isinstance(value, int):
            return TypeError, expected
        return (ValueError, expected) if kind == "int" and value < rule[1] else None
    if kind == "bool":
        return None if isinstance(value, bool) else (TypeError, "True or False")
    if kind == "str":
        return None if isinstance(value, str) else (TypeError, "a str")
    if kind == "secret":  # the message never shows the value
        return None if value is None or isinstance(value, str) else (TypeError, "a str or None")
    if kind == "name":
        if value is None:
            return None
        if not isinstance(value, str):
            return TypeError, "a str or None"
        return None if _host_name(value) else (ValueError, "a host name (as ssl takes it)")
    if kind == "path":
        ok = value is None or isinstance(value, str | os.PathLike)
        return None if ok else (TypeError, "a file path (str) or None")
    # "one of"
    return None if value in rule[1] else (ValueError, " or ".join(map(repr, rule[1])))


def _host_name(name: str) -> bool:
    """Whether ssl would take ``name`` as a server_hostname (it refuses them at connect)."""
    if not name or name.startswith(".") or "\x00" in name:
        return False
    try:
        name.encode("idna")
    except UnicodeError:
        return False
    return True


def _validate(config: Any) -> None:
    for f in fields(config):
        rule = _RULES.get(f.name)
        if rule is None:
            continue
        value = getattr(config, f.name)
        name = f"{type(config).__name__}.{f.name}"
        if rule[0] == "seconds":  # the same check as a call's seconds arguments
            seconds(name, value, minimum=rule[1], above=rule[2])
            continue
        problem = _problem(value, rule)
        if problem is not None:
            error, expected = problem
            got = type(value).__name__ if rule[0] == "secret" else repr(value)
            raise error(f"{name} must be {expected}, got {got}")
    if isinstance(config, ServerConfig) and config.tls_mode != "disabled":
        auth = config.client_auth()
        if auth != "none" and not config.tls_ca_file:
            raise ValueError(f"ServerConfig.tls_client_auth={auth!r} needs tls_ca_file (the CA "
                             "that signs the client certificates)")
    low, high = config.write_buffer_low_water_mark, config.write_buffer_high_water_mark
    if low > high:  # as Netty's WriteBufferWaterMark
        raise ValueError(f"{type(config).__name__}.write_buffer_low_water_mark ({low}) must "
                         f"not exceed write_buffer_high_water_mark ({high})")


@dataclass(frozen=True, slots=True, kw_only=True)
class _CommonConfig:
    max_frame_bytes: int = DEFAULT_MAX_FRAME_BYTES  # NettyDecoder frameMaxLength
    # A frame announcing a longer header closes its connection, before any of it is read:
    # parsing a header costs the event loop time per byte (codec.DEFAULT_MAX_HEADER_BYTES).
    max_header_bytes: int = DEFAULT_MAX_HEADER_BYTES
    max_idle_seconds: float = 120.0  # *ChannelMaxIdleTimeSeconds; 0 disables
    # Response-table scanner (NettyRemotingAbstract.scanResponseTable): a safety net. Each
    # request also expires exactly at its own deadline (precise_timeouts), which RocketMQ
    # does not do: it relies on the scan and its 1 s grace.
    scan_initial_delay: float = 3.0
    scan_period: float = 1.0
    scan_grace: float = 1.0
    precise_timeouts: bool = True
    callback_executor_threads: int = 0  # 0 -> number of CPUs, as RocketMQ
    # Per-connection outbound buffer: above high, senders wait (back-pressure).
    write_buffer_high_water_mark: int = 4 * 1024 * 1024
    write_buffer_low_water_mark: int = 1024 * 1024
    default_processor_threads: int = 4  # serverCallbackExecutorThreads (0 -> 4)
    processor_queue_capacity: int = 10_000  # bounded queue per pool: OVERLOAD reply beyond
    # A connection holding part of a frame for this long is closed (slowloris); 0 disables.
    partial_frame_timeout: float = 30.0
    # OpenTelemetry (docs/observability.md): spans and metrics when the ``otel`` extra is
    # installed and a provider is configured, globally or here, by the time the endpoint
    # starts. Providers are left out when a config is pickled (Spark executors use theirs).
    telemetry: bool = True
    tracer_provider: Any = field(default=None, compare=False, repr=False)
    meter_provider: Any = field(default=None, compare=False, repr=False)

    def __post_init__(self) -> None:
        path = getattr(self, "tls_properties_file", None)
        if isinstance(self, ServerConfig | ClientConfig) and isinstance(path, str | os.PathLike):
            _apply_tls_properties(self, path)
        _validate(self)

    def __reduce__(self) -> tuple[Any, ...]:
        values = {f.name: getattr(self, f.name) for f in fields(self)
                  if f.name not in _NOT_PICKLED}
        return _rebuild, (type(self), values)

    def callback_threads(self) -> int:
        """Return the callback executor size (0 means one per CPU)."""
        return self.callback_executor_threads or _cpu_count()

    def processor_threads(self) -> int:
        """Return the default pool size of a sync processor (0 means 4, as RocketMQ)."""
        return self.default_processor_threads or 4


@dataclass(frozen=True, slots=True, kw_only=True)
class ServerConfig(_CommonConfig):
    """Server settings.

    Attributes:
        listen_port: 0 picks an ephemeral port (read it back from ``server.port``).
        bind_address: the address to listen on.
        server_async_semaphore_value: permits for server->client invoke_sync/async.
        server_oneway_semaphore_value: permits for server->client oneway sends.
    """

    listen_port: int = 0
    bind_address: str = "127.0.0.1"  # safer than RocketMQ's 0.0.0.0; set it to serve others
    server_async_semaphore_value: int = 64
    server_oneway_semaphore_value: int = 256
    shutdown_grace_seconds: float = 5.0  # RocketMQ waits 30 s when enableShutdownGracefully
    backlog: int = 1024
    reuse_port: bool = False  # SO_REUSEPORT: several processes serve one port (--workers)
    max_connections: int = 10_000  # new connections beyond are closed at once; 0: no limit
    max_connections_per_ip: int = 1_000  # per remote IP; 0: no limit
    # Requests of one connection being processed at once; beyond, its reads pause.
    max_requests_per_connection: int = 4_096
    # TLS (SPEC 8): "disabled", "permissive" (TLS and plaintext on one port, told apart by the
    # first byte) or "enforcing". RocketMQ defaults to permissive with a self-signed test
    # certificate; we need real certificates, so TLS is off until configured.
    tls_mode: Literal["disabled", "permissive", "enforcing"] = "disabled"
    tls_cert_file: str | None = None
    tls_key_file: str | None = None
    tls_key_password: str | None = field(default=None, repr=False)  # of an encrypted key
    tls_ca_file: str | None = None  # the CA that signs the client certificates it accepts
    # Ask clients for a certificate: "none", "optional" (one that is sent must verify) or
    # "require". None: "require" when tls_ca_file is set, else "none".
    tls_client_auth: Literal["none", "optional", "require"] | None = None
    tls_handshake_timeout: float = 10.0
    # RocketMQ's tls.properties (tls.server.* keys): fills the TLS fields left at their
    # defaults, when the config is made (docs/security.md).
    tls_properties_file: str | None = field(default=None, compare=False)

    def client_auth(self) -> Literal["none", "optional", "require"]:
        """Return whether clients are asked for a certificate (``tls_client_auth`` resolved)."""
        if self.tls_client_auth is not None:
            return self.tls_client_auth
        return "require" if self.tls_ca_file else "none"


@dataclass(frozen=True, slots=True, kw_only=True)
class ClientConfig(_CommonConfig):
    """Client settings.

    Attributes:
        connect_timeout: seconds for the TCP connect, counted inside each call's deadline.
        close_socket_if_timeout: close a connection after a timed-out invoke_sync.
        io: how a `RemotingClient` drives its connections: ``"threads"`` (the calling
            threads send and read themselves, no event loop thread; the default) or
            ``"loop"`` (every call is handed to an event loop in a thread of its own, as
            in 0.2; kept for one release, to compare). The trio client ignores it.
    """

    connect_timeout: float = 3.0
    client_async_semaphore_value: int = 65535
    client_oneway_semaphore_value: int = 65535
    close_socket_if_timeout: bool = True
    enable_reconnect_for_go_away: bool = True
    use_tls: bool = False
    tls_ca_file: str | None = None  # None: the system's trusted CAs
    tls_cert_file: str | None = None  # client certificate, for mutual TLS
    tls_key_file: str | None = None
    tls_key_password: str | None = field(default=None, repr=False)  # of an encrypted key
    tls_server_hostname: str | None = None  # name to verify; default: the host dialled
    tls_check_hostname: bool = True
    # False: accept any server certificate (tests only: anyone on the path can read and
    # change the traffic); each address is logged once, tls.verification_skipped.
    tls_verify: bool = True
    # RocketMQ's tls.properties (tls.enable, tls.client.* keys): fills the TLS fields left
    # at their defaults, when the config is made (docs/security.md).
    tls_properties_file: str | None = field(default=None, compare=False)
    io: Literal["threads", "loop"] = "threads"


def _apply_tls_properties(config: ServerConfig | ClientConfig, path: str | os.PathLike[str]
                          ) -> None:
    """Fill the TLS fields left at their defaults from RocketMQ's properties file.

    Raises:
        RemotingStartError: the file cannot be read.
        ValueError: a value in it that is not valid, naming the key.
    """
    role: Literal["client", "server"] = "server" if isinstance(config, ServerConfig) else "client"
    defaults = {f.name: f.default for f in fields(config)}
    for name, value in tls_fields(path, role).items():
        if getattr(config, name) == defaults[name]:  # a field given explicitly wins
            object.__setattr__(config, name, value)


class ConnectionSettings(Protocol):
    """The configuration a connection reads (both configs satisfy it)."""

    @property
    def max_frame_bytes(self) -> int: ...
    @property
    def max_header_bytes(self) -> int: ...
    @property
    def write_buffer_high_water_mark(self) -> int: ...
    @property
    def write_buffer_low_water_mark(self) -> int: ...
    @property
    def partial_frame_timeout(self) -> float: ...
