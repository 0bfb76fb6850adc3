"""A RocketMQ 4.x client: produce to and consume from a RocketMQ cluster (name servers,
brokers, consumer groups) over RocketMQ's remoting protocol, on both faces.

Blocking (any thread): `Producer`, `PushConsumer`, `LitePullConsumer` (context managers).
trio: ``async with open_producer(...)``, `open_push_consumer`, `open_lite_pull_consumer`.
See docs/rocketmq.md.
"""

from __future__ import annotations

from codec._module_metadata import fixup_module_metadata as _fixup_module_metadata

from ._errors import MalformedResponseError as MalformedResponseError
from ._errors import MQBrokerError as MQBrokerError
from ._errors import RocketMQError as RocketMQError
from ._errors import SendFailedError as SendFailedError
from ._errors import TopicRouteError as TopicRouteError
from ._lite_pull_consumer import LitePullConsumer as LitePullConsumer
from ._lite_pull_consumer import TrioLitePullConsumer as TrioLitePullConsumer
from ._lite_pull_consumer import open_lite_pull_consumer as open_lite_pull_consumer
from ._message import Message as Message
from ._message import MessageQueue as MessageQueue
from ._message import SendResult as SendResult
from ._message import SendStatus as SendStatus
from ._producer import Producer as Producer
from ._producer import SendFuture as SendFuture
from ._producer import TrioProducer as TrioProducer
from ._producer import open_producer as open_producer
from ._push_consumer import ConsumerStatistics as ConsumerStatistics
from ._push_consumer import PushConsumer as PushConsumer
from ._push_consumer import TrioPushConsumer as TrioPushConsumer
from ._push_consumer import open_push_consumer as open_push_consumer
from ._send import Outgoing as Outgoing

__all__ = [
    "LitePullConsumer",
    "TrioLitePullConsumer",
    "open_lite_pull_consumer",
    "ConsumerStatistics",
    "PushConsumer",
    "TrioPushConsumer",
    "open_push_consumer",
    "MQBrokerError",
    "MalformedResponseError",
    "Message",
    "MessageQueue",
    "Outgoing",
    "Producer",
    "RocketMQError",
    "SendFailedError",
    "SendFuture",
    "SendResult",
    "SendStatus",
    "TopicRouteError",
    "TrioProducer",
    "open_producer",
]

# reprs, tracebacks, pickles and the API reference name remoting.rocketmq.X
_fixup_module_metadata("remoting.rocketmq", globals())
