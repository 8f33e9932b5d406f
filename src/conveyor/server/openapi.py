"""The OpenAPI 3.1 description of every route, served at ``/openapi.json``: generated from the wire's
structs (:mod:`conveyor.wire`, through ``msgspec.json.schema_components``) and the route table
below, which says for each route its method, path, summary, request struct and result type."""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass
from typing import Any

import msgspec

from conveyor import wire
from conveyor.prober.model import FleetRow, Target
from conveyor.prober.report import Report, RoundSummary
from conveyor.wire import kv, r2
from conveyor.wire import prober as pr
from conveyor.wire import slurper as ss
from conveyor.wire import workflows as wf

Schema = dict[str, Any]
REF = "#/components/schemas/{name}"


@dataclass(frozen=True)
class Op:
    method: str
    path: str
    summary: str
    request: Any = None  # the body's struct, if the route reads one
    result: Any = None  # the envelope's result type
    query: tuple[Schema, ...] = ()
    # workerd's binding answers without the envelope, and reads its own headers.
    enveloped: bool = True


def _query(name: str, schema: Schema) -> Schema:
    return {"name": name, "in": "query", "schema": schema}


PAGING = (
    _query("page", {"type": "integer", "minimum": 1}),
    _query("per_page", {"type": "integer", "minimum": 1, "maximum": 1000}),
)
CF = "/client/v4/accounts/{account_id}/queues"
Q = CF + "/{queue_id}"
C = Q + "/consumers/{consumer_id}"
CV = "/conveyor/v1/accounts/{account_id}/queues/{queue_id}"
W = "/conveyor/v1/accounts/{account_id}/workers"
B = "/workerd/accounts/{account_id}/queues/{queue_name}"
R2 = "/client/v4/accounts/{account_id}/r2/buckets"
CB = "/conveyor/v1/accounts/{account_id}/buckets"
OB = CB + "/{bucket_name}"
OBJECT_QUERY = tuple(_query(name, {"type": "string"}) for name in ("prefix", "start_after", "limit"))
EN = "/client/v4/accounts/{account_id}/event_notifications/r2/{bucket_name}/configuration"
KV = "/client/v4/accounts/{account_id}/storage/kv/namespaces"
KN = KV + "/{namespace_id}"
SS = "/client/v4/accounts/{account_id}/slurper"
SJ = SS + "/jobs/{job_id}"
SLURPER_PAGING = (
    _query("limit", {"type": "integer", "minimum": 1, "maximum": 1000}),
    _query("offset", {"type": "integer", "minimum": 0}),
)
PF = "/client/v4/accounts/{account_id}/prober/fleets"
PFT = PF + "/{fleet}/targets"
PFR = PF + "/{fleet}/rounds"
WFS = "/client/v4/accounts/{account_id}/workflows"
WF = WFS + "/{workflow_name}"
WV = WF + "/versions/{version_id}"
WI = WF + "/instances"
WII = WI + "/{instance_id}"
INSTANCE_LIST_QUERY = (
    _query("page", {"type": "integer", "minimum": 1}),
    _query("per_page", {"type": "integer", "minimum": 1, "maximum": 100}),
    _query("cursor", {"type": "string"}),
    _query("direction", {"enum": ["asc", "desc"]}),
    _query("status", {"enum": ["queued", "running", "paused", "errored", "terminated", "complete", "waitingForPause",
                               "waiting", "rollingBack"]}),
    _query("date_start", {"type": "string", "format": "date-time"}),
    _query("date_end", {"type": "string", "format": "date-time"}),
)  # fmt: skip

ROUTES = (
    # Cloudflare's v4 Queues API.
    Op("post", CF, "Create a queue", wire.QueueRequest, wire.Queue),
    Op("get", CF, "List queues", None, list[wire.Queue], (*PAGING, _query("name", {"type": "string"}))),
    Op("get", Q, "Get a queue", None, wire.Queue),
    Op("put", Q, "Replace a queue's settings", wire.QueueRequest, wire.Queue),
    Op("patch", Q, "Change some of a queue's settings", wire.QueueRequest, wire.Queue),
    Op(
        "delete",
        Q,
        "Delete a queue (force=true: one with damaged storage too, its files kept aside)",
        None,
        wire.KeptAside | None,
        (_query("force", {"enum": ["true", "false"]}),),
    ),
    Op("get", Q + "/metrics", "A queue's backlog", None, wire.Metrics),
    Op("post", Q + "/purge", "Purge a queue", wire.PurgeRequest, wire.Queue),
    Op("get", Q + "/purge", "Purge status", None, wire.PurgeStatus),
    Op("post", Q + "/consumers", "Add the queue's consumer", wire.ConsumerRequest, wire.Consumer),
    Op("get", Q + "/consumers", "List consumers", None, list[wire.Consumer], PAGING),
    Op("get", C, "Get a consumer", None, wire.Consumer),
    Op("put", C, "Replace a consumer's settings", wire.ConsumerRequest, wire.Consumer),
    Op("delete", C, "Remove a consumer", None, None),
    Op("post", Q + "/messages", "Send a message", wire.PushedMessage, wire.SendResult),
    Op("post", Q + "/messages/batch", "Send up to 100 messages atomically", wire.BatchRequest, wire.SendResult),
    Op("post", Q + "/messages/pull", "Lease messages (http_pull consumers)", wire.PullRequest, wire.PullResult),
    Op("post", Q + "/messages/ack", "Ack and retry pulled messages", wire.AckRequest, wire.AckResult),
    Op("post", Q + "/messages/peek", "Read messages without leasing them", wire.PeekRequest, wire.PeekResult),
    Op(
        "post",
        Q + "/messages/purge",
        "Delete single messages by ref (not supported: every ref gets a warning)",
        wire.PurgeMessagesRequest,
        wire.PurgeMessagesResult,
    ),
    # Conveyor's engine endpoints, for the remote transport.
    Op(
        "post",
        CV + "/enqueue",
        "Store encoded messages (bodies in base64) atomically",
        wire.EnqueueRequest,
        wire.EnqueueResult,
    ),
    Op(
        "post",
        CV + "/lease",
        "Lease messages under a delivery policy; with wait_ms, held until messages arrive (long poll)",
        wire.LeaseRequest,
        wire.LeaseResult,
    ),
    Op("post", CV + "/wake", "End the held leases sent with this waiter id now (a worker stopping)", wire.WakeRequest),
    Op("post", CV + "/extend", "Renew leases (heartbeat)", wire.ExtendRequest),
    Op("post", CV + "/settle", "Ack and retry leased messages in one commit", wire.SettleRequest, wire.SettleResult),
    Op("post", CV + "/release", "Give leased, unstarted messages back", wire.ReleaseRequest),
    Op("get", CV + "/counters", "Lifetime counters and messages in flight", None, wire.Counters),
    Op("get", CV + "/next-visible", "When the next message becomes deliverable", None, wire.NextVisible),
    Op(
        "get", CV + "/history", "The queue's recorded figures (?minutes=, 60 by default)", None, list[wire.HistoryPoint]
    ),
    Op("post", CV + "/wait", "Wait (at most 5 s) until messages may have arrived", wire.WaitRequest),
    Op("post", CV + "/redrive", "Move every message to another queue", wire.RedriveRequest, wire.Moved),
    Op("post", CV + "/purge", "Delete every message; returns how many", None, wire.Purged),
    Op("post", CV + "/shards", "Add a storage shard", None, wire.Shards),
    Op("get", W, "The live workers that run this account's queues", None, list[wire.Worker]),
    Op("put", W + "/{worker_id}", "Register or heartbeat a worker", wire.WorkerRequest),
    Op("delete", W + "/{worker_id}", "Remove a worker that stopped", None, None),
    # workerd's queue binding.
    Op(
        "post",
        B + "/message",
        "workerd binding: send one message",
        None,
        wire.BindingSent,
        (
            {"name": "X-Msg-Fmt", "in": "header", "schema": {"enum": ["text", "bytes", "json", "v8"]}},
            {"name": "X-Msg-Delay-Secs", "in": "header", "schema": {"type": "string"}},
        ),
        enveloped=False,
    ),
    Op(
        "post",
        B + "/batch",
        "workerd binding: send a batch",
        wire.BindingBatch,
        wire.BindingSent,
        ({"name": "X-Msg-Delay-Secs", "in": "header", "schema": {"type": "string"}},),
        enveloped=False,
    ),
    Op("get", B + "/metrics", "workerd binding: the queue's backlog", None, wire.BindingMetrics, enveloped=False),
    # R2's bucket management and event-notification configuration (conveyor.server.r2_routes).
    Op("post", R2, "Create a bucket (a directory of the deployment)", r2.BucketRequest, r2.Bucket),
    Op(
        "get",
        R2,
        "List buckets",
        None,
        r2.BucketList,
        tuple(
            _query(name, {"type": "string"})
            for name in ("name_contains", "start_after", "per_page", "cursor", "direction", "order")
        ),
    ),
    Op("get", R2 + "/{bucket_name}", "Get a bucket", None, r2.Bucket),
    Op("delete", R2 + "/{bucket_name}", "Delete an empty bucket", None, None),
    Op("get", EN, "A bucket's notification rules, by queue", None, r2.NotificationConfiguration),
    Op("put", EN + "/queues/{queue_id}", "Add notification rules for a queue", r2.NotificationRequest, None),
    Op("get", EN + "/queues/{queue_id}", "A bucket's notification rules for a queue", None, r2.QueueRules),
    Op("delete", EN + "/queues/{queue_id}", "Remove a queue's rules (body ruleIds: only those)", r2.RuleIds, None),
    Op(
        "post",
        CB,
        "Create a bucket in an S3-compatible service or a shared directory (egress-checked)",
        r2.BucketLocationRequest,
        r2.BucketLocation,
    ),
    Op("get", CB, "List buckets and where they live", None, list[r2.BucketLocation]),
    # Conveyor's object routes (conveyor.server.object_routes): PUT and GET objects carry raw bytes.
    Op("get", OB, "A bucket and where it lives", None, r2.BucketLocation),
    Op("delete", OB, "Delete an empty bucket", None, None),
    Op("get", OB + "/objects", "Objects in key order", None, r2.ObjectList, OBJECT_QUERY),
    Op("put", OB + "/objects/{key}", "Store an object (the body's bytes)", None, r2.Object),
    Op("get", OB + "/objects/{key}", "Read an object (range: bytes=START-END)", None, None, enveloped=False),
    Op("delete", OB + "/objects/{key}", "Delete an object", None, r2.Deleted),
    Op("get", OB + "/info/{key}", "An object's metadata", None, r2.Object),
    Op("post", OB + "/copy", "Copy an object within the bucket", r2.CopyRequest, r2.Object),
    Op("post", OB + "/notifications", "Add a notification rule", r2.NotificationRuleRequest, r2.NotificationRuleShape),
    Op("get", OB + "/notifications", "The bucket's notification rules", None, list[r2.NotificationRuleShape]),
    Op("delete", OB + "/notifications/{rule_id}", "Remove a notification rule", None, None),
    Op("post", OB + "/lifecycle", "Add a lifecycle rule", r2.LifecycleRuleRequest, r2.LifecycleRuleShape),
    Op("get", OB + "/lifecycle", "The bucket's lifecycle rules", None, list[r2.LifecycleRuleShape]),
    Op("delete", OB + "/lifecycle/{rule_id}", "Remove a lifecycle rule", None, None),
    # Cloudflare's Workers KV API.
    Op(
        "get",
        KV,
        "List KV namespaces",
        None,
        list[kv.KVNamespace],
        (*PAGING, _query("order", {"enum": ["title", "id"]}), _query("direction", {"enum": ["asc", "desc"]})),
    ),
    Op("post", KV, "Create a KV namespace", kv.KVNamespaceRequest, kv.KVNamespace),
    Op("get", KN, "Get a KV namespace", None, kv.KVNamespace),
    Op("put", KN, "Rename a KV namespace", kv.KVNamespaceRequest, kv.KVNamespace),
    Op("delete", KN, "Delete a KV namespace and its keys", None, dict[str, Any]),
    Op(
        "get",
        KN + "/keys",
        "List keys in byte order (cursor paging)",
        None,
        kv.KVKeysEnvelope,
        (
            _query("prefix", {"type": "string"}),
            _query("cursor", {"type": "string"}),
            _query("limit", {"type": "integer", "minimum": 10, "maximum": 1000}),
        ),
        enveloped=False,
    ),
    Op("get", KN + "/values/{key_name}", "Read a value (the raw bytes)", None, str, enveloped=False),
    Op(
        "put",
        KN + "/values/{key_name}",
        "Write a value: the raw body, or a multipart form of value and metadata",
        None,
        dict[str, Any],
        (
            _query("expiration", {"type": "integer"}),
            _query("expiration_ttl", {"type": "integer", "minimum": 60}),
            {"name": "conveyor-kv-type", "in": "header", "schema": {"enum": ["text", "bytes", "json"]}},
        ),
    ),
    Op("delete", KN + "/values/{key_name}", "Delete a key", None, dict[str, Any]),
    Op("get", KN + "/metadata/{key_name}", "Read a key's metadata", None, Any),
    Op("put", KN + "/bulk", "Write up to 10,000 pairs at once", list[kv.KVBulkWrite], kv.KVBulkResult),
    Op("post", KN + "/bulk/delete", "Delete up to 10,000 keys at once", list[str], kv.KVBulkResult),
    Op("post", KN + "/bulk/get", "Read up to 100 values at once", kv.KVBulkGetRequest, kv.KVBulkGetResult),
    # Super Slurper (conveyor.server.slurper_routes): migration jobs into the account's buckets.
    Op(
        "post",
        SS + "/jobs",
        "Create a migration job (source and target are reached first)",
        ss.SlurperJobRequest,
        ss.SlurperJobCreated,
    ),
    Op("get", SS + "/jobs", "List migration jobs, newest first", None, list[ss.SlurperJob], SLURPER_PAGING),
    Op("put", SS + "/jobs/abortAll", "Abort every running or paused job", None, str),
    Op("get", SJ, "Get a migration job", None, ss.SlurperJob),
    Op("get", SJ + "/progress", "A job's counts", None, ss.SlurperProgress),
    Op("get", SJ + "/logs", "A job's log entries, oldest first", None, list[ss.SlurperLog], SLURPER_PAGING),
    Op("put", SJ + "/pause", "Pause a running job", None, str),
    Op("put", SJ + "/resume", "Resume a paused job", None, str),
    Op("put", SJ + "/abort", "Abort a job", None, str),
    Op(
        "put",
        SS + "/source/connectivity-precheck",
        "Reach a source as a job would",
        ss.SlurperSource,
        ss.SlurperConnectivity,
    ),
    Op(
        "put",
        SS + "/target/connectivity-precheck",
        "Reach a target as a job would",
        ss.SlurperTarget,
        ss.SlurperConnectivity,
    ),
    # The prober (conveyor.server.prober_routes): fleets of targets, rounds and reports.
    Op("get", PF, "List the account's fleets as their workers registered them", None, list[FleetRow]),
    Op("get", PFT, "List a fleet's targets with their latest outcome", None, list[Target]),
    Op(
        "post",
        PFT,
        "Add targets, all or none (addresses pass the egress policy)",
        list[pr.ProbeTargetRequest],
        pr.ProbeTargetsAdded,
    ),
    Op(
        "delete",
        PFT,
        "Remove the target of an id, or the targets of an address",
        None,
        pr.ProbeTargetsRemoved,
        (_query("key", {"type": "string"}),),
    ),
    Op("post", PFR, "Ask the fleet's worker for a round now", None, pr.ProbeRoundStarted),
    Op("get", PFR + "/{round_id}", "A round's jobs by state and its times", None, RoundSummary | None),
    Op(
        "get",
        PF + "/{fleet}/report",
        "The fleet's figures since a time",
        None,
        Report,
        (
            _query("since_ms", {"type": "integer", "minimum": 0}),
            _query("min_gap_ms", {"type": "integer", "minimum": 0}),
        ),
    ),
    # Cloudflare's Workflows API (conveyor.server.workflow_routes).
    Op(
        "get",
        WFS,
        "List workflows",
        None,
        list[wf.Workflow],
        (
            *PAGING[:1],
            _query("per_page", {"type": "integer", "minimum": 1, "maximum": 100}),
            _query("search", {"type": "string"}),
        ),
    ),
    Op("get", WF, "Get a workflow, its instances by status and whether a worker runs it", None, wf.Workflow),
    Op(
        "put",
        WF,
        "Create a workflow's record or replace the settings it overrides",
        wf.WorkflowRequest,
        wf.WorkflowUpdated,
    ),
    Op("delete", WF, "Delete a workflow with its versions and instances", None, wf.Deleted),
    Op("get", WF + "/versions", "List a workflow's versions, the one in force first", None, list[wf.Version], PAGING),
    Op("get", WV, "Get a version", None, wf.Version),
    Op("get", WV + "/graph", "A version's step graph (none: Conveyor does not parse code)", None, wf.VersionGraph),
    Op("post", WI, "Create an instance", wf.CreateInstance, wf.InstanceCreated),
    Op("get", WI, "List instances (pages, or result_info.cursor)", None, list[wf.InstanceListed], INSTANCE_LIST_QUERY),
    Op(
        "get",
        WI + "/",
        "List instances (wrangler's form of the path)",
        None,
        list[wf.InstanceListed],
        INSTANCE_LIST_QUERY,
    ),
    Op(
        "post",
        WI + "/batch",
        "Create up to 100 instances, all or none",
        list[wf.CreateInstance],
        list[wf.InstanceCreated],
    ),
    Op("post", WI + "/batch/delete", "Delete up to 100 instances", wf.BatchDelete, wf.BatchDeleted),
    Op(
        "put",
        WI + "/terminate",
        "Terminate every instance (of a status)",
        None,
        wf.TerminateStarted,
        (_query("status", {"enum": ["queued", "running", "paused", "waitingForPause", "waiting"]}),),
    ),
    Op(
        "get",
        WII,
        "Get an instance with its steps",
        None,
        wf.InstanceDetail,
        (_query("order", {"enum": ["asc", "desc"]}), _query("simple", {"enum": ["true", "false"]})),
    ),
    Op("delete", WII, "Delete an instance", None, wf.Deleted),
    Op(
        "get",
        WII + "/step",
        "One step's status, output and error",
        None,
        wf.StepDetail,
        (
            {"name": "name", "in": "query", "required": True, "schema": {"type": "string"}},
            _query("type", {"enum": ["step", "waitForEvent"]}),
            _query("attempt", {"type": "integer", "minimum": 1}),
        ),
    ),
    Op("patch", WII + "/status", "Pause, resume, terminate or restart an instance", wf.StatusChange, wf.StatusChanged),
    Op("post", WII + "/events/{event_type}", "Send an event (the body is its payload)", None, wf.EventSent),
)


def _json(schema: Schema) -> Schema:
    return {"content": {"application/json": {"schema": schema}}}


def _component_name(name: str) -> str:
    """``Envelope_list_conveyor.wire.queues.Queue__`` (msgspec's name of a generic) as ``Envelope_list_Queue``."""
    return re.sub(r"conveyor\.wire\.\w+\.", "", name).replace("___", "_or_").rstrip("_")


def _operation(op: Op, request: Schema | None, answer: Schema) -> Schema:
    params = [
        {"name": name, "in": "path", "required": True, "schema": {"type": "string"}}
        for name in re.findall(r"{(\w+)}", op.path)
    ]
    out: Schema = {
        "summary": op.summary,
        "parameters": [*params, *op.query],
        "responses": {
            "200": {"description": "OK", **_json(answer)},
            "default": {"description": "A refusal, in Cloudflare's envelope", **_json(_ref("ErrorEnvelope"))},
        },
    }
    if request is not None:
        out["requestBody"] = {"required": True, **_json(request)}
    elif op.path.endswith("/message") or ("/values/" in op.path and op.method == "put"):
        out["requestBody"] = {"content": {"application/octet-stream": {"schema": {"type": "string"}}}}
    elif op.path.endswith("/events/{event_type}"):
        out["requestBody"] = {"content": {"application/json": {"schema": {}}}}
    return out


def _ref(name: str) -> Schema:
    return {"$ref": REF.format(name=name)}


@functools.cache
def document() -> dict[str, Any]:
    """The whole OpenAPI document (built once)."""
    answers = [wire.Envelope[op.result] if op.enveloped else op.result for op in ROUTES]  # type: ignore[name-defined]
    requests = [op.request for op in ROUTES if op.request is not None]
    schemas, components = msgspec.json.schema_components(
        [*answers, *requests, wire.ErrorEnvelope], ref_template="{name}"
    )
    # Renamed after the fact: msgspec writes a generic's name with its parameters' modules.
    renamed = {name: _component_name(name) for name in components}

    def fix(node: Any) -> Any:
        if isinstance(node, dict):
            return {k: REF.format(name=renamed[v]) if k == "$ref" else fix(v) for k, v in node.items()}
        if isinstance(node, list):
            return [fix(v) for v in node]
        return node

    answer_schemas = iter(schemas[: len(answers)])
    request_schemas = iter(schemas[len(answers) : len(answers) + len(requests)])
    paths: dict[str, dict[str, Any]] = {}
    for op in ROUTES:
        request = fix(next(request_schemas)) if op.request is not None else None
        paths.setdefault(op.path, {})[op.method] = _operation(op, request, fix(next(answer_schemas)))
    paths["/metrics"] = {
        "get": {
            "summary": "Prometheus metrics (a token's scrape sees its own account)",
            "responses": {
                "200": {"description": "OK", "content": {"text/plain": {"schema": {"type": "string"}}}},
                "default": {"description": "A refusal, in Cloudflare's envelope", **_json(_ref("ErrorEnvelope"))},
            },
        }
    }
    return {
        "openapi": "3.1.0",
        "info": {
            "title": "Conveyor",
            "version": "1",
            "description": "Cloudflare Queues' REST API v4 (under /client/v4), Conveyor's engine endpoints "
            "for the remote transport (under /conveyor/v1), workerd's queue binding (under /workerd), and "
            "Workers KV's API (under /client/v4/.../storage/kv), and Cloudflare Workflows' API (under "
            "/client/v4/.../workflows).",
        },
        "components": {
            "schemas": {renamed[name]: fix(schema) for name, schema in components.items()},
            "securitySchemes": {"bearer": {"type": "http", "scheme": "bearer"}},
        },
        "security": [{"bearer": []}],
        "paths": paths,
    }
