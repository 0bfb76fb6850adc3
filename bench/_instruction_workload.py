"""The workload bench/instructions.py counts: one process, a trio server with the async echo
processor and one client on 127.0.0.1, ``N`` requests of 128 bytes in one style.

    python bench/_instruction_workload.py CASE N

CASE: ``trio-many`` (trio client, `invoke_many`, 64 in flight), ``trio-seq`` (trio client,
`invoke_sync` one at a time), ``blocking-many`` and ``blocking-seq`` (the blocking client,
from the main thread, the server's loop in a thread of its own). The library comes from
``PYTHONPATH`` (the checkout measured).
"""

from __future__ import annotations

import logging
import os
import sys
import threading

# Python put this script's directory first on sys.path, where bench/queue.py and bench/codec.py
# would shadow the standard library's queue (trio imports it) and the real codec: it goes last
_HERE = os.path.dirname(os.path.abspath(__file__))
sys.path[:] = [p for p in sys.path if os.path.abspath(p or os.curdir) != _HERE] + [_HERE]

import trio  # noqa: E402

CODE = 100
BODY = b"x" * 128
WINDOW = 64
TIMEOUT = 120.0  # valgrind runs the process ~50x slower than usual


async def _serve(ready: list[str], stop: trio.Event,
                 started: threading.Event | None = None) -> None:
    """Serve until ``stop`` is set; put the address in ``ready`` (and set ``started``)."""
    from processors import AsyncEchoProcessor
    from remoting import ServerConfig, TrioRemotingServer

    server = TrioRemotingServer(ServerConfig(bind_address="127.0.0.1"))
    server.register_default_processor(AsyncEchoProcessor())
    async with trio.open_nursery() as nursery:
        port = await nursery.start(server.serve)
        ready.append(f"127.0.0.1:{port}")
        if started is not None:
            started.set()
        await stop.wait()
        nursery.cancel_scope.cancel()


async def _trio_case(case: str, n: int) -> None:
    import remoting
    from remoting import RemotingCommand

    create = RemotingCommand.create_request
    async with trio.open_nursery() as nursery:
        ready: list[str] = []
        stop = trio.Event()
        nursery.start_soon(_serve, ready, stop)
        while not ready:
            await trio.lowlevel.checkpoint()
        addr = ready[0]
        async with remoting.open_client() as client:
            if case == "trio-many":
                requests = [create(CODE, body=BODY) for _ in range(n)]
                for reply in await client.invoke_many(addr, requests, TIMEOUT, limit=WINDOW):
                    assert not isinstance(reply, Exception)
                    assert reply.body == BODY
            else:
                for _ in range(n):
                    reply = await client.invoke_sync(addr, create(CODE, body=BODY), TIMEOUT)
                    assert reply.body == BODY
        stop.set()


def _blocking_case(case: str, n: int) -> None:
    from remoting import RemotingClient, RemotingCommand

    create = RemotingCommand.create_request
    ready: list[str] = []
    started = threading.Event()
    token: list[trio.lowlevel.TrioToken] = []
    stop_holder: list[trio.Event] = []

    async def server_loop() -> None:
        token.append(trio.lowlevel.current_trio_token())
        stop_holder.append(trio.Event())
        await _serve(ready, stop_holder[0], started)

    thread = threading.Thread(target=trio.run, args=(server_loop,), daemon=True)
    thread.start()
    if not started.wait(TIMEOUT):
        raise RuntimeError("the server did not start")
    with RemotingClient() as client:
        if case == "blocking-many":
            requests = [create(CODE, body=BODY) for _ in range(n)]
            for reply in client.invoke_many(ready[0], requests, TIMEOUT, limit=WINDOW):
                assert not isinstance(reply, Exception)
                assert reply.body == BODY
        else:
            for _ in range(n):
                reply = client.invoke_sync(ready[0], create(CODE, body=BODY), TIMEOUT)
                assert reply.body == BODY
    trio.from_thread.run_sync(stop_holder[0].set, trio_token=token[0])
    thread.join(TIMEOUT)


def main() -> None:
    case, n = sys.argv[1], int(sys.argv[2])
    logging.getLogger("remoting").setLevel(logging.WARNING)
    if case.startswith("trio-"):
        trio.run(_trio_case, case, n)
    elif case.startswith("blocking-"):
        _blocking_case(case, n)
    else:
        raise SystemExit(f"unknown case {case!r}")


if __name__ == "__main__":
    main()
