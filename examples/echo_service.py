"""A processor factory for ``remoting serve``: ``remoting serve examples.echo_service:processors``.

Code 1 echoes on a thread pool, code 2 on the event loop; every other code is echoed too.
"""

from __future__ import annotations

from processors import AsyncEchoProcessor, EchoProcessor


def processors() -> dict[int | None, EchoProcessor | AsyncEchoProcessor]:
    """Return the processors to register, by request code (None: the default processor)."""
    return {1: EchoProcessor(), 2: AsyncEchoProcessor(), None: AsyncEchoProcessor()}
