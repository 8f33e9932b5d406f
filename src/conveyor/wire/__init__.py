"""The typed wire: every REST shape Conveyor speaks, defined once as a msgspec ``Struct``.

The server decodes request bodies into these structs and renders its answers from them, the remote
client (``conveyor.client.http``) decodes the server's answers into the same structs, the CLI's
``--json`` prints them (:func:`to_builtins`), and ``/openapi.json`` is generated from them
(``conveyor.server.openapi``). A field that a struct does not name is refused, never ignored, and
every refusal comes from one place, :func:`decode` (10208 for malformed JSON, 10207 naming the field
path otherwise, or the code the struct at that spot declares).

- ``queues``: Cloudflare's catalog (queues, consumers, metrics, purges);
- ``messages``: Cloudflare's message routes (push, batch, pull, ack, peek);
- ``engine``: Conveyor's ``/conveyor/v1`` engine and worker-registry routes;
- ``workerd``: the answers (and the batch) of workerd's queue binding;
- ``r2``, ``kv``, ``workflows``: Cloudflare's R2 bucket, Workers KV and Workflows routes (imported
  as modules: ``from conveyor.wire import workflows``);
- ``envelope``: the ``{"success", "errors", "messages", "result"}`` around every answer.

Adding a route's shapes (Super Slurper's, the CDN API's go here next): write a module
of :class:`Shape` subclasses, one per request body and one per result, with the wire's field names
(``msgspec.field(name=...)`` where the wire is camelCase), ``None`` / ``UNSET`` defaults for what a
caller may leave out, and the struct <-> ``conveyor.model`` mapping beside them (a ``to_model``
method, a function from the model object). Then decode with ``decode(raw, TheRequest)`` in the
handler, answer with ``ok(the_result)``, and add one line to the route table in
``conveyor.server.openapi``; value limits stay in ``conveyor.client.validation``.

>>> from conveyor import wire
>>> wire.decode(b'{"batch_size": 10}', wire.PeekRequest).batch_size
10
"""

from __future__ import annotations

from conveyor.wire.decoding import Shape, decode, decode_answer, encode, refusal, to_builtins
from conveyor.wire.engine import (
    Counters,
    EncodedMessage,
    EnqueueRequest,
    EnqueueResult,
    ExtendRequest,
    HistoryPoint,
    LeasedMessage,
    LeaseRequest,
    LeaseResult,
    Moved,
    NextVisible,
    Policy,
    Purged,
    RedriveRequest,
    ReleaseRequest,
    Retry,
    RunRequest,
    SettleRequest,
    SettleResult,
    Shards,
    WaitRequest,
    WakeRequest,
    Worker,
    WorkerRequest,
    WorkerRun,
    counters,
    enqueue_request,
    leased,
    policy,
    settled,
    worker,
    worker_request,
)
from conveyor.wire.envelope import Envelope, Error, ErrorEnvelope, ResultInfo
from conveyor.wire.messages import (
    AckItem,
    AckRequest,
    AckResult,
    BatchRequest,
    Message,
    MessageMetadata,
    MessageRef,
    PeekedMessage,
    PeekRequest,
    PeekResult,
    PulledMessage,
    PullRequest,
    PullResult,
    PurgeMessagesRequest,
    PurgeMessagesResult,
    PushedMessage,
    SendMetadata,
    SendResult,
    message_body,
    peeked,
    pulled,
    sent,
)
from conveyor.wire.queues import (
    Consumer,
    ConsumerRequest,
    ConsumerSettings,
    ConsumerSettingsChange,
    KeptAside,
    Metrics,
    PurgeRequest,
    PurgeStatus,
    Queue,
    QueueRequest,
    QueueSettings,
    QueueSettingsChange,
    consumer,
    consumer_request,
    metrics,
    queue,
    queue_request,
)
from conveyor.wire.workerd import (
    BindingBatch,
    BindingMessage,
    BindingMetrics,
    BindingSent,
    binding_metrics,
    binding_sent,
)

__all__ = [
    "AckItem",
    "AckRequest",
    "AckResult",
    "BatchRequest",
    "BindingBatch",
    "BindingMessage",
    "BindingMetrics",
    "BindingSent",
    "Consumer",
    "ConsumerRequest",
    "ConsumerSettings",
    "ConsumerSettingsChange",
    "Counters",
    "EncodedMessage",
    "EnqueueRequest",
    "EnqueueResult",
    "Envelope",
    "Error",
    "ErrorEnvelope",
    "ExtendRequest",
    "HistoryPoint",
    "KeptAside",
    "LeaseRequest",
    "LeaseResult",
    "LeasedMessage",
    "Message",
    "MessageMetadata",
    "MessageRef",
    "Metrics",
    "Moved",
    "NextVisible",
    "PeekRequest",
    "PeekResult",
    "PeekedMessage",
    "Policy",
    "PullRequest",
    "PullResult",
    "PulledMessage",
    "PurgeMessagesRequest",
    "PurgeMessagesResult",
    "PurgeRequest",
    "PurgeStatus",
    "Purged",
    "PushedMessage",
    "Queue",
    "QueueRequest",
    "QueueSettings",
    "QueueSettingsChange",
    "RedriveRequest",
    "ReleaseRequest",
    "ResultInfo",
    "Retry",
    "RunRequest",
    "SendMetadata",
    "SendResult",
    "SettleRequest",
    "SettleResult",
    "Shape",
    "Shards",
    "WaitRequest",
    "WakeRequest",
    "Worker",
    "WorkerRequest",
    "WorkerRun",
    "binding_metrics",
    "binding_sent",
    "consumer",
    "consumer_request",
    "counters",
    "decode",
    "decode_answer",
    "encode",
    "enqueue_request",
    "leased",
    "message_body",
    "metrics",
    "peeked",
    "policy",
    "pulled",
    "queue",
    "queue_request",
    "refusal",
    "sent",
    "settled",
    "to_builtins",
    "worker",
    "worker_request",
]
