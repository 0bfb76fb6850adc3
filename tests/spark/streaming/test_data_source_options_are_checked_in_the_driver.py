"""The data source's options (strings, keys in any case) are read into typed values in the
driver, or refused with a message naming the option: never a failed task later, and never a
misspelt option that silently does nothing."""

from __future__ import annotations

from typing import Any

import pytest

from remoting.spark._streaming._options import sink_options, source_options

BASE = {"addresses": "127.0.0.1:9876, 127.0.0.1:9877", "topic": "events"}


def test_a_stream_starts_at_latest_and_a_batch_read_at_earliest_by_default() -> None:
    stream = source_options(BASE, streaming=True)
    batch = source_options(BASE, streaming=False)

    assert stream.queue.addresses == ("127.0.0.1:9876", "127.0.0.1:9877")
    assert (stream.starting, batch.starting, batch.ending) == ("latest", "earliest", "latest")
    assert (stream.max_per_trigger, stream.group, stream.fail_on_data_loss) == (None, None, True)


def test_options_are_read_whatever_their_case() -> None:
    options = source_options({**BASE, "MAXMESSAGESPERTRIGGER": "5_000",
                              "startingOffsets": "Earliest", "messagesPerPartition": "700",
                              "group": "reports", "failOnDataLoss": "FALSE",
                              "reconnectTimeout": "0", "timeout": "2.5"}, streaming=True)

    assert (options.max_per_trigger, options.starting, options.per_partition) == (
        5000, "earliest", 700)
    assert (options.group, options.fail_on_data_loss) == ("reports", False)
    assert (options.queue.reconnect_timeout, options.queue.timeout) == (0.0, 2.5)
    assert source_options({**BASE, "startingOffsets": "17"}, streaming=True).starting == 17


@pytest.mark.parametrize(("extra", "message"), [
    ({"maxMessagePerTrigger": "10"},
     r"no option 'maxmessagepertrigger' \(did you mean maxMessagesPerTrigger\?\)"),
    ({"maxMessagesPerTrigger": "0"}, "maxMessagesPerTrigger must be a whole number >= 1"),
    ({"maxMessagesPerTrigger": "ten"}, "maxMessagesPerTrigger must be a whole number"),
    ({"startingOffsets": "newest"}, "startingOffsets must be earliest, latest or an offset"),
    ({"startingOffsets": "-1"}, "startingOffsets must be earliest, latest or an offset"),
    ({"failOnDataLoss": "no"}, "failOnDataLoss must be true or false"),
    ({"timeout": "0"}, "timeout must be a number of seconds > 0"),
    ({"reconnectTimeout": "nan"}, "reconnectTimeout must be a number of seconds >= 0"),
    ({"group": "a group"}, "option group must be 1-128 of"),
    ({"topic": "../etc"}, "option topic must be 1-128 of"),
    ({"endingOffsets": "latest"}, "no option 'endingoffsets'"),  # a stream has no end
    ({"waitForTopic": "yes"}, "waitForTopic must be true or false"),
])
def test_a_bad_option_is_refused_naming_it(extra: dict[str, str], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        source_options({**BASE, **extra}, streaming=True)


def test_addresses_and_topic_are_required() -> None:
    with pytest.raises(ValueError, match="needs option addresses"):
        source_options({"topic": "t"}, streaming=True)
    with pytest.raises(ValueError, match="needs option topic"):
        sink_options({"addresses": "127.0.0.1:1"})


def test_the_sink_takes_only_its_options() -> None:
    assert sink_options({**BASE, "checkpointLocation": "/tmp/x"}).queue.topic == "events"
    with pytest.raises(ValueError, match="no option 'startingoffsets'"):
        sink_options({**BASE, "startingOffsets": "earliest"})


def test_a_batch_read_does_not_wait_for_its_topic() -> None:
    with pytest.raises(ValueError, match="waitForTopic is a stream's"):
        source_options({**BASE, "waitForTopic": "true"}, streaming=False)
    assert source_options({**BASE, "waitForTopic": "TRUE"}, streaming=True).wait_for_topic


@pytest.mark.spark
def test_a_misspelt_option_fails_load_naming_the_documented_one(streaming: Any) -> None:
    reader = (streaming.readStream.format("remoting")
              .option("addresses", "127.0.0.1:9876").option("topic", "events")
              .option("maxMessagesPerTriger", "10"))
    with pytest.raises(Exception, match="did you mean maxMessagesPerTrigger") as caught:
        reader.load()  # no query started, no service asked
    assert "UnboundLocalError" not in str(caught.value)


@pytest.mark.spark
def test_a_bad_option_value_fails_load(streaming: Any) -> None:
    reader = (streaming.read.format("remoting").option("addresses", "127.0.0.1:9876")
              .option("topic", "events").option("failOnDataLoss", "maybe"))
    with pytest.raises(Exception, match="failOnDataLoss must be true or false"):
        reader.load()
