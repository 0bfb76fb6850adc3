"""The Spark helpers check their arguments in the driver, when the UDF is made.

Before, many wrong arguments were accepted there and failed only in the executors (every
task, every row), or were converted silently: ``code=1.7`` called processor 1, and
``deterministic="no"`` made a deterministic UDF. No SparkSession is needed to make a UDF.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

import pytest

from codec import SerializeType
from remoting import ClientConfig
from remoting.spark import remote_batch_udf, remote_udf
from remoting.spark._options import call_spec, worker_options

from .service import UPPER

ADDR = "127.0.0.1:1"

BAD: list[tuple[dict[str, Any], type[Exception], str]] = [
    ({"code": 1001.7}, TypeError, "code must be an int"),  # was processor 1001
    ({"code": "1001"}, TypeError, "code must be an int"),
    ({"code": None}, TypeError, "code must be an int"),
    ({"code": True}, TypeError, "code must be an int"),
    ({"code": 2**31}, ValueError, "int32"),
    ({"timeout": "abc"}, TypeError, "timeout must be a number of seconds"),
    ({"timeout": "3"}, TypeError, "timeout must be a number of seconds"),
    ({"timeout": True}, TypeError, "timeout must be a number of seconds"),  # was 1 s
    ({"timeout": None}, TypeError, "timeout must be a number of seconds"),
    ({"timeout": float("nan")}, ValueError, "timeout"),
    ({"timeout": 0}, ValueError, "timeout"),
    ({"cooldown": "5"}, TypeError, "cooldown must be a number of seconds"),
    ({"cooldown": float("nan")}, ValueError, "cooldown"),
    ({"header": {"k": None}}, TypeError, "header must map str to str"),  # was "None"
    ({"header": {"k": 1}}, TypeError, "header must map str to str"),
    ({"header": {1: "v"}}, TypeError, "header must map str to str"),
    ({"header": [("k", "v")]}, TypeError, "header must be a mapping"),
    ({"header": "k=v"}, TypeError, "header must be a mapping"),
    ({"serialize_type": 7}, ValueError, "serialize_type"),
    ({"serialize_type": "XML"}, ValueError, "serialize_type"),
    ({"on_batch": 5}, TypeError, "on_batch must be a function"),
    ({"worker_setup": "setup"}, TypeError, "worker_setup must be a function"),
    ({"worker_log_level": "LOUD"}, ValueError, "worker_log_level must name a logging level"),
    ({"worker_log_level": 1.5}, TypeError, "worker_log_level"),
    ({"config": {"connect_timeout": 1}}, TypeError, "config must be a ClientConfig"),
    ({"deterministic": "no"}, TypeError, "deterministic must be True or False"),
    ({"idempotent": "yes"}, TypeError, "idempotent must be True or False"),
    ({"on_error": "ignore"}, ValueError, "on_error"),
    ({"return_type": None}, TypeError, "return_type"),
    ({"return_type": str}, TypeError, "return_type"),  # the Python type: a segfault in 3.11.7
    ({"hooks": 5}, TypeError, "hooks must be a list of RPC hooks"),
    ({"hooks": [5]}, TypeError, "RPC hook needs do_before_request"),
    ({"hooks": [lambda: None]}, TypeError, "RPC hook needs do_before_request"),
]
ROW_ONLY: list[tuple[dict[str, Any], type[Exception], str]] = [
    ({"max_in_flight": 2.9}, TypeError, "max_in_flight must be an int"),  # was 2
    ({"max_in_flight": True}, TypeError, "max_in_flight must be an int"),
    ({"max_in_flight": "x"}, TypeError, "max_in_flight must be an int"),
    ({"max_in_flight": 0}, ValueError, "max_in_flight"),
    ({"serializer": 5}, TypeError, "serializer must have encode"),
]
BAD_ADDRESSES: list[tuple[object, type[Exception], str]] = [
    (None, TypeError, "addresses must be"),
    (ADDR.encode(), TypeError, "addresses must be"),
    ({ADDR: 1}, TypeError, "addresses must be"),
    ([1], TypeError, "each address must be a 'host:port' string"),
    (["127.0.0.1 :1"], ValueError, "without spaces"),  # was accepted, then never connected
    ("", ValueError, "at least one server address"),
    ("127.0.0.1", ValueError, "host:port"),
    ("127.0.0.1:70000", ValueError, "1-65535"),
]

Maker = Callable[..., Any]


@pytest.mark.parametrize("make", [remote_udf, remote_batch_udf])
@pytest.mark.parametrize(("kwargs", "error", "words"), BAD)
def test_a_bad_option_is_refused_when_the_udf_is_made(
        make: Maker, kwargs: dict[str, Any], error: type[Exception], words: str) -> None:
    options: dict[str, Any] = {"code": UPPER, "return_type": "string"}
    options.update(kwargs)
    with pytest.raises(error, match=words):
        make(ADDR, **options)


@pytest.mark.parametrize(("kwargs", "error", "words"), ROW_ONLY)
def test_a_bad_per_row_option_is_refused_when_the_udf_is_made(
        kwargs: dict[str, Any], error: type[Exception], words: str) -> None:
    with pytest.raises(error, match=words):
        remote_udf(ADDR, UPPER, **kwargs)


@pytest.mark.parametrize("make", [remote_udf, remote_batch_udf])
@pytest.mark.parametrize(("addresses", "error", "words"), BAD_ADDRESSES)
def test_bad_addresses_are_refused_when_the_udf_is_made(
        make: Maker, addresses: object, error: type[Exception], words: str) -> None:
    with pytest.raises(error, match=words):
        make(addresses, UPPER)


def test_address_items_are_stripped_as_in_a_comma_separated_string() -> None:
    listed = call_spec([" 127.0.0.1:1", "127.0.0.1:2 "], UPPER, 3.0, 8, None,
                       SerializeType.JSON)
    joined = call_spec(" 127.0.0.1:1 , 127.0.0.1:2", UPPER, 3.0, 8, None, SerializeType.JSON)

    assert listed.addresses == joined.addresses == ("127.0.0.1:1", "127.0.0.1:2")


@pytest.mark.parametrize(("given", "wanted"), [
    ("JSON", SerializeType.JSON), ("rocketmq", SerializeType.ROCKETMQ),
    (0, SerializeType.JSON), (SerializeType.ROCKETMQ, SerializeType.ROCKETMQ)])
def test_serialize_type_may_be_given_by_name_or_wire_value(given: object,
                                                           wanted: SerializeType) -> None:
    spec = call_spec(ADDR, UPPER, 3.0, 8, {"k": "v"}, given)

    assert spec.serialize_type is wanted
    assert spec.header == (("k", "v"),)


@pytest.mark.parametrize(("given", "wanted"), [
    ("debug", logging.DEBUG), ("WARNING", logging.WARNING), (logging.INFO, logging.INFO),
    (None, None)])
def test_worker_log_level_may_be_a_name_in_any_case(given: object, wanted: int | None) -> None:
    options = worker_options(ClientConfig(), None, given, None, None)

    assert options.log_level == wanted
    assert options.config == ClientConfig()


@pytest.mark.parametrize("make", [remote_udf, remote_batch_udf])
def test_a_hook_that_cannot_travel_to_the_workers_is_refused_when_made(make: Maker) -> None:
    class LocalHook:  # a class defined in a function cannot be pickled
        def do_before_request(self, remote_addr: str, request: object) -> None:
            return None

        def do_after_response(self, remote_addr: str, request: object,
                              response: object) -> None:
            return None

    with pytest.raises(TypeError, match="hooks must be picklable"):
        make(ADDR, UPPER, hooks=[LocalHook()])
