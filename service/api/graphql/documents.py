"""Documents parsed, measured and validated once, cached by their text.

strawberry's ParserCache and ValidationCache key their caches by the text and by the parsed
document: the second key hashes the whole syntax tree on every request (for a submitMove,
dozens of node hashes, more than its validation costs to look up). Here a document is looked
up once by its text, and what was found of it (its limit errors, then graphql-core's
validation errors for the schema's rules, the same on every request) kept beside it.

Limits (:mod:`service.api.graphql.limits`) are checked before graphql-core validates: some of
its rules take time that grows with the square of a document's repeated fields.
"""

from __future__ import annotations

import logging
from collections import OrderedDict
from collections.abc import Iterator
from typing import Any

from graphql import DocumentNode, GraphQLError, parse
from strawberry.extensions import SchemaExtension
from strawberry.schema.schema import validate_document

from service.api.graphql.limits import DocumentMeter

log = logging.getLogger("wizard_arena.graphql")


class Document:
    """A parsed document, its errors under ``rules``, and whether each request's variables
    must be measured again for its cost."""

    __slots__ = ("ast", "errors", "recheck_cost", "rules")

    def __init__(self, ast: DocumentNode) -> None:
        self.ast = ast
        self.rules: tuple[Any, ...] | None = None
        self.errors: list[GraphQLError] = []
        self.recheck_cost = False


class Documents:
    """The process's cache of documents (most recently used kept) and the meter of its schema."""

    def __init__(self, maxsize: int = 512) -> None:
        self.maxsize = maxsize
        self.by_key: OrderedDict[tuple[Any, ...], Document] = OrderedDict()
        self.meter: DocumentMeter | None = None


class DocumentCache(SchemaExtension):
    """Parsing, limits and validation, cached together by the query's text.

    A document that does not parse is left to strawberry's own parse: its syntax error (or
    the token limit's) then reaches ``ErrorCodes`` like every other error."""

    def __init__(self, documents: Documents) -> None:
        super().__init__()
        self._documents = documents
        self._document: Document | None = None

    def on_parse(self) -> Iterator[None]:
        context = self.execution_context
        key = (context.query, *context.parse_options.items())
        cache = self._documents.by_key
        document = cache.get(key)
        if document is None and context.query is not None:
            try:
                document = Document(parse(context.query, **context.parse_options))
            except (GraphQLError, RecursionError):
                pass  # parsed again, and refused, inside strawberry's error handling
            else:
                cache[key] = document
                if len(cache) > self._documents.maxsize:
                    cache.popitem(last=False)
        elif document is not None:
            cache.move_to_end(key)
        if document is not None:
            context.graphql_document = document.ast
            self._document = document
        yield

    def on_validate(self) -> Iterator[None]:
        context = self.execution_context
        document = self._document
        if document is not None and context.graphql_document is document.ast:
            rules = tuple(context.validation_rules)
            if document.rules != rules:
                meter = self._documents.meter
                try:
                    errors, document.recheck_cost = ([], False) if meter is None else meter.check(document.ast)
                except Exception:  # a bug of ours: logged, and the document refused as a server error
                    log.exception("measuring a document failed")
                    errors = [GraphQLError("internal error: the server failed to measure this document; it has been "
                                           "logged", extensions={"code": "INTERNAL_ERROR"})]
                if not errors:
                    errors = validate_document(context.schema._schema, document.ast, rules)
                document.errors = errors
                document.rules = rules
            context.pre_execution_errors = document.errors
            if document.recheck_cost and not document.errors and self._documents.meter is not None:
                # a variable sets a bound that, at its largest, puts the cost over the limit
                error = self._documents.meter.cost_error(document.ast, context.operation_name, context.variables or {})
                if error is not None:
                    context.pre_execution_errors = [error]
        yield
