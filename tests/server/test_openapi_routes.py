"""``/openapi.json`` is generated from the wire's structs and the route table: every route the server
serves is in it, and each request body's schema refuses fields the struct does not name."""

from __future__ import annotations

from conveyor.server import (
    engine_routes,
    kv_routes,
    object_routes,
    prober_routes,
    r2_routes,
    routes,
    slurper_routes,
    workerd,
    workflow_routes,
)
from conveyor.server.openapi import document


def test_every_served_route_is_described() -> None:
    served = {
        (route.path.replace(":path}", "}"), method.lower())  # a {key:path} parameter is {key} in OpenAPI
        for route in (
            *routes.ROUTES,
            *engine_routes.ROUTES,
            *workerd.ROUTES,
            *r2_routes.ROUTES,
            *object_routes.ROUTES,
            *kv_routes.ROUTES,
            *slurper_routes.ROUTES,
            *prober_routes.ROUTES,
            *workflow_routes.ROUTES,
        )
        for method in route.methods or ()
        if method != "HEAD"
    }
    described = {(path, method) for path, ops in document()["paths"].items() for method in ops}
    assert served <= described and described - served == {("/metrics", "get")}


def test_a_request_body_schema_is_closed_and_references_resolve() -> None:
    doc = document()
    schemas = doc["components"]["schemas"]
    assert schemas["BatchRequest"]["additionalProperties"] is False
    assert schemas["PushedMessage"]["required"] == ["body"]
    assert schemas["AckResult"]["required"] == ["ackCount", "retryCount", "warnings"]

    def refs(node: object) -> list[str]:
        if isinstance(node, dict):
            return [node["$ref"]] if "$ref" in node else [r for v in node.values() for r in refs(v)]
        if isinstance(node, list):
            return [r for v in node for r in refs(v)]
        return []

    for ref in refs(doc):
        assert ref.removeprefix("#/components/schemas/") in schemas, ref
