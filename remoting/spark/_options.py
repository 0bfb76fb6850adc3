"""Checks of what the Spark helpers are given, made in the driver when the UDF is made.

Everything here travels to the Python workers inside the UDF, where a wrong value would only
show as a failed task, every row failed, or worse a call to another processor. So a wrong
type raises `TypeError` and a wrong value `ValueError` here, naming the argument, and nothing
is converted silently (``code=1.7`` is not code 1, ``timeout=True`` is not one second).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, cast

from pyspark.sql.pandas.functions import pandas_udf

from codec import SerializeType

from .._checks import request_code, seconds
from .._config import ClientConfig
from ._calls import DEFAULT_COOLDOWN, CallSpec
from ._client import hooks_key
from ._serde import DefaultSerializer

if TYPE_CHECKING:
    from collections.abc import Callable

    from pyspark.sql.types import DataType

    from .._hooks import RPCHook
    from ._columns import BatchStats, OnError, RemoteUDF
    from ._serde import Serializer

__all__ = ["WorkerOptions", "call_spec", "check_on_error", "flag", "serializer_of",
           "spark_udf", "worker_options"]


@dataclass(frozen=True, slots=True, kw_only=True)
class WorkerOptions:
    """What a Python worker process needs besides the calls (picklable: it travels).

    Attributes:
        config: the worker's client settings (None: the defaults).
        on_batch: called after each Arrow batch with its `BatchStats`.
        log_level: the ``remoting`` loggers' level in the worker (None: untouched).
        setup: called once per worker process before its first request.
        parent: the driver's trace context, for the batch spans.
        hooks: RPC hooks on the worker's client (`get_client`).
    """

    config: ClientConfig | None = None
    on_batch: Callable[[BatchStats], object] | None = None
    log_level: int | None = logging.WARNING
    setup: Callable[[], object] | None = None
    parent: Mapping[str, str] | None = None
    hooks: tuple[RPCHook, ...] = ()


def worker_options(config: object, on_batch: object, worker_log_level: object,
                   worker_setup: object, parent: Mapping[str, str] | None,
                   hooks: object = ()) -> WorkerOptions:
    """Return the checked `WorkerOptions` of a Spark helper's arguments.

    Raises:
        TypeError: ``config`` is not a `ClientConfig`, ``on_batch`` or ``worker_setup`` is
            not callable, ``worker_log_level`` is neither an int nor a level name, or
            ``hooks`` is not a list of picklable RPC hooks.
        ValueError: ``worker_log_level`` names no logging level.
    """
    if config is not None and not isinstance(config, ClientConfig):
        raise TypeError(f"config must be a ClientConfig, got {type(config).__name__}")
    return WorkerOptions(
        config=config,
        on_batch=_callable_or_none("on_batch", on_batch),
        log_level=_log_level(worker_log_level),
        setup=_callable_or_none("worker_setup", worker_setup),
        parent=parent,
        hooks=_hooks(hooks),
    )


def _hooks(hooks: object) -> tuple[RPCHook, ...]:
    """Return ``hooks`` as a tuple, checked as `get_client` will take them in the workers."""
    if hooks is None:
        return ()
    hooks_key(hooks)
    return tuple(hooks)  # type: ignore[arg-type]  # hooks_key checked it is a list or tuple


def call_spec(addresses: object, code: object, timeout: object, max_in_flight: object,
              header: object, serialize_type: object, idempotent: object = False,
              cooldown: object = DEFAULT_COOLDOWN) -> CallSpec:
    """Return the checked `CallSpec` of a Spark helper's arguments.

    Raises:
        TypeError: an argument of the wrong type (named in the message).
        ValueError: a bad address, a code outside int32, a timeout <= 0 or NaN, an in-flight
            bound below 1, a negative cool-down.
    """
    if not isinstance(max_in_flight, int) or isinstance(max_in_flight, bool):
        raise TypeError(f"max_in_flight must be an int, got {max_in_flight!r}")
    return CallSpec(
        addresses=_addresses(addresses), code=request_code(code),
        timeout=seconds("timeout", timeout, above=True), max_in_flight=max_in_flight,
        header=_header(header), serialize_type=_serialize_type(serialize_type),
        idempotent=flag("idempotent", idempotent), cooldown=seconds("cooldown", cooldown),
    )


def check_on_error(on_error: object) -> OnError:
    """Return ``on_error`` if it is ``"raise"`` or ``"null"``.

    Raises:
        ValueError: it is not.
    """
    if on_error not in ("raise", "null"):
        raise ValueError(f"on_error must be 'raise' or 'null', not {on_error!r}")
    return on_error


def flag(name: str, value: object) -> bool:
    """Return ``value`` if it is a bool (``"no"`` is not False: it is a mistake).

    Raises:
        TypeError: it is not.
    """
    if not isinstance(value, bool):
        raise TypeError(f"{name} must be True or False, got {value!r}")
    return value


def serializer_of(serializer: object, value_type: DataType) -> Serializer:
    """Return ``serializer``, or the `DefaultSerializer` of ``value_type`` for None.

    Raises:
        TypeError: it lacks ``encode`` or ``decode`` methods.
    """
    if serializer is None:
        return DefaultSerializer(value_type)
    for method in ("encode", "decode"):
        if not callable(getattr(serializer, method, None)):
            raise TypeError(f"serializer must have encode(value) and decode(body) methods "
                            f"(a remoting.spark.Serializer), got {type(serializer).__name__}")
    return serializer  # type: ignore[return-value]


def _addresses(addresses: object) -> tuple[str, ...]:
    """Return the addresses of ``"h:p"``, ``"h:p,h:p"`` or a sequence, items stripped."""
    if isinstance(addresses, str):
        items: list[Any] = addresses.split(",")
    elif isinstance(addresses, bytes | bytearray | Mapping) or not hasattr(addresses,
                                                                           "__iter__"):
        raise TypeError(f"addresses must be 'host:port', a comma-separated string of them "
                        f"or a list of them, got {type(addresses).__name__}")
    else:
        items = list(addresses)
        for item in items:
            if not isinstance(item, str):
                raise TypeError(f"each address must be a 'host:port' string, got {item!r}")
    return tuple(a.strip() for a in items if a.strip())


def _header(header: object) -> tuple[tuple[str, str], ...]:
    if header is None:
        return ()
    if not isinstance(header, Mapping):
        raise TypeError(f"header must be a mapping of str to str, got "
                        f"{type(header).__name__}")
    pairs: list[tuple[str, str]] = []
    for key, value in header.items():
        if not isinstance(key, str) or not isinstance(value, str):
            raise TypeError(f"header must map str to str (ext fields are text), got "
                            f"{key!r}: {value!r}")
        pairs.append((key, value))
    return tuple(sorted(pairs))


def _serialize_type(value: object) -> SerializeType:
    """Return a `SerializeType`, also from its name (``"JSON"``) or wire value (0, 1)."""
    if isinstance(value, str) and value.upper() in SerializeType.__members__:
        return SerializeType[value.upper()]
    if isinstance(value, int) and not isinstance(value, bool) and value in (0, 1):
        return SerializeType(value)
    raise ValueError(f"serialize_type must be SerializeType.JSON or SerializeType.ROCKETMQ "
                     f"(or their names), got {value!r}")


def _callable_or_none(name: str, value: object) -> Any:
    if value is not None and not callable(value):
        raise TypeError(f"{name} must be a function (or None), got {type(value).__name__}")
    return value


def _log_level(level: object) -> int | None:
    """Return a logging level from an int or a level name (``"debug"`` or ``"DEBUG"``)."""
    if level is None or (isinstance(level, int) and not isinstance(level, bool)):
        return level
    if not isinstance(level, str):
        raise TypeError(f"worker_log_level must be a logging level (logging.DEBUG or "
                        f"'DEBUG') or None, got {level!r}")
    number = logging.getLevelNamesMapping().get(level.strip().upper())
    if number is None:
        raise ValueError(f"worker_log_level must name a logging level such as 'DEBUG' or "
                         f"'WARNING', got {level!r}")
    return number


def spark_udf(fn: Callable[..., Any], udf_type: DataType, deterministic: object
              ) -> RemoteUDF:
    """Return ``fn`` as a pandas UDF of ``udf_type``, non-deterministic unless asked."""
    udf = pandas_udf(fn, udf_type)  # type: ignore[call-overload]
    return cast("RemoteUDF", udf if flag("deterministic", deterministic)
                else udf.asNondeterministic())
