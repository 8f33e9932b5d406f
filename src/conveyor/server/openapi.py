"""The OpenAPI 3.1 description of every route: Cloudflare's v4 Queues API, Conveyor's engine
endpoints, the workerd binding and ``/metrics``; served at ``/openapi.json``."""

from __future__ import annotations

import functools
from typing import Any

from conveyor import limits

Schema = dict[str, Any]


def _obj(properties: dict[str, Schema], required: tuple[str, ...] = ()) -> Schema:
    schema: Schema = {"type": "object", "properties": properties}
    if required:
        schema["required"] = list(required)
    return schema


def _ref(name: str) -> Schema:
    return {"$ref": f"#/components/schemas/{name}"}


INT: Schema = {"type": "integer"}
STR: Schema = {"type": "string"}
BOOL: Schema = {"type": "boolean"}
ID: Schema = {"type": "string", "pattern": "^[0-9a-f]{32}$"}

METRICS = _obj(
    {"backlog_count": INT, "backlog_bytes": INT, "oldest_message_timestamp_ms": INT},
    ("backlog_count", "backlog_bytes", "oldest_message_timestamp_ms"),
)
CONSUMER = _obj(
    {
        "consumer_id": ID,
        "queue_id": ID,
        "queue_name": STR,
        "type": {"enum": ["worker", "http_pull"]},
        "script_name": STR,
        "script": STR,
        "created_on": STR,
        "dead_letter_queue": STR,
        "settings": _obj(
            {
                "batch_size": INT,
                "max_retries": INT,
                "max_wait_time_ms": INT,
                "max_concurrency": {"type": ["integer", "null"]},
                "retry_delay": INT,
                "visibility_timeout_ms": INT,
            }
        ),
    },
    ("consumer_id", "queue_name", "type", "created_on", "dead_letter_queue", "settings"),
)
QUEUE_SETTINGS = _obj({"delivery_delay": INT, "delivery_paused": BOOL, "message_retention_period": INT})
QUEUE = _obj(
    {
        "queue_id": ID,
        "queue_name": STR,
        "created_on": STR,
        "modified_on": STR,
        "producers": {"type": "array"},
        "producers_total_count": INT,
        "consumers": {"type": "array", "items": _ref("Consumer")},
        "consumers_total_count": INT,
        "settings": _ref("QueueSettings"),
        # Conveyor's own: why a queue's stored messages cannot be read (a damaged shard file).
        "storage_error": STR,
    },
    ("queue_id", "queue_name", "created_on", "modified_on", "consumers", "settings"),
)
MESSAGE_OUT = _obj(
    {
        "id": ID,
        "body": STR,
        "attempts": INT,
        "lease_id": STR,
        "ref": STR,
        "timestamp_ms": INT,
        "metadata": _obj({"CF-Content-Type": {"enum": ["json", "text", "bytes"]}}),
    },
    ("id", "body", "attempts", "timestamp_ms"),
)
ERROR = _obj({"code": INT, "message": STR}, ("code", "message"))
ENVELOPE_ERROR = _obj(
    {
        "success": {"const": False},
        "errors": {"type": "array", "items": _ref("Error"), "minItems": 1},
        "messages": {"type": "array"},
        "result": {"type": "null"},
    },
    ("success", "errors", "messages", "result"),
)
RESULT_INFO = _obj(
    {"page": INT, "per_page": INT, "count": INT, "total_count": INT, "total_pages": INT},
    ("page", "per_page", "count", "total_count", "total_pages"),
)
# Cloudflare's shape, and the ids the messages got, in order (Conveyor's addition).
SEND_RESULT = _obj(
    {"metadata": _obj({"metrics": _ref("Metrics")}, ("metrics",)), "message_ids": {"type": "array", "items": ID}},
    ("metadata", "message_ids"),
)
ENGINE_MESSAGE = _obj(
    {
        "id": ID,
        "timestamp_ms": INT,
        "body": {"type": "string", "contentEncoding": "base64"},
        "content_type": {"enum": ["json", "text", "bytes"]},
        "attempts": INT,
        "lease_id": STR,
    },
    ("id", "timestamp_ms", "body", "content_type", "attempts", "lease_id"),
)
POLICY = _obj({"max_retries": {"type": "integer", "minimum": 0, "maximum": 100}, "dead_letter_queue": STR})

SCHEMAS: dict[str, Schema] = {
    "Metrics": METRICS,
    "Consumer": CONSUMER,
    "QueueSettings": QUEUE_SETTINGS,
    "Queue": QUEUE,
    "Message": MESSAGE_OUT,
    "Error": ERROR,
    "ErrorEnvelope": ENVELOPE_ERROR,
    "ResultInfo": RESULT_INFO,
    "SendResult": SEND_RESULT,
    "EngineMessage": ENGINE_MESSAGE,
    "DeliveryPolicy": POLICY,
}


def _envelope(result: Schema, *, paged: bool = False) -> Schema:
    props: dict[str, Schema] = {
        "success": {"const": True},
        "errors": {"type": "array", "maxItems": 0},
        "messages": {"type": "array"},
        "result": result,
    }
    required = ["success", "errors", "messages", "result"]
    if paged:
        props["result_info"] = _ref("ResultInfo")
        required.append("result_info")
    return {"type": "object", "properties": props, "required": required}


def _json(schema: Schema) -> dict[str, Any]:
    return {"content": {"application/json": {"schema": schema}}}


ERRORS = {"default": {"description": "A refusal, in Cloudflare's envelope", **_json(_ref("ErrorEnvelope"))}}
ACCOUNT = {"name": "account_id", "in": "path", "required": True, "schema": {"type": "string"}}
QUEUE_ID = {"name": "queue_id", "in": "path", "required": True, "schema": {"type": "string"}}
CONSUMER_ID = {"name": "consumer_id", "in": "path", "required": True, "schema": {"type": "string"}}
QUEUE_NAME = {"name": "queue_name", "in": "path", "required": True, "schema": {"type": "string"}}


def _op(
    summary: str,
    result: Schema | None,
    *,
    params: tuple[dict[str, Any], ...] = (ACCOUNT, QUEUE_ID),
    body: Schema | None = None,
    paged: bool = False,
    query: tuple[dict[str, Any], ...] = (),
    raw: dict[str, Any] | None = None,
) -> dict[str, Any]:
    op: dict[str, Any] = {
        "summary": summary,
        "parameters": [*params, *query],
        "responses": {"200": {"description": "OK", **(raw or _json(_envelope(result or {}, paged=paged)))}, **ERRORS},
    }
    if body is not None:
        op["requestBody"] = {"required": True, **_json(body)}
    return op


def _closed(schema: Schema) -> Schema:
    """A request body of Cloudflare's API: a field it does not name is refused (10207)."""
    return {**schema, "additionalProperties": False}


def _cloudflare() -> dict[str, dict[str, Any]]:
    p = "/client/v4/accounts/{account_id}/queues"
    q = p + "/{queue_id}"
    settings_body = _closed(_obj({"queue_name": STR, "settings": _ref("QueueSettings")}))
    consumer_body = _closed(
        _obj(
            {
                "type": {"enum": ["worker", "http_pull"]},
                "script_name": STR,
                "script": STR,
                "environment_name": STR,
                "dead_letter_queue": STR,
                "settings": CONSUMER["properties"]["settings"],
            }
        )
    )
    message_in = _closed(
        _obj(
            {
                "body": {},
                "content_type": {"enum": ["json", "text", "bytes"]},
                "delay_seconds": {"type": "integer", "minimum": 0, "maximum": limits.MAX_DELAY_SECONDS},
            },
            ("body",),
        )
    )
    paging = (
        {"name": "page", "in": "query", "schema": {"type": "integer", "minimum": 1}},
        {"name": "per_page", "in": "query", "schema": {"type": "integer", "minimum": 1, "maximum": 1000}},
    )
    cid = (ACCOUNT, QUEUE_ID, CONSUMER_ID)
    lease_list = {"type": "array", "items": _closed(_obj({"lease_id": STR}, ("lease_id",)))}
    return {
        p: {
            "post": _op(
                "Create a queue",
                _ref("Queue"),
                params=(ACCOUNT,),
                body=_closed(_obj({"queue_name": STR, "settings": _ref("QueueSettings")}, ("queue_name",))),
            ),
            "get": _op(
                "List queues",
                {"type": "array", "items": _ref("Queue")},
                params=(ACCOUNT,),
                paged=True,
                query=(*paging, {"name": "name", "in": "query", "schema": STR}),
            ),
        },
        q: {
            "get": _op("Get a queue", _ref("Queue")),
            "put": _op("Replace a queue's settings", _ref("Queue"), body=settings_body),
            "patch": _op("Change some of a queue's settings", _ref("Queue"), body=settings_body),
            "delete": _op(
                "Delete a queue (force=true: one with damaged storage too, its files kept aside)",
                {"oneOf": [{"type": "null"}, _obj({"kept_aside": {"type": "array", "items": STR}}, ("kept_aside",))]},
                query=({"name": "force", "in": "query", "schema": {"enum": ["true", "false"]}},),
            ),
        },
        q + "/metrics": {"get": _op("A queue's backlog", _ref("Metrics"))},
        q + "/purge": {
            "post": _op(
                "Purge a queue", _ref("Queue"), body=_closed(_obj({"delete_messages_permanently": {"const": True}}))
            ),
            "get": _op("Purge status", _obj({"started_at": STR, "completed": BOOL}, ("started_at", "completed"))),
        },
        q + "/consumers": {
            "post": _op("Add the queue's consumer", _ref("Consumer"), body=consumer_body),
            "get": _op("List consumers", {"type": "array", "items": _ref("Consumer")}, paged=True, query=paging),
        },
        q + "/consumers/{consumer_id}": {
            "get": _op("Get a consumer", _ref("Consumer"), params=cid),
            "put": _op("Replace a consumer's settings", _ref("Consumer"), params=cid, body=consumer_body),
            "delete": _op("Remove a consumer", {"type": "null"}, params=cid),
        },
        q + "/messages": {"post": _op("Send a message", _ref("SendResult"), body=message_in)},
        q + "/messages/batch": {
            "post": _op(
                "Send up to 100 messages atomically",
                _ref("SendResult"),
                body=_closed(
                    _obj(
                        {
                            "messages": {"type": "array", "items": message_in, "minItems": 1, "maxItems": 100},
                            "delay_seconds": {"type": "integer", "minimum": 0, "maximum": limits.MAX_DELAY_SECONDS},
                        },
                        ("messages",),
                    )
                ),
            )
        },
        q + "/messages/pull": {
            "post": _op(
                "Lease messages (http_pull consumers)",
                _obj(
                    {
                        "message_backlog_count": INT,
                        "messages": {"type": "array", "items": _ref("Message")},
                        "metadata": _obj({"metrics": _ref("Metrics")}),
                    },
                    ("messages",),
                ),
                body=_closed(_obj({"batch_size": INT, "visibility_timeout_ms": INT, "visibility_timeout": INT})),
            )
        },
        q + "/messages/ack": {
            "post": _op(
                "Ack and retry pulled messages",
                _obj(
                    {"ackCount": INT, "retryCount": INT, "warnings": {"type": "object"}},
                    ("ackCount", "retryCount", "warnings"),
                ),
                body=_closed(
                    _obj(
                        {
                            "acks": lease_list,
                            "retries": {
                                "type": "array",
                                "items": _closed(_obj({"lease_id": STR, "delay_seconds": INT}, ("lease_id",))),
                            },
                        }
                    )
                ),
            )
        },
        q + "/messages/peek": {
            "post": _op(
                "Read messages without leasing them",
                _obj({"messages": {"type": "array", "items": _ref("Message")}}, ("messages",)),
                body=_closed(_obj({"batch_size": INT})),
            )
        },
        q + "/messages/purge": {
            "post": _op(
                "Delete single messages by ref (not supported: every ref gets a warning)",
                _obj({"errors": {"type": "array"}, "warnings": {"type": "object"}}),
                body=_closed(_obj({"refs": {"type": "array", "items": _obj({"ref": STR}, ("ref",))}}, ("refs",))),
            )
        },
    }


def _engine() -> dict[str, dict[str, Any]]:
    e = "/conveyor/v1/accounts/{account_id}/queues/{queue_id}"
    ids = {"type": "array", "items": STR}
    nothing: Schema = {"type": "null"}
    return {
        e + "/enqueue": {
            "post": _op(
                "Store encoded messages (bodies in base64) atomically",
                _ref("Metrics"),
                body=_obj(
                    {
                        "messages": {
                            "type": "array",
                            "items": _obj(
                                {
                                    "body": {"type": "string", "contentEncoding": "base64"},
                                    "content_type": {"enum": ["json", "text", "bytes"]},
                                    "delay_seconds": INT,
                                },
                                ("body",),
                            ),
                        }
                    },
                    ("messages",),
                ),
            )
        },
        e + "/lease": {
            "post": _op(
                "Lease messages under a delivery policy; with wait_ms, held until messages arrive (long poll)",
                _obj({"messages": {"type": "array", "items": _ref("EngineMessage")}}, ("messages",)),
                body=_obj(
                    {
                        "max_messages": INT,
                        "visibility_ms": INT,
                        "policy": _ref("DeliveryPolicy"),
                        "wait_ms": {"type": "integer", "minimum": 0, "maximum": 25000},
                        "waiter": STR,
                    }
                ),
            )
        },
        e + "/wake": {
            "post": _op(
                "End the held leases sent with this waiter id now (a worker stopping)",
                nothing,
                body=_obj({"waiter": STR}, ("waiter",)),
            )
        },
        e + "/extend": {
            "post": _op("Renew leases (heartbeat)", nothing, body=_obj({"lease_ids": ids, "visibility_ms": INT}))
        },
        e + "/settle": {
            "post": _op(
                "Ack and retry leased messages in one commit",
                _obj(
                    {
                        "acked": INT,
                        "retried": INT,
                        "dead_lettered": INT,
                        "dropped": INT,
                        "warnings": {"type": "object"},
                    },
                    ("acked", "retried", "dead_lettered", "dropped", "warnings"),
                ),
                body=_obj(
                    {
                        "acks": ids,
                        "retries": {
                            "type": "array",
                            "items": _obj({"lease_id": STR, "delay_seconds": INT}, ("lease_id",)),
                        },
                        "policy": _ref("DeliveryPolicy"),
                    }
                ),
            )
        },
        e + "/release": {"post": _op("Give leased, unstarted messages back", nothing, body=_obj({"lease_ids": ids}))},
        e + "/counters": {
            "get": _op(
                "Lifetime counters and messages in flight",
                _obj(
                    {k: INT for k in ("sent", "acked", "retried", "dead_lettered", "expired", "dropped", "in_flight")}
                ),
            )
        },
        e + "/next-visible": {
            "get": _op(
                "When the next message becomes deliverable",
                _obj({"next_visible_ms": {"type": ["integer", "null"]}}, ("next_visible_ms",)),
            )
        },
        e + "/wait": {
            "post": _op(
                "Wait (at most 5 s) until messages may have arrived",
                nothing,
                body=_obj({"timeout": {"type": "number", "minimum": 0, "maximum": 5}}),
            )
        },
        e + "/redrive": {
            "post": _op(
                "Move every message to another queue",
                _obj({"moved": INT}, ("moved",)),
                body=_obj({"to_queue_id": STR}, ("to_queue_id",)),
            )
        },
        e + "/purge": {"post": _op("Delete every message; returns how many", _obj({"purged": INT}, ("purged",)))},
        e + "/shards": {"post": _op("Add a storage shard", _obj({"shards": INT}, ("shards",)))},
        **_workers(),
    }


def _workers() -> dict[str, dict[str, Any]]:
    w = "/conveyor/v1/accounts/{account_id}/workers"
    nullable_int: Schema = {"type": ["integer", "null"]}
    run = _obj(
        {"queue_id": STR, "script_name": STR, "max_concurrency": nullable_int, "concurrency": INT},
        ("queue_id", "script_name"),
    )
    listed_run = _obj(
        {
            "queue_id": STR,
            "queue_name": STR,
            "script_name": STR,
            "max_concurrency": nullable_int,
            "concurrency": INT,
        },
        ("queue_id", "queue_name", "script_name", "max_concurrency", "concurrency"),
    )
    entry = _obj(
        {
            "worker_id": STR,
            "host": STR,
            "pid": INT,
            "started_ms": INT,
            "heartbeat_ms": INT,
            "runs": {"type": "array", "items": listed_run},
        },
        ("worker_id", "host", "pid", "started_ms", "heartbeat_ms", "runs"),
    )
    worker_id = {"name": "worker_id", "in": "path", "required": True, "schema": STR}
    return {
        w: {
            "get": _op(
                "The live workers that run this account's queues",
                {"type": "array", "items": entry},
                params=(ACCOUNT,),
            )
        },
        w + "/{worker_id}": {
            "put": _op(
                "Register or heartbeat a worker",
                {"type": "null"},
                params=(ACCOUNT, worker_id),
                body=_obj(
                    {"host": STR, "pid": INT, "started_ms": INT, "runs": {"type": "array", "items": run}},
                    ("host", "pid", "started_ms"),
                ),
            ),
            "delete": _op("Remove a worker that stopped", {"type": "null"}, params=(ACCOUNT, worker_id)),
        },
    }


def _workerd() -> dict[str, dict[str, Any]]:
    w = "/workerd/accounts/{account_id}/queues/{queue_name}"
    camel = _obj(
        {"backlogCount": INT, "backlogBytes": INT, "oldestMessageTimestamp": INT},
        ("backlogCount", "backlogBytes", "oldestMessageTimestamp"),
    )
    sent = _json(_obj({"metadata": _obj({"metrics": camel}, ("metrics",))}, ("metadata",)))
    params = (ACCOUNT, QUEUE_NAME)
    fmt = {"name": "X-Msg-Fmt", "in": "header", "schema": {"enum": ["text", "bytes", "json", "v8"]}}
    delay = {"name": "X-Msg-Delay-Secs", "in": "header", "schema": STR}
    message = _op("workerd binding: send one message", None, params=params, query=(fmt, delay), raw=sent)
    message["requestBody"] = {"content": {"application/octet-stream": {"schema": {"type": "string"}}}}
    return {
        w + "/message": {"post": message},
        w + "/batch": {
            "post": _op(
                "workerd binding: send a batch",
                None,
                params=params,
                query=(delay,),
                raw=sent,
                body=_obj(
                    {
                        "messages": {
                            "type": "array",
                            "items": _obj({"body": STR, "contentType": STR, "delaySecs": INT}, ("body",)),
                        }
                    },
                    ("messages",),
                ),
            )
        },
        w + "/metrics": {"get": _op("workerd binding: the queue's backlog", None, params=params, raw=_json(camel))},
    }


@functools.cache
def document() -> dict[str, Any]:
    """The whole OpenAPI document (built once)."""
    metrics_op = {
        "summary": "Prometheus metrics (a token's scrape sees its own account)",
        "responses": {"200": {"description": "OK", "content": {"text/plain": {"schema": STR}}}, **ERRORS},
    }
    return {
        "openapi": "3.1.0",
        "info": {
            "title": "Conveyor",
            "version": "1",
            "description": "Cloudflare Queues' REST API v4 (under /client/v4), Conveyor's engine endpoints "
            "for the remote transport (under /conveyor/v1), and workerd's queue binding (under /workerd).",
        },
        "components": {
            "schemas": SCHEMAS,
            "securitySchemes": {"bearer": {"type": "http", "scheme": "bearer"}},
        },
        "security": [{"bearer": []}],
        "paths": {**_cloudflare(), **_engine(), **_workerd(), "/metrics": {"get": metrics_op}},
    }
