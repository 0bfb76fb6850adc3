"""A real Apache RocketMQ 4.9.8 cluster on 127.0.0.1: a name server and brokers, each a JVM
we start and stop by pid, for the tests of tests/rocketmq/ and bench/rocketmq.py.

Where the broker comes from (`rocketmq_home`): ``RMQ_HOME``, or ``../shared/rocketmq-broker``
beside the checkout (or beside the main checkout, for a git worktree). Two layouts work:

- the project's prebuilt folder (``classpath.sh`` prints its classpath: jars built from
  source, then Debian's; ``install-deps.sh`` installs the latter);
- Apache's binary release (``rocketmq-all-4.9.8-bin-release``): every jar of ``lib/``.

The JVMs are started the way that folder's ``start.sh`` starts them (the same generated
``broker-N.conf``, the same JVM options), but from here, so that the ports are free ones
chosen here, a bind race is retried with other ports, the JVMs are our children (waited
for, never left as zombies) and die with us: SIGTERM when the process that started them
dies (PR_SET_PDEATHSIG), and `RocketMQCluster.close` at exit. The run directory has
``start.sh``'s layout (``namesrv.pid``, ``broker-N.pid``, ``*.out``, ``home/``,
``store-broker-X/``), so its ``stop.sh RUN_DIR`` stops a cluster left behind by a killed run.

Each JVM gets ``-Drocketmq.home.dir`` pointing at ``RUN_DIR/rocketmq-home``, whose ``conf/``
links the broker folder's logback files and holds this cluster's ``plain_acl.yml`` (`Acl`);
TLS (`Tls`) is a ``tls.properties`` there, named by ``-Dtls.config.file`` (TlsSystemConfig).

A broker listens on its port, on port-2 (the "VIP" channel) and port+1 (HA): all three are
checked free before it starts. Topics are created as ``mqadmin updateTopic -c`` creates them
(``UPDATE_AND_CREATE_TOPIC`` to every broker, signed by the admin account under ACL) and
`new_topic` returns once the name server's route shows every broker's queues.
"""

from __future__ import annotations

import atexit
import ctypes
import itertools
import json
import os
import re
import shutil
import signal
import socket
import ssl
import subprocess
import tempfile
import threading
import time
import uuid
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any, Self

from codec import FrameDecoder, RemotingCommand, encode_command
from remoting import AclClientRPCHook

ROOT = Path(__file__).resolve().parents[2]
BOOT_TIMEOUT = 90.0  # start.sh's bound; a loaded 2-CPU machine boots a broker in 3-10 s
STOP_TIMEOUT = 30.0  # stop.sh's bound: SIGTERM (RocketMQ's shutdown hook flushes), then SIGKILL
PORT_ATTEMPTS = 5  # another process may take a port between our check and the JVM's bind
ROUTE_TIMEOUT = 30.0
DEFAULT_JVM = ("-Xms256m", "-Xmx512m")  # start.sh's RMQ_JVM default
# Java 17: the store's MappedFile uses sun.nio.ch.DirectBuffer and reflects into the buffer
# cleaner (start.sh)
JDK17_OPTIONS = ("--add-exports", "java.base/sun.nio.ch=ALL-UNNAMED",
                 "--add-opens", "java.base/sun.nio.ch=ALL-UNNAMED",
                 "--add-opens", "java.base/java.nio=ALL-UNNAMED",
                 "--add-opens", "java.base/jdk.internal.ref=ALL-UNNAMED")

# RequestCode.java (4.9.8): the admin requests this module sends itself
UPDATE_AND_CREATE_TOPIC = 17
GET_ROUTEINFO_BY_TOPIC = 105
SUCCESS = 0
TOPIC_NOT_EXIST = 17  # ResponseCode.TOPIC_NOT_EXIST
PERM_READ_WRITE = 6  # PermName.PERM_READ | PERM_WRITE
# TopicValidator: what a topic or group name may hold
_NAME = re.compile(r"^[%|a-zA-Z0-9_-]{1,127}$")
_PR_SET_PDEATHSIG = 1


class ClusterError(RuntimeError):
    """The cluster could not be started, or an admin request to it failed."""


def rocketmq_home() -> Path:
    """Return the broker folder: ``RMQ_HOME``, else ``../shared/rocketmq-broker`` beside this
    checkout or beside the main checkout of this worktree."""
    if env := os.environ.get("RMQ_HOME"):
        return Path(env).expanduser().absolute()
    candidates = [ROOT.parent / "shared" / "rocketmq-broker"]
    try:
        common = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--git-common-dir"],
                                capture_output=True, text=True, timeout=10).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        common = ""
    if common:  # "<main checkout>/.git": the shared folder sits beside the main checkout
        main = (ROOT / common).resolve().parent
        candidates.append(main.parent / "shared" / "rocketmq-broker")
    return next((c for c in candidates if c.is_dir()), candidates[0])


def classpath(home: Path) -> str:
    """Return the broker's classpath: ``classpath.sh``'s output, or ``lib/*.jar``.

    Raises:
        ClusterError: no broker there, or a jar it names is missing (install-deps.sh).
    """
    script = home / "classpath.sh"
    if script.is_file():
        cp = subprocess.run([str(script)], capture_output=True, text=True, check=True,
                            timeout=30).stdout.strip()
    else:
        jars = sorted((home / "lib").glob("*.jar"))
        if not jars:
            raise ClusterError(f"no RocketMQ broker in {home} (neither classpath.sh nor "
                               "lib/*.jar): set RMQ_HOME to a broker folder (README.md)")
        cp = os.pathsep.join(map(str, jars))
    missing = [j for j in cp.split(os.pathsep) if not Path(j).is_file()]
    if missing:
        raise ClusterError(f"{len(missing)} jar(s) of the broker's classpath are missing, "
                           f"e.g. {missing[0]}: run {home / 'install-deps.sh'}")
    return cp


def java_major() -> int:
    """Return the major version of the ``java`` on PATH (8 for 1.8)."""
    out = subprocess.run(["java", "-XshowSettings:properties", "-version"],
                         capture_output=True, text=True, timeout=60).stderr
    m = re.search(r"java\.specification\.version = (?:1\.)?(\d+)", out)
    if m is None:
        raise ClusterError(f"cannot tell the version of java on PATH:\n{out[-500:]}")
    return int(m.group(1))


def jvm_base_options() -> list[str]:
    """Return the options every JVM of the cluster gets (start.sh's COMMON, minus paths)."""
    opts = ["-server", "-XX:-OmitStackTraceInFastThrow"]
    if java_major() >= 9:
        opts += JDK17_OPTIONS
    return opts


def free_port(offsets: Sequence[int] = (0,)) -> int:
    """Return a port P such that P + each offset is free on 127.0.0.1 just now.

    P comes from the kernel (bind to port 0); each P + offset is then bound to check it.
    Another process may still take one before the JVM binds it: `RocketMQCluster` retries.
    """
    for _ in range(200):
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port: int = s.getsockname()[1]
        if not all(1024 <= port + o <= 65535 for o in offsets):
            continue
        held: list[socket.socket] = []
        try:
            for o in offsets:
                s = socket.socket()
                held.append(s)
                s.bind(("127.0.0.1", port + o))
        except OSError:
            continue
        finally:
            for s in held:
                s.close()
        return port
    raise ClusterError(f"found no free port P with P{offsets} free in 200 tries")


# Both from util-linux: with them no Python code runs in the child between fork and exec
# (no preexec_fn, so no library's after-fork handler either).
_SETPRIV = shutil.which("setpriv")
_TASKSET = shutil.which("taskset")
# looked up here, not in the child: a dlopen between fork and exec could wait forever on a
# lock another thread held at the fork
_prctl = ctypes.CDLL(None, use_errno=True).prctl


def _die_with_parent() -> None:
    """In the child before exec: get SIGTERM when the thread that started us dies."""
    _prctl(_PR_SET_PDEATHSIG, signal.SIGTERM, 0, 0, 0)


def spawn(argv: Sequence[str], *, log: Path | None, cwd: Path,
          env: Mapping[str, str] | None = None, cpus: set[int] | None = None,
          stdout: int | None = None) -> subprocess.Popen[bytes]:
    """Start a JVM (or any program) in a session of its own, that dies with this process.

    Its output goes to ``log`` (stderr too), or to ``stdout`` (a pipe) with stderr to
    ``log``. ``cpus``: pin it, and every thread it starts, to these CPUs. Started through
    ``setpriv --pdeathsig`` and ``taskset`` where they exist, else by a ``preexec_fn``.
    """
    # PDEATHSIG fires when the *thread* that forked dies: only ask for it from the main
    # thread, which lives as long as the process.
    on_main = threading.current_thread() is threading.main_thread()
    command = list(argv)
    before_exec: Callable[[], None] | None = None
    if _SETPRIV is not None and (_TASKSET is not None or not cpus):
        if cpus and _TASKSET is not None:
            command = [_TASKSET, "-c", ",".join(map(str, sorted(cpus))), *command]
        if on_main:
            command = [_SETPRIV, "--pdeathsig", "TERM", *command]
    else:
        def before_exec() -> None:
            if on_main:
                _die_with_parent()
            if cpus:
                os.sched_setaffinity(0, cpus)

    out: IO[bytes] | None = open(log, "ab") if log is not None else None  # noqa: SIM115
    try:
        return subprocess.Popen(
            command, cwd=cwd, env=dict(env) if env is not None else None,
            stdin=subprocess.DEVNULL, stdout=stdout if stdout is not None else out,
            stderr=out if out is not None else None, start_new_session=True,
            preexec_fn=before_exec)
    finally:
        if out is not None:
            out.close()  # the child holds its own copy


def stop_process(proc: subprocess.Popen[Any], timeout: float = STOP_TIMEOUT) -> int:
    """SIGTERM ``proc`` (our child), wait up to ``timeout``, then SIGKILL; return its code."""
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            return proc.wait(timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
    return proc.wait()


class _Jvm:
    """One JVM of the cluster: our child, its output file and its pid file."""

    def __init__(self, name: str, run_dir: Path) -> None:
        self.name = name
        self.run_dir = run_dir
        self.out = run_dir / f"{name}.out"
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def pid(self) -> int:
        return self.proc.pid if self.proc is not None else 0

    def start(self, argv: Sequence[str], cpus: set[int] | None) -> None:
        self.out.write_bytes(b"")
        self.proc = spawn(argv, log=self.out, cwd=self.run_dir, cpus=cpus)
        (self.run_dir / f"{self.name}.pid").write_text(f"{self.proc.pid}\n")

    def wait_boot(self, deadline: float) -> None:
        """Wait for "boot success" in its output (both JVMs print it).

        Raises:
            _PortTaken: it died because a port was taken (the caller retries).
            ClusterError: it died otherwise, or did not boot in time (it is stopped).
        """
        assert self.proc is not None
        while time.monotonic() < deadline:
            text = self.out.read_text(errors="replace")
            if "boot success" in text:
                return
            if self.proc.poll() is not None:
                self._forget()
                if "Address already in use" in text:
                    raise _PortTaken(self.name)
                raise ClusterError(f"{self.name} exited with {self.proc.returncode} before "
                                   f"booting; {self.out}:\n{text[-3000:]}")
            time.sleep(0.1)  # polling a file another process writes
        self.stop()
        raise ClusterError(f"{self.name}: no 'boot success' within {BOOT_TIMEOUT:.0f} s "
                           f"({self.out})")

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def stop(self, timeout: float = STOP_TIMEOUT) -> None:
        """SIGTERM, wait up to ``timeout`` (its shutdown hook unregisters and flushes), then
        SIGKILL."""
        if self.proc is not None:
            stop_process(self.proc, timeout)
        self._forget()

    def kill(self) -> None:
        """SIGKILL: no shutdown hook, no unregistering (a crash)."""
        if self.proc is not None:
            if self.proc.poll() is None:
                self.proc.kill()
            self.proc.wait()
        self._forget()

    def _forget(self) -> None:
        (self.run_dir / f"{self.name}.pid").unlink(missing_ok=True)


class _PortTaken(Exception):
    """A JVM could not bind one of its ports (another process took it first)."""


@dataclass(eq=False)
class Broker:
    """A master broker of the cluster (brokerId 0).

    Attributes:
        name: ``broker-a``, ``broker-b``, ...
        addr: ``"127.0.0.1:port"``; it also listens on port-2 (VIP) and port+1 (HA).
    """

    name: str
    addr: str
    _jvm: _Jvm
    _argv: list[str]
    _cpus: set[int] | None

    @property
    def port(self) -> int:
        return int(self.addr.rsplit(":", 1)[1])

    @property
    def pid(self) -> int:
        """The JVM's pid (0 once stopped)."""
        return self._jvm.pid if self._jvm.alive() else 0

    @property
    def log_dir(self) -> Path:
        """Its RocketMQ logs (broker.log, store.log, ...)."""
        return self._jvm.run_dir / "home" / self._jvm.name / "logs" / "rocketmqlogs"

    def alive(self) -> bool:
        return self._jvm.alive()

    def stop(self, timeout: float = STOP_TIMEOUT) -> None:
        """Stop it as an operator does: SIGTERM, then wait (it unregisters from the name
        servers and flushes its store); SIGKILL after ``timeout``."""
        self._jvm.stop(timeout)

    def kill(self) -> None:
        """SIGKILL it (a crash: the name server drops it when its connection closes)."""
        self._jvm.kill()

    def restart(self) -> None:
        """Start it again after `stop` or `kill`, same ports and store; wait for its boot."""
        if self._jvm.alive():
            raise ClusterError(f"{self.name} is running")
        self._jvm.start(self._argv, self._cpus)
        self._jvm.wait_boot(time.monotonic() + BOOT_TIMEOUT)


@dataclass(frozen=True, kw_only=True)
class AclAccount:
    """One account of ``plain_acl.yml``; perms are ``DENY``, ``PUB``, ``SUB`` or ``PUB|SUB``."""

    access_key: str
    secret_key: str
    admin: bool = False
    default_topic_perm: str = "DENY"
    default_group_perm: str = "DENY"
    topic_perms: Mapping[str, str] = field(default_factory=dict)
    group_perms: Mapping[str, str] = field(default_factory=dict)

    def yaml(self) -> str:
        lines = [f"  - accessKey: {self.access_key}", f"    secretKey: {self.secret_key}",
                 "    whiteRemoteAddress:", f"    admin: {str(self.admin).lower()}",
                 f"    defaultTopicPerm: {self.default_topic_perm}",
                 f"    defaultGroupPerm: {self.default_group_perm}"]
        for key, perms in (("topicPerms", self.topic_perms), ("groupPerms", self.group_perms)):
            if perms:
                lines.append(f"    {key}:")
                lines += [f"      - {name}={perm}" for name, perm in perms.items()]
        return "\n".join(lines) + "\n"


@dataclass(frozen=True, kw_only=True)
class Acl:
    """``aclEnable=true`` and these accounts; ``admin`` signs the cluster's own requests.

    No address is whitelisted (a whitelisted address skips the signature check)."""

    admin: AclAccount
    others: Sequence[AclAccount] = ()

    def yaml(self) -> str:
        return ("# written by tests/rocketmq/cluster.py\nglobalWhiteRemoteAddresses: []\n"
                "accounts:\n" + "".join(a.yaml() for a in (self.admin, *self.others)))


@dataclass(frozen=True, kw_only=True)
class Tls:
    """TLS on the name server and brokers, in ``mode`` (TlsMode: ``enforcing`` refuses
    plain connections, ``permissive`` takes both), with this certificate and key (PEM, key
    in PKCS#8 as Netty reads it). ``client_auth``: ``none``, ``optional`` or ``require``
    (verified against ``ca_path``); the client certificate, if any, is what the brokers
    show the name server and what `RocketMQCluster.request` shows."""

    mode: str
    ca_path: Path
    cert_path: Path
    key_path: Path
    client_auth: str = "none"
    client_cert_path: Path | None = None
    client_key_path: Path | None = None

    def properties(self) -> str:
        """Return the ``tls.properties`` the JVMs read (the brokers' client side, to the
        name servers, verifies them against ``ca_path``)."""
        props: dict[str, object] = {
            "tls.test.mode.enable": "false",
            "tls.server.need.client.auth": self.client_auth,
            "tls.server.certPath": self.cert_path,
            "tls.server.keyPath": self.key_path,
            "tls.server.trustCertPath": self.ca_path,
            "tls.client.authServer": "true",
            "tls.client.trustCertPath": self.ca_path,
        }
        if self.client_cert_path is not None:
            props["tls.client.certPath"] = self.client_cert_path
            props["tls.client.keyPath"] = self.client_key_path
        return "".join(f"{k}={v}\n" for k, v in props.items())


class RocketMQCluster:
    """A name server and ``brokers`` master brokers (``broker-a``, ``broker-b``, ...) of
    cluster ``DefaultCluster`` on free ports of 127.0.0.1, for the length of a ``with``
    block (or `start` ... `close`).

    Attributes:
        name_servers: ``["127.0.0.1:port"]``.
        namesrv_addr: the same, ``;``-joined (Java's ``namesrvAddr``).
        run_dir: pid files, JVM output (``*.out``), logs (``home/``), stores.
        brokers: the `Broker` s, in name order.
        acl, tls: as given.

    ``broker_conf`` adds or overrides ``broker.conf`` lines; ``jvm_options`` replaces
    ``-Xms256m -Xmx512m``; ``cpus`` pins every JVM to those CPUs.
    """

    def __init__(self, *, brokers: int = 1, run_dir: Path | None = None,
                 home: Path | None = None, broker_conf: Mapping[str, str] | None = None,
                 jvm_options: Sequence[str] = DEFAULT_JVM, acl: Acl | None = None,
                 tls: Tls | None = None, cpus: set[int] | None = None,
                 keep_store: bool = False) -> None:
        if not 1 <= brokers <= 26:
            raise ValueError("brokers: 1 to 26 (broker-a to broker-z)")
        self.home = home or rocketmq_home()
        self._own_run_dir = run_dir is None  # removed at close, logs and all
        self.run_dir = run_dir or Path(tempfile.mkdtemp(prefix="rocketmq-run-"))
        self.run_dir.mkdir(parents=True, exist_ok=True)
        self.acl = acl
        self.tls = tls
        self.name_servers: list[str] = []
        self.brokers: list[Broker] = []
        self._broker_count = brokers
        self._broker_conf = dict(broker_conf or {})
        self._jvm_options = list(jvm_options)
        self._cpus = cpus
        self._keep_store = keep_store
        self._namesrv = _Jvm("namesrv", self.run_dir)
        self._names = itertools.count(1)
        self._admin_hook = (AclClientRPCHook(acl.admin.access_key, acl.admin.secret_key)
                            if acl is not None else None)
        self._ssl: ssl.SSLContext | None = None
        self._closed = False

    # ------------------------------------------------------------------ lifecycle

    def __enter__(self) -> Self:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    def namesrv_addr(self) -> str:
        return ";".join(self.name_servers)

    @property
    def namesrv_pid(self) -> int:
        return self._namesrv.pid if self._namesrv.alive() else 0

    def start(self) -> None:
        """Start the name server, then the brokers; return when all have booted.

        Raises:
            ClusterError: a JVM did not boot (its output is in the message); whatever had
                started is stopped.
        """
        atexit.register(self.close)
        try:
            self._start()
        except BaseException:
            self.close()
            raise

    def _start(self) -> None:
        cp = classpath(self.home)
        base = [*jvm_base_options(), *self._jvm_options]
        rmq_home = self._rocketmq_home_dir()
        tls_opts = []
        if self.tls is not None:
            self._ssl = ssl.create_default_context(cafile=str(self.tls.ca_path))
            if self.tls.client_cert_path is not None:
                self._ssl.load_cert_chain(self.tls.client_cert_path, self.tls.client_key_path)
            (rmq_home / "tls.properties").write_text(self.tls.properties())
            # TlsSystemConfig reads the mode and tls.enable from system properties only
            tls_opts = [f"-Dtls.server.mode={self.tls.mode}", "-Dtls.enable=true",
                        f"-Dtls.config.file={rmq_home / 'tls.properties'}"]

        def argv(user_home: Path, main: str, conf: Path) -> list[str]:
            return ["java", *base, f"-Duser.home={user_home}",
                    f"-Drocketmq.home.dir={rmq_home}", "-Drmq.bind.host=127.0.0.1",
                    *tls_opts, "-cp", cp, main, "-c", str(conf)]

        (self.run_dir / "home").mkdir(exist_ok=True)
        for _ in range(PORT_ATTEMPTS):
            port = free_port()
            conf = self.run_dir / "namesrv.conf"
            conf.write_text(f"listenPort={port}\n")
            self._namesrv.start(argv(self.run_dir / "home",
                                     "org.apache.rocketmq.namesrv.NamesrvStartup", conf),
                                self._cpus)
            try:
                self._namesrv.wait_boot(time.monotonic() + BOOT_TIMEOUT)
            except _PortTaken:
                continue
            self.name_servers = [f"127.0.0.1:{port}"]
            break
        else:
            raise ClusterError(f"the name server found no free port in {PORT_ATTEMPTS} tries")

        pending = list(range(self._broker_count))
        self.brokers = [Broker("", "", _Jvm(f"broker-{i}", self.run_dir), [], self._cpus)
                        for i in pending]  # placeholders until each starts: close() stops them
        for _ in range(PORT_ATTEMPTS):
            for i in pending:
                name = "broker-" + chr(ord("a") + i)
                port = free_port((-2, 0, 1))
                conf = self._write_broker_conf(i, name, port)
                jvm = _Jvm(f"broker-{i}", self.run_dir)
                args = argv(self.run_dir / "home" / f"broker-{i}",
                            "org.apache.rocketmq.broker.BrokerStartup", conf)
                self.brokers[i] = Broker(name, f"127.0.0.1:{port}", jvm, args, self._cpus)
                jvm.start(args, self._cpus)
            deadline = time.monotonic() + BOOT_TIMEOUT
            retry = []
            for i in pending:
                try:
                    self.brokers[i]._jvm.wait_boot(deadline)
                except _PortTaken:
                    retry.append(i)
            pending = retry
            if not pending:
                return
        raise ClusterError(f"broker(s) {pending} found no free ports in {PORT_ATTEMPTS} tries")

    def _rocketmq_home_dir(self) -> Path:
        """``rocketmq.home.dir``: links to the broker folder's conf files, our ACL file."""
        rmq_home = self.run_dir / "rocketmq-home"
        conf = rmq_home / "conf"
        conf.mkdir(parents=True, exist_ok=True)
        for f in (self.home / "conf").glob("logback_*.xml"):
            link = conf / f.name
            if not link.exists():
                link.symlink_to(f)
        if self.acl is not None:
            (conf / "plain_acl.yml").write_text(self.acl.yaml())
        return rmq_home

    def _write_broker_conf(self, i: int, name: str, port: int) -> Path:
        store = self.run_dir / f"store-{name}"
        store.mkdir(exist_ok=True)
        lines = {  # start.sh's broker.conf
            "brokerClusterName": "DefaultCluster", "brokerName": name, "brokerId": "0",
            "namesrvAddr": self.namesrv_addr, "brokerIP1": "127.0.0.1",
            "brokerIP2": "127.0.0.1", "listenPort": str(port), "haListenPort": str(port + 1),
            "storePathRootDir": str(store), "storePathCommitLog": str(store / "commitlog"),
            "autoCreateTopicEnable": "true", "autoCreateSubscriptionGroup": "true",
            "brokerRole": "ASYNC_MASTER", "flushDiskType": "ASYNC_FLUSH",
            "mappedFileSizeCommitLog": "67108864", "mappedFileSizeConsumeQueue": "600000",
            "maxHashSlotNum": "50000", "maxIndexNum": "200000", "deleteWhen": "04",
            "fileReservedTime": "48",
        }
        if self.acl is not None:
            lines["aclEnable"] = "true"
        lines.update(self._broker_conf)
        conf = self.run_dir / f"broker-{i}.conf"
        conf.write_text("".join(f"{k}={v}\n" for k, v in lines.items()))
        return conf

    def close(self) -> None:
        """Stop the brokers, then the name server (SIGTERM, SIGKILL after 30 s); remove the
        stores (the logs stay in a `run_dir` given to us; one we made is removed). Safe to
        call twice."""
        if self._closed:
            return
        self._closed = True
        atexit.unregister(self.close)
        for broker in reversed(self.brokers):
            broker.stop()
        self._namesrv.stop()
        if self._own_run_dir and not self._keep_store:
            shutil.rmtree(self.run_dir, ignore_errors=True)
        elif not self._keep_store:
            for store in self.run_dir.glob("store-broker-*"):
                shutil.rmtree(store, ignore_errors=True)

    def broker(self, name: str) -> Broker:
        """Return the broker called ``name``."""
        for b in self.brokers:
            if b.name == name:
                return b
        raise KeyError(name)

    # ------------------------------------------------------------------ admin

    def new_group(self, prefix: str = "g") -> str:
        """Return a consumer or producer group name no one has used (groups are created on
        first use: ``autoCreateSubscriptionGroup=true``)."""
        return self._unique(prefix)

    def new_topic(self, prefix: str = "t", queues: int = 4, *,
                  brokers: Sequence[str] | None = None) -> str:
        """Create a topic of a new name with ``queues`` read and write queues on each broker
        (or on those named), as ``mqadmin updateTopic -c``; return its name once the name
        server's route lists those brokers with those queues.

        Raises:
            ClusterError: a broker refused, or the route did not show it in 30 s.
        """
        topic = self._unique(prefix)
        self.create_topic(topic, queues, brokers=brokers)
        return topic

    def create_topic(self, topic: str, queues: int = 4, *,
                     brokers: Sequence[str] | None = None) -> None:
        """Create (or update) ``topic`` by name; see `new_topic`."""
        targets = [b for b in self.brokers if brokers is None or b.name in brokers]
        for b in targets:
            reply = self.request(b.addr, UPDATE_AND_CREATE_TOPIC, {
                "topic": topic, "defaultTopic": "TBW102", "readQueueNums": str(queues),
                "writeQueueNums": str(queues), "perm": str(PERM_READ_WRITE),
                "topicFilterType": "SINGLE_TAG", "topicSysFlag": "0", "order": "false"})
            if reply.code != SUCCESS:
                raise ClusterError(f"{b.name} refused to create {topic}: code {reply.code} "
                                   f"{reply.remark}")
        want = {b.name for b in targets}
        deadline = time.monotonic() + ROUTE_TIMEOUT
        while time.monotonic() < deadline:
            route = self.route(topic)
            have = {q["brokerName"] for q in (route or {}).get("queueDatas", [])
                    if q["writeQueueNums"] == queues and q["readQueueNums"] == queues}
            if want <= have:
                return
            time.sleep(0.05)  # the broker registers the topic with the name server itself
        raise ClusterError(f"topic {topic} not in the name server's route after "
                           f"{ROUTE_TIMEOUT:.0f} s (brokers {sorted(want)})")

    def route(self, topic: str) -> dict[str, Any] | None:
        """Return the name server's ``TopicRouteData`` of ``topic`` as a dict (standard JSON:
        ``acceptStandardJsonOnly``), or None when it has no route."""
        reply = self.request(self.name_servers[0], GET_ROUTEINFO_BY_TOPIC,
                             {"topic": topic, "acceptStandardJsonOnly": "true"})
        if reply.code == TOPIC_NOT_EXIST:
            return None
        if reply.code != SUCCESS or not reply.body:
            raise ClusterError(f"route of {topic}: code {reply.code} {reply.remark}")
        route: dict[str, Any] = json.loads(reply.body)
        return route

    def request(self, addr: str, code: int, ext_fields: Mapping[str, str],
                body: bytes | None = None, timeout: float = 10.0, *,
                credentials: tuple[str, str] | None = None) -> RemotingCommand:
        """Send one request to ``addr`` on a connection of its own and return the reply.

        Signed with ``credentials`` (access key, secret key), else by the admin account
        under ACL; over TLS (verified against the CA) when the cluster has it.
        """
        cmd = RemotingCommand.create_request(code, dict(ext_fields), body)
        hook = (AclClientRPCHook(*credentials) if credentials is not None
                else self._admin_hook)
        if hook is not None:
            hook.do_before_request(addr, cmd)
        host, port = addr.rsplit(":", 1)
        with socket.create_connection((host, int(port)), timeout) as raw, (
                self._ssl.wrap_socket(raw, server_hostname=host) if self._ssl is not None
                else raw) as sock:
            sock.sendall(encode_command(cmd))
            decoder = FrameDecoder()
            while (reply := decoder.next_command()) is None:
                data = sock.recv(65536)
                if not data:
                    raise ClusterError(f"{addr} closed the connection before replying to "
                                       f"request code {code}")
                decoder.feed(data)
            return reply

    def _unique(self, prefix: str) -> str:
        name = f"{prefix}-{os.getpid()}-{next(self._names)}-{uuid.uuid4().hex[:8]}"
        if not _NAME.match(name):
            raise ValueError(f"{prefix!r}: a topic or group name holds only letters, digits, "
                             "'_', '-', '%' and '|' (127 at most)")
        return name

    def describe(self) -> Iterator[str]:
        """Lines for a log: where everything listens."""
        yield f"name server {self.namesrv_addr} (pid {self.namesrv_pid})"
        for b in self.brokers:
            yield f"{b.name} {b.addr} (pid {b.pid})"
        yield f"run dir {self.run_dir}"


class RocketMQAclCluster(RocketMQCluster):
    """A cluster with ``aclEnable=true`` and two accounts in its ``plain_acl.yml``.

    Attributes:
        access_key, secret_key: the admin account (``admin: true``: everything).
        restricted_access_key, restricted_secret_key: an account that may do only what
            ``restricted_topics`` and ``restricted_groups`` say ({name: perm}, perm ``PUB``,
            ``SUB``, ``PUB|SUB`` or ``DENY``); ``DENY`` for every other topic and group, and
            no admin request (creating a topic, ...). Its topics exist (created at start):
            ``open_topic`` (PUB|SUB), ``pub_topic`` (PUB), ``sub_topic`` (SUB),
            ``denied_topic`` (DENY); its groups: ``restricted_group`` (SUB: consuming needs
            SUB on the group, which stands for its ``%RETRY%`` topic), ``denied_group``.
    """

    def __init__(self, **options: Any) -> None:
        tag = uuid.uuid4().hex[:8]
        self.open_topic, self.pub_topic, self.sub_topic, self.denied_topic = (
            f"acl-{what}-{tag}" for what in ("open", "pub", "sub", "denied"))
        self.restricted_group, self.denied_group = f"acl-group-{tag}", f"acl-denied-{tag}"
        self.restricted_topics = {self.open_topic: "PUB|SUB", self.pub_topic: "PUB",
                                  self.sub_topic: "SUB", self.denied_topic: "DENY"}
        self.restricted_groups = {self.restricted_group: "SUB", self.denied_group: "DENY"}
        admin = AclAccount(access_key="RocketMQAdmin", secret_key=uuid.uuid4().hex,
                           admin=True)
        restricted = AclAccount(access_key="RocketMQRestricted", secret_key=uuid.uuid4().hex,
                                topic_perms=self.restricted_topics,
                                group_perms=self.restricted_groups)
        super().__init__(acl=Acl(admin=admin, others=[restricted]), **options)
        self.access_key, self.secret_key = admin.access_key, admin.secret_key
        self.restricted_access_key = restricted.access_key
        self.restricted_secret_key = restricted.secret_key

    def _start(self) -> None:
        super()._start()
        for topic in self.restricted_topics:
            self.create_topic(topic)


class RocketMQTlsCluster(RocketMQCluster):
    """A cluster whose name server and brokers speak TLS (``tls.server.mode`` ``enforcing``:
    plain connections are refused; or ``permissive``: both), with a certificate for
    127.0.0.1 and localhost from a throwaway CA (trustme), written under ``run_dir/tls``.

    Attributes:
        ca_path: the CA certificate a client verifies them with.
        cert_path, key_path: the servers' certificate and key (PKCS#8).
        client_cert_path, client_key_path: a client certificate of the same CA
            (``client_auth="require"`` asks for one).
        tls_properties_path: the ``tls.properties`` the JVMs read (``-Dtls.config.file``).
        tls_mode: the mode.
    """

    def __init__(self, *, tls_mode: str = "enforcing", client_auth: str = "none",
                 **options: Any) -> None:
        import trustme
        from cryptography.hazmat.primitives import serialization

        super().__init__(**options)
        pki = self.run_dir / "tls"
        pki.mkdir(exist_ok=True)
        ca = trustme.CA()
        server = ca.issue_cert("127.0.0.1", "localhost")
        client = ca.issue_cert("client.example", common_name="client.example")
        self.ca_path = pki / "ca.pem"
        self.cert_path, self.key_path = pki / "server.pem", pki / "server.key"
        self.client_cert_path, self.client_key_path = pki / "client.pem", pki / "client.key"
        ca.cert_pem.write_to_path(str(self.ca_path))
        for leaf, cert, key in ((server, self.cert_path, self.key_path),
                                (client, self.client_cert_path, self.client_key_path)):
            leaf.cert_chain_pems[0].write_to_path(str(cert))
            # Netty reads PKCS#8 keys (trustme writes SEC1 "EC PRIVATE KEY")
            pem = serialization.load_pem_private_key(leaf.private_key_pem.bytes(), None)
            key.write_bytes(pem.private_bytes(serialization.Encoding.PEM,
                                              serialization.PrivateFormat.PKCS8,
                                              serialization.NoEncryption()))
        self.tls = Tls(mode=tls_mode, ca_path=self.ca_path, cert_path=self.cert_path,
                       key_path=self.key_path, client_auth=client_auth,
                       client_cert_path=self.client_cert_path,
                       client_key_path=self.client_key_path)
        self.tls_mode = tls_mode
        self.tls_properties_path = self.run_dir / "rocketmq-home" / "tls.properties"



def main() -> None:
    """``python -m tests.rocketmq.cluster [BROKERS]``: start a cluster of BROKERS brokers
    (default ``RMQ_BROKERS``, as start.sh, else 1), print where, wait for Ctrl-C (or
    SIGTERM), stop it."""
    import sys

    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))  # unwinds through close()
    brokers = int(sys.argv[1] if len(sys.argv) > 1 else os.environ.get("RMQ_BROKERS", "1"))
    t0 = time.monotonic()
    with RocketMQCluster(brokers=brokers) as cluster:
        print(f"started in {time.monotonic() - t0:.1f} s", *cluster.describe(), sep="\n",
              flush=True)
        try:
            signal.pause()
        except KeyboardInterrupt:
            pass


if __name__ == "__main__":
    main()
