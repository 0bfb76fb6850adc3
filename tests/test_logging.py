"""The library logs like a library: through the standard library, configuring nothing,
writing nothing to stdout; and every event it can log is in docs/logging.md."""

from __future__ import annotations

import ast
import logging
import re
import subprocess
import sys
from collections.abc import MutableMapping
from pathlib import Path
from typing import Any

import pytest
import structlog
import trio

from codec import RemotingCommand
from processors import AsyncEchoProcessor
from remoting import open_client, open_server

ROOT = Path(__file__).resolve().parents[1]
LEVELS = {"debug", "info", "warning", "error", "critical"}


def emitted_events() -> set[str]:
    """Every event name passed to a logging call (``log.info("x", ...)``) in the library."""
    names: set[str] = set()
    for path in (ROOT / "remoting").rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
                    and node.func.attr in LEVELS and node.args
                    and isinstance(node.args[0], ast.Constant)
                    and isinstance(node.args[0].value, str)
                    and re.fullmatch(r"[a-z_]+\.[a-z_]+", node.args[0].value)):
                names.add(node.args[0].value)
    return names


def documented_events() -> set[str]:
    """The event names in the first column of docs/logging.md's catalogue."""
    text = (ROOT / "docs" / "logging.md").read_text()
    catalogue = text[text.index("## Event catalogue"):]
    first_cells = re.findall(r"^\| ([^|]+) \|", catalogue, re.M)
    return {name for cell in first_cells for name in re.findall(r"`([a-z_]+\.[a-z_]+)`", cell)}


def test_every_event_logged_in_the_code_is_in_the_catalogue() -> None:
    emitted = emitted_events()
    assert len(emitted) > 20  # the scan found the calls
    assert emitted - documented_events() == set()
    assert {"connection.failed", "request.failed", "inbox.failed"} <= emitted


def test_the_catalogue_lists_no_event_the_code_does_not_log() -> None:
    assert documented_events() - emitted_events() == set()


def test_with_no_configuration_nothing_reaches_stdout_and_info_is_quiet() -> None:
    program = (ROOT / "README.md").read_text().split("```python\n", 1)[1].split("```", 1)[0]
    result = subprocess.run([sys.executable, "-c", program], cwd=ROOT, capture_output=True,
                            text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    assert result.stdout == ""
    assert result.stderr == ""  # info events are filtered by the standard library's default


async def test_an_application_controls_the_level_through_logging() -> None:
    logging.getLogger("remoting").setLevel(logging.ERROR)
    records: list[logging.LogRecord] = []

    class Keep(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            records.append(record)

    handler = Keep()
    logging.getLogger("remoting").addHandler(handler)
    try:
        async with open_server() as server:
            server.register_processor(1, AsyncEchoProcessor())
            async with open_client() as client:
                await client.invoke_sync(f"127.0.0.1:{server.port}",
                                         RemotingCommand.create_request(1), 5)
    finally:
        logging.getLogger("remoting").removeHandler(handler)
    assert records == []  # server.started, connection.opened...: all below ERROR


async def test_a_structlog_application_receives_structured_events() -> None:
    rendered: list[MutableMapping[str, Any]] = []

    def keep(_: object, __: str, event: MutableMapping[str, Any]) -> str:
        rendered.append(event)
        return "ok"

    handler = logging.Handler()
    handler.setFormatter(structlog.stdlib.ProcessorFormatter(processors=[
        structlog.stdlib.ProcessorFormatter.remove_processors_meta,
        structlog.stdlib.add_log_level,
        keep,
    ]))

    def emit(record: logging.LogRecord) -> None:
        handler.format(record)

    handler.emit = emit  # type: ignore[method-assign]
    logger = logging.getLogger("remoting")
    logger.addHandler(handler)
    logger.setLevel(logging.INFO)
    try:
        async with open_server() as server:
            port = server.port
    finally:
        logger.removeHandler(handler)
    started = [e for e in rendered if e["event"] == "server.started"]
    assert started == [{"event": "server.started", "port": port, "bind": "127.0.0.1",
                        "level": "info"}]


def test_a_plain_formatter_prints_the_event_and_its_fields(
    caplog: pytest.LogCaptureFixture,
) -> None:
    async def main() -> None:
        async with open_server():
            pass

    with caplog.at_level(logging.INFO, logger="remoting"):
        trio.run(main)
    line = next(r.getMessage() for r in caplog.records
                if r.getMessage().startswith("server.started"))
    assert re.fullmatch(r"server\.started port=\d+ bind='127\.0\.0\.1'", line)
