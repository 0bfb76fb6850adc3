"""The reply to one request: a processor's response stamped and encoded, and the response that
stands for a failure.

`encode_reply` turns a processor's response into the frame that answers its request (or a
SYSTEM_ERROR reply saying why it cannot be sent); `failure` is the answer to a processor,
hook or interceptor that raised (RocketMQ's ``exceptionSimpleDesc`` remark, logged once as
``processor.failed``); `error_reply` a refusal's. Sync, no I/O: used on the loop and on pool
threads alike.
"""

from __future__ import annotations

import traceback
from typing import TYPE_CHECKING, Final, TypeAlias

from codec import FLAG_ONEWAY, CodecError, RemotingCommand, ResponseCode, encode_frame_parts

from ..._checks import request_code
from ..._hooks import AbortProcessError
from ..._log import log

if TYPE_CHECKING:
    from codec import EncodedFrame

__all__ = [
    "FAILURES",
    "Reply",
    "encode_reply",
    "error_reply",
    "exception_simple_desc",
    "failure",
]

# The frame to send (None: already sent), and its response code.
Reply: TypeAlias = "tuple[EncodedFrame | None, int]"

# What a processor, hook or interceptor may raise that becomes a SYSTEM_ERROR reply. Not
# KeyboardInterrupt (Ctrl-C stops the server) nor trio.Cancelled (shutdown): they propagate.
# A processor's own GeneratorExit is turned into a RuntimeError where it is caught.
FAILURES: Final = (Exception, SystemExit)

def exception_simple_desc(exc: BaseException) -> str:
    """Describe ``exc`` like RocketMQ's UtilAll.exceptionSimpleDesc: type, message, where.

    Never raises, even for an exception whose ``__str__`` does.
    """
    try:
        message = str(exc)
    except Exception:
        message = "<its message could not be made>"
    desc = f"{type(exc).__module__}.{type(exc).__qualname__}: {message}"
    frames = traceback.extract_tb(exc.__traceback__)
    if frames:
        last = frames[-1]
        desc += f", {last.name}({last.filename.rsplit('/', 1)[-1]}:{last.lineno})"
    return desc


def error_reply(request: RemotingCommand, code: int, remark: str) -> Reply | None:
    """Return the encoded error response to ``request``, or None for a oneway request."""
    if request.flag & FLAG_ONEWAY:
        return None
    return encode_reply(request, RemotingCommand.create_response(code, remark))


def encode_reply(request: RemotingCommand, response: object, limit: int = 0x7FFFFFFF + 4,
                 header_limit: int = 0xFFFFFF) -> Reply | None:
    """Stamp ``response`` as the answer to ``request`` and encode it (None for oneway).

    A response that is not a `RemotingCommand`, cannot be encoded, or would make a frame
    over ``limit`` bytes or a header over ``header_limit`` bytes (the peer's
    ``max_frame_bytes`` and ``max_header_bytes``), becomes a SYSTEM_ERROR reply saying so
    (logged once as ``processor.bad_response``).
    """
    if request.flag & FLAG_ONEWAY:  # is_oneway, inlined: this runs per request
        return None
    if not isinstance(response, RemotingCommand):
        problem = f"processor returned {type(response).__name__}, not a RemotingCommand"
    else:
        response.opaque = request.opaque
        response.flag |= 1
        response.serialize_type = request.serialize_type  # mirror the request, as 4.9
        try:
            return encode_frame_parts(response, limit, header_limit), response.code
        except CodecError as exc:
            problem = f"response could not be encoded: {exc}"
        except (TypeError, ValueError, AttributeError) as exc:  # e.g. a str body
            problem = f"response could not be encoded: {type(exc).__name__}: {exc}"
    log.error("processor.bad_response", opaque=request.opaque, code=request.code,
              error=problem)
    fallback = RemotingCommand.create_response(ResponseCode.SYSTEM_ERROR, problem)
    fallback.opaque = request.opaque
    fallback.serialize_type = request.serialize_type
    return encode_frame_parts(fallback), ResponseCode.SYSTEM_ERROR


def failure(request: RemotingCommand, exc: BaseException) -> RemotingCommand:
    """Return the response to a request whose processor or hook raised ``exc`` (logged once
    as ``processor.failed``; `AbortProcessError` answers with its own code and remark when
    they fit the wire). Never raises: the reply to a failure must not fail in turn."""
    if isinstance(exc, AbortProcessError) and _abort_fits(exc):
        return RemotingCommand.create_response(exc.code, exc.remark)
    try:
        log.error("processor.failed", opaque=request.opaque, code=request.code, exc_info=exc)
    except Exception:  # a logging handler that cannot format this exception
        pass
    return RemotingCommand.create_response(ResponseCode.SYSTEM_ERROR, exception_simple_desc(exc))


def _abort_fits(exc: AbortProcessError) -> bool:
    """Whether an `AbortProcessError`'s code is an int32 and its remark a str or None."""
    try:
        request_code(exc.code)  # a response code follows the same wire rule
    except (TypeError, ValueError):
        return False
    return exc.remark is None or isinstance(exc.remark, str)
