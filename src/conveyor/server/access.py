"""Who may call each route, declared where the route is declared and enforced here, in one place.

Every route of the server is built by :func:`declared` with an :class:`Access`: which tokens may
call it (read-only ones? operator ones?), how far it reaches (one queue of its path, the token's
queues of the account, the whole account, or nothing that needs a token), and whether it changes
what the server's queue handles hold (so they are dropped for that queue once it has answered).
Deciding this by method and URL suffix missed every route nobody remembered; a declaration cannot
be forgotten: :func:`check_declared` refuses to build an app with a route that has none.

>>> route = declared(Q + "/messages/peek", peek, "POST", Access(Scope.QUEUE, read_only=True))
"""

from __future__ import annotations

import enum
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute, Route

from conveyor.client.validation import check_queue_name
from conveyor.errors import Forbidden
from conveyor.server.service import Context, Service, blocking

Handler = Callable[[Request], Awaitable[Response]]


class Scope(enum.Enum):
    """How far a route reaches, and so what a queue-scoped token may do with it."""

    # One queue, named by the path (``{queue_id}`` or ``{queue_name}``): a queue-scoped token may
    # call it for its queues; any other answers 404, as an unknown queue does.
    QUEUE = "queue"
    # The account, with what the handler answers or changes limited to the token's queues (listing
    # queues and workers, creating a queue the token names, registering a worker of its queues).
    TOKEN_QUEUES = "token queues"
    # The whole account: a queue-scoped token may not call it (403).
    ACCOUNT = "account"
    # Nothing that needs a token (health, the OpenAPI document).
    PUBLIC = "public"
    # The dashboard's pages: no bearer token, its session cookie instead, which the dashboard checks
    # itself with the same rules (conveyor.server.dash.sessions).
    SESSION = "session"


@dataclass(frozen=True, slots=True)
class Access:
    """One route's declaration (see the module docstring)."""

    scope: Scope
    read_only: bool = False  # a read-only token may call it: it changes nothing
    operator: bool = False  # an operator token may call it (it answers for no account's routes)
    catalog_write: bool = False  # it changes a queue's settings or consumer: drop that queue's handles


# The declarations the routes use, by what they do.
READ = Access(Scope.QUEUE, read_only=True)
WRITE = Access(Scope.QUEUE)
CATALOG_WRITE = Access(Scope.QUEUE, catalog_write=True)
TOKEN_QUEUES_READ = Access(Scope.TOKEN_QUEUES, read_only=True)
TOKEN_QUEUES_WRITE = Access(Scope.TOKEN_QUEUES)
ACCOUNT_WRITE = Access(Scope.ACCOUNT)
METRICS = Access(Scope.TOKEN_QUEUES, read_only=True, operator=True)
PUBLIC = Access(Scope.PUBLIC, read_only=True, operator=True)
DASHBOARD = Access(Scope.SESSION, read_only=True, operator=True)


class DeclaredRoute(Route):
    """A Starlette route that carries its :class:`Access`."""

    def __init__(self, path: str, endpoint: Handler, method: str, access: Access) -> None:
        super().__init__(path, endpoint, methods=[method])
        self.access = access


def declared(
    path: str, endpoint: Handler, method: str, access: Access, *, outer: Callable[[Handler], Handler] | None = None
) -> DeclaredRoute:
    """The route ``method path``, whose handler runs only once the caller passed ``access``.
    ``outer`` wraps the whole (workerd's routes answer every refusal, these too, with its headers)."""
    if access.catalog_write and "{queue_id}" not in path:
        raise TypeError(f"route {path!r} writes a queue's catalog entry, but its path names no queue_id")

    async def guarded(request: Request) -> Response:
        await admit(request, access)
        try:
            return await endpoint(request)
        finally:
            if access.catalog_write:  # after the write: the next message request reads the queue anew
                service: Service = request.app.state.service
                service.forget(request.path_params["account_id"], request.path_params["queue_id"])

    guarded.__name__ = endpoint.__name__
    guarded.__doc__ = endpoint.__doc__
    return DeclaredRoute(path, outer(guarded) if outer else guarded, method, access)


def check_declared(routes: Iterable[BaseRoute]) -> None:
    """Refuse (``TypeError``) a route that does not declare its access: it would be served unchecked."""
    for route in routes:
        if not isinstance(route, DeclaredRoute):
            raise TypeError(f"route {getattr(route, 'path', route)!r} declares no access: build it with declared()")


async def admit(request: Request, access: Access) -> None:
    """Let the request's caller through ``access``, or raise what refuses it: 401 without a valid
    token; 403 for an operator token where operators may not call, another account, a read-only
    token on a write, a queue-scoped token on an account-wide route; 404 for a queue of the path
    outside the token's queues (the answer an unknown queue gets). What it learns is kept on
    ``request.state``: ``token``, and on account routes ``account`` and the handlers'
    :func:`~conveyor.server.service.context`."""
    if access.scope in (Scope.PUBLIC, Scope.SESSION):
        return
    service: Service = request.app.state.service
    token = service.auth.token(request)
    if token is not None and token.operator and not access.operator:
        raise Forbidden("an operator token reads /metrics only; use a token of the account")
    request.state.token = token
    account_id = request.path_params.get("account_id")
    if account_id is None:  # /metrics: the handler shows what the token's scope covers
        return
    principal = service.auth.principal(token, account_id)
    client = service.client(account_id)  # refuses a malformed account id
    # The request-latency histograms count a request under its account only once it is authenticated.
    request.state.account = account_id
    if not access.read_only:
        principal.check_write()
    ctx = Context(principal, client, service, account_id)
    if principal.token is not None and principal.token.queues:
        if access.scope is Scope.ACCOUNT:
            what = f"{request.method} {_template(request)}"
            raise Forbidden(f"this token is limited to some queues; {what} is account-wide")
        if access.scope is Scope.QUEUE:
            await _check_queue(ctx, request)
    request.state.context = ctx


async def _check_queue(ctx: Context, request: Request) -> None:
    queue_id = request.path_params.get("queue_id")
    if queue_id is not None:
        await blocking(ctx.message_lookup_sync, queue_id)  # 404 outside the token's queues
    else:
        ctx.principal.check_queue(check_queue_name(request.path_params["queue_name"]))


def _template(request: Request) -> str:
    route = request.scope.get("route")
    return str(getattr(route, "path", request.url.path))
