"""Argument types of the ``remoting`` command: each refuses a bad value with a clear message."""

from __future__ import annotations

import argparse

__all__ = ["count", "ext_pair", "port", "positive_int", "seconds", "seconds_from_zero",
           "whole_number"]


def whole_number(text: str, minimum: int = 0) -> int:
    """An int >= ``minimum`` (``1_000_000`` and ``1,000,000`` allowed)."""
    try:
        value = int(text.replace("_", "").replace(",", ""))
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be a whole number, got {text!r}") from None
    if value < minimum:
        raise argparse.ArgumentTypeError(f"must be >= {minimum}, got {text}")
    return value


def positive_int(text: str) -> int:
    """An int >= 1 (``1_000_000`` and ``1,000,000`` allowed)."""
    return whole_number(text, 1)


count = positive_int


def _seconds(text: str, zero: bool) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be a number of seconds, got {text!r}") from None
    if zero and not (0 <= value < float("inf")):
        raise argparse.ArgumentTypeError(f"must be a number of seconds >= 0, got {text}")
    if not zero and not value > 0:
        raise argparse.ArgumentTypeError(f"must be > 0 seconds, got {text}")
    return value


def seconds(text: str) -> float:
    """A duration in seconds, > 0."""
    return _seconds(text, zero=False)


def seconds_from_zero(text: str) -> float:
    """A duration in seconds, >= 0 (not infinite)."""
    return _seconds(text, zero=True)


def port(text: str) -> int:
    """A TCP port, 0-65535 (0: any free one)."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be a port number, got {text!r}") from None
    if not 0 <= value <= 65535:
        raise argparse.ArgumentTypeError(f"must be 0-65535 (0 picks a free port), got {text}")
    return value


def ext_pair(text: str) -> tuple[str, str]:
    """``key=value``."""
    key, sep, value = text.partition("=")
    if not sep or not key:
        raise argparse.ArgumentTypeError(f"takes key=value, got {text!r}")
    return key, value
