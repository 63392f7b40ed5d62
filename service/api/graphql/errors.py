"""Every GraphQL error gets API.md's ``extensions.code``, here and nowhere else.

Domain and engine errors map through :func:`service.errors.service_error`; errors GraphQL
itself raises (syntax, unknown fields, wrong types) are BAD_INPUT, the limiters' are
LIMIT_EXCEEDED; anything else is a bug, logged and answered as INTERNAL_ERROR with no detail.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Iterator

from graphql import GraphQLError
from strawberry.extensions import SchemaExtension

from service.errors import service_error

log = logging.getLogger("wizard_arena.graphql")

#: graphql-core's "Did you mean ...?" hints (on arguments, types, input fields, enum values);
#: StrawberryConfig(disable_field_suggestions=True) drops only those on output fields.
_SUGGESTION = re.compile(r" ?Did you mean [^?]*\?")


def _is_limit(message: str) -> bool:
    """graphql-core's own limits (the parser's token count and nesting, introspection depth)."""
    return (
        ("Document contains more than" in message and "tokens" in message)
        or "Document is nested too deeply" in message
        or "Maximum introspection depth exceeded" in message
    )


def coded_error(error: GraphQLError) -> GraphQLError:
    original = error.original_error
    if error.path is not None and (original is None or isinstance(original, GraphQLError)):
        # graphql-core failing on our own result (a value it cannot serialise): a bug
        original = RuntimeError(error.message)
    elif original is None or isinstance(original, GraphQLError):
        code = "LIMIT_EXCEEDED" if _is_limit(error.message) else "BAD_INPUT"
        for coded in (original, error):  # a code given where the error was made stands
            if coded is not None and coded.extensions and "code" in coded.extensions:
                code = coded.extensions["code"]
                break
        return GraphQLError(_SUGGESTION.sub("", error.message), error.nodes, error.source, error.positions,
                            error.path, extensions={**(error.extensions or {}), "code": code})
    mapped = service_error(original)
    if mapped is None:
        log.error("unexpected error in %s", error.path, exc_info=original)
        return GraphQLError("internal error: the server failed on this request; it has been logged",
                            error.nodes, error.source, error.positions, error.path,
                            extensions={"code": "INTERNAL_ERROR"})
    return GraphQLError(mapped.message, error.nodes, error.source, error.positions, error.path,
                        extensions=mapped.graphql_extensions())


class ErrorCodes(SchemaExtension):
    """Rewrites the result's errors into coded ones (and counts them). One instance per
    operation (the schema is given the class): it keeps the operation's state.

    A stream (an operation over the WebSocket, a subscription above all) has its results
    coded one by one as they are sent; ``on_operation`` codes the single result of the rest."""

    def on_operation(self) -> Iterator[None]:
        self._streamed = False
        yield
        if not self._streamed:
            self._code(self.execution_context.result)

    def on_stream_result(self, result: object) -> Iterator[None]:
        self._streamed = True
        self._code(result)
        yield

    def _code(self, result: object) -> None:
        errors = getattr(result, "errors", None)
        if errors:
            metrics = getattr(self.execution_context.context, "services", None)
            outages = getattr(metrics, "outages", None)
            if outages is not None:  # Redis or the archive away: logged once, not per request
                for e in errors:
                    if e.original_error is not None:
                        outages.report(e.original_error)
            coded = [coded_error(e) for e in errors]
            result.errors = coded  # type: ignore[attr-defined]
            if metrics is not None:
                for e in coded:
                    metrics.metrics.error(e.extensions["code"])  # type: ignore[index]
