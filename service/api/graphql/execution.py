"""Execution of the selections that every bot makes on every turn, at the cost of reading them.

A seated bot asks for its view on every turn (``awaitTurn``, ``myTurns``), and graphql-core
completes each of the view's ~60 fields through its general machinery: a resolve info, the
field's resolver, awaitable checks, error paths. For the types whose fields are all plain
attributes (``Match`` and what it holds: seats, moves, tricks; no arguments, no resolver, no
extension), :class:`ArenaExecutionContext` completes a selection by reading the attributes
and coercing the leaves itself, which is what graphql-core does for such fields, minus the
machinery; anything else (``@defer``, a null where the schema promises a value, an abstract
type) is left to graphql-core, which answers it as before. ``test_execution.py`` holds the
two to the same answers.

A selection is compiled once: the first request that makes it turns it into a tree of small
functions (read this attribute, coerce it as an Int, complete each item of this list with
that), kept by the identity of the selection's nodes in the parsed document (which the
service's DocumentCache keeps: a bot's same query is the same nodes), so later requests
only run the tree. A selection under ``@skip``/``@include`` (or any directive) collects its
fields by the request's variables, so it is compiled for its request alone.

A match's answer is also shared: the object a selection of ``Match`` completes to is kept with
the match as the process holds it (the feed's snapshot of one version, shared by all its
waiters), by the viewer's seat and the selection, so a version is completed once for the
subscribers of a seat and once for all of a match's spectators, not once per subscriber.
"""

from __future__ import annotations

import math
import weakref
from collections.abc import Callable, Collection
from typing import Any

from graphql import (
    FieldNode,
    FragmentSpreadNode,
    GraphQLBoolean,
    GraphQLEnumType,
    GraphQLFloat,
    GraphQLID,
    GraphQLInt,
    GraphQLList,
    GraphQLNonNull,
    GraphQLObjectType,
    GraphQLOutputType,
    GraphQLScalarType,
    GraphQLString,
    InlineFragmentNode,
)
from graphql.execution.collect_fields import CollectedFields, FieldDetailsList, FragmentDetails, GroupedFieldSet
from graphql.pyutils import Path, Undefined
from strawberry.schema.schema import StrawberryGraphQLCoreExecutionContext

from service.api.graphql.types import LiveMatchType
from service.model.live_match import LiveMatch

#: by GraphQL object type: the Python attribute of each field that is a plain attribute (no
#: resolver, no arguments, no extension); None for a type with an ``is_type_of`` check. A
#: selection of any other field is graphql-core's.
_Plan = dict[str, str] | None
_plans: dict[GraphQLObjectType, _Plan] = {}

#: a compiled selection, or a compiled field's value: completes what it is given to its answer
#: (raises _Fallback where graphql-core must answer instead)
_Complete = Callable[[Any], Any]
#: selections kept at most: bots send a few documents each, and a flood of new ones starts
#: over; as many as the DocumentCache keeps documents, so that the nodes kept here hold no
#: more documents in memory than it does
MAX_COMPILED = 512
#: what a _ByNodes keeper has not kept
_MISSING: Any = object()


def _same_nodes(kept: tuple[object, ...], nodes: tuple[object, ...]) -> bool:
    return all(a is b for a, b in zip(kept, nodes, strict=True))


class _ByNodes:
    """What was worked out for a selection, kept across requests by (object type, the
    selection's nodes by identity): the nodes are kept with it, so an id is never reused while
    its entry lives. At most MAX_COMPILED entries: a flood of new documents starts over."""

    __slots__ = ("entries",)

    def __init__(self) -> None:
        self.entries: dict[tuple[GraphQLObjectType, tuple[int, ...]], tuple[tuple[object, ...], Any]] = {}

    def get(self, object_type: GraphQLObjectType, nodes: tuple[object, ...], ids: tuple[int, ...]) -> Any:
        kept = self.entries.get((object_type, ids))
        return kept[1] if kept is not None and _same_nodes(kept[0], nodes) else _MISSING

    def put(self, object_type: GraphQLObjectType, nodes: tuple[object, ...], ids: tuple[int, ...], value: Any) -> None:
        if len(self.entries) >= MAX_COMPILED:
            self.entries.clear()
        self.entries[object_type, ids] = (nodes, value)


#: compiled selections (None: not compilable)
_compiled = _ByNodes()
#: the fields graphql-core collected under a field, for selections that collect the same
#: fields whatever the request
_collected = _ByNodes()

#: completed selections of ``Match``, by match (as this process holds it), then by
#: (version, viewer seat, the selection's field nodes by identity): the nodes are kept with the
#: answer, so an id is never reused while its entry lives
_Answers = dict[tuple[int, int | None, tuple[int, ...]], tuple[tuple[object, ...], dict[str, Any]]]
#: by ``id(match)``, with a weak reference that drops the entry with the match (a LiveMatch is
#: mutable, so not hashable: it is known by its identity)
_answers: dict[int, tuple[weakref.ref[LiveMatch], _Answers]] = {}
#: answers kept per match at most (a match has a few seats and a few selections in use)
MAX_ANSWERS_PER_MATCH = 32

_INT_MIN, _INT_MAX = -(2**31), 2**31 - 1


class _Fallback(Exception):
    """This value needs graphql-core's general completion."""


def _plan(object_type: GraphQLObjectType) -> _Plan:
    try:
        return _plans[object_type]
    except KeyError:
        pass
    plan: _Plan = None
    if object_type.is_type_of is None:
        plan = {}
        for name, field in object_type.fields.items():
            definition = field.extensions.get("strawberry-definition")
            if not field.args and definition is not None and definition.is_basic_field:
                plan[name] = definition.python_name
    _plans[object_type] = plan
    return plan


def _forget(match_key: int) -> Any:
    def forget(_: object) -> None:
        _answers.pop(match_key, None)

    return forget


def _deferred(fields: GroupedFieldSet) -> bool:
    return any(details.defer_usage is not None for details_list in fields.values() for details in details_list)


def _conditional(selections: Collection[Any], fragments: dict[str, FragmentDetails], seen: set[str]) -> bool:
    """Whether these selections (and those under them, through fragments too) collect fields
    by the request: a directive (``@skip``, ``@include``, ``@defer``, …) or a fragment given
    arguments."""
    for node in selections:
        if node.directives:
            return True
        if isinstance(node, FragmentSpreadNode):
            if getattr(node, "arguments", None):
                return True
            name = node.name.value
            if name not in seen:
                seen.add(name)
                details = fragments.get(name)
                if details is None or _conditional(details.definition.selection_set.selections, fragments, seen):
                    return True
        elif isinstance(node, FieldNode | InlineFragmentNode) and node.selection_set is not None:
            if _conditional(node.selection_set.selections, fragments, seen):
                return True
    return False


def _leaf(leaf_type: GraphQLScalarType | GraphQLEnumType) -> _Complete:
    """Coerce a nullable leaf as graphql-core does: the built-in scalars' own values pass as
    they are; an enum's names are remembered by value; anything else through the type."""
    coerce = leaf_type.coerce_output_value

    def coerced(value: Any) -> Any:
        if value is None:
            return None
        result = coerce(value)
        if result is None or result is Undefined:
            raise _Fallback
        return result

    if isinstance(leaf_type, GraphQLEnumType):
        names: dict[tuple[type, Any], Any] = {}

        def enum(value: Any) -> Any:
            try:
                return names[type(value), value]
            except KeyError:
                name = names[type(value), value] = coerced(value)
                return name
            except TypeError:  # unhashable: never an enum's value, but graphql-core says so
                return coerced(value)

        return enum
    exact: type | None = None
    if leaf_type is GraphQLInt:

        def int_(value: Any) -> Any:
            return value if type(value) is int and _INT_MIN <= value <= _INT_MAX else coerced(value)

        return int_
    if leaf_type is GraphQLFloat:

        def float_(value: Any) -> Any:
            return value if type(value) is float and math.isfinite(value) else coerced(value)

        return float_
    if leaf_type is GraphQLString or leaf_type is GraphQLID:
        exact = str
    elif leaf_type is GraphQLBoolean:
        exact = bool
    if exact is None:
        return coerced

    def exactly(value: Any) -> Any:
        return value if type(value) is exact else coerced(value)

    return exactly


def _non_null(complete: _Complete) -> _Complete:
    def non_null(value: Any) -> Any:
        if value is None:
            raise _Fallback  # graphql-core's error, with its path
        return complete(value)

    return non_null


def _list(complete: _Complete) -> _Complete:
    def items(value: Any) -> Any:
        return None if value is None else [complete(item) for item in value]

    return items


def _nullable(complete: _Complete) -> _Complete:
    def nullable(value: Any) -> Any:
        return None if value is None else complete(value)

    return nullable


def _object(entries: tuple[tuple[str, str | None, Any], ...]) -> _Complete:
    """Complete an object: each (response key, attribute, its completion), or (response key,
    None, the type's name) for ``__typename``."""

    def complete(source: Any) -> dict[str, Any]:
        answer: dict[str, Any] = {}
        for key, attribute, complete_value in entries:
            answer[key] = complete_value if attribute is None else complete_value(getattr(source, attribute))
        return answer

    return complete


class ArenaExecutionContext(StrawberryGraphQLCoreExecutionContext):
    """strawberry's execution context, completing plain-attribute types directly."""

    def execute_collected_subfields(
        self,
        parent_type: GraphQLObjectType,
        source_value: Any,
        path: Path,
        grouped_field_set: GroupedFieldSet,
        new_defer_usages: Any,
        position_context: Any,
    ) -> Any:
        if _plan(parent_type) is not None and not new_defer_usages and not _deferred(grouped_field_set):
            # (deferred: a kept selection may be deferred in another request, by @defer's `if`)
            try:
                return self._complete_selection(parent_type, source_value, grouped_field_set)
            except Exception:  # noqa: BLE001 (_Fallback, or an error graphql-core reports at its field)
                pass
        return super().execute_collected_subfields(
            parent_type, source_value, path, grouped_field_set, new_defer_usages, position_context
        )

    def collect_subfields(self, return_type: GraphQLObjectType, field_details_list: FieldDetailsList) -> CollectedFields:
        """graphql-core's, kept across requests: the selection under a field (a turn's view, on
        every turn) is visited once, not once per request, unless what it collects depends on
        the request (a directive, a fragment's arguments, @defer)."""
        if any(d.defer_usage is not None or d.fragment_variable_values is not None for d in field_details_list):
            return super().collect_subfields(return_type, field_details_list)
        nodes = tuple(details.node for details in field_details_list)
        ids = tuple(map(id, nodes))
        collected: CollectedFields = _collected.get(return_type, nodes, ids)
        if collected is not _MISSING:
            return collected
        collected = super().collect_subfields(return_type, field_details_list)
        if not collected.new_defer_usages and not collected.forbidden_directive_instances and not _conditional(
            nodes, self.fragments, set()
        ):
            _collected.put(return_type, nodes, ids, collected)
        return collected

    def _complete_selection(self, object_type: GraphQLObjectType, source: Any, fields: GroupedFieldSet) -> Any:
        nodes = tuple(details.node for details_list in fields.values() for details in details_list)
        ids = tuple(map(id, nodes))
        complete: _Complete | None = _compiled.get(object_type, nodes, ids)
        shared = complete is not _MISSING
        if not shared:
            shared = not _conditional(nodes, self.fragments, set())
            try:
                complete = self._compile_object(object_type, fields)
            except _Fallback:
                complete = None
            if shared:
                _compiled.put(object_type, nodes, ids, complete)
        if complete is None:
            raise _Fallback
        if shared and isinstance(source, LiveMatchType):
            return self._shared_answer(complete, source, nodes, ids)
        return complete(source)

    @staticmethod
    def _shared_answer(
        complete: _Complete, source: LiveMatchType, nodes: tuple[object, ...], ids: tuple[int, ...]
    ) -> dict[str, Any]:
        live = source.live
        key = (live.version, source.viewer_seat, ids)
        entry = _answers.get(id(live))
        kept = entry[1] if entry is not None and entry[0]() is live else None
        if kept is not None:
            found = kept.get(key)
            if found is not None and _same_nodes(found[0], nodes):
                return found[1]
        answer: dict[str, Any] = complete(source)
        if kept is None:
            kept = {}
            _answers[id(live)] = (weakref.ref(live, _forget(id(live))), kept)
        elif len(kept) >= MAX_ANSWERS_PER_MATCH:
            kept.clear()
        kept[key] = (nodes, answer)
        return answer

    def _compile_object(self, object_type: GraphQLObjectType, fields: GroupedFieldSet) -> _Complete:
        plan = _plan(object_type)
        if plan is None or _deferred(fields):
            raise _Fallback
        entries: list[tuple[str, str | None, Any]] = []
        for response_key, details_list in fields.items():
            name = details_list[0].node.name.value
            if name == "__typename":
                entries.append((response_key, None, object_type.name))
                continue
            attribute = plan.get(name)
            if attribute is None:  # a resolver's field, or introspection other than __typename
                raise _Fallback
            entries.append((response_key, attribute, self._compile_value(object_type.fields[name].type, details_list)))
        return _object(tuple(entries))

    def _compile_value(self, return_type: GraphQLOutputType, details_list: FieldDetailsList) -> _Complete:
        if isinstance(return_type, GraphQLNonNull):
            return _non_null(self._compile_value(return_type.of_type, details_list))
        if isinstance(return_type, GraphQLScalarType | GraphQLEnumType):
            return _leaf(return_type)
        if isinstance(return_type, GraphQLList):
            return _list(self._compile_value(return_type.of_type, details_list))
        if isinstance(return_type, GraphQLObjectType):
            grouped, defer_usages, _ = self.collect_subfields(return_type, details_list)
            if defer_usages:
                raise _Fallback
            return _nullable(self._compile_object(return_type, grouped))
        raise _Fallback  # an interface or a union


__all__ = ["ArenaExecutionContext"]
