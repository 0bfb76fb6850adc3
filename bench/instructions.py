"""Instructions per request, pure Python against compiled (or two checkouts): a count no
other load moves.

    .venv/bin/python bench/instructions.py                    # this checkout, both sides
    .venv/bin/python bench/instructions.py --tree ../other --requests 5000
    .venv/bin/python bench/instructions.py --a ../old-checkout     # two commits, pure Python
    .venv/bin/python bench/instructions.py --a ../old-checkout --only bus   # the bus's cases

CPU time per request (bench/rpc.py, bench/ab.py) moves with what else runs on the machine:
caches, frequency, the scheduler. The number of instructions a process runs for a request
does not. Each case runs one process under valgrind's callgrind (``--instr-atstart=no``),
the other natively: an echo server (`AsyncEchoProcessor`, or `EchoProcessor` on its pool)
and a client sending 128-byte requests with three ext fields through ``invoke_many``
(limit 64; the blocking `RemotingClient` or the trio client), or one ``invoke_sync`` at a
time, or 64 trio tasks or 64 threads each looping ``invoke_sync``, or a window of 64
``invoke_async`` calls whose callbacks let the next one go (the blocking client). After a
warm-up of 2,000 requests (and, for those, 2,000 more in that style) the measured process
turns counting on (``callgrind_control -i on`` on its own
pid, or on the server's), sends ``--requests`` more, turns it off, and the count divided by
the requests is the figure (user-space instructions of all its threads; the kernel's share,
the system calls, is not counted, and is the same on both sides). Each case runs once with
``TRIO_REMOTING_PURE_PYTHON=1`` and once compiled; the last column is compiled / pure. With
``--a`` each case runs on checkout A and on ``--tree``, both pure Python: the last column is
B / A, the A/B of two commits (a checkout is any directory holding ``codec``, ``processors``
and ``remoting``: a worktree, or ``git archive <commit> | tar -x -C <dir>``).
Requests are built in the measured part (``create_request``), as an application builds them.
The bus cases (``--only bus``) attach an `EventBus` to the server; the client process holds a
`BusClient` whose consumer at ``echo`` replies with the body, on a connection of its own, and
the caller: a `BusClient` sending or requesting one at a time (a quarter of the warm-up), or
a `TrioBusClient` with 64 tasks; a figure is per message (counted in the server, or in the
client process: caller and consumer together).
Needs valgrind (Debian: ``apt-get install valgrind``); a case takes about half a minute.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
WARM_UP = 2000
STOP_CODE = 999  # a oneway request of this code ends the server
COLLECTED = re.compile(r"Collected : (\d+)")

SERVER = """
import sys, trio
from processors import AsyncEchoProcessor, AsyncRequestProcessor, EchoProcessor
from remoting import ServerConfig, TrioRemotingServer

class Stop(AsyncRequestProcessor):
    def __init__(self, scope):
        self.scope = scope
    async def process_request(self, ctx, request):
        self.scope.cancel()

async def main():
    server = TrioRemotingServer(ServerConfig(bind_address="127.0.0.1"))
    server.register_default_processor(
        EchoProcessor() if sys.argv[2] == "pool" else AsyncEchoProcessor())
    if sys.argv[2] == "bus":
        from remoting.bus import EventBus
        EventBus().attach(server)
    async with trio.open_nursery() as nursery:
        server.register_processor(STOP_CODE, Stop(nursery.cancel_scope))
        port = await nursery.start(server.serve)
        with open(sys.argv[1] + ".tmp", "w") as f:
            f.write(str(port))
        import os; os.rename(sys.argv[1] + ".tmp", sys.argv[1])
trio.run(main)
""".replace("STOP_CODE", str(STOP_CODE))

CLIENT = """
import os, subprocess, sys, time
port_file, style, n, counted = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
while not os.path.exists(port_file):
    time.sleep(0.1)
addr = "127.0.0.1:" + open(port_file).read()
from remoting import ClientConfig, RemotingClient, RemotingCommand
counted = str(os.getpid()) if counted == "self" else counted

def requests(k):
    return [RemotingCommand.create_request(12, {"a": "1", "b": "2", "c": "3"}, b"x" * 128)
            for _ in range(k)]

def count(on):
    subprocess.run(["callgrind_control", "-i", "on" if on else "off", counted], check=True,
                   capture_output=True)

def share(k, i):  # the requests of the i-th of 64 callers, k in all
    return k // 64 + (i < k % 64)

def check(results):
    bad = [r for r in results if isinstance(r, BaseException)]
    assert not bad, bad[0]

if style.startswith("bus"):
    # a consumer of "echo" in this process, on a connection of its own (the server pushes
    # to it), and the caller's bus client on another
    from remoting.bus import BusClient, TrioBusClient
    call = style.split("-")[1]
    body = b"x" * 128

    with RemotingClient(ClientConfig()) as cc, BusClient(cc, addr) as consumer_bus:
        consumer_bus.consumer("echo", lambda message: message.reply(message.body))
        if style.endswith("-seq"):
            with RemotingClient(ClientConfig()) as c, BusClient(c, addr) as bus:
                one = bus.send if call == "send" else bus.request
                for _ in range(WARM_UP // 4):
                    one("echo", body)
                count(True)
                for _ in range(n):
                    one("echo", body)
                count(False)
                c.invoke_oneway(addr, RemotingCommand.create_request(STOP_CODE), 60.0)
        else:
            import trio
            import remoting

            async def main():
                async with remoting.open_client(ClientConfig()) as c:
                    bus = TrioBusClient(c, addr)
                    one = bus.send if call == "send" else bus.request

                    async def worker(k):
                        for _ in range(k):
                            await one("echo", body)

                    async def tasks(total):
                        async with trio.open_nursery() as nursery:
                            for _ in range(64):
                                nursery.start_soon(worker, total // 64)

                    await tasks(WARM_UP)
                    await trio.to_thread.run_sync(count, True)
                    await tasks(n)
                    await trio.to_thread.run_sync(count, False)
                    await bus.aclose()
                    await c.invoke_oneway(addr, RemotingCommand.create_request(STOP_CODE), 60.0)
            trio.run(main)
elif style.startswith("blocking"):
    import threading

    def threads(c, k):  # 64 threads sharing the client, each looping invoke_sync
        def worker(batch):
            for request in batch:
                check([c.invoke_sync(addr, request, 600.0)])
        workers = [threading.Thread(target=worker, args=(requests(share(k, i)),))
                   for i in range(64)]
        for t in workers:
            t.start()
        for t in workers:
            t.join()

    def window(c, k):  # invoke_async with a callback, 64 in flight
        room = threading.Semaphore(64)
        done = threading.Semaphore(0)
        failed = []

        def on_done(fut):
            if fut.cause is not None:
                failed.append(fut.cause)
            room.release()
            done.release()
        for request in requests(k):
            room.acquire()
            c.invoke_async(addr, request, 600.0, callback=on_done)
        for _ in range(k):
            done.acquire()
        check(failed)

    with RemotingClient(ClientConfig()) as c:
        check(c.invoke_many(addr, requests(WARM_UP), 600.0, limit=64))
        if style == "blocking-threads":
            threads(c, WARM_UP)
        elif style == "blocking-window":
            window(c, WARM_UP)
        count(True)
        if style == "blocking-seq":
            check([c.invoke_sync(addr, request, 600.0) for request in requests(n)])
        elif style == "blocking-threads":
            threads(c, n)
        elif style == "blocking-window":
            window(c, n)
        else:
            check(c.invoke_many(addr, requests(n), 600.0, limit=64))
        count(False)
        c.invoke_oneway(addr, RemotingCommand.create_request(STOP_CODE), 60.0)
else:
    import trio
    import remoting

    async def main():
        async with remoting.open_client(ClientConfig()) as c:

            async def tasks(k):  # 64 tasks, each looping invoke_sync
                async def worker(batch):
                    for request in batch:
                        check([await c.invoke_sync(addr, request, 600.0)])
                async with trio.open_nursery() as nursery:
                    for i in range(64):
                        nursery.start_soon(worker, requests(share(k, i)))

            async def calls(k):
                if style == "trio-tasks":
                    await tasks(k)
                elif style == "trio-seq":
                    check([await c.invoke_sync(addr, request, 600.0)
                           for request in requests(k)])
                else:
                    check(await c.invoke_many(addr, requests(k), 600.0, limit=64))

            check(await c.invoke_many(addr, requests(WARM_UP), 600.0, limit=64))
            await calls(WARM_UP)
            await trio.to_thread.run_sync(count, True)
            await calls(n)
            await trio.to_thread.run_sync(count, False)
            await c.invoke_oneway(addr, RemotingCommand.create_request(STOP_CODE), 60.0)
    trio.run(main)
""".replace("STOP_CODE", str(STOP_CODE)).replace("WARM_UP", str(WARM_UP))

CASES = [  # (name, the process counted, processor, client style)
    ("server, async processor (blocking client)", "server", "async", "blocking"),
    ("server, pool processor (blocking client)", "server", "pool", "blocking"),
    ("client, blocking invoke_many (async processor)", "client", "async", "blocking"),
    ("client, trio invoke_many (async processor)", "client", "async", "trio"),
    ("client, blocking invoke_sync, one at a time", "client", "async", "blocking-seq"),
    ("client, trio 64 tasks x invoke_sync", "client", "async", "trio-tasks"),
    ("client, trio invoke_sync, one at a time", "client", "async", "trio-seq"),
    ("client, blocking 64 threads x invoke_sync", "client", "async", "blocking-threads"),
    ("client, blocking invoke_async window, callbacks", "client", "async",
     "blocking-window"),
    # the event bus: a caller's sends or requests to a consumer in another connection (the
    # client process holds both; "client" counts the two together)
    ("server, bus send, one at a time", "server", "bus", "bus-send-seq"),
    ("server, bus request, one at a time", "server", "bus", "bus-request-seq"),
    ("server, bus send, 64 trio tasks", "server", "bus", "bus-send-pipelined"),
    ("server, bus request, 64 trio tasks", "server", "bus", "bus-request-pipelined"),
    ("caller and consumer, bus send, 64 trio tasks", "client", "bus", "bus-send-pipelined"),
    ("caller and consumer, bus request, 64 trio tasks", "client", "bus",
     "bus-request-pipelined"),
]


def count_case(tree: Path, pure: bool, counted: str, processor: str, style: str,
               requests: int) -> float:
    """Run one case; return the counted process's instructions per request."""
    env = {k: v for k, v in os.environ.items() if k != "TRIO_REMOTING_PURE_PYTHON"}
    env["PYTHONPATH"] = str(tree)
    if pure:
        env["TRIO_REMOTING_PURE_PYTHON"] = "1"
    with tempfile.TemporaryDirectory(prefix="instructions-") as tmp:
        port_file = os.path.join(tmp, "port")
        grind = ["valgrind", "--tool=callgrind", "--instr-atstart=no",
                 f"--callgrind-out-file={tmp}/callgrind.out"]
        server_cmd = [sys.executable, "-c", SERVER, port_file, processor]
        # run in the temporary directory: ``-c`` puts the working directory first on
        # sys.path, where a checkout's own packages would hide ``tree``'s
        server = subprocess.Popen(grind + server_cmd if counted == "server" else server_cmd,
                                  env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                                  text=True, cwd=tmp)
        try:
            target = str(server.pid) if counted == "server" else "self"
            client_cmd = [sys.executable, "-c", CLIENT, port_file, style, str(requests), target]
            client = subprocess.run(grind + client_cmd if counted == "client" else client_cmd,
                                    env=env, capture_output=True, text=True, timeout=1800,
                                    cwd=tmp)
            _, server_err = server.communicate(timeout=300)
        finally:
            if server.poll() is None:
                server.kill()
                server.wait()
        if client.returncode:
            raise RuntimeError(f"the client failed:\n{client.stderr[-3000:]}")
        found = COLLECTED.search(server_err if counted == "server" else client.stderr)
        if found is None:
            raise RuntimeError("callgrind reported no count:\n"
                               + (server_err if counted == "server" else client.stderr)[-3000:])
        return int(found[1]) / requests


def chosen(only: str | None) -> list[tuple[str, ...]]:
    """The cases ``--only`` picks: the one named exactly so, else those whose name contains
    it (every case without it)."""
    if only is None:
        return list(CASES)
    exact = [case for case in CASES if case[0] == only]
    return exact or [case for case in CASES if only in case[0]]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--tree", type=Path, default=HERE.parent,
                    help="the checkout whose library runs (default: this one; its compiled "
                         "fast path must be built there: python hatch_build.py)")
    ap.add_argument("--a", type=Path, default=None,
                    help="another checkout: count it against --tree, both pure Python (an A/B "
                         "of two commits), instead of --tree's pure Python against compiled")
    ap.add_argument("--requests", type=int, default=5000)
    ap.add_argument("--only", default=None,
                    help="a case's full name: that case alone; else the cases whose name "
                         "contains this (e.g. 'bus'; 'one at a time' also picks bus cases)")
    args = ap.parse_args()
    cases = chosen(args.only)
    if not cases:
        ap.error(f"--only {args.only!r} names no case; the cases are: "
                 + "; ".join(repr(case[0]) for case in CASES))
    if shutil.which("valgrind") is None or shutil.which("callgrind_control") is None:
        ap.error("needs valgrind and callgrind_control (Debian: apt-get install valgrind)")
    tree = args.tree.resolve()
    started = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    if args.a is not None:
        a = args.a.resolve()
        print(f"A = {a}, B = {tree}, both pure Python; {started}, {args.requests:,} requests "
              f"after {WARM_UP:,}\n")
        print(f"| {'instructions per request':<48} | {'A':>8} | {'B':>8} |   B/A |")
        print(f"|{'-' * 50}|{'-' * 10}|{'-' * 10}|-------|")
        for name, counted, processor, style in cases:
            ia, ib = (count_case(side, True, counted, processor, style, args.requests)
                      for side in (a, tree))
            print(f"| {name:<48} | {ia:>8,.0f} | {ib:>8,.0f} | {ib / ia:.3f}x |", flush=True)
        return 0
    status = subprocess.run([sys.executable, "-c", "import codec._native as n; print(n.STATUS)"],
                            env={**os.environ, "PYTHONPATH": str(tree)}, capture_output=True,
                            text=True, cwd=tree).stdout.strip()
    if not status.startswith("compiled"):
        ap.error(f"the compiled fast path is not in use there: {status}")
    print(f"{tree}, {started}, {args.requests:,} requests after {WARM_UP:,}\n")
    print(f"| {'instructions per request':<48} | {'pure':>8} | {'compiled':>8} | ratio |")
    print(f"|{'-' * 50}|{'-' * 10}|{'-' * 10}|-------|")
    for name, counted, processor, style in cases:
        pure, compiled = (count_case(tree, side, counted, processor, style, args.requests)
                          for side in (True, False))
        print(f"| {name:<48} | {pure:>8,.0f} | {compiled:>8,.0f} | {compiled / pure:.2f}x |",
              flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
