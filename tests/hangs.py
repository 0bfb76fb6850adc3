"""Bounds that catch a hang without timing a call (the suite's timing rule,
tests/wall_clock_rule.py).

A test that must show a blocking call returns (a shutdown that does not wait out its grace,
say) bounds the wait far beyond what the call needs on any machine, and below what a wrong
implementation would take: make the alternative long (a grace of minutes), and the bound
`HANG_SECONDS`.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Final, TypeVar

T = TypeVar("T")

HANG_SECONDS: Final = 30.0  # a call that has not returned by then is hung, however loaded


def returns_within(seconds: float, fn: Callable[[], T]) -> T:
    """Call ``fn()`` in a thread of its own and return what it returns (or raise what it
    raises); fail the test if it has not returned within ``seconds``.

    The thread is a daemon: a hung call is left behind, and the test fails at once.
    """
    outcome: list[T] = []
    failure: list[BaseException] = []

    def run() -> None:
        try:
            outcome.append(fn())
        except BaseException as exc:  # handed to the caller
            failure.append(exc)

    thread = threading.Thread(target=run, name="test-returns-within", daemon=True)
    thread.start()
    thread.join(seconds)
    if thread.is_alive():
        raise AssertionError(f"{getattr(fn, '__qualname__', fn)} has not returned after "
                             f"{seconds} s: it hangs")
    if failure:
        raise failure[0]
    return outcome[0]
