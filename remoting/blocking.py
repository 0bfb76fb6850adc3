"""The blocking faces: `RemotingClient` and `RemotingServer` for threads, scripts and Spark.

Each runs the trio core in one daemon thread and forwards calls into it. Calling a blocking
method from the loop's own thread would deadlock, so it raises `RuntimeError`; trio code uses
`remoting.open_client` / `open_server` instead.
"""

from __future__ import annotations

from ._faces._blocking import RemotingClient as RemotingClient
from ._faces._blocking_server import RemotingServer as RemotingServer

__all__ = ["RemotingClient", "RemotingServer"]
