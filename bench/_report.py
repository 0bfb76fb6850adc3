"""What every benchmark writes beside its table: the machine, the code and the date, as JSON.

``--json PATH`` in bench/rpc.py, bench/spark.py and bench/workers.py writes
``{"meta": machine_meta(), ...}``; bench/charts.py draws docs/images/ from those files.
"""

from __future__ import annotations

import datetime
import json
import os
import platform
import subprocess
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]


def cpu_model() -> str:
    """Return the CPU model name from /proc/cpuinfo (or the platform's guess)."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown CPU"


def commit() -> str:
    """Return the short commit measured, with ``+dirty`` when library files differ from it."""
    try:
        head = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"],
                              capture_output=True, text=True, timeout=10).stdout.strip()
        dirty = subprocess.run(
            ["git", "-C", str(ROOT), "status", "--porcelain", "--", "codec", "processors",
             "remoting"], capture_output=True, text=True, timeout=10).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return "unknown"
    return (head or "unknown") + ("+dirty" if dirty else "")


def machine_meta() -> dict[str, Any]:
    """Return what a reader needs to judge a figure: commit, date, CPU, CPUs, Python."""
    return {
        "commit": commit(),
        "date": datetime.date.today().isoformat(),
        "cpu": cpu_model(),
        "cpus": os.cpu_count(),
        "python": sys.version.split()[0],
    }


def write_json(path: str, payload: dict[str, Any]) -> None:
    """Write ``{"meta": machine_meta(), **payload}`` to ``path``."""
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    Path(path).write_text(json.dumps({"meta": machine_meta(), **payload}, indent=1) + "\n")
    print(f"wrote {path}")
