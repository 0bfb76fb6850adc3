"""`Command`: one subcommand of ``remoting`` (name, help, arguments, runner)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import argparse
    from collections.abc import Callable

__all__ = ["Command"]


@dataclass(frozen=True, slots=True)
class Command:
    """One subcommand of ``remoting``: its runner returns the exit code."""

    name: str
    help: str
    add_arguments: Callable[[argparse.ArgumentParser], None]
    run: Callable[[argparse.Namespace], int]
    log_level: str = "warning"  # unless --log-level says otherwise
