"""Enumerations and constants of the RocketMQ remoting protocol (SPEC sections 2-4)."""

from __future__ import annotations

from enum import IntEnum
from typing import Final

from ._errors import InvalidCommandError

__all__ = [
    "FLAG_ONEWAY",
    "FLAG_RESPONSE",
    "LanguageCode",
    "RequestCode",
    "ResponseCode",
    "SerializeType",
]

FLAG_RESPONSE: Final = 0x1  # RemotingCommand RPC_TYPE bit: set on responses
FLAG_ONEWAY: Final = 0x2  # RemotingCommand RPC_ONEWAY bit: set on oneway requests


class LanguageCode(IntEnum):
    """Language of the peer that built a command (`LanguageCode.java`)."""

    JAVA = 0
    CPP = 1
    DOTNET = 2
    PYTHON = 3
    DELPHI = 4
    ERLANG = 5
    RUBY = 6
    OTHER = 7
    HTTP = 8
    GO = 9
    PHP = 10
    OMS = 11
    RUST = 12
    NODE_JS = 13


class SerializeType(IntEnum):
    """How the header of a frame is serialized: the high byte of the header word."""

    JSON = 0
    ROCKETMQ = 1


class ResponseCode(IntEnum):
    """Response codes (RocketMQ's ``RemotingSysResponseCode`` and ``ResponseCode``)."""

    SUCCESS = 0
    SYSTEM_ERROR = 1
    SYSTEM_BUSY = 2
    REQUEST_CODE_NOT_SUPPORTED = 3
    TRANSACTION_FAILED = 4
    FLUSH_DISK_TIMEOUT = 10
    SLAVE_NOT_AVAILABLE = 11
    FLUSH_SLAVE_TIMEOUT = 12
    MESSAGE_ILLEGAL = 13
    SERVICE_NOT_AVAILABLE = 14
    VERSION_NOT_SUPPORTED = 15
    NO_PERMISSION = 16
    TOPIC_NOT_EXIST = 17
    TOPIC_EXIST_ALREADY = 18
    PULL_NOT_FOUND = 19
    PULL_RETRY_IMMEDIATELY = 20
    PULL_OFFSET_MOVED = 21
    QUERY_NOT_FOUND = 22
    SUBSCRIPTION_PARSE_FAILED = 23
    SUBSCRIPTION_NOT_EXIST = 24
    SUBSCRIPTION_NOT_LATEST = 25
    SUBSCRIPTION_GROUP_NOT_EXIST = 26
    FILTER_DATA_NOT_EXIST = 27
    FILTER_DATA_NOT_LATEST = 28
    INVALID_PARAMETER = 29
    NO_MESSAGE = 208
    POLLING_FULL = 209
    POLLING_TIMEOUT = 210
    FLOW_CONTROL = 215
    GO_AWAY = 1500
    # client-local pseudo codes, never sent on the wire by RocketMQ
    RPC_UNKNOWN = -1000
    RPC_ADDR_IS_NULL = -1002
    RPC_SEND_TO_CHANNEL_FAILED = -1004
    RPC_TIME_OUT = -1006

    @classmethod
    def name_of(cls, code: int) -> str | None:
        """Return the name of response ``code`` (``3`` -> ``"REQUEST_CODE_NOT_SUPPORTED"``),
        or None for a code that is not one of these (a service's own)."""
        member = cls._value2member_map_.get(code)
        return None if member is None else member.name


class RequestCode(IntEnum):
    """Well-known RocketMQ request codes; applications are free to use their own."""

    SEND_MESSAGE = 10
    PULL_MESSAGE = 11
    QUERY_MESSAGE = 12
    QUERY_CONSUMER_OFFSET = 14
    UPDATE_CONSUMER_OFFSET = 15
    GET_MAX_OFFSET = 30
    GET_MIN_OFFSET = 31
    HEART_BEAT = 34
    UNREGISTER_CLIENT = 35
    CONSUMER_SEND_MSG_BACK = 36
    END_TRANSACTION = 37
    GET_CONSUMER_LIST_BY_GROUP = 38
    CHECK_TRANSACTION_STATE = 39
    NOTIFY_CONSUMER_IDS_CHANGED = 40
    PUT_KV_CONFIG = 100
    GET_KV_CONFIG = 101
    REGISTER_BROKER = 103
    UNREGISTER_BROKER = 104
    GET_ROUTEINFO_BY_TOPIC = 105
    GET_BROKER_CLUSTER_INFO = 106
    GET_CONSUMER_RUNNING_INFO = 307
    CONSUME_MESSAGE_DIRECTLY = 309
    SEND_MESSAGE_V2 = 310
    SEND_BATCH_MESSAGE = 320
    SEND_REPLY_MESSAGE = 324
    PUSH_REPLY_MESSAGE_TO_CLIENT = 326
    LITE_PULL_MESSAGE = 361
    BROKER_HEARTBEAT = 904
    POP_MESSAGE = 200050
    ACK_MESSAGE = 200051


# Lookup tables used on the decode hot path (IntEnum construction is slow).
LANGUAGE_BY_VALUE: Final[dict[int, LanguageCode]] = {m.value: m for m in LanguageCode}
LANGUAGE_BY_NAME: Final[dict[str, LanguageCode]] = {m.name: m for m in LanguageCode}
# what both header encoders accept as ``language``: a member (or its int), or None (unknown)
LANGUAGE_BYTE: Final[dict[LanguageCode | None, int]] = {
    **{m: m.value for m in LanguageCode}, None: LanguageCode.OTHER.value}


def language_error(language: object) -> InvalidCommandError:
    """Return the error for a ``language`` that is not a `LanguageCode` or None."""
    return InvalidCommandError(f"language={language!r} is not a LanguageCode (e.g. "
                               "LanguageCode.PYTHON) or None")
SERIALIZE_TYPE_BY_VALUE: Final[dict[int, SerializeType]] = {m.value: m for m in SerializeType}
