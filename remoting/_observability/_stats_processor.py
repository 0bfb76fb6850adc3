"""The built-in statistics processor: answers a server's `statistics()` as JSON."""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Final

import orjson

from codec import RemotingCommand, ResponseCode
from processors import AsyncRequestProcessor

if TYPE_CHECKING:
    from collections.abc import Callable

    from processors import RequestContext

    from ._statistics import EndpointStatistics

__all__ = ["STATS_REQUEST_CODE", "StatsProcessor"]

STATS_REQUEST_CODE: Final = 32_000  # ours; below int16's limit, far from RocketMQ's codes


class StatsProcessor(AsyncRequestProcessor):
    """Reply with the JSON of ``source()`` (a server's ``statistics``); used by ``remoting stats``.

    Register it with ``server.register_processor(STATS_REQUEST_CODE, StatsProcessor(
    server.statistics))``; protect it with the ACL hook if the numbers are sensitive. With
    ``bus=event_bus.statistics`` (an `EventBus` attached to the server), the reply has the
    bus's counters too, under ``"bus"``; with ``queue=`` (a function returning a queue
    service's `QueueStatistics`, ``remoting queue`` gives one), its topics, under
    ``"queue"``.
    """

    def __init__(self, source: object, *, bus: Callable[[], object] | None = None,
                 queue: Callable[[], object] | None = None) -> None:
        self._source = source
        self._sections = {name: read for name, read in (("bus", bus), ("queue", queue))
                          if read is not None}

    async def process_request(self, ctx: RequestContext, request: RemotingCommand
                              ) -> RemotingCommand:
        stats: EndpointStatistics = self._source()  # type: ignore[operator]
        fields = dataclasses.asdict(stats)
        for name, read in self._sections.items():
            fields[name] = dataclasses.asdict(read())  # type: ignore[call-overload]
        response = RemotingCommand.create_response(ResponseCode.SUCCESS)
        response.body = orjson.dumps(fields, option=orjson.OPT_NON_STR_KEYS | orjson.OPT_SORT_KEYS)
        return response
