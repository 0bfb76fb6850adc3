"""Integers in header fields: the one parser for every place a peer's text becomes an int.

A peer's ``ext_fields`` value (or a JSON header's string) is text it chose. Python's
``int()`` takes far more than a peer should send, and `str.isdigit` is no guard in front of it:
``int()`` also takes non-ASCII decimal digits (``"٣"`` is 3), surrounding whitespace,
underscores (``"1_000"``) and a ``+``; ``"²".isdigit()`` is True and ``int("²")`` raises; and a
run of thousands of digits costs quadratic time before Python refuses it past 4,300. Java's
``Long.parseLong`` refuses most of that (it writes none of it: ``Long.toString`` gives an
optional ``-`` and ASCII digits). So this module accepts exactly that shape, checks the length
before ``int()`` runs, and the range after, and raises one `ValueError` whose message says
what was expected without repeating the peer's text (callers log it).
"""

from __future__ import annotations

from typing import Final

__all__ = ["INT32_MAX", "INT32_MIN", "INT64_MAX", "INT64_MIN", "header_int"]

INT32_MIN: Final = -(2**31)
INT32_MAX: Final = 2**31 - 1
INT64_MIN: Final = -(2**63)
INT64_MAX: Final = 2**63 - 1
# the widest value a field may hold (an unsigned 64-bit one) has 20 digits: longer text is
# refused before int() sees it
_MAX_DIGITS: Final = 20


def header_int(name: str, text: str, low: int = INT64_MIN, high: int = INT64_MAX) -> int:
    """Return the integer ``text`` spells: an optional ``-`` then 1 to 20 ASCII digits, from
    ``low`` to ``high`` (Java's ``Long.toString`` shape; leading zeros are allowed).

    Raises:
        ValueError: any other text (non-ASCII digits, a ``+``, whitespace, underscores, an
            empty string, more than 20 digits), or a value outside ``low``..``high``; the
            message names ``name`` and the range, and the value only once it is a bounded
            number, never other text.
    """
    digits = text[1:] if text[:1] == "-" else text
    if not (0 < len(digits) <= _MAX_DIGITS and digits.isascii() and digits.isdigit()):
        raise ValueError(f"{name} is not an integer: it must be an int from {low} to {high}, "
                         "in ASCII digits")
    value = int(text)
    if low <= value <= high:
        return value
    raise ValueError(f"{name} must be from {low} to {high}, got {value} (out of range)")
