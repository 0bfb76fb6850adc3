"""Typed custom headers: dataclasses packed into and built back from ``ext_fields``.

As RocketMQ's ``makeCustomHeaderToNet`` / ``decodeCommandCustomHeader``: each non-None field
becomes ``name -> str(value)`` (booleans as ``"true"``/``"false"``). Unlike Java, which only logs
a field that fails to parse, we raise `HeaderFieldError` naming the field.
"""

from __future__ import annotations

import dataclasses
import types
import typing
from typing import Any, Final, TypeVar

from ._errors import HeaderFieldError
from ._header_numbers import header_int

__all__ = ["decode_custom_header", "pack_custom_header"]

T = TypeVar("T")

_SCALARS: Final = (str, int, float, bool)


def _wire_str(value: object) -> str:
    if value is True:
        return "true"
    if value is False:
        return "false"
    return str(value)


def pack_custom_header(header: object) -> dict[str, str]:
    """Return the ``ext_fields`` entries of a dataclass header (None fields omitted)."""
    if not dataclasses.is_dataclass(header) or isinstance(header, type):
        raise TypeError(
            f"a custom header must be a dataclass instance, got {type(header).__name__}"
        )
    return {
        f.name: _wire_str(value)
        for f in dataclasses.fields(header)
        if (value := getattr(header, f.name)) is not None
    }


_FIELD_CACHE: dict[type, list[tuple[str, type, bool]]] = {}


def _field_specs(cls: type) -> list[tuple[str, type, bool]]:
    """Return ``(name, scalar type, required)`` per field, cached per class."""
    specs = _FIELD_CACHE.get(cls)
    if specs is not None:
        return specs
    hints = typing.get_type_hints(cls)
    specs = []
    for f in dataclasses.fields(cls):
        if not f.init:
            continue
        tp: Any = hints[f.name]
        if isinstance(tp, types.UnionType) or typing.get_origin(tp) is typing.Union:
            args = [a for a in typing.get_args(tp) if a is not type(None)]
            tp = args[0] if len(args) == 1 else str
        if tp not in _SCALARS:
            raise TypeError(
                f"{cls.__name__}.{f.name}: unsupported header field type {tp!r} "
                "(use str, int, float or bool)"
            )
        required = f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING
        specs.append((f.name, tp, required))
    _FIELD_CACHE[cls] = specs
    return specs


def _parse(header: str, name: str, tp: type, raw: str) -> object:
    if tp is str:
        return raw
    if tp is bool:
        low = raw.lower()
        if low in ("true", "false"):
            return low == "true"
        raise HeaderFieldError(header, name, f"expected 'true' or 'false', got {raw!r}")
    # Java's Long.parseLong / Double.parseDouble refuse what Python's int() and float() take
    # besides: underscores ("4_2"), non-ASCII digits, and for an int spaces (header_int)
    try:
        if tp is int:
            return header_int(name, raw)
        if "_" in raw or not raw.isascii():
            raise ValueError(raw)
        return float(raw)
    except ValueError:
        raise HeaderFieldError(header, name, f"expected {tp.__name__}, got {raw!r}") from None


def decode_custom_header(cls: type[T], ext_fields: dict[str, str | None] | None) -> T:
    """Build a dataclass header from ``ext_fields``, converting each field to its type.

    Raises:
        HeaderFieldError: a required field is missing or a value does not parse.
        TypeError: ``cls`` is not a dataclass of scalar fields (a programming error).
    """
    if not dataclasses.is_dataclass(cls):
        raise TypeError(f"{cls!r} is not a dataclass")
    ext = ext_fields or {}
    kwargs: dict[str, object] = {}
    for name, tp, required in _field_specs(cls):
        raw = ext.get(name)
        if raw is None:
            if required:
                raise HeaderFieldError(cls.__name__, name, "required field is missing")
            continue
        kwargs[name] = _parse(cls.__name__, name, tp, raw)
    return cls(**kwargs)
