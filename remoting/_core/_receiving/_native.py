"""Which implementation of the receiving side's kernels runs: compiled, or pure Python.

``_speedups.c`` beside this module holds the compiled fast path of `_first_step.first_step`;
it is loaded by the codec's one rule
(`codec._native.load_extension`: never under ``TRIO_REMOTING_PURE_PYTHON``, never when it was
not built, never when it is stale), and the owning module swaps its compiled twin in.
`STATUS` says which runs, and why.
"""

from __future__ import annotations

from pathlib import Path

from codec._native import load_extension

__all__ = ["STATUS", "speedups"]

speedups, STATUS = load_extension(__name__.rpartition(".")[0], Path(__file__).parent)
