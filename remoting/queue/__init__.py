"""A queue service over remoting: topics, channels and groups (NSQ's model with RocketMQ's
offsets), with credit-based subscriptions, acknowledged delivery and long-polling pulls.

Serve one with ``QueueService(...).attach(server)`` (a `RemotingServer` or a
`TrioRemotingServer`); use it with ``QueueClient(client)``: plain methods for a blocking
`RemotingClient`, awaited ones for a `TrioRemotingClient`. See docs/queue.md.
"""

from __future__ import annotations

from codec._module_metadata import fixup_module_metadata as _fixup_module_metadata

from ._client import BlockingQueueClient as BlockingQueueClient
from ._client import QueueClient as QueueClient
from ._client import TrioQueueClient as TrioQueueClient
from ._errors import QueueError as QueueError
from ._errors import QueueFullError as QueueFullError
from ._messages import Message as Message
from ._messages import PulledRecords as PulledRecords
from ._service import QueueService as QueueService
from ._stats import ChannelStatistics as ChannelStatistics
from ._stats import GroupStatistics as GroupStatistics
from ._stats import QueueStatistics as QueueStatistics
from ._stats import TopicOffsets as TopicOffsets
from ._stats import TopicStatistics as TopicStatistics
from ._subscription import BlockingSubscription as BlockingSubscription
from ._subscription import Delivery as Delivery
from ._subscription import TrioDelivery as TrioDelivery
from ._subscription import TrioSubscription as TrioSubscription
from ._wire import QueueCode as QueueCode

__all__ = [
    "BlockingQueueClient",
    "BlockingSubscription",
    "ChannelStatistics",
    "Delivery",
    "GroupStatistics",
    "Message",
    "PulledRecords",
    "QueueClient",
    "QueueCode",
    "QueueError",
    "QueueFullError",
    "QueueService",
    "QueueStatistics",
    "TopicOffsets",
    "TopicStatistics",
    "TrioDelivery",
    "TrioQueueClient",
    "TrioSubscription",
]

# reprs, tracebacks, pickles and the API reference name remoting.queue.X, not the private module
_fixup_module_metadata("remoting.queue", globals())
