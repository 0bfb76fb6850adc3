"""The RocketMQ client's exceptions: one root, `RocketMQError`, under `remoting.RemotingError`.

Transport failures (`RemotingConnectError`, `RemotingTimeoutError`...) reach the caller as
they are where one call failed; a send that tried several brokers raises `SendFailedError`
with each attempt's error.
"""

from __future__ import annotations

from codec import ResponseCode

from .._errors import RemotingError

__all__ = ["MQBrokerError", "MalformedResponseError", "RocketMQError", "SendFailedError",
           "TopicRouteError"]


class RocketMQError(RemotingError):
    """A RocketMQ client operation failed (the root of `remoting.rocketmq`'s errors)."""


class MQBrokerError(RocketMQError):
    """A broker or name server answered with an error code (Java's MQBrokerException).

    Nothing was done by the request that got it. ``code`` is RocketMQ's response code
    (``NO_PERMISSION`` 16, ``TOPIC_NOT_EXIST`` 17, ``SUBSCRIPTION_GROUP_NOT_EXIST`` 26...),
    ``remark`` the server's reason.
    """

    def __init__(self, code: int, remark: str | None, addr: str | None = None) -> None:
        self.code = code
        self.remark = remark
        name = ResponseCode.name_of(code)
        label = f"{code} ({name})" if name else str(code)
        where = f"{addr} answered" if addr else "answered"
        super().__init__(f"{where} code {label}: {(remark or '').strip()[:300]}", addr)



class MalformedResponseError(RocketMQError):
    """A broker's answer could not be read: a header field missing or not a number, a
    message whose bytes do not follow RocketMQ's layout (``MessageDecoder``), a body that
    does not decompress. The connection stays up; what could be read was kept."""


class TopicRouteError(RocketMQError):
    """No route for a topic: no name server knows it (and it cannot be created on first
    send), or none answered. ``topic`` names it; ``__cause__`` is the last name server's
    error."""

    def __init__(self, message: str, topic: str, addr: str | None = None) -> None:
        self.topic = topic
        super().__init__(message, addr)



class SendFailedError(RocketMQError):
    """Every attempt of a send failed (``1 + retries`` brokers tried, within its timeout).

    ``attempts`` lists ``(broker_name, error)`` per attempt; ``__cause__`` is the last
    error. A send that failed after its request reached a broker may still have been stored
    there (a timeout): consumers may see it once.
    """

    def __init__(self, message: str, attempts: tuple[tuple[str, BaseException], ...] = (),
                 addr: str | None = None) -> None:
        self.attempts = attempts
        super().__init__(message, addr)

