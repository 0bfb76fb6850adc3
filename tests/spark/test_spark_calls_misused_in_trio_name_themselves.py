"""Spark's UDF calls wrap the blocking client: called in a thread that runs trio, they
refuse at once naming ``call_bodies`` (the call made), not the client's ``invoke_sync``.
Kept with the Spark tests: `remoting.spark` needs the spark extra, which the core's
newest-trio run does not install."""

from __future__ import annotations

import pytest

from remoting import RemotingClient
from remoting.spark._calls import CallSpec, call_bodies

pytestmark = pytest.mark.default_io  # the check is the face's, before any io


async def test_spark_s_calls_name_themselves() -> None:
    with RemotingClient() as client:
        spec = CallSpec(addresses=("127.0.0.1:1",), code=1, timeout=1.0, max_in_flight=1)
        with pytest.raises(RuntimeError) as caught:
            call_bodies(client, spec, [b"x"])
    message = str(caught.value)
    assert message.startswith("remoting.spark's UDF calls (call_bodies) blocks"), message
