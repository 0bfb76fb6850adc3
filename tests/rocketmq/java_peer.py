"""Java's own RocketMQ 4.9.8 client as a test peer: tests/rocketmq/java/RmqPeer.java, compiled
once (javac against the broker folder's classpath, cached in ``.cache/rmq-peer/`` by a hash
of the source, the classpath and javac's version) and run as one JVM per call.

Each run prints JSON lines (``sent`` / ``received`` per message, ``result`` for a benchmark,
``done`` last); `JavaPeer` parses them. The message records carry ``msg_id`` (the UNIQ_KEY,
as Java prints it), ``offset_msg_id``, ``topic``, ``broker``, ``queue_id``, ``queue_offset``,
``tags``, ``keys`` (space-separated, as Java's ``getKeys()``), ``properties`` (all of them),
``user_properties`` (without RocketMQ's own keys), ``body_sha256``, ``body_length``; a
received one also ``reconsume_times``, ``born_timestamp``, ``store_timestamp``, ``born_host``,
``store_host``, ``sys_flag``, ``commit_log_offset`` and ``status`` (what the listener
returned). Bodies are `peer_body` (``run_id``, index, size).

Connection options of every method: ``access_key`` and ``secret_key`` (Java's
AclClientRPCHook), ``tls_ca_path`` (TLS, the server verified against that CA), and
``tls_cert_path`` / ``tls_key_path`` (a client certificate).
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import queue
import shutil
import subprocess
import tempfile
import threading
import time
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

from .cluster import ROOT, classpath, rocketmq_home, spawn, stop_process

SOURCE = Path(__file__).resolve().parent / "java" / "RmqPeer.java"
CACHE = ROOT / ".cache" / "rmq-peer"
CLIENT_JVM = ("-Xms64m", "-Xmx256m")  # roundtrip.sh's
RUN_TIMEOUT = 300.0
CONNECTION_OPTIONS = ("access_key", "secret_key", "tls_ca_path", "tls_cert_path",
                      "tls_key_path")

NameServers = str | Sequence[str]


class PeerError(RuntimeError):
    """The Java peer failed: exited non-zero, or did not finish in time (stopped)."""


def peer_body(run_id: str, index: int, size: int) -> bytes:
    """Return the body RmqPeer sends as message ``index`` of run ``run_id``."""
    head = f"{run_id}:{index}:".encode()
    return (head * (size // len(head) + 1))[:size]


def _ns(name_servers: NameServers) -> str:
    return name_servers if isinstance(name_servers, str) else ";".join(name_servers)


def _offsets(offsets: Mapping[tuple[str, int], int] | None) -> str | None:
    if offsets is None:
        return None
    return ",".join(f"{broker}:{qid}:{off}" for (broker, qid), off in offsets.items())


def _compile(home: Path, cache: Path) -> tuple[Path, str]:
    """Return (classes dir, classpath), compiling RmqPeer.java unless a cached build fits."""
    cp = classpath(home)
    javac = subprocess.run(["javac", "-version"], capture_output=True, text=True,
                           timeout=60).stdout.strip()
    key = hashlib.sha256(SOURCE.read_bytes() + cp.encode() + javac.encode()).hexdigest()[:16]
    classes = cache / key
    cache.mkdir(parents=True, exist_ok=True)
    with open(cache / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # one javac for parallel sessions and xdist workers
        if not (classes / "RmqPeer.class").exists():
            tmp = Path(tempfile.mkdtemp(dir=cache, prefix="build-"))
            try:
                done = subprocess.run(["javac", "-nowarn", "-encoding", "UTF-8", "-d", str(tmp),
                                       "-cp", cp, str(SOURCE)],
                                      capture_output=True, text=True, timeout=300)
                if done.returncode != 0:
                    raise PeerError(f"javac {SOURCE.name} failed:\n{done.stderr[-3000:]}")
                tmp.rename(classes)
            finally:
                shutil.rmtree(tmp, ignore_errors=True)
    return classes, f"{cp}{os.pathsep}{classes}"


class PeerProcess:
    """One running RmqPeer: its records as they come, its stderr in a file."""

    def __init__(self, argv: list[str], *, cwd: Path, stderr: Path,
                 cpus: set[int] | None = None) -> None:
        self.argv = argv
        self.stderr_path = stderr
        self.records: list[dict[str, Any]] = []
        self._lines: queue.Queue[dict[str, Any] | None] = queue.Queue()
        self.proc = spawn(argv, log=stderr, cwd=cwd, cpus=cpus, stdout=subprocess.PIPE)
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        with self.proc.stdout:
            for line in self.proc.stdout:
                record = json.loads(line)
                self.records.append(record)
                self._lines.put(record)
        self._lines.put(None)

    def wait_for(self, event: str, timeout: float = 60.0) -> dict[str, Any]:
        """Return the first record of ``event`` not yet taken, waiting up to ``timeout``.

        Raises:
            PeerError: the peer exited first, or ``timeout`` passed.
        """
        deadline = time.monotonic() + timeout
        while True:
            try:
                record = self._lines.get(timeout=max(0.0, deadline - time.monotonic()))
            except queue.Empty:
                raise PeerError(f"no {event!r} from the Java peer in {timeout:.0f} s"
                                f"{self._stderr_tail()}") from None
            if record is None:
                self._lines.put(None)
                raise PeerError(f"the Java peer exited ({self.proc.wait()}) before {event!r}"
                                f"{self._stderr_tail()}")
            if record.get("event") == event:
                return record

    def result(self, timeout: float = RUN_TIMEOUT) -> list[dict[str, Any]]:
        """Wait for the peer to exit; return every record.

        Raises:
            PeerError: it exited non-zero (its stderr in the message), or ran past
                ``timeout`` (then it is stopped).
        """
        try:
            code = self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.stop()
            raise PeerError(f"the Java peer ran past {timeout:.0f} s: stopped"
                            f"{self._stderr_tail()}") from None
        self._reader.join(30)
        if code != 0:
            raise PeerError(f"the Java peer exited with {code}{self._stderr_tail()}")
        return self.records

    def messages(self, timeout: float = RUN_TIMEOUT) -> list[dict[str, Any]]:
        """`result` without the ``started``/``done`` records: one per message."""
        return [r for r in self.result(timeout) if r["event"] in ("sent", "received")]

    def summary(self) -> dict[str, Any]:
        """The ``done`` record (after `result`)."""
        return next(r for r in reversed(self.records) if r["event"] == "done")

    def stop(self, timeout: float = 10.0) -> None:
        """SIGTERM (a consumer shuts down cleanly: offsets committed, its group told), then
        SIGKILL after ``timeout``."""
        stop_process(self.proc, timeout)
        self._reader.join(10)

    def kill(self) -> None:
        """SIGKILL (a crash: no offsets committed since the last 5-second commit)."""
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait()
        self._reader.join(10)

    def _stderr_tail(self) -> str:
        text = self.stderr_path.read_text(errors="replace") if self.stderr_path.exists() else ""
        return f"; command {' '.join(self.argv[-20:])}; stderr ({self.stderr_path}):\n" \
               f"{text[-3000:]}"


class JavaPeer:
    """Runs RmqPeer, Java's 4.9.8 client; see the module docstring for what it prints."""

    def __init__(self, work_dir: Path, *, home: Path | None = None, cache: Path = CACHE,
                 jvm_options: Sequence[str] = CLIENT_JVM) -> None:
        self.home = home or rocketmq_home()
        self.work_dir = work_dir
        self.work_dir.mkdir(parents=True, exist_ok=True)
        self.classes, self.classpath = _compile(self.home, cache)
        self.jvm_options = list(jvm_options)
        self._runs = 0
        self._lock = threading.Lock()
        self._running: list[PeerProcess] = []

    def command(self, mode: str, options: Mapping[str, object], *,
                access_key: str | None = None, secret_key: str | None = None,
                tls_ca_path: str | os.PathLike[str] | None = None,
                tls_cert_path: str | os.PathLike[str] | None = None,
                tls_key_path: str | os.PathLike[str] | None = None,
                jvm_options: Sequence[str] = ()) -> list[str]:
        """Return the java command line of one run."""
        jvm = [*self.jvm_options, *jvm_options, f"-Duser.home={self.work_dir / 'home'}",
               f"-Drocketmq.client.logRoot={self.work_dir / 'logs'}"]
        if tls_ca_path is not None:
            jvm += ["-Dtls.enable=true", "-Dtls.test.mode.enable=false",
                    "-Dtls.client.authServer=true", f"-Dtls.client.trustCertPath={tls_ca_path}"]
            if tls_cert_path is not None:
                jvm += [f"-Dtls.client.certPath={tls_cert_path}",
                        f"-Dtls.client.keyPath={tls_key_path}"]
        args = [mode]
        if access_key is not None:
            if secret_key is None:
                raise ValueError("access_key needs a secret_key")
            options = {**options, "access-key": access_key, "secret-key": secret_key}
        for key, value in options.items():
            if value is not None:
                text = str(value).lower() if isinstance(value, bool) else str(value)
                args += [f"--{key}", text]
        return ["java", *jvm, "-cp", self.classpath, "RmqPeer", *args]

    def start(self, mode: str, options: Mapping[str, object], *,
              cpus: set[int] | None = None, **connection: Any) -> PeerProcess:
        """Start one run in the background."""
        with self._lock:
            self._runs += 1
            n = self._runs
        proc = PeerProcess(self.command(mode, options, **connection), cwd=self.work_dir,
                           stderr=self.work_dir / f"peer-{n}-{mode}.err", cpus=cpus)
        self._running = [p for p in self._running if p.proc.poll() is None] + [proc]
        return proc

    def run(self, mode: str, options: Mapping[str, object], *, timeout: float = RUN_TIMEOUT,
            cpus: set[int] | None = None, **connection: Any) -> list[dict[str, Any]]:
        """Run one mode to its end; return every record (`PeerProcess.result`)."""
        return self.start(mode, options, cpus=cpus, **connection).result(timeout)

    def close(self) -> None:
        """Stop any run still going."""
        for proc in self._running:
            proc.stop()
        self._running.clear()

    # ------------------------------------------------------------------ modes

    def produce(self, name_servers: NameServers, topic: str, n: int, *,
                sizes: Sequence[int] = (128,), tags: Sequence[str] = (),
                key_prefix: str = "", keys_per_message: int = 1,
                properties: Mapping[str, str] | None = None, run_id: str | None = None,
                queue: tuple[str, int] | None = None, group: str | None = None,
                timeout: float = RUN_TIMEOUT, **connection: Any) -> list[dict[str, Any]]:
        """Send ``n`` messages one by one (sync) with Java's DefaultMQProducer; return one
        ``sent`` record per message (``index``, ``status``, ``msg_id``, ...).

        Message i has body ``peer_body(run_id, i, sizes[i % len(sizes)])`` (bodies of 4 KiB
        and more are compressed by Java's producer), tag ``tags[i % len(tags)]`` (none if
        empty), keys ``f"{key_prefix}-{i}"`` (then ``-1``, ``-2``... up to
        ``keys_per_message``), the user ``properties``; sent to ``queue`` (broker name,
        queue id) if given, else as Java's producer chooses.
        """
        props = properties or {}
        for k, v in props.items():
            if not k or any(c in k for c in "=;") or ";" in v:
                raise ValueError(f"property {k!r}={v!r}: no '=' or ';' here, please")
        records = self.run("produce", {
            "ns": _ns(name_servers), "topic": topic, "n": n,
            "sizes": ",".join(map(str, sizes)), "tags": ",".join(tags) if tags else None,
            "key-prefix": key_prefix or None, "keys-per-message": keys_per_message,
            "props": ";".join(f"{k}={v}" for k, v in props.items()) or None,
            "run-id": run_id, "queue": f"{queue[0]}:{queue[1]}" if queue else None,
            "producer-group": group}, timeout=timeout, **connection)
        return [r for r in records if r["event"] == "sent"]

    def start_consume(self, name_servers: NameServers, topic: str, group: str, n: int, *,
                      expression: str = "*", consume_from: str | int = "first",
                      timeout: float = 60.0, fail_times: int = 0, linger: float = 0.0,
                      broadcasting: bool = False, orderly: bool = False,
                      **connection: Any) -> PeerProcess:
        """Start Java's DefaultMQPushConsumer (clustering unless ``broadcasting``) and return
        once it has started; it stops by itself once ``n`` distinct messages were consumed
        (then ``linger`` seconds more, to see duplicates) or after ``timeout`` seconds.

        ``consume_from``: ``"first"``, ``"last"`` or a timestamp (ms). ``fail_times``: the
        listener returns RECONSUME_LATER (SUSPEND_CURRENT_QUEUE_A_MOMENT when ``orderly``)
        while a message's ``reconsume_times`` is below it.
        """
        when = f"timestamp:{consume_from}" if isinstance(consume_from, int) else consume_from
        proc = self.start("consume", {
            "ns": _ns(name_servers), "topic": topic, "group": group, "n": n,
            "expression": expression, "consume-from": when,
            "timeout-ms": int(timeout * 1000), "fail-times": fail_times,
            "linger-ms": int(linger * 1000), "broadcasting": broadcasting,
            "orderly": orderly}, **connection)
        proc.wait_for("started", 120.0)
        return proc

    def consume(self, name_servers: NameServers, topic: str, group: str, n: int, *,
                timeout: float = 60.0, **options: Any) -> list[dict[str, Any]]:
        """`start_consume` and wait: one ``received`` record per delivery (duplicates and
        redeliveries included), fewer than ``n`` distinct ones if ``timeout`` passed."""
        proc = self.start_consume(name_servers, topic, group, n, timeout=timeout, **options)
        return proc.messages(timeout + 120.0)

    def pull(self, name_servers: NameServers, topic: str, n: int | None = None, *,
             start: Mapping[tuple[str, int], int] | None = None,
             end: Mapping[tuple[str, int], int] | None = None, group: str | None = None,
             timeout: float = 60.0, **connection: Any) -> list[dict[str, Any]]:
        """Read the topic with Java's DefaultLitePullConsumer, every queue assigned, from
        ``start`` ({(broker, queue id): offset}; default each queue's first offset) up to
        ``end`` (exclusive; queues without one: until ``n`` or ``timeout``); return one
        ``received`` record per message (no offsets are committed)."""
        records = self.run("pull", {
            "ns": _ns(name_servers), "topic": topic, "n": n, "group": group,
            "start": _offsets(start), "end": _offsets(end),
            "timeout-ms": int(timeout * 1000)}, timeout=timeout + 120.0, **connection)
        return [r for r in records if r["event"] == "received"]

    def bench(self, mode: str, name_servers: NameServers, topic: str, *, n: int,
              cpus: set[int] | None = None, jvm_options: Sequence[str] = (),
              timeout: float = 900.0, **options: object) -> dict[str, Any]:
        """Run a benchmark mode (``bench-send-sync``, ``bench-send-async``,
        ``bench-send-batch``, ``bench-consume``, ``bench-latency``); return its ``result``.

        ``options``: ``warmup``, ``size``, ``in_flight``, ``batch``, ``group``,
        ``timeout_ms``, and the connection options.
        """
        connection = {k: options.pop(k) for k in CONNECTION_OPTIONS if k in options}
        args = {"ns": _ns(name_servers), "topic": topic, "n": n,
                **{k.replace("_", "-"): v for k, v in options.items()}}
        records = self.run(mode, args, timeout=timeout, cpus=cpus, jvm_options=jvm_options,
                           **connection)
        return next(r for r in records if r["event"] == "result")


@contextlib.contextmanager
def java_peer_in(work_dir: Path) -> Iterator[JavaPeer]:
    """A `JavaPeer` whose runs still going are stopped at the end of the block."""
    peer = JavaPeer(work_dir)
    try:
        yield peer
    finally:
        peer.close()
