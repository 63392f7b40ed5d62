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

A match's answer is also shared: the object a selection of ``Match`` completes to is kept with
the match as the process holds it (the feed's snapshot of one version, shared by all its
waiters), by the viewer's seat and the selection, so a version is completed once for the
subscribers of a seat and once for all of a match's spectators, not once per subscriber.
"""

from __future__ import annotations

import weakref
from typing import Any

from graphql import (
    GraphQLEnumType,
    GraphQLList,
    GraphQLNonNull,
    GraphQLObjectType,
    GraphQLOutputType,
    GraphQLScalarType,
)
from graphql.execution.collect_fields import FieldDetailsList, GroupedFieldSet
from graphql.pyutils import Path, Undefined
from strawberry.schema.schema import StrawberryGraphQLCoreExecutionContext

from service.api.graphql.types import LiveMatchType
from service.model.live_match import LiveMatch

#: by GraphQL object type: the Python attribute of each field that is a plain attribute (no
#: resolver, no arguments, no extension); None for a type with an ``is_type_of`` check. A
#: selection of any other field is graphql-core's.
_Plan = dict[str, str] | None
_plans: dict[GraphQLObjectType, _Plan] = {}

#: completed selections of ``Match``, by match (as this process holds it), then by
#: (version, viewer seat, the selection's field nodes by identity): the nodes are kept with the
#: answer, so an id is never reused while its entry lives
_Answers = dict[tuple[int, int | None, tuple[int, ...]], tuple[tuple[object, ...], dict[str, Any]]]
#: by ``id(match)``, with a weak reference that drops the entry with the match (a LiveMatch is
#: mutable, so not hashable: it is known by its identity)
_answers: dict[int, tuple[weakref.ref[LiveMatch], _Answers]] = {}
#: answers kept per match at most (a match has a few seats and a few selections in use)
MAX_ANSWERS_PER_MATCH = 32


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
        plan = _plan(parent_type)
        if plan is not None and not new_defer_usages and not _deferred(grouped_field_set):
            try:
                if isinstance(source_value, LiveMatchType):
                    return self._shared_answer(parent_type, plan, source_value, grouped_field_set)
                return self._complete_object(parent_type, plan, source_value, grouped_field_set)
            except Exception:  # noqa: BLE001 (_Fallback, or an error graphql-core reports at its field)
                pass
        return super().execute_collected_subfields(
            parent_type, source_value, path, grouped_field_set, new_defer_usages, position_context
        )

    def _shared_answer(
        self, match_type: GraphQLObjectType, plan: dict[str, str], source: LiveMatchType, fields: GroupedFieldSet
    ) -> dict[str, Any]:
        live, seat = source.live, source.viewer_seat
        nodes = tuple(details.node for details_list in fields.values() for details in details_list)
        key = (live.version, seat, tuple(map(id, nodes)))
        entry = _answers.get(id(live))
        kept = entry[1] if entry is not None and entry[0]() is live else None
        if kept is not None:
            found = kept.get(key)
            if found is not None and all(a is b for a, b in zip(found[0], nodes, strict=True)):
                return found[1]
        answer = self._complete_object(match_type, plan, source, fields)
        if kept is None:
            kept = {}
            _answers[id(live)] = (weakref.ref(live, _forget(id(live))), kept)
        elif len(kept) >= MAX_ANSWERS_PER_MATCH:
            kept.clear()
        kept[key] = (nodes, answer)
        return answer

    def _complete_object(
        self, object_type: GraphQLObjectType, plan: dict[str, str], source: Any, fields: GroupedFieldSet
    ) -> dict[str, Any]:
        answer: dict[str, Any] = {}
        object_fields = object_type.fields
        for response_key, details_list in fields.items():
            name = details_list[0].node.name.value
            if name == "__typename":
                answer[response_key] = object_type.name
                continue
            attribute = plan.get(name)
            if attribute is None:  # a resolver's field, or introspection other than __typename
                raise _Fallback
            answer[response_key] = self._complete(object_fields[name].type, details_list, getattr(source, attribute))
        return answer

    def _complete(self, return_type: GraphQLOutputType, details_list: FieldDetailsList, value: Any) -> Any:
        if isinstance(return_type, GraphQLNonNull):
            if value is None:
                raise _Fallback  # graphql-core's error, with its path
            return_type = return_type.of_type
        if value is None:
            return None
        if isinstance(return_type, GraphQLScalarType | GraphQLEnumType):
            coerced = return_type.coerce_output_value(value)
            if coerced is None or coerced is Undefined:
                raise _Fallback
            return coerced
        if isinstance(return_type, GraphQLList):
            item_type = return_type.of_type
            return [self._complete(item_type, details_list, item) for item in value]
        if isinstance(return_type, GraphQLObjectType):
            plan = _plan(return_type)
            if plan is None:
                raise _Fallback
            grouped, defer_usages, _ = self.collect_subfields(return_type, details_list)
            if defer_usages or _deferred(grouped):
                raise _Fallback
            return self._complete_object(return_type, plan, value, grouped)
        raise _Fallback  # an interface or a union


__all__ = ["ArenaExecutionContext"]
