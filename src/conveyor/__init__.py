"""Conveyor: durable message queues for Python, with Cloudflare Queues' semantics.

>>> import conveyor
>>> cv = conveyor.connect()                 # $CONVEYOR_URL, else SQLite in ./.conveyor/
>>> q = cv.create_queue("emails")
>>> q.send({"to": "a@b"})
>>> conveyor.keep_freed_memory()            # opt in to Conveyor's malloc setting (see conveyor.allocator)
"""

from conveyor.allocator import keep_freed_memory
from conveyor.client.aio import AsyncConveyor, AsyncQueue, connect_async
from conveyor.client.backpressure import QueueLimits
from conveyor.client.connect import connect
from conveyor.client.sync import Conveyor, Queue
from conveyor.consumer.app import App
from conveyor.consumer.batch import Message, MessageBatch
from conveyor.errors import (
    BatchTooLarge,
    ConsumerExists,
    ConsumerNotFound,
    ConveyorError,
    CorruptStorage,
    DeliveryPaused,
    Forbidden,
    InvalidBatchDelay,
    InvalidMessage,
    InvalidQueueId,
    InvalidQueueName,
    InvalidRequest,
    InvalidSetting,
    MalformedJSON,
    MessageTooLarge,
    Overloaded,
    QueueExists,
    QueueNotFound,
    StorageError,
    StorageFull,
    StorageLimitExceeded,
    TooManyMessages,
    Unauthorized,
)
from conveyor.model import (
    AckResult,
    ConsumerInfo,
    ConsumerSettings,
    Counters,
    Metrics,
    PulledMessage,
    QueueInfo,
    QueueSettings,
    SendBatchResult,
    SendResult,
)
from conveyor.storage.kv_errors import (
    InvalidKVExpiration,
    InvalidKVKey,
    InvalidKVNamespaceTitle,
    KVKeyNotFound,
    KVMetadataTooLarge,
    KVNamespaceExists,
    KVNamespaceNotFound,
    KVValueTooLarge,
)

__all__ = [
    "AckResult",
    "App",
    "AsyncConveyor",
    "AsyncQueue",
    "BatchTooLarge",
    "ConsumerExists",
    "ConsumerInfo",
    "ConsumerNotFound",
    "ConsumerSettings",
    "Conveyor",
    "ConveyorError",
    "CorruptStorage",
    "Counters",
    "DeliveryPaused",
    "Forbidden",
    "InvalidBatchDelay",
    "InvalidKVExpiration",
    "InvalidKVKey",
    "InvalidKVNamespaceTitle",
    "InvalidMessage",
    "InvalidQueueId",
    "InvalidQueueName",
    "InvalidRequest",
    "InvalidSetting",
    "KVKeyNotFound",
    "KVMetadataTooLarge",
    "KVNamespaceExists",
    "KVNamespaceNotFound",
    "KVValueTooLarge",
    "MalformedJSON",
    "Message",
    "MessageBatch",
    "MessageTooLarge",
    "Metrics",
    "Overloaded",
    "PulledMessage",
    "Queue",
    "QueueExists",
    "QueueInfo",
    "QueueLimits",
    "QueueNotFound",
    "QueueSettings",
    "SendBatchResult",
    "SendResult",
    "StorageError",
    "StorageFull",
    "StorageLimitExceeded",
    "TooManyMessages",
    "Unauthorized",
    "connect",
    "connect_async",
    "keep_freed_memory",
]
