"""The built-in statistics processor: answers a server's `statistics()` as JSON."""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Final

import orjson

from codec import RemotingCommand, ResponseCode
from processors import AsyncRequestProcessor

if TYPE_CHECKING:
    from processors import RequestContext

    from ._statistics import EndpointStatistics

__all__ = ["STATS_REQUEST_CODE", "StatsProcessor"]

STATS_REQUEST_CODE: Final = 32_000  # ours; below int16's limit, far from RocketMQ's codes


class StatsProcessor(AsyncRequestProcessor):
    """Reply with the JSON of ``source()`` (a server's ``statistics``); used by ``remoting stats``.

    Register it with ``server.register_processor(STATS_REQUEST_CODE, StatsProcessor(
    server.statistics))``; protect it with the ACL hook if the numbers are sensitive.
    """

    __module__ = "remoting"

    def __init__(self, source: object) -> None:
        self._source = source

    async def process_request(self, ctx: RequestContext, request: RemotingCommand
                              ) -> RemotingCommand:
        stats: EndpointStatistics = self._source()  # type: ignore[operator]
        response = RemotingCommand.create_response(ResponseCode.SUCCESS)
        response.body = orjson.dumps(dataclasses.asdict(stats),
                                     option=orjson.OPT_NON_STR_KEYS | orjson.OPT_SORT_KEYS)
        return response
