"""``/api/docs``: the REST API's reference for people, drawn from its OpenAPI document (the same
one ``/api/openapi.json`` serves): every route with its parameters, body and answer."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from service.domain.services import Services

if TYPE_CHECKING:
    from service.api.pages.frame import Pages


def routes(pages: Pages, document: Callable[[], Awaitable[dict[str, Any]]]) -> list[Route]:
    async def docs(request: Request, services: Services) -> Response:
        described = await document()
        shared = described["components"]["schemas"]
        tags: dict[str, list[dict[str, Any]]] = {}
        for path, methods in described["paths"].items():
            for method, operation in methods.items():
                tags.setdefault(operation["tags"][0], []).append(reference(path, method, operation, shared))
        return pages.render("api_docs.html", info=described["info"], tags=tags)

    return [Route("/api/docs", pages.page(docs), methods=["GET"])]


def reference(path: str, method: str, operation: dict[str, Any], shared: dict[str, Any]) -> dict[str, Any]:
    """One route as the page lists it: its inputs and its answer's fields, each with its type."""
    body = operation.get("requestBody", {}).get("content", {}).get("application/json", {}).get("schema")
    status, answer = next((s, a) for s, a in operation["responses"].items() if s != "4XX")
    media, content = next(iter(answer["content"].items()))
    return {
        "method": method.upper(),
        "path": path,
        "id": operation["operationId"],
        "summary": operation["summary"],
        "description": operation.get("description", ""),
        "token": operation["security"] == [{"bearer": []}],
        "parameters": [
            (p["name"], p["in"], type_of(p["schema"], shared), p["required"]) for p in operation.get("parameters", [])
        ],
        "body": fields_of(body, shared) if body else [],
        "status": status,
        "media": media,
        "answer": type_of(content["schema"], shared),
        "answer_fields": fields_of(content["schema"], shared),
    }


def resolved(schema: dict[str, Any], shared: dict[str, Any]) -> dict[str, Any]:
    while "$ref" in schema:
        schema = shared[schema["$ref"].rsplit("/", 1)[1]]
    if "allOf" in schema:
        return resolved(schema["allOf"][0], shared)
    return schema


def fields_of(schema: dict[str, Any], shared: dict[str, Any]) -> list[tuple[str, str, bool, str]]:
    """An object's fields (of a list's items, or of a nullable object): name, type, required,
    description."""
    schema = resolved(schema, shared)
    if "anyOf" in schema:
        schema = resolved(schema["anyOf"][0], shared)
    if schema.get("type") == "array":
        schema = resolved(schema["items"], shared)
    required = set(schema.get("required", []))
    return [
        (name, type_of(field, shared), name in required, resolved(field, shared).get("description", "")
         or field.get("description", ""))
        for name, field in schema.get("properties", {}).items()
    ]


def type_of(schema: dict[str, Any], shared: dict[str, Any]) -> str:
    """A schema's type as people read it: ``Int``, ``[Match]``, ``Suit or null``, ``one of A, B``."""
    if "$ref" in schema:
        return str(schema["$ref"].rsplit("/", 1)[1])
    if "allOf" in schema:
        return type_of(schema["allOf"][0], shared)
    if "anyOf" in schema:
        return " or ".join(type_of(s, shared) for s in schema["anyOf"])
    if "enum" in schema:
        return "one of " + ", ".join(schema["enum"])
    kind = schema.get("type")
    if kind == "array":
        return f"[{type_of(schema.get('items', {}), shared)}]"
    if kind == "object":
        return str(schema.get("title", "object"))
    if isinstance(kind, list):
        return " or ".join(kind)
    return str(schema.get("format", kind or "any"))
