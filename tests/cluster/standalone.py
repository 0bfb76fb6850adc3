"""A real Spark standalone cluster on 127.0.0.1, and the code shipped to its executors.

- `StandaloneCluster`: a Master and a Worker, each a JVM of its own started with the installed
  pyspark's ``bin/spark-class``, on ephemeral ports with the web UIs on ephemeral ports and the
  REST submission server off; stopped by pid (SIGTERM, then SIGKILL) however the block ends.
  Both run a Spark installation of their own (a hard-linked copy of the installed pyspark)
  and the Worker starts with a clean environment in an empty directory, so its executors
  see neither the checkout nor ``.venv``.
- `packed_env`: the third-party packages the executors need (pandas, pyarrow, trio, ...), at
  the driver's versions, in a virtualenv packed with ``venv-pack``, for ``spark.archives``
  (PySpark's recommended way for clusters without the packages installed). Cached by versions.
- `code_zip`: this checkout's ``codec``, ``processors`` and ``remoting`` packages as a zip for
  ``spark.submit.pyFiles``.

Used by tests/cluster/ and bench/cluster.py; ``python -m tests.cluster.standalone`` starts a
cluster and prints its master URL until Ctrl-C (docs/spark.md shows the spark-class lines).
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from importlib import metadata
from pathlib import Path
from typing import IO, Self

from examples.shipping import zip_packages

ROOT = Path(__file__).resolve().parents[2]
CACHE = ROOT / ".cache" / "spark-env"
PACKAGES = ("codec", "processors", "remoting")
# What the executors import, besides pyspark (which Spark ships from SPARK_HOME itself).
EXECUTOR_REQUIREMENTS = ("pandas", "pyarrow", "numpy", "trio", "structlog", "orjson")
START_TIMEOUT = 90.0
STOP_TIMEOUT = 20.0


def spark_home() -> Path:
    """Return the installed pyspark's directory, which is a complete SPARK_HOME."""
    import pyspark

    return Path(pyspark.__file__).resolve().parent


class _Daemon:
    """One JVM started with spark-class; its log file; stopped by pid."""

    def __init__(self, name: str, args: list[str], env: dict[str, str], cwd: Path) -> None:
        self.name = name
        self.log_path = cwd / f"{name}.log"
        self._log: IO[bytes] = open(self.log_path, "wb")  # noqa: SIM115 (closed in stop)
        self.proc = subprocess.Popen(
            [str(Path(env["SPARK_HOME"]) / "bin" / "spark-class"), *args], cwd=cwd, env=env,
            stdout=self._log, stderr=subprocess.STDOUT, start_new_session=True)

    def wait_for(self, pattern: str, timeout: float) -> re.Match[str]:
        """Wait until the log matches ``pattern``; raise with the log if it never does."""
        deadline = time.monotonic() + timeout
        regex = re.compile(pattern)
        while time.monotonic() < deadline:
            text = self.log_path.read_text(errors="replace")
            if m := regex.search(text):
                return m
            if self.proc.poll() is not None:
                break
            time.sleep(0.2)  # polling a log file another process writes
        raise RuntimeError(f"spark {self.name} did not log {pattern!r} within {timeout:.0f} s "
                           f"(exit code {self.proc.poll()}):\n{self.log_path.read_text()[-3000:]}")

    def stop(self) -> None:
        """SIGTERM the JVM (its pid, which we started), SIGKILL if it lingers."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(STOP_TIMEOUT)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(STOP_TIMEOUT)
        self._log.close()


class StandaloneCluster:
    """A Spark standalone Master and one Worker on 127.0.0.1, for the length of a block."""

    def __init__(self, cores: int = 2, memory: str = "2g") -> None:
        self.cores = cores
        self.memory = memory
        self.master_url = ""
        self.dir = Path(tempfile.mkdtemp(prefix="spark-standalone-"))
        self._daemons: list[_Daemon] = []

    def __enter__(self) -> Self:
        try:
            self._start()
        except BaseException:
            self.close()
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _env(self) -> dict[str, str]:
        """A clean environment: no PYTHONPATH, no virtualenv, nothing of the checkout."""
        keep = ("PATH", "HOME", "JAVA_HOME", "LANG", "LC_ALL", "TMPDIR", "USER")
        env = {k: v for k, v in os.environ.items() if k in keep}
        venv_bin = str(Path(sys.prefix) / "bin")
        env["PATH"] = os.pathsep.join(
            p for p in env.get("PATH", "/usr/bin:/bin").split(os.pathsep) if p != venv_bin)
        conf = self.dir / "conf"
        conf.mkdir(exist_ok=True)
        (conf / "spark-defaults.conf").write_text("spark.master.rest.enabled false\n")
        env.update(SPARK_HOME=str(self._install_spark()), SPARK_CONF_DIR=str(conf),
                   SPARK_LOCAL_IP="127.0.0.1", SPARK_LOG_DIR=str(self.dir),
                   SPARK_WORKER_DIR=str(self.dir / "work"))
        return env

    def _install_spark(self) -> Path:
        """Give the cluster a Spark installation of its own, outside the checkout and .venv.

        A copy of the installed pyspark (hard links where the file system allows: instant),
        so the executors' Python path, which includes SPARK_HOME/python/lib, names no file
        of the checkout, as on a cluster whose nodes have Spark installed.
        """
        home = self.dir / "spark"
        try:
            shutil.copytree(spark_home(), home, copy_function=os.link, symlinks=True)
        except OSError:
            shutil.rmtree(home, ignore_errors=True)
            shutil.copytree(spark_home(), home, symlinks=True)
        return home

    def _start(self) -> None:
        env = self._env()
        master = _Daemon("master", [
            "org.apache.spark.deploy.master.Master", "--host", "127.0.0.1", "--port", "0",
            "--webui-port", "0", "--properties-file",
            str(self.dir / "conf" / "spark-defaults.conf")], env, self.dir)
        self._daemons.append(master)
        found = master.wait_for(r"Starting Spark master at (spark://127\.0\.0\.1:\d+)",
                                START_TIMEOUT)
        self.master_url = found.group(1)
        worker = _Daemon("worker", [
            "org.apache.spark.deploy.worker.Worker", self.master_url, "--host", "127.0.0.1",
            "--port", "0", "--webui-port", "0", "--cores", str(self.cores),
            "--memory", self.memory, "--work-dir", str(self.dir / "work"),
            "--properties-file", str(self.dir / "conf" / "spark-defaults.conf")],
            env, self.dir)
        self._daemons.append(worker)
        worker.wait_for(r"Successfully registered with master", START_TIMEOUT)

    def close(self) -> None:
        """Stop the Worker, then the Master (by pid); remove the working directory."""
        for daemon in reversed(self._daemons):
            daemon.stop()
        self._daemons.clear()
        shutil.rmtree(self.dir, ignore_errors=True)


def _versions() -> dict[str, str]:
    return {name: metadata.version(name) for name in EXECUTOR_REQUIREMENTS}


def packed_env(cache: Path = CACHE) -> Path:
    """Return a venv-pack archive with the executors' third-party packages (built once).

    The archive holds a virtualenv made with this interpreter's Python and the driver's
    versions of `EXECUTOR_REQUIREMENTS`; its name is a hash of those versions.
    """
    versions = _versions()
    key = hashlib.sha256(repr((sys.version, sorted(versions.items()))).encode()).hexdigest()
    archive = cache / f"executor-env-{key[:16]}.tar.gz"
    if archive.exists():
        return archive
    cache.mkdir(parents=True, exist_ok=True)
    base = getattr(sys, "_base_executable", sys.executable)
    with tempfile.TemporaryDirectory(dir=cache) as tmp:
        venv = Path(tmp) / "env"
        subprocess.run([base, "-m", "venv", str(venv)], check=True)
        pip = [str(venv / "bin" / "python"), "-m", "pip", "install", "-q",
               "--disable-pip-version-check"]
        subprocess.run([*pip, "venv-pack", *(f"{n}=={v}" for n, v in versions.items())],
                       check=True)
        partial = archive.with_name("partial-" + archive.name)
        subprocess.run([str(venv / "bin" / "venv-pack"), "-q", "-p", str(venv), "-o",
                        str(partial), "--force"], check=True)
        partial.rename(archive)
    return archive


def code_zip(directory: Path) -> Path:
    """Zip this checkout's packages (Python sources only) for ``spark.submit.pyFiles``."""
    return zip_packages(ROOT, PACKAGES, directory / "trio_remoting_code.zip")


def _stop(signum: int, frame: object) -> None:
    raise KeyboardInterrupt


def main() -> None:
    """Start a cluster, print its master URL, and keep it up until Ctrl-C or SIGTERM."""
    signal.signal(signal.SIGTERM, _stop)  # stop the JVMs on SIGTERM too, not only Ctrl-C
    with StandaloneCluster() as cluster, contextlib.suppress(KeyboardInterrupt):
        print(cluster.master_url, flush=True)
        signal.pause()


if __name__ == "__main__":
    main()
