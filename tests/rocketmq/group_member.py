"""A push consumer in a process of its own, for the group tests: ``python -m
tests.rocketmq.group_member NAMESRV GROUP TOPIC``. It prints one JSON line per message
(``{"id": msg_id}``) and, every 0.1 s, its assignment (``{"queues": [[broker, id], ...]}``);
SIGTERM shuts it down gracefully (offsets committed), SIGKILL does not."""

from __future__ import annotations

import json
import signal
import sys
import threading

from remoting.rocketmq import Message, PushConsumer


def main() -> None:
    namesrv, group, topic = sys.argv[1:4]
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    out = sys.stdout
    lock = threading.Lock()

    def handle(message: Message) -> None:
        with lock:
            out.write(json.dumps({"id": message.msg_id}) + "\n")
            out.flush()

    with PushConsumer(namesrv, group, topic, handler=handle, consume_from="first") as consumer:
        while not stop.wait(0.1):
            queues = [[q.broker_name, q.queue_id] for q in consumer.assignment()]
            with lock:
                out.write(json.dumps({"queues": queues}) + "\n")
                out.flush()
    with lock:
        out.write(json.dumps({"stopped": True}) + "\n")
        out.flush()


if __name__ == "__main__":
    main()
