"""Whether Spark's Python workers can import this package, checked in the driver.

Spark starts its Python workers with the interpreter its SparkContext took from
``PYSPARK_PYTHON`` when it started (``python3`` from PATH when unset), not the driver's own.
That one often lacks trio-remoting (a virtualenv's package, a checkout), and the failure then
comes late and far away: ``[PYTHON_DATA_SOURCE_ERROR] ... No module named 'remoting'`` when a
query is planned, or a failed task. `check_python_workers` asks that interpreter once (a
subprocess that finds the package without importing it, ~20 ms) and, on a local master,
where the workers run on this machine, points them at this interpreter instead (as ``remoting
demo`` does); elsewhere it raises with what to set.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from typing import TYPE_CHECKING, Final

from ._fleet import log

if TYPE_CHECKING:
    from pyspark import SparkContext

__all__ = ["check_python_workers"]

PROBE_SECONDS: Final = 60.0  # an interpreter that has not answered by then is not usable
# Prints the interpreter's version; exits 3 when it cannot find the package.
PROBE: Final = ("import importlib.util, sys; print('%d.%d' % sys.version_info[:2]); "
                "sys.exit(0 if importlib.util.find_spec('remoting') else 3)")

_checked: dict[tuple[str, str, str], str | None] = {}  # (interpreter, cwd, path) -> problem


def _problem(python: str, pythonpath: str) -> str | None:
    """Why ``python`` cannot run the package's code in a Spark worker (None: it can)."""
    key = (python, os.getcwd(), pythonpath)
    if key not in _checked:
        env = dict(os.environ, PYTHONPATH=pythonpath) if pythonpath else dict(os.environ)
        try:
            done = subprocess.run([python, "-c", PROBE], capture_output=True, text=True,
                                  timeout=PROBE_SECONDS, env=env, check=False)
        except (OSError, subprocess.TimeoutExpired) as exc:
            _checked[key] = f"it cannot be run ({type(exc).__name__}: {exc})"
        else:
            version = done.stdout.strip()
            mine = "{}.{}".format(*sys.version_info[:2])
            if done.returncode == 3:
                _checked[key] = f"it (Python {version}) has no module named 'remoting'"
            elif done.returncode != 0:
                _checked[key] = (f"it failed to start (exit {done.returncode}): "
                                 f"{done.stderr.strip()[-300:]}")
            elif version != mine:
                _checked[key] = (f"it is Python {version}, the driver is Python {mine} "
                                 "(Spark refuses workers of another version)")
            else:
                _checked[key] = None
    return _checked[key]


def _worker_pythonpath(sc: SparkContext) -> str:
    """The PYTHONPATH a worker adds to ours: the job's ``--py-files`` (as Spark ships them)."""
    from pyspark import SparkFiles

    includes = list(getattr(sc, "_python_includes", None) or [])
    shipped = [os.path.join(SparkFiles.getRootDirectory(), name) for name in includes]
    return os.pathsep.join([*shipped, *filter(None, [os.environ.get("PYTHONPATH")])])


def check_python_workers(sc: SparkContext) -> None:
    """Make sure the Python workers of ``sc`` can import this package.

    On a local master (``local``, ``local[N]``...) whose workers' interpreter cannot, the
    workers are pointed at this interpreter (``sc.pythonExec``, which ``PYSPARK_PYTHON`` sets),
    logged as ``spark.python_workers_set``: what is registered or made afterwards (the data
    source, UDFs) runs there.

    Raises:
        ImportError: another master, whose workers' interpreter (on this machine: Spark plans
            a Python data source in a worker on the driver) cannot import the package; the
            message says what to set.
    """
    python = sc.pythonExec
    if python == sys.executable or shutil.which(python) == sys.executable:
        return
    problem = _problem(python, _worker_pythonpath(sc))
    if problem is None:
        return
    if (sc.master or "").startswith("local"):
        log.warning("spark.python_workers_set", was=python, now=sys.executable, reason=problem)
        sc.pythonExec = sys.executable
        return
    raise ImportError(
        f"Spark's Python workers run {python!r} (PYSPARK_PYTHON when the SparkSession "
        f"started), and {problem}: they could not run trio-remoting's code. Set "
        "PYSPARK_PYTHON, before the SparkSession starts, to an interpreter that has "
        "trio-remoting and pyspark installed (os.environ['PYSPARK_PYTHON'] = sys.executable "
        "when the workers run on this machine), or ship one (docs/spark.md, Running on a "
        "cluster)")
