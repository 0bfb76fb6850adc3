"""Built-in echo processors: reply SUCCESS with the request's body and ext fields."""

from __future__ import annotations

from typing import TYPE_CHECKING

from codec import RemotingCommand, ResponseCode

from ._base import AsyncRequestProcessor, RequestProcessor

if TYPE_CHECKING:
    from ._base import RequestContext

__all__ = ["AsyncEchoProcessor", "EchoProcessor"]


def echo_response(request: RemotingCommand) -> RemotingCommand:
    """Return a SUCCESS response carrying the request's body and ext fields."""
    response = RemotingCommand.create_response(ResponseCode.SUCCESS)
    response.body = request.body
    response.ext_fields = request.ext_fields
    response.serialize_type = request.serialize_type
    return response


class EchoProcessor(RequestProcessor):
    """Echo on a thread pool."""

    def process_request(self, ctx: RequestContext, request: RemotingCommand) -> RemotingCommand:
        return echo_response(request)


class AsyncEchoProcessor(AsyncRequestProcessor):
    """Echo on the event loop."""

    async def process_request(
        self, ctx: RequestContext, request: RemotingCommand
    ) -> RemotingCommand:
        return echo_response(request)
