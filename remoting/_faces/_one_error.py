"""What leaves a block that runs a nursery: one exception as itself, several as a group.

trio's nurseries group whatever their tasks and their body raise (``strict_exception_groups``
is trio's default), so a body that raised one ``KeyError`` would leave ``async with
open_client()`` as ``ExceptionGroup(..., [KeyError])`` and an ``except KeyError`` around it
would miss it. As trio-websocket's ``open_websocket`` settled on: a single exception leaves as
itself (the same object, its traceback and context intact); a ``Cancelled`` beside one other
exception is dropped (the other is what happened); only several real exceptions stay a group.
"""

from __future__ import annotations

from typing import NoReturn

import trio

__all__ = ["raise_one"]


def the_one(group: BaseExceptionGroup[BaseException]) -> BaseException | None:
    """Return the exception that stands for ``group`` (a nursery's), or None: several real
    exceptions, which leave as the group they are."""
    if len(group.exceptions) == 1:
        return group.exceptions[0]
    real = [exc for exc in group.exceptions if not isinstance(exc, trio.Cancelled)]
    if not real:  # cancelled from outside, several tasks at once: one Cancelled says it
        return group.exceptions[0]
    if len(real) == 1:
        return real[0]
    return None


def raise_one(group: BaseExceptionGroup[BaseException]) -> NoReturn:
    """Raise the exception that stands for ``group``; call it in ``except`` for the group.

    The exception is raised as it is: its ``__context__`` is put back (raising it here would
    make the group, which holds it, its context: a loop in every traceback printed).
    """
    __tracebackhide__ = True  # pytest: this frame is plumbing
    single = the_one(group)
    if single is None:
        raise group
    context = single.__context__
    try:
        raise single
    finally:
        single.__context__ = context
        del single, context
