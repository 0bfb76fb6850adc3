"""A process with one consumer, for the tests that spread consumers over processes.

    python -m tests.remoting.bus.consumer_process HOST:PORT ADDRESS NAME

Registers a consumer at ADDRESS on the bus server, prints ``ready NAME``, then counts the
messages it handles; a message whose body is ``count?`` (a publish, so it reaches every
process after what was sent before it) makes it print ``count NAME N``. Runs until killed.
"""

from __future__ import annotations

import sys
import threading

from remoting import RemotingClient
from remoting.bus import BusClient, Message


def main() -> None:
    addr, address, name = sys.argv[1:4]
    handled = 0

    def handler(message: Message) -> None:
        nonlocal handled
        if message.body == b"count?":
            print(f"count {name} {handled}", flush=True)
        else:
            handled += 1

    with RemotingClient() as client, BusClient(client, addr) as bus:
        bus.consumer(address, handler)
        print(f"ready {name}", flush=True)
        threading.Event().wait()


if __name__ == "__main__":
    main()
