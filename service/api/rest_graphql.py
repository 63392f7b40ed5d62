"""REST routes that each run one fixed GraphQL operation: the same resolvers, rules, limits and
error codes as GraphQL, written once, with the REST shape of a route read off its operation.

An :class:`Operation` names its GraphQL document; its inputs are the document's variables, each
taken from where the route puts it: a path parameter of the same name (``/api/bots/{id}`` fills
``$id``), a query parameter of the same name (GET), or the JSON body (``body="input"``: the
whole body is ``$input``; ``body="fields"``: each key of the body is the variable of its name).
The answer is the operation's one root field as JSON, with ``status``; a null answer is
``NOT_FOUND`` (``missing`` says what was not found). An error is the first GraphQL error's code
and message, in the REST shape ``{"error": {"code", "message", ...}}``, with that code's HTTP
status. :mod:`service.api.openapi` describes the same routes from the same documents."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import dataclass
from functools import cached_property
from typing import Any

from graphql import (
    DocumentNode,
    GraphQLEnumType,
    GraphQLSchema,
    ListTypeNode,
    NonNullTypeNode,
    OperationDefinitionNode,
    TypeNode,
    VariableDefinitionNode,
    parse,
    print_ast,
)
from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from service.api.graphql.context import RequestContext
from service.api.rest import error_response
from service.domain.services import Services
from service.errors import BadInput, NotFound, ServiceError, Unauthenticated, coded_error

_INT = re.compile(r"-?[0-9]{1,15}")
#: GraphQL's name for a route's input, in a message: REST names it by its parameter or field
_VARIABLE = re.compile(r"Variable '\$(\w+)'")


@dataclass(frozen=True)
class Operation:
    method: str
    path: str
    #: the OpenAPI operationId (also the route's name)
    name: str
    summary: str
    tag: str
    document: str
    body: str | None = None
    status: int = 200
    missing: str | None = None
    needs_token: bool = False
    description: str = ""
    #: the answer: the field at this path of the result's data (default: the root field)
    pick: tuple[str, ...] = ()
    #: served by a handler of its own (service.api.rest), not by running the document
    direct: bool = False
    #: the answer's media types and schemas, where the document does not describe it
    response: dict[str, Any] | None = None
    #: the body of a direct route: the fields of the input variable named first, beside the
    #: other variables named (a move: ``{"bid": 2, "expectedVersion": 7}``)
    flat_body: tuple[str, ...] = ()
    #: whether null is an answer (the turn long-poll's "nothing yet")
    nullable: bool = False
    #: headers the answer carries: name -> what it says
    headers: dict[str, str] | None = None

    @cached_property
    def parsed(self) -> DocumentNode:
        return parse(self.document)

    @cached_property
    def definition(self) -> OperationDefinitionNode:
        [definition] = self.parsed.definitions
        assert isinstance(definition, OperationDefinitionNode)
        return definition

    @cached_property
    def root_field(self) -> str:
        [selection] = self.definition.selection_set.selections
        return selection.alias.value if selection.alias else selection.name.value  # type: ignore[attr-defined]

    @cached_property
    def variables(self) -> dict[str, VariableDefinitionNode]:
        return {v.variable.name.value: v for v in self.definition.variable_definitions or ()}

    @cached_property
    def path_params(self) -> list[str]:
        return re.findall(r"\{(\w+)\}", self.path)

    @cached_property
    def query_params(self) -> list[str]:
        """The variables a GET takes from the query string (those not in the path)."""
        if self.method != "GET":
            return []
        return [name for name in self.variables if name not in self.path_params]


def named_type(node: TypeNode) -> str:
    while isinstance(node, NonNullTypeNode | ListTypeNode):
        node = node.type
    return node.name.value  # type: ignore[attr-defined]


def from_query(name: str, given: str, definition: VariableDefinitionNode, schema: GraphQLSchema) -> Any:
    """A query parameter's text as its variable's type reads it: a whole number for an Int, a
    number for a Float, true or false for a Boolean, one of an enum's values, the text itself
    otherwise (an ID, a date: GraphQL checks it)."""
    kind = named_type(definition.type)
    enum = schema.get_type(kind)
    if isinstance(enum, GraphQLEnumType):
        if given not in enum.values:
            raise BadInput(f"{name} must be one of {', '.join(enum.values)}, not {given!r}")
        return given
    if kind == "Int":
        if not _INT.fullmatch(given):
            raise BadInput(f"{name} must be a whole number, not {given!r}")
        return int(given)
    if kind == "Float":
        try:
            return float(given)
        except ValueError:
            raise BadInput(f"{name} must be a number, not {given!r}") from None
    if kind == "Boolean":
        if given not in ("true", "false"):
            raise BadInput(f"{name} must be true or false, not {given!r}")
        return given == "true"
    return given


class GraphQLRoutes:
    """Runs :class:`Operation` s over a strawberry schema for REST requests."""

    def __init__(self, schema: Any, services_of: Callable[[Request], Services]) -> None:
        self.schema = schema
        self.services_of = services_of

    def endpoint(self, operation: Operation) -> Callable[[Request], Any]:
        async def run(request: Request) -> Response:
            try:
                variables = await self._variables(operation, request)
                context = RequestContext.for_http(self.services_of(request), request, None)
                if operation.needs_token and context.token is None:
                    raise Unauthenticated("send `Authorization: Bearer <token>` (POST /api/bots gives one)")
                result = await self.schema.execute(
                    operation.document, variable_values=variables, context_value=context,
                )
            except ServiceError as error:
                return error_response(error)
            if result.errors:
                first = result.errors[0]
                extensions = dict(first.extensions or {})
                message = _VARIABLE.sub(r"'\1'", first.message)
                return error_response(coded_error(str(extensions.pop("code", "BAD_INPUT")), message, extensions))
            answer: Any = result.data or {}
            for name in operation.pick or (operation.root_field,):
                answer = answer.get(name) if isinstance(answer, dict) else None
            if answer is None and operation.missing is not None:
                return error_response(NotFound(operation.missing.format(**request.path_params)))
            return JSONResponse(answer, operation.status)

        run.__name__ = operation.name
        return run

    async def _variables(self, operation: Operation, request: Request) -> dict[str, Any]:
        variables: dict[str, Any] = {
            # (a whole number in the path, a ladder's players, read as the Int it stands for)
            name: from_query(name, request.path_params[name], operation.variables[name], self.schema._schema)
            if named_type(operation.variables[name].type) == "Int" else request.path_params[name]
            for name in operation.path_params
        }
        if operation.method == "GET":
            unknown = sorted(set(request.query_params) - set(operation.query_params))
            if unknown:
                allowed = ", ".join(operation.query_params) or "none"
                raise BadInput(f"unknown parameter {unknown[0]!r}: the parameters are {allowed}")
            for name, given in request.query_params.items():
                variables[name] = from_query(name, given, operation.variables[name], self.schema._schema)
            self._check_required(operation, variables, "parameter")
            return variables
        if operation.body is None:
            return variables
        raw = await request.body()
        if not raw.strip() and operation.body == "input":
            raise BadInput("send the input as a JSON object body (Content-Type: application/json); {} takes every default")
        try:
            body = json.loads(raw) if raw.strip() else {}
        except ValueError:
            raise BadInput("the body is not JSON: send a JSON object (Content-Type: application/json)") from None
        if not isinstance(body, dict):
            raise BadInput("the body must be a JSON object")
        if operation.body == "input":
            variables["input"] = body
            return variables
        fields = [name for name in operation.variables if name not in operation.path_params]
        unexpected = sorted(set(body) - set(fields))
        if unexpected:
            raise BadInput(f"unknown field {unexpected[0]!r}: the body's fields are {', '.join(fields) or 'none'}")
        variables.update(body)
        self._check_required(operation, variables, "field")
        return variables

    @staticmethod
    def _check_required(operation: Operation, variables: dict[str, Any], what: str) -> None:
        for name, definition in operation.variables.items():
            required = isinstance(definition.type, NonNullTypeNode) and definition.default_value is None
            if required and variables.get(name) is None:
                raise BadInput(f"{name} is required: the {what} {name} ({print_ast(definition.type)}) is missing")
