"""A/B two checkouts with bench/rpc.py (and bench/spark.py's per-row UDF), alternating them.

    .venv/bin/python bench/ab.py --a ../old-checkout --b . --rounds 5
    .venv/bin/python bench/ab.py --a ../old-checkout --b . --rounds 5 --spark 3
    .venv/bin/python bench/ab.py --pure-vs-compiled --rounds 5 --spark 3

Each round runs ``bench/rpc.py --runs 1`` once with checkout A's packages first on
``PYTHONPATH`` and once with B's (the order alternates from round to round), so that a drift
of the machine hits both alike. The harness itself (this file, bench/rpc.py, bench/spark.py
and their workers) always comes from the checkout it is run from; only the library code
differs. It prints, per metric, the median over rounds of A and of B, and the median of the
per-round ratios B/A. ``--spark N`` also runs, in the same alternating way, bench/spark.py's
per-row UDF (``remote_udf``, one request per row from the Spark workers' task threads) ``N``
times per round and side (``--spark-rows`` rows each); its row is the median rows/s.

A checkout is any directory holding ``codec``, ``processors`` and ``remoting``: a git
worktree, or ``git archive <commit> | tar -x -C <dir>``. ``--pure-vs-compiled`` compares one
checkout with itself: A with ``TRIO_REMOTING_PURE_PYTHON=1`` (the pure-Python package), B with
the compiled fast path (which must be built there: ``python hatch_build.py``).
"""

from __future__ import annotations

import argparse
import os
import re
import statistics
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROW = re.compile(r"^\|\s*(?P<name>[^|]+?)\s*\|\s*(?P<ours>[\d,.]+)\s*\|")
CPU_ROW = re.compile(r"^\|\s*(?P<name>(?:ours|raw)[^|]+?)\s*\|\s*(?P<cli>[\d.]+)\s*\|\s*[\d.]+\s*\|"
                     r"\s*(?P<srv>[\d.]+)\s*\|")
SPARK_RUN = re.compile(r"^ours per-row \(remote_udf\): (?P<rate>[\d,]+) rows/s")
SPARK_ROW = "Spark per-row rows/s (remote_udf, median of the side's runs)"


def parse(text: str) -> dict[str, float]:
    """Return {metric: value} from bench/rpc.py's two tables (ours column, CPU per request)."""
    out: dict[str, float] = {}
    section = ""
    for line in text.splitlines():
        if line.startswith("| metric"):
            section = "metric"
            continue
        if line.startswith("| case"):
            section = "cpu"
            continue
        if section == "metric" and (m := ROW.match(line)):
            out[m["name"]] = float(m["ours"].replace(",", ""))
        elif section == "cpu" and (m := CPU_ROW.match(line)):
            out[f"cpu client us, {m['name']}"] = float(m["cli"])
            out[f"cpu server us, {m['name']}"] = float(m["srv"])
        elif section == "metric" and line.startswith("| 1 MiB") is False and not line:
            section = ""
    return out


PURE_ENV = "TRIO_REMOTING_PURE_PYTHON"


def _env(tree: Path, pure: bool = False) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != PURE_ENV}
    env["PYTHONPATH"] = str(tree)
    if pure:
        env[PURE_ENV] = "1"
    return env


def codec_status(tree: Path, pure: bool) -> str:
    """Which codec the side runs (codec._native.STATUS, or why it cannot say)."""
    proc = subprocess.run([sys.executable, "-c", "import codec._native as n; print(n.STATUS)"],
                          env=_env(tree, pure), capture_output=True, text=True, timeout=60,
                          cwd=tree)  # (``-c`` puts the working directory first on sys.path)
    return proc.stdout.strip() or "no codec._native (an older checkout: pure Python)"


def run_once(tree: Path, extra: list[str], pure: bool = False) -> dict[str, float]:
    proc = subprocess.run([sys.executable, str(HERE / "rpc.py"), "--runs", "1", *extra],
                          env=_env(tree, pure), capture_output=True, text=True, timeout=1800)
    if proc.returncode not in (0, 1):  # 1: a target missed, still a result
        raise RuntimeError(f"bench/rpc.py failed for {tree}:\n{proc.stderr[-3000:]}")
    return parse(proc.stdout)


def spark_once(tree: Path, runs: int, rows: int, pure: bool = False) -> dict[str, float]:
    """Run bench/spark.py's per-row variant ``runs`` times; return its median rows/s."""
    proc = subprocess.run(
        [sys.executable, str(HERE / "spark.py"), "--only", "ours per-row", "--skip-invoke-many",
         "--rows", str(rows), "--repeats", str(runs)],
        env=_env(tree, pure), capture_output=True, text=True, timeout=3600)
    if proc.returncode != 0:
        raise RuntimeError(f"bench/spark.py failed for {tree}:\n{proc.stderr[-3000:]}")
    rates = [float(m["rate"].replace(",", "")) for line in proc.stdout.splitlines()
             if (m := SPARK_RUN.match(line))]
    if not rates:
        raise RuntimeError(f"bench/spark.py printed no per-row rate for {tree}")
    return {SPARK_ROW: statistics.median(rates)}


def commit_of(tree: Path) -> str:
    return subprocess.run(["git", "-C", str(tree), "rev-parse", "--short", "HEAD"],
                          capture_output=True, text=True).stdout.strip() or "?"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--a", type=Path, help="checkout A (the baseline)")
    ap.add_argument("--pure-vs-compiled", action="store_true",
                    help="A: checkout B with TRIO_REMOTING_PURE_PYTHON=1; B: compiled")
    ap.add_argument("--b", type=Path, default=HERE.parent, help="checkout B (default: this one)")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--quick", action="store_true", help="pass --quick to bench/rpc.py")
    ap.add_argument("--spark", type=int, default=0, metavar="N",
                    help="also run the Spark per-row UDF N times per round and side")
    ap.add_argument("--spark-rows", type=int, default=200_000)
    args = ap.parse_args()
    if args.pure_vs_compiled == (args.a is not None):
        ap.error("give --a or --pure-vs-compiled (one of them)")
    b = args.b.resolve()
    a = b if args.pure_vs_compiled else args.a.resolve()
    pure = {"A": args.pure_vs_compiled, "B": False}
    status = {label: codec_status(tree, pure[label]) for label, tree in (("A", a), ("B", b))}
    if args.pure_vs_compiled and not status["B"].startswith("compiled"):
        ap.error(f"B is not compiled: {status['B']}")
    extra = ["--quick"] if args.quick else []
    runs: dict[str, list[dict[str, float]]] = {"A": [], "B": []}
    for i in range(args.rounds):
        order = [("A", a), ("B", b)] if i % 2 == 0 else [("B", b), ("A", a)]
        for label, tree in order:
            result = run_once(tree, extra, pure[label])
            if args.spark:
                result.update(spark_once(tree, args.spark, args.spark_rows, pure[label]))
            runs[label].append(result)
            print(f"round {i + 1}/{args.rounds}: {label} done", file=sys.stderr, flush=True)
    print(f"A = {a} ({commit_of(a)}), codec {status['A']}; B = {b} ({commit_of(b)} + working "
          f"tree), codec {status['B']}; {args.rounds} rounds, alternating\n")
    print(f"| {'metric':<74} | {'A':>9} | {'B':>9} | {'B/A':>6} |")
    print(f"|{'-' * 76}|{'-' * 11}|{'-' * 11}|{'-' * 8}|")
    for name in runs["A"][0]:
        av = [r[name] for r in runs["A"] if name in r]
        bv = [r[name] for r in runs["B"] if name in r]
        if not av or not bv:
            continue
        ratios = [y / x for x, y in zip(av, bv, strict=False) if x]
        print(f"| {name:<74} | {statistics.median(av):>9,.1f} | {statistics.median(bv):>9,.1f} "
              f"| {statistics.median(ratios):>5.2f}x |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
