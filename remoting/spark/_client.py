"""One `RemotingClient` per process and config: the client a Spark Python worker uses.

Theory of operation:
- `get_client(config, hooks=...)` returns this process's client for ``config`` and ``hooks``,
  creating and starting it on first use (under a lock), with the hooks registered before its
  first call. Nothing runs at import: no thread, no socket. Hooks arrive unpickled afresh with
  every task, so a client is keyed by their pickled bytes: equal hooks share one client, and
  a client with hooks never serves a UDF without them.
- The registry remembers the pid that filled it. After ``fork()`` the child drops the inherited
  entries without touching them and makes a new lock (`os.register_at_fork`), because their
  loop threads do not exist in the child and their sockets are shared with the parent. A fork
  never waits for the lock: a thread of the parent may hold it while it starts a client.
  `get_client` also compares pids, for forks that bypass the at-fork hooks.
- A client whose loop thread died, or that was shut down, is replaced on the next call (with
  its hooks); its connections reconnect lazily on the next request, so a fresh client is
  cheap.
- `atexit` shuts this process's clients down. Spark workers leave with ``os._exit`` and never
  run it; the OS then closes the sockets and the server sees the connections close.
"""

from __future__ import annotations

import atexit
import hashlib
import logging
import os
import pickle
import threading
from typing import TYPE_CHECKING

from .._checks import rpc_hook
from .._config import ClientConfig
from ..blocking import RemotingClient

if TYPE_CHECKING:
    from collections.abc import Sequence

    from .._hooks import RPCHook

__all__ = ["configure_worker_logging", "get_client", "hooks_key", "shutdown_clients"]

_lock = threading.Lock()
_clients: dict[tuple[ClientConfig, bytes], RemotingClient] = {}
_pid = os.getpid()
_logging_done = False


def configure_worker_logging(level: int) -> None:
    """Set the level of the ``remoting`` loggers in this process, unless the application set
    one (structlog's global configuration is never touched)."""
    global _logging_done
    if _logging_done:
        return
    _logging_done = True
    logger = logging.getLogger("remoting")
    if logger.level == logging.NOTSET:
        logger.setLevel(level)


def get_client(config: ClientConfig | None = None, *, log_level: int | None = None,
               hooks: Sequence[RPCHook] = ()) -> RemotingClient:
    """Return this process's started client for ``config`` and ``hooks`` (made on first use).

    Args:
        config: the client settings; equal configs share one client.
        log_level: when not None, first set the ``remoting`` loggers to this level unless
            the application set one (`configure_worker_logging`); the Spark helpers pass
            ``logging.WARNING``.
        hooks: RPC hooks registered on the client before its first call (picklable, as the
            Spark helpers ship them); a client made for other hooks, or none, is another one.

    Raises:
        TypeError: ``hooks`` is not a sequence of picklable `RPCHook` objects.
        RemotingError: the client's loop could not start.
    """
    global _pid
    if log_level is not None and not _logging_done:
        configure_worker_logging(log_level)
    key = (config or ClientConfig(), hooks_key(hooks))
    client = _clients.get(key)
    if client is not None and client.is_running and _pid == os.getpid():
        return client
    with _lock:
        if _pid != os.getpid():
            _forget_inherited()
        client = _clients.get(key)
        if client is None or not client.is_running:
            if client is not None:
                client.shutdown()
            client = RemotingClient(key[0])
            for hook in hooks:
                client.register_rpc_hook(hook)
            client.start()
            _clients[key] = client
        return client


def hooks_key(hooks: object) -> bytes:
    """Return what identifies ``hooks`` across processes: a digest of their pickled bytes.

    Raises:
        TypeError: not a list or tuple of `RPCHook` objects, or one that cannot be pickled.
    """
    if not isinstance(hooks, list | tuple):
        raise TypeError(f"hooks must be a list of RPC hooks, got {type(hooks).__name__}")
    if not hooks:
        return b""
    for hook in hooks:
        rpc_hook(hook)
    try:
        data = pickle.dumps(tuple(hooks))
    except Exception as exc:  # PicklingError, TypeError, AttributeError (a local class)
        raise TypeError(f"hooks must be picklable: they travel to the Spark workers with the "
                        f"UDF ({exc})") from None
    return hashlib.sha256(data).digest()


def shutdown_clients() -> None:
    """Shut down this process's clients (idempotent; runs at exit)."""
    with _lock:
        if _pid != os.getpid():
            _forget_inherited()
            return
        clients = list(_clients.values())
        _clients.clear()
    for client in clients:
        client.shutdown()


def _forget_inherited() -> None:
    """Drop the parent's clients in a forked child, without touching them."""
    global _pid
    _clients.clear()
    _pid = os.getpid()


def _after_fork_in_child() -> None:
    global _lock, _logging_done
    _lock = threading.Lock()  # the parent's may have been held by another thread
    _logging_done = False
    _forget_inherited()


# Nothing before the fork: a fork never waits for a client being started in another thread
# (the child gets a fresh lock and an empty registry whatever the parent was doing).
os.register_at_fork(after_in_child=_after_fork_in_child)
atexit.register(shutdown_clients)
