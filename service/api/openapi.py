"""The REST API's OpenAPI 3.1 document, made from the route table (:data:`OPERATIONS`) and the
GraphQL schema: a route's parameters and body are its document's variables, typed as GraphQL
types them; its answer is the document's selection, each field typed as GraphQL types it. So the
document cannot drift from what the routes take and answer. ``GET /api/openapi.json`` serves
it, ``wizard-arena openapi`` prints it, and ``openapi.json`` at the repository root is its
checked-in copy (tests/project/test_openapi_file.py)."""

from __future__ import annotations

import json
from typing import Any

from graphql import (
    FieldNode,
    GraphQLEnumType,
    GraphQLInputObjectType,
    GraphQLInputType,
    GraphQLList,
    GraphQLNonNull,
    GraphQLObjectType,
    GraphQLOutputType,
    GraphQLScalarType,
    GraphQLSchema,
    SelectionSetNode,
    TypeNode,
    type_from_ast,
)
from graphql.pyutils import Undefined

from service.api.rest_api import OPERATIONS
from service.api.rest_graphql import Operation

#: the error codes a client may meet (API.md's, and those added since: README "Errors")
ERROR_SCHEMA: dict[str, Any] = {
    "type": "object",
    "required": ["error"],
    "properties": {
        "error": {
            "type": "object",
            "required": ["code", "message"],
            "properties": {
                "code": {"type": "string", "description": "UNAUTHENTICATED, FORBIDDEN, NOT_FOUND, BAD_INPUT, "
                         "NOT_YOUR_TURN, ILLEGAL_MOVE, STALE_VERSION, MATCH_NOT_ACTIVE, RATE_LIMITED, "
                         "LIMIT_EXCEEDED, …: the README's Errors section lists them"},
                "message": {"type": "string", "description": "what was wrong, and what to do"},
            },
            "additionalProperties": True,
        },
    },
}
SCALARS: dict[str, dict[str, Any]] = {
    "Int": {"type": "integer"},
    "Float": {"type": "number"},
    "String": {"type": "string"},
    "ID": {"type": "string"},
    "Boolean": {"type": "boolean"},
    "DateTime": {"type": "string", "format": "date-time"},
}


def openapi_document(schema: GraphQLSchema, version: str) -> dict[str, Any]:
    paths: dict[str, dict[str, Any]] = {}
    for operation in OPERATIONS:
        paths.setdefault(operation.path, {})[operation.method.lower()] = _operation(schema, operation)
    shared: dict[str, Any] = {"Error": ERROR_SCHEMA}
    paths = _shared_once(paths, shared)
    return {
        "openapi": "3.1.0",
        "info": {
            "title": "Wizard Arena REST API",
            "version": version,
            "description": "A bot's whole life over plain HTTP, beside GraphQL at /graphql with the same rules and "
                           "error codes. Errors answer `{\"error\": {\"code\", \"message\"}}` with a 4xx status. "
                           "Send a bot's token as `Authorization: Bearer <token>` (POST /api/bots gives one).",
        },
        "tags": [{"name": name} for name in dict.fromkeys(o.tag for o in OPERATIONS)],
        "paths": paths,
        "components": {
            "schemas": shared,
            "securitySchemes": {"bearer": {"type": "http", "scheme": "bearer", "description": "a bot's token"}},
            "responses": {"Error": {
                "description": "refused: the code says why and the message what to do",
                "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Error"}}},
            }},
        },
    }


def document_json(schema: GraphQLSchema, version: str) -> str:
    """The document as the checked-in file holds it."""
    return json.dumps(openapi_document(schema, version), indent=2, sort_keys=False) + "\n"


def _shared_once(paths: dict[str, Any], shared: dict[str, Any]) -> dict[str, Any]:
    """``paths`` with every object schema that occurs more than once (a Match, a Bot) written once,
    in ``shared`` under its GraphQL type's name (a second selection of one type: ``Name2``, …),
    and referred to by ``$ref``."""
    seen: dict[str, int] = {}

    def count(node: Any) -> None:
        if isinstance(node, dict):
            if "title" in node and "properties" in node:
                key = json.dumps(node, sort_keys=True)
                seen[key] = seen.get(key, 0) + 1
            for value in node.values():
                count(value)
        elif isinstance(node, list):
            for value in node:
                count(value)

    names: dict[str, str] = {}

    def replace(node: Any) -> Any:
        if isinstance(node, dict):
            if "title" in node and "properties" in node:
                key = json.dumps(node, sort_keys=True)
                if seen[key] > 1:
                    if key not in names:
                        # a reference to a thing (its id and name) is a ``…Ref``; another
                        # selection of a type already named, ``…2``, …
                        base = node["title"] + ("Ref" if set(node["properties"]) <= {"id", "name"} else "")
                        name, n = base, 1
                        while name in shared:
                            n += 1
                            name = f"{base}{n}"
                        names[key] = name
                        shared[name] = {k: replace(v) for k, v in node.items()}
                    return {"$ref": f"#/components/schemas/{names[key]}"}
            return {k: replace(v) for k, v in node.items()}
        if isinstance(node, list):
            return [replace(v) for v in node]
        return node

    count(paths)
    return {path: replace(methods) for path, methods in paths.items()}


def _operation(schema: GraphQLSchema, operation: Operation) -> dict[str, Any]:
    definition = operation.definition
    variables = {name: _variable_type(schema, v.type) for name, v in operation.variables.items()}
    defaults = {name for name, v in operation.variables.items() if v.default_value is not None}
    described: dict[str, Any] = {
        "operationId": operation.name,
        "summary": operation.summary,
        "tags": [operation.tag],
    }
    if operation.description:
        described["description"] = operation.description
    parameters = [
        {"name": name, "in": "path", "required": True, "schema": _input_schema(variables[name])}
        for name in operation.path_params
    ]
    parameters += [
        {"name": name, "in": "query", "required": isinstance(variables[name], GraphQLNonNull) and name not in defaults,
         "schema": _input_schema(variables[name])}
        for name in operation.query_params
    ]
    if parameters:
        described["parameters"] = parameters
    body = _body(operation, variables, defaults)
    if body is not None:
        described["requestBody"] = {"required": operation.body == "input" or bool(operation.flat_body),
                                    "content": {"application/json": {"schema": body}}}
    if operation.response is not None:
        content = operation.response
    else:
        root = schema.mutation_type if definition.operation.value == "mutation" else schema.query_type
        assert root is not None
        answer = _selected(root, definition.selection_set)
        for name in operation.pick or (operation.root_field,):
            answer = _non_null(answer)["properties"][name]
        if not operation.nullable:  # a null answer is NOT_FOUND (missing), or never made
            answer = _non_null(answer)
        content = {"application/json": {"schema": answer}}
    answered: dict[str, Any] = {"description": operation.summary, "content": content}
    if operation.headers:
        answered["headers"] = {
            name: {"description": what, "schema": {"type": "string"}} for name, what in operation.headers.items()
        }
    described["responses"] = {
        str(operation.status): answered,
        "4XX": {"$ref": "#/components/responses/Error"},
    }
    described["security"] = [{"bearer": []}] if operation.needs_token else [{}, {"bearer": []}]
    return described


def _body(operation: Operation, variables: dict[str, GraphQLInputType], defaults: set[str]) -> dict[str, Any] | None:
    if operation.flat_body:
        first, *others = operation.flat_body
        flattened = _input_schema_of(_strip(variables[first]))
        for name in others:
            flattened["properties"][name] = _input_schema(variables[name])
        return flattened
    if operation.body == "input":
        return _input_schema_of(_strip(variables["input"]))
    if operation.body == "fields":
        fields = [name for name in variables if name not in operation.path_params]
        return {
            "type": "object",
            "properties": {name: _input_schema(variables[name]) for name in fields},
            "required": [n for n in fields if isinstance(variables[n], GraphQLNonNull) and n not in defaults],
            "additionalProperties": False,
        }
    return None


def _variable_type(schema: GraphQLSchema, node: TypeNode) -> GraphQLInputType:
    found = type_from_ast(schema, node)
    assert found is not None, node
    return found  # type: ignore[return-value]


def _strip(kind: Any) -> Any:
    return kind.of_type if isinstance(kind, GraphQLNonNull) else kind


def _nullable(schema: dict[str, Any]) -> dict[str, Any]:
    return {"anyOf": [schema, {"type": "null"}]}


def _non_null(schema: dict[str, Any]) -> dict[str, Any]:
    return schema["anyOf"][0] if "anyOf" in schema else schema


def _input_schema(kind: GraphQLInputType) -> dict[str, Any]:
    if isinstance(kind, GraphQLNonNull):
        return _input_schema_of(kind.of_type)
    return _nullable(_input_schema_of(kind))


def _input_schema_of(kind: Any) -> dict[str, Any]:
    if isinstance(kind, GraphQLList):
        return {"type": "array", "items": _input_schema(kind.of_type)}
    if isinstance(kind, GraphQLInputObjectType):
        return {
            "type": "object",
            "properties": {name: _described(_input_schema(f.type), f.description) for name, f in kind.fields.items()},
            "required": [name for name, f in kind.fields.items()
                         if isinstance(f.type, GraphQLNonNull) and f.default_value is Undefined],
            "additionalProperties": False,
        }
    return _leaf(kind)


def _leaf(kind: Any) -> dict[str, Any]:
    if isinstance(kind, GraphQLEnumType):
        return {"type": "string", "enum": list(kind.values)}
    assert isinstance(kind, GraphQLScalarType), kind
    return dict(SCALARS.get(kind.name, {}))


def _output_schema(kind: GraphQLOutputType, selection: SelectionSetNode | None) -> dict[str, Any]:
    if isinstance(kind, GraphQLNonNull):
        return _output_schema_of(kind.of_type, selection)
    return _nullable(_output_schema_of(kind, selection))


def _output_schema_of(kind: Any, selection: SelectionSetNode | None) -> dict[str, Any]:
    if isinstance(kind, GraphQLList):
        return {"type": "array", "items": _output_schema(kind.of_type, selection)}
    if isinstance(kind, GraphQLObjectType):
        assert selection is not None, kind
        return _selected(kind, selection)
    return _leaf(kind)


def _selected(kind: GraphQLObjectType, selection: SelectionSetNode) -> dict[str, Any]:
    properties: dict[str, Any] = {}
    for node in selection.selections:
        assert isinstance(node, FieldNode), node
        field = kind.fields[node.name.value]
        key = node.alias.value if node.alias else node.name.value
        properties[key] = _described(_output_schema(field.type, node.selection_set), field.description)
    return {"title": kind.name, "type": "object", "properties": properties, "required": list(properties),
            "additionalProperties": False}


def _described(schema: dict[str, Any], description: str | None) -> dict[str, Any]:
    """``schema`` with a field's description (beside an object's schema, not in it: an object
    selected alike stays one schema wherever it is)."""
    if not description:
        return schema
    if "title" in schema:
        return {"allOf": [schema], "description": description}
    return {**schema, "description": description}

