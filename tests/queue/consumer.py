"""A consumer process for the tests: subscribes to a channel and, for every message, prints
``got <offset> <attempts>`` (flushed) and acknowledges it, until it is killed."""

from __future__ import annotations

import sys

from remoting import RemotingClient
from remoting.queue import QueueClient


def main() -> None:
    addr, topic, channel, credits = sys.argv[1:5]
    with RemotingClient() as client:
        q = QueueClient(client)
        with q.subscribe(addr, topic, channel, credits=int(credits)) as sub:
            print("subscribed", flush=True)
            for msg in sub:
                print(f"got {msg.offset} {msg.attempts}", flush=True)
                msg.ack()


if __name__ == "__main__":
    main()
