"""Instructions per request of two checkouts, counted by valgrind: an A/B that a loaded
machine cannot blur.

    .venv/bin/python bench/instructions.py --a /tmp/old-checkout --b . [--cases trio-many,...]

Timing A/Bs (bench/ab.py) need a quiet machine: other processes move a rate by more than the
few per cent a change costs. This one counts the CPU instructions a process executes
(valgrind's callgrind, no cache simulation) for the same workload
(bench/_instruction_workload.py: a trio server with the async echo processor and one client
in one process) at two request counts, ``--small`` and ``--large``; the difference divided
by the difference in requests is the cost of one request, start-up and imports cancelled
out. A process runs ~50x slower under valgrind, so each case takes a minute or two.

Instructions are not time (a cache miss costs more than an add), but for the same Python
workload they follow CPU time closely, and they are repeatable to a fraction of a per cent.
Both sides run the pure-Python package (``TRIO_REMOTING_PURE_PYTHON=1``) unless
``--compiled``. A checkout is any directory holding ``codec``, ``processors`` and
``remoting`` (a git worktree, or ``git archive <commit> | tar -x -C <dir>``).
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
WORKLOAD = HERE / "_instruction_workload.py"
CASES = ("trio-many", "trio-seq", "blocking-many", "blocking-seq")
COLLECTED = re.compile(r"Collected : (\d+)")


def instructions(tree: Path, case: str, n: int, pure: bool) -> int:
    """Instructions executed by the workload ``case`` of ``n`` requests on ``tree``."""
    env = {k: v for k, v in os.environ.items() if k != "TRIO_REMOTING_PURE_PYTHON"}
    env["PYTHONPATH"] = str(tree)
    if pure:
        env["TRIO_REMOTING_PURE_PYTHON"] = "1"
    proc = subprocess.run(
        ["valgrind", "--tool=callgrind", "--callgrind-out-file=/dev/null",
         sys.executable, str(WORKLOAD), case, str(n)],
        env=env, capture_output=True, text=True, timeout=3600)
    found = COLLECTED.search(proc.stderr)
    if proc.returncode != 0 or found is None:
        raise RuntimeError(f"{case} on {tree} failed:\n{proc.stderr[-3000:]}")
    return int(found.group(1))


def per_request(tree: Path, case: str, small: int, large: int, pure: bool) -> float:
    return (instructions(tree, case, large, pure) - instructions(tree, case, small, pure)) / (
        large - small)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--a", type=Path, required=True, help="checkout A (the baseline)")
    ap.add_argument("--b", type=Path, default=HERE.parent, help="checkout B (default: this one)")
    ap.add_argument("--cases", default=",".join(CASES), help=f"comma-separated of {CASES}")
    ap.add_argument("--small", type=int, default=200)
    ap.add_argument("--large", type=int, default=2200)
    ap.add_argument("--compiled", action="store_true",
                    help="run the compiled fast path where a side has it built")
    args = ap.parse_args()
    if shutil.which("valgrind") is None:
        ap.error("valgrind not found: apt-get install valgrind")
    cases = [c for c in args.cases.split(",") if c]
    unknown = set(cases) - set(CASES)
    if unknown:
        ap.error(f"unknown cases {sorted(unknown)}: choose from {CASES}")
    a, b = args.a.resolve(), args.b.resolve()
    print(f"A = {a}, B = {b}; {'compiled where built' if args.compiled else 'pure Python'}; "
          f"instructions per request from {args.small} and {args.large} requests\n")
    print(f"| {'case':<14} | {'A':>10} | {'B':>10} | {'B/A':>6} |")
    print(f"|{'-' * 16}|{'-' * 12}|{'-' * 12}|{'-' * 8}|")
    for case in cases:
        ia = per_request(a, case, args.small, args.large, not args.compiled)
        ib = per_request(b, case, args.small, args.large, not args.compiled)
        print(f"| {case:<14} | {ia:>10,.0f} | {ib:>10,.0f} | {ib / ia:>5.3f}x |", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
