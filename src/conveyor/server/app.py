"""The ASGI application: the routes, one middleware for request ids, timing and access logs, and
the translation of every refusal into Cloudflare's envelope.

>>> app = build_app(Service(engine, Authenticator(open_token_store(engine))))
>>> uvicorn.run(app, host="127.0.0.1", port=8787)
"""

from __future__ import annotations

import contextlib
import logging
import re
import time
import uuid
from typing import Any

from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.requests import ClientDisconnect, Request
from starlette.responses import Response
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from conveyor import tracing
from conveyor.errors import ConveyorError, InvalidRequest
from conveyor.server import (
    dash,
    engine_routes,
    kv_routes,
    object_routes,
    prober_routes,
    prometheus,
    r2_routes,
    routes,
    slurper_routes,
    workerd,
    workflow_routes,
    workflow_store_routes,
)
from conveyor.server.access import METRICS, PUBLIC, check_declared, declared
from conveyor.server.envelope import JSONResponse, error_body, error_response
from conveyor.server.logs import request_id
from conveyor.server.openapi import document
from conveyor.server.service import Service, blocking
from conveyor.server.tokens import Token

log = logging.getLogger("conveyor.server")
access = logging.getLogger("conveyor.server.access")

_REQUEST_ID = re.compile(r"[A-Za-z0-9._-]{1,64}")


def _traced(scope: Scope) -> contextlib.AbstractContextManager[Any]:
    """The request's W3C ``traceparent`` as the current trace while it is served (what it writes
    and sends carries it; a malformed one is ignored here, and refused by the routes that take it)."""
    given = dict(scope["headers"]).get(b"traceparent")
    if given is None:
        return contextlib.nullcontext()
    try:
        return tracing.activate(tracing.TraceContext(tracing.check_traceparent(given.decode("latin-1"))))
    except InvalidRequest:
        return contextlib.nullcontext()


class RequestObserver:
    """Gives each request an id (``x-request-id``, taken from the client when sane), times it into
    the latency histogram by route template, and writes one access log line."""

    def __init__(self, app: ASGIApp, service: Service) -> None:
        self.app = app
        self.service = service

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        given = dict(scope["headers"]).get(b"x-request-id", b"").decode("latin-1")
        rid = given if _REQUEST_ID.fullmatch(given) else uuid.uuid4().hex
        token = request_id.set(rid)
        started = time.perf_counter()
        status = 500

        async def send_with_id(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
                message.setdefault("headers", [])
                message["headers"] = [*message["headers"], (b"x-request-id", rid.encode())]
            await send(message)

        try:
            with _traced(scope):
                await self.app(scope, receive, send_with_id)
        finally:
            elapsed = time.perf_counter() - started
            route = scope.get("route")
            template = getattr(route, "path", "unmatched")
            account = scope.get("state", {}).get("account", "")
            self.service.requests.observe(account, scope["method"], template, status, elapsed)
            # DEBUG: an idle worker polls several times a second, and INFO would be mostly that.
            access.debug(
                "%s %s %d %.2f ms",
                scope["method"],
                scope["path"],
                status,
                elapsed * 1000,
                extra={"method": scope["method"], "path": scope["path"], "status": status, "ms": elapsed * 1000},
            )
            request_id.reset(token)


async def conveyor_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, ConveyorError)
    return error_response(exc)


async def http_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, HTTPException)
    # Cloudflare answers an unknown route with 7003 ("Could not route to ...") and a wrong method with 7001.
    code = {404: 7003, 405: 7001}.get(exc.status_code, 7000)
    return JSONResponse(
        error_body(code, str(exc.detail)), status_code=exc.status_code, headers={"x-should-retry": "false"}
    )


async def client_gone(request: Request, exc: Exception) -> Response:
    # The connection closed before the request was whole (the client left, or a body deadline of
    # http_protocol.py closed it): nobody is left to answer.
    log.debug("client disconnected before its request was complete")
    return Response(status_code=400)


async def internal_error(request: Request, exc: Exception) -> Response:
    log.exception("internal error")
    return JSONResponse(error_body(15000, "internal error"), status_code=500)


async def metrics_endpoint(request: Request) -> Response:
    service: Service = request.app.state.service
    token: Token | None = request.state.token  # admitted (access.METRICS)
    if token is None or token.operator:
        scope = prometheus.EVERYTHING
    else:
        queues = frozenset(token.queues) if token.queues else None
        scope = prometheus.MetricsScope(frozenset([token.account_id]), queues)
    text = await blocking(prometheus.render, service.engine, service.requests, scope, service.concurrency)
    return Response(text, media_type=prometheus.CONTENT_TYPE)


async def openapi_endpoint(request: Request) -> Response:
    return JSONResponse(document())


async def health(request: Request) -> Response:
    return JSONResponse({"status": "ok"})


def build_app(service: Service) -> Starlette:
    served = [
        *routes.ROUTES,
        *engine_routes.ROUTES,
        *workerd.ROUTES,
        *r2_routes.ROUTES,
        *object_routes.ROUTES,
        *kv_routes.ROUTES,
        *workflow_routes.ROUTES,
        *workflow_store_routes.ROUTES,
        *slurper_routes.ROUTES,
        *prober_routes.ROUTES,
        *dash.ROUTES,
        declared("/metrics", metrics_endpoint, "GET", METRICS),
        declared("/openapi.json", openapi_endpoint, "GET", PUBLIC),
        declared("/healthz", health, "GET", PUBLIC),
    ]
    check_declared(served)
    app = Starlette(
        routes=served,
        exception_handlers={
            ConveyorError: conveyor_error,
            HTTPException: http_error,
            ClientDisconnect: client_gone,
            Exception: internal_error,
        },
    )
    app.state.service = service
    app.add_middleware(RequestObserver, service=service)
    return app
