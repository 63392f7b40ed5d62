"""What one GraphQL document may ask of the server, measured before anything else looks at it.

The measures, each taken in one pass over the document that visits every fragment once (a
fragment spread twice is looked up, not walked again, and fragments are ordered with a stack
of our own, so neither a fragment bomb nor a long chain of fragments makes measuring costly):

- **depth**: how deeply fields nest (a field with a selection is one level; introspection
  fields are left out, graphql-core bounds those itself);
- **aliases**: aliased fields in the document, a fragment's counted as often as it is spread;
- **cost**: how many fields the answer can hold at most: every field counts 1, and what is
  selected under a list of objects counts once per item the list can hold (its *bound*);
- **fragment nesting**: how deeply fragment spreads nest inside one another;
- **repeats**: how often one response name is selected in one selection set, fragments and
  inline fragments merged in. graphql-core's OverlappingFieldsCanBeMerged compares such
  fields pairwise: 900 copies of ``seats { seat }`` in a 3 KB document cost it 0.7 s of CPU.

A document over a limit is refused before graphql-core validates it, with LIMIT_EXCEEDED, the
measure and the limit. Every list of objects in the schema declares its bound
(:class:`ListBound`, in the field's ``metadata``): a number the rules imply (six seats at
most), or an argument such as ``first``, its default and its largest allowed value. A
connection (``matches(first:)``) carries the bound of its page on the connection field, and
its ``edges`` the bound 1: what a page can hold is counted once. A bound
set by a variable counts at the argument's largest value; only when that puts the document
over the cost limit is it measured again with the request's variables (:meth:`DocumentMeter.cost`).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from graphql import (
    DocumentNode,
    FieldNode,
    FragmentDefinitionNode,
    FragmentSpreadNode,
    GraphQLError,
    GraphQLList,
    GraphQLNonNull,
    GraphQLObjectType,
    GraphQLSchema,
    InlineFragmentNode,
    IntValueNode,
    OperationDefinitionNode,
    SelectionSetNode,
    VariableNode,
    get_named_type,
    is_composite_type,
)

from service.errors import BadInput

#: the key of a field's ``metadata`` that holds its :class:`ListBound`
BOUND = "list_bound"


@dataclass(frozen=True, slots=True)
class ListBound:
    """How many items a list field can answer: ``size``, or the value of the argument
    ``argument`` (``default`` when it is left out), which may not exceed ``size``."""

    size: int
    argument: str | None = None
    default: int | None = None

    def metadata(self) -> dict[str, ListBound]:
        return {BOUND: self}

    def check(self, value: object, lowest: int = 1) -> int:
        """The argument's value, refused unless it is a whole number from ``lowest`` to ``size``."""
        if isinstance(value, bool) or not isinstance(value, int) or not lowest <= value <= self.size:
            raise BadInput(f"{self.argument} must be from {lowest} to {self.size}, not {value!r}")
        return value

    def of(self, node: FieldNode, variables: Mapping[str, Any] | None) -> tuple[int, bool]:
        """The bound of one use of the field, and whether a variable not known yet set it."""
        if self.argument is None:
            return self.size, False
        for argument in node.arguments or ():
            if argument.name.value != self.argument:
                continue
            value = argument.value
            if isinstance(value, VariableNode):
                if variables is None:
                    return self.size, True
                given = variables.get(value.name.value, self.default)
                return (given if isinstance(given, int) and 0 <= given <= self.size else self.size), False
            if isinstance(value, IntValueNode):
                return max(0, min(int(value.value), self.size)), False
            return self.size, False  # not an Int: graphql-core refuses the document anyway
        return self.size if self.default is None else self.default, False


@dataclass(frozen=True, slots=True)
class Limits:
    max_depth: int
    max_aliases: int
    max_cost: int
    max_fragment_depth: int
    max_repeats: int


@dataclass(slots=True)
class Measure:
    depth: int = 0
    aliases: int = 0
    cost: int = 0
    fragment_depth: int = 0
    #: the most often one response name is selected in one selection set below this point
    repeats: int = 0
    #: whether a variable set a bound (counted at the argument's largest value)
    by_variables: bool = False
    #: response names selected at this level, with how often (fragments merged in)
    keys: Counter[str] = field(default_factory=Counter)

    def add(self, other: Measure, keys: bool = True) -> None:
        self.depth = max(self.depth, other.depth)
        self.aliases += other.aliases
        self.cost += other.cost
        self.fragment_depth = max(self.fragment_depth, other.fragment_depth)
        self.repeats = max(self.repeats, other.repeats)
        self.by_variables = self.by_variables or other.by_variables
        if keys:
            self.keys.update(other.keys)

    def close(self) -> Measure:
        """This selection set is complete: its own repeats count."""
        if self.keys:
            self.repeats = max(self.repeats, max(self.keys.values()))
        return self


class DocumentMeter:
    """Measures documents against one schema (whose list bounds it reads once)."""

    def __init__(self, schema: GraphQLSchema, limits: Limits) -> None:
        self.schema = schema
        self.limits = limits
        self.bounds: dict[tuple[str, str], ListBound] = {}
        unbounded = []
        for type_ in schema.type_map.values():
            if not isinstance(type_, GraphQLObjectType) or type_.name.startswith("__"):
                continue
            for name, graphql_field in type_.fields.items():
                definition = (graphql_field.extensions or {}).get("strawberry-definition")
                bound = (getattr(definition, "metadata", None) or {}).get(BOUND)
                if bound is not None:
                    # a list's, or a connection's (its `first` counts what its edges hold)
                    self.bounds[(type_.name, name)] = bound
                elif _is_list_of_objects(graphql_field.type):
                    unbounded.append(f"{type_.name}.{name}")
        if unbounded:  # a list nobody bounded would make every cost a guess
            raise TypeError(f"lists of objects without a ListBound in their metadata: {', '.join(unbounded)}")

    # ------------------------------------------------------------------ checking
    def check(self, document: DocumentNode) -> tuple[list[GraphQLError], bool]:
        """The limit errors of a document (its cost too, unless a variable may lower it), and
        whether its cost must be checked again with each request's variables."""
        measures = self.measure(document)
        errors = []
        limits = self.limits
        for label, m in measures.items():
            if m.depth > limits.max_depth:
                errors.append(_limit_error(
                    f"the depth of {label} is {m.depth}; at most {limits.max_depth} is allowed: select fewer nested fields",
                    depth=m.depth, limit=limits.max_depth,
                ))
            if m.fragment_depth > limits.max_fragment_depth:
                errors.append(_limit_error(
                    f"fragments nest {m.fragment_depth} deep in {label}; at most {limits.max_fragment_depth} levels are "
                    "allowed: spread fragments less deeply",
                    fragmentDepth=m.fragment_depth, limit=limits.max_fragment_depth,
                ))
            if m.repeats > limits.max_repeats:
                errors.append(_limit_error(
                    f"one field is selected {m.repeats:,} times in one selection of {label}; at most "
                    f"{limits.max_repeats} are allowed: select each field once",
                    repeats=m.repeats, limit=limits.max_repeats,
                ))
            if m.cost > limits.max_cost and not m.by_variables:
                errors.append(_cost_error(label, m.cost, limits.max_cost))
        aliases = sum(m.aliases for m in measures.values())
        if aliases > limits.max_aliases:
            errors.append(_limit_error(
                f"the document has {aliases:,} aliases; at most {limits.max_aliases} are allowed: send fewer aliased "
                "fields (or several requests)",
                aliases=aliases, limit=limits.max_aliases,
            ))
        recheck = any(m.by_variables and m.cost > limits.max_cost for m in measures.values())
        return errors, recheck and not errors

    def cost_error(
        self, document: DocumentNode, operation_name: str | None, variables: Mapping[str, Any]
    ) -> GraphQLError | None:
        """The cost error of the operation that runs, measured with the request's variables."""
        measures = self.measure(document, variables)
        label = _label(operation_name or "")
        chosen = measures.get(label) if operation_name else (next(iter(measures.values())) if len(measures) == 1 else None)
        if chosen is None or chosen.cost <= self.limits.max_cost:
            return None  # an operation graphql-core will refuse to pick
        return _cost_error(label, chosen.cost, self.limits.max_cost)

    # ------------------------------------------------------------------ measuring
    def measure(self, document: DocumentNode, variables: Mapping[str, Any] | None = None) -> dict[str, Measure]:
        """Each operation's measure, by a label naming it."""
        fragments = {d.name.value: d for d in document.definitions if isinstance(d, FragmentDefinitionNode)}
        measured = self._fragments(fragments, variables)
        return {
            _label(op.name.value if op.name else ""): self._selections(
                op.selection_set, self.schema.get_root_type(op.operation), measured, variables
            ).close()
            for op in document.definitions
            if isinstance(op, OperationDefinitionNode)
        }

    def _fragments(
        self, fragments: dict[str, FragmentDefinitionNode], variables: Mapping[str, Any] | None
    ) -> dict[str, Measure]:
        """Every fragment's measure, each fragment walked once and after the fragments it
        spreads. A fragment in a cycle measures as nothing beyond the cycle (graphql-core
        refuses cycles anyway)."""
        measured: dict[str, Measure] = {}
        for start in fragments:
            stack = [start]
            entered: set[str] = set()
            while stack:
                name = stack[-1]
                if name in measured:
                    stack.pop()
                    continue
                pending = [s for s in _spreads(fragments[name].selection_set) if s in fragments and s not in measured]
                if name not in entered and pending:
                    entered.add(name)
                    stack.extend(s for s in pending if s not in entered)
                    continue
                stack.pop()
                fragment = fragments[name]
                parent = self.schema.get_type(fragment.type_condition.name.value)
                measured[name] = self._selections(
                    fragment.selection_set, parent if isinstance(parent, GraphQLObjectType) else None, measured, variables
                )
        return measured

    def _selections(
        self,
        selection_set: SelectionSetNode,
        parent: GraphQLObjectType | None,
        fragments: dict[str, Measure],
        variables: Mapping[str, Any] | None,
    ) -> Measure:
        """A selection set's measure; its ``keys`` are what it selects at its own level, and
        it is not closed (a spread or inline fragment merges into the selection around it)."""
        total = Measure()
        for selection in selection_set.selections:
            if isinstance(selection, FieldNode):
                total.add(self._field(selection, parent, fragments, variables), keys=False)
                total.keys[(selection.alias or selection.name).value] += 1
            elif isinstance(selection, InlineFragmentNode):
                inner = parent
                if selection.type_condition is not None:
                    condition = self.schema.get_type(selection.type_condition.name.value)
                    inner = condition if isinstance(condition, GraphQLObjectType) else None
                total.add(self._selections(selection.selection_set, inner, fragments, variables))
            elif isinstance(selection, FragmentSpreadNode):
                spread = fragments.get(selection.name.value)
                if spread is not None:
                    total.add(spread)
                    total.fragment_depth = max(total.fragment_depth, spread.fragment_depth + 1)
        return total

    def _field(
        self,
        node: FieldNode,
        parent: GraphQLObjectType | None,
        fragments: dict[str, Measure],
        variables: Mapping[str, Any] | None,
    ) -> Measure:
        name = node.name.value
        aliases = 1 if node.alias is not None else 0
        if node.selection_set is None:
            return Measure(aliases=aliases, cost=1)
        graphql_field = None if parent is None else parent.fields.get(name)
        child = None if graphql_field is None else get_named_type(graphql_field.type)
        inner = self._selections(
            node.selection_set, child if isinstance(child, GraphQLObjectType) else None, fragments, variables
        ).close()
        if name.startswith("__"):  # introspection: small, static, bounded by graphql-core
            return Measure(0, aliases + inner.aliases, 1 + inner.cost, inner.fragment_depth, inner.repeats,
                           inner.by_variables)
        items, by_variables = 1, False
        bound = None if parent is None else self.bounds.get((parent.name, name))
        if bound is not None:
            items, by_variables = bound.of(node, variables)
        return Measure(
            1 + inner.depth, aliases + inner.aliases, 1 + items * inner.cost, inner.fragment_depth, inner.repeats,
            inner.by_variables or by_variables,
        )


def _label(operation_name: str) -> str:
    return f"operation {operation_name!r}" if operation_name else "the operation"


def _is_list_of_objects(type_: Any) -> bool:
    if isinstance(type_, GraphQLNonNull):
        type_ = type_.of_type
    return isinstance(type_, GraphQLList) and is_composite_type(get_named_type(type_))


def _spreads(selection_set: SelectionSetNode | None) -> Iterator[str]:
    """The fragments spread anywhere in a selection set (inside its fields too)."""
    pending = [selection_set] if selection_set is not None else []
    while pending:
        for selection in pending.pop().selections:
            if isinstance(selection, FragmentSpreadNode):
                yield selection.name.value
            elif isinstance(selection, FieldNode | InlineFragmentNode) and selection.selection_set is not None:
                pending.append(selection.selection_set)


def _limit_error(message: str, **extensions: Any) -> GraphQLError:
    return GraphQLError(message, extensions={"code": "LIMIT_EXCEEDED", **extensions})


def _cost_error(label: str, cost: int, limit: int) -> GraphQLError:
    return _limit_error(
        f"the cost of {label} is {cost:,} (the most fields its answer can hold, each list counted at its bound); "
        f"at most {limit:,} is allowed: ask for fewer items (first, last) or fewer fields",
        cost=cost, limit=limit,
    )
