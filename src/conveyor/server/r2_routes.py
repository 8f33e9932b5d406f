"""Cloudflare's R2 bucket management and event-notification configuration, under
``/client/v4/accounts/{account_id}``, so the ``cloudflare`` SDK's ``r2.buckets.*`` and
``r2.buckets.event_notifications.*`` work against ``conveyor serve``.

A bucket made here is a directory of a SQLite deployment (on PostgreSQL it is refused: there a
bucket needs an S3-compatible service or a shared directory, given through the Python API).
Conveyor's own ``/conveyor/v1/accounts/{account_id}/buckets`` creates a bucket in an S3-compatible
service or a shared directory, through the operator's egress policy. Objects are not served here
yet. Bucket routes reach the whole account: a queue-scoped token may not call them.
"""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import Response

from conveyor.egress import EgressPolicy
from conveyor.errors import InvalidRequest
from conveyor.server.access import Access, Scope, declared
from conveyor.server.envelope import ok, read, read_body
from conveyor.server.service import Context, blocking, context
from conveyor.storage import facade
from conveyor.storage.bucket import Bucket
from conveyor.storage.errors import RuleNotFound
from conveyor.storage.model import NotificationRule
from conveyor.wire import decode, r2

PREFIX = "/client/v4/accounts/{account_id}"
BUCKETS = PREFIX + "/r2/buckets"
BUCKET = BUCKETS + "/{bucket_name}"
CONFIGURATION = PREFIX + "/event_notifications/r2/{bucket_name}/configuration"
QUEUE_RULES = CONFIGURATION + "/queues/{queue_id}"
CONVEYOR_BUCKETS = "/conveyor/v1/accounts/{account_id}/buckets"
MAX_PER_PAGE = 1000

ACCOUNT_READ = Access(Scope.ACCOUNT, read_only=True)
ACCOUNT_WRITE = Access(Scope.ACCOUNT)


def _jurisdiction(request: Request) -> None:
    jurisdiction = request.headers.get("cf-r2-jurisdiction")
    if jurisdiction not in (None, "default"):
        raise InvalidRequest(
            f"jurisdiction {jurisdiction!r} is not supported: a Conveyor deployment keeps its data where its storage is"
        )


async def create_bucket(request: Request) -> Response:
    _jurisdiction(request)
    ctx = context(request)
    body = await read(request, r2.BucketRequest)
    b = await blocking(ctx.client.create_bucket, body.name)
    return ok(r2.bucket(b.info))


async def list_buckets(request: Request) -> Response:
    _jurisdiction(request)
    ctx = context(request)
    query = request.query_params
    unknown = set(query) - {"name_contains", "start_after", "per_page", "cursor", "direction", "order"}
    if unknown:
        raise InvalidRequest(f"unknown query parameter {sorted(unknown)[0]!r}")
    direction = query.get("direction", "asc")
    if direction not in ("asc", "desc") or query.get("order", "name") != "name":
        raise InvalidRequest("order must be name and direction asc or desc")
    raw = query.get("per_page", "")
    if raw and not (raw.isascii() and raw.isdigit() and 1 <= int(raw) <= MAX_PER_PAGE):
        raise InvalidRequest(f"per_page is {raw!r}; it must be a whole number from 1 to {MAX_PER_PAGE}")
    after = query.get("start_after") or query.get("cursor") or ""
    contains = query.get("name_contains", "")
    infos = sorted(await blocking(ctx.client.list_buckets), key=lambda b: b.name, reverse=direction == "desc")
    chosen = [
        b
        for b in infos
        if contains in b.name and (not after or (b.name > after if direction == "asc" else b.name < after))
    ]
    return ok(r2.BucketList([r2.bucket(b) for b in chosen[: int(raw) if raw else MAX_PER_PAGE]]))


async def get_bucket(request: Request) -> Response:
    _jurisdiction(request)
    b = await _bucket(context(request), request)
    return ok(r2.bucket(b.info))


async def delete_bucket(request: Request) -> Response:
    _jurisdiction(request)
    ctx = context(request)
    await blocking(ctx.client.delete_bucket, request.path_params["bucket_name"])
    return ok(None)


async def _bucket(ctx: Context, request: Request) -> Bucket:
    return await blocking(ctx.client.bucket, request.path_params["bucket_name"])


# -- event notifications ------------------------------------------------------------------------
async def put_queue_rules(request: Request) -> Response:
    _jurisdiction(request)
    ctx = context(request)
    b = await _bucket(ctx, request)
    queue = await ctx.queue(request.path_params["queue_id"])
    body = await read(request, r2.NotificationRequest)
    if not body.rules:
        raise InvalidRequest("rules must hold at least one rule")

    def add() -> None:
        for rule in body.rules:
            b.add_notification(queue.name, rule.actions, rule.prefix, rule.suffix, rule.description)

    await blocking(add)
    return ok(None)


async def get_configuration(request: Request) -> Response:
    _jurisdiction(request)
    ctx = context(request)
    b = await _bucket(ctx, request)
    by_queue: dict[str, list[NotificationRule]] = {}
    for rule in await blocking(b.notifications):
        by_queue.setdefault(rule.queue_id, []).append(rule)
    queues = [r2.queue_rules(queue_id, rules[0].queue, rules) for queue_id, rules in by_queue.items()]
    return ok(r2.NotificationConfiguration(bucket_name=b.name, queues=queues))


async def get_queue_rules(request: Request) -> Response:
    _jurisdiction(request)
    ctx = context(request)
    b = await _bucket(ctx, request)
    queue = await ctx.queue(request.path_params["queue_id"])
    rules = [r for r in await blocking(b.notifications) if r.queue_id == queue.id]
    return ok(r2.queue_rules(queue.id, queue.name, rules))


async def delete_queue_rules(request: Request) -> Response:
    _jurisdiction(request)
    ctx = context(request)
    b = await _bucket(ctx, request)
    queue_id = request.path_params["queue_id"]
    raw = await read_body(request)
    wanted = set(decode(raw, r2.RuleIds).rule_ids) if raw.strip() else None
    rules = [r for r in await blocking(b.notifications) if r.queue_id == queue_id]
    if wanted is not None:
        missing = wanted - {r.rule_id for r in rules}
        if missing:
            raise RuleNotFound(f"bucket {b.name!r} has no rule {sorted(missing)[0]!r} for queue {queue_id}")
        rules = [r for r in rules if r.rule_id in wanted]

    def remove() -> None:
        for rule in rules:
            b.remove_notification(rule.rule_id)

    await blocking(remove)
    return ok(None)


# -- Conveyor's own: a bucket in an S3-compatible service or a shared directory ------------------
async def create_bucket_at(request: Request) -> Response:
    """A tenant's S3 endpoint passes the operator's egress policy (``--egress-allow``,
    ``$CONVEYOR_EGRESS_ALLOW``) first; a ``file://`` directory must be one the operator shared."""
    ctx = context(request)
    body = await read(request, r2.BucketLocationRequest)
    policy = EgressPolicy.from_environment()

    def create() -> Bucket:
        return facade.create_bucket(
            ctx.client,
            body.name,
            url=body.url,
            endpoint=body.endpoint,
            region=body.region,
            access_key_id=body.access_key_id,
            secret_access_key=body.secret_access_key,
            egress=policy,
        )

    b = await blocking(create)
    return ok(r2.bucket_location(b.info))


async def list_bucket_locations(request: Request) -> Response:
    ctx = context(request)
    return ok([r2.bucket_location(b) for b in await blocking(ctx.client.list_buckets)])


ROUTES = [
    declared(BUCKETS, create_bucket, "POST", ACCOUNT_WRITE),
    declared(BUCKETS, list_buckets, "GET", ACCOUNT_READ),
    declared(BUCKET, get_bucket, "GET", ACCOUNT_READ),
    declared(BUCKET, delete_bucket, "DELETE", ACCOUNT_WRITE),
    declared(CONFIGURATION, get_configuration, "GET", ACCOUNT_READ),
    declared(QUEUE_RULES, put_queue_rules, "PUT", ACCOUNT_WRITE),
    declared(QUEUE_RULES, get_queue_rules, "GET", ACCOUNT_READ),
    declared(QUEUE_RULES, delete_queue_rules, "DELETE", ACCOUNT_WRITE),
    declared(CONVEYOR_BUCKETS, create_bucket_at, "POST", ACCOUNT_WRITE),
    declared(CONVEYOR_BUCKETS, list_bucket_locations, "GET", ACCOUNT_READ),
]
