"""Argument types of the ``remoting`` command: each refuses a bad value with a clear message."""

from __future__ import annotations

import argparse

__all__ = ["count", "ext_pair", "port", "positive_int", "seconds", "seconds_from_zero"]


def positive_int(text: str) -> int:
    """An int >= 1 (``1_000_000`` and ``1,000,000`` allowed)."""
    try:
        value = int(text.replace("_", "").replace(",", ""))
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be a whole number, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be >= 1, got {text}")
    return value


count = positive_int


def seconds(text: str) -> float:
    """A duration in seconds, > 0."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be a number of seconds, got {text!r}") from None
    if not value > 0:
        raise argparse.ArgumentTypeError(f"must be > 0 seconds, got {text}")
    return value


def seconds_from_zero(text: str) -> float:
    """A duration in seconds, >= 0."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be a number of seconds, got {text!r}") from None
    if not value >= 0 or value == float("inf"):
        raise argparse.ArgumentTypeError(f"must be a number of seconds >= 0, got {text}")
    return value


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
