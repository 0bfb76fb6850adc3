"""``remoting --help`` says which commands log at info by default (the servers: a line per
connection) and that every other one, ``queue pub``, ``tail`` and ``stats`` included, logs
warnings only; the levels the commands run at are those. (That the queue server's info
lines are per connection, and gone at ``--log-level warning``, is checked on a real one in
tests/queue/test_the_queue_server_says_what_it_keeps_and_exports_metrics.py.)"""

from __future__ import annotations

import pytest

from remoting.cli import COMMANDS, build_parser


def test_the_help_names_the_commands_that_log_at_info() -> None:
    text = " ".join(build_parser().format_help().split())
    servers = [command.name for command in COMMANDS if command.log_level == "info"]
    assert servers == ["serve", "queue", "bus"]
    assert ("default: info for the servers (serve, queue, bus), whose info events include a "
            "line per connection opened and closed; warning for the other commands, queue "
            "pub, tail and stats included") in text


@pytest.mark.parametrize(("argv", "level"), [
    (["serve", "m:f"], "info"), (["queue"], "info"), (["bus"], "info"),
    (["ping", "h:1"], "warning"), (["stats", "h:1"], "warning"),
    (["queue", "pub", "h:1", "t", "x"], "warning"), (["queue", "tail", "h:1", "t"], "warning"),
    (["queue", "stats", "h:1"], "warning")])
def test_each_command_runs_at_the_level_the_help_gives(argv: list[str], level: str) -> None:
    args = build_parser().parse_args(argv)
    assert args.log_level is None and args._log_level == level
