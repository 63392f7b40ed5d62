"""The checked-in ``schema.graphql`` is the code's schema, and it has every name API.md fixes.

API.md is the contract bot authors write against; the SDL is generated from the code
(``wizard-arena schema``). The first test catches drift between the two files' sources, the
others catch a rename or removal that would break the contract. (Tournament and leaderboard
names come with a later piece of work and are not required here.)
"""

from __future__ import annotations

from pathlib import Path

import pytest
from graphql import (
    GraphQLEnumType,
    GraphQLInputObjectType,
    GraphQLObjectType,
    GraphQLSchema,
    build_schema,
    get_named_type,
    print_ast,
)

from service.api.graphql.schema import schema_sdl

SCHEMA_FILE = Path(__file__).resolve().parents[2] / "schema.graphql"
REGENERATE = ".venv/bin/wizard-arena schema > schema.graphql"


@pytest.fixture(scope="module")
def schema() -> GraphQLSchema:
    return build_schema(SCHEMA_FILE.read_text())


def test_checked_in_schema_matches_the_code():
    assert SCHEMA_FILE.exists(), f"schema.graphql is missing: run `{REGENERATE}` at the repository root"
    assert SCHEMA_FILE.read_text() == schema_sdl(), (
        f"schema.graphql differs from the code's schema: run `{REGENERATE}` at the repository root, "
        "review the diff (API.md is the contract) and commit it"
    )


def _object(schema: GraphQLSchema, name: str) -> GraphQLObjectType:
    found = schema.get_type(name)
    assert isinstance(found, GraphQLObjectType), f"API.md fixes an object type {name}"
    return found


def _type_str(schema: GraphQLSchema, type_name: str, field: str, arg: str | None = None) -> str:
    owner = schema.get_type(type_name)
    assert isinstance(owner, GraphQLObjectType | GraphQLInputObjectType), type_name
    assert field in owner.fields, f"API.md fixes {type_name}.{field}"
    if arg is None:
        return str(owner.fields[field].type)
    args = owner.fields[field].args  # type: ignore[union-attr]
    assert arg in args, f"API.md fixes the argument {arg} of {type_name}.{field}"
    return str(args[arg].type)


TYPES = {
    "Match": GraphQLObjectType,
    "Seat": GraphQLObjectType,
    "Bot": GraphQLObjectType,
    "BotRegistration": GraphQLObjectType,
    "Move": GraphQLObjectType,
    "Play": GraphQLObjectType,
    "Trick": GraphQLObjectType,
    "RoundResult": GraphQLObjectType,
    "MoveInput": GraphQLInputObjectType,
    "CreateMatchInput": GraphQLInputObjectType,
    "Suit": GraphQLEnumType,
    "Ruleset": GraphQLEnumType,
    "Variant": GraphQLEnumType,
    "Phase": GraphQLEnumType,
    "MatchStatus": GraphQLEnumType,
    "HouseBotKind": GraphQLEnumType,
}


@pytest.mark.parametrize("name", sorted(TYPES))
def test_types(schema, name):
    assert isinstance(schema.get_type(name), TYPES[name]), f"API.md fixes the {TYPES[name].__name__} {name}"


# Operation -> (answer type, {argument: type}), as API.md writes them.
OPERATIONS = {
    "Query": {
        "me": ("Bot", {}),
        "bot": ("Bot", {"id": "ID!"}),
        "match": ("Match", {"id": "ID!"}),
        "awaitTurn": ("Match", {"matchId": "ID", "timeoutMs": "Int"}),
    },
    "Mutation": {
        "registerBot": ("BotRegistration!", {"name": "String!"}),
        "createMatch": ("Match!", {"input": "CreateMatchInput!"}),
        "joinMatch": ("Match!", {"matchId": "ID!", "seat": "Int"}),
        "addHouseBot": ("Match!", {"matchId": "ID!", "kind": "HouseBotKind!"}),
        "submitMove": ("Match!", {"matchId": "ID!", "move": "MoveInput!", "expectedVersion": "Int"}),
    },
    "Subscription": {
        "matchUpdates": ("Match!", {"matchId": "ID!"}),
        "myTurns": ("Match!", {}),
    },
}


@pytest.mark.parametrize(
    "root, name", [(root, name) for root, operations in OPERATIONS.items() for name in operations]
)
def test_operations(schema, root, name):
    answer, arguments = OPERATIONS[root][name]
    assert _type_str(schema, root, name) == answer
    for arg, arg_type in arguments.items():
        assert _type_str(schema, root, name, arg) == arg_type
    # Any further arguments must be optional, or clients written against API.md break.
    extra = set(_object(schema, root).fields[name].args) - set(arguments)
    for arg in extra:
        assert not _type_str(schema, root, name, arg).endswith("!"), f"{root}.{name}({arg}) must be optional"


# Type -> fields API.md fixes (with their types where API.md states them).
FIELDS = {
    "Match": {
        "id": "ID!", "ruleset": "Ruleset!", "variants": "[Variant!]!", "players": "Int!",
        "status": "MatchStatus!", "version": "Int!", "round": "Int!", "rounds": "Int!", "dealer": "Int!",
        "phase": "Phase!", "trumpCard": "String", "trumpSuit": "Suit", "toAct": "Int", "deadline": "DateTime",
        "mySeat": "Int", "hand": "[String!]", "legalMoves": "[Move!]!", "seats": "[Seat!]!",
        "currentTrick": "[Play!]!", "completedTricks": "[Trick!]!", "lastTrick": "Trick",
        "roundResults": "[RoundResult!]!", "winners": "[Int!]", "seedHash": "String!", "seed": "String",
        "salt": "String", "seedChosen": "Boolean!",
    },
    "Seat": {
        "seat": "Int!", "bot": "Bot", "score": "Int!", "bid": "Int", "tricks": "Int!", "timeouts": "Int!",
        "hand": "[String!]",
    },
    "Bot": {"id": "ID!", "name": "String!", "ratings": None},
    "BotRegistration": {"token": "String!", "bot": "Bot!"},
    "Move": {"bid": "Int", "card": "String", "trump": "Suit"},
    "MoveInput": {"bid": "Int", "card": "String", "trump": "Suit"},
    "Play": {"seat": "Int!", "card": "String!"},
    "Trick": {"leader": "Int!", "plays": "[Play!]!", "winner": "Int!"},
    "RoundResult": {"round": "Int!", "seats": None},
    "CreateMatchInput": {
        "ruleset": None, "players": None, "variants": None, "moveTimeoutMs": None, "rated": None,
        "seed": "String", "firstDealer": "Int", "deals": "[[String!]!]",
    },
}


@pytest.mark.parametrize("type_name", sorted(FIELDS))
def test_fields(schema, type_name):
    for field, field_type in FIELDS[type_name].items():
        actual = _type_str(schema, type_name, field)
        if field_type is not None:
            assert actual == field_type, f"{type_name}.{field} is {actual}; API.md says {field_type}"


def test_nested_fields(schema):
    ratings = get_named_type(_object(schema, "Bot").fields["ratings"].type)
    assert {"ruleset", "rating", "games"} <= set(ratings.fields)  # type: ignore[union-attr]
    seat_result = get_named_type(_object(schema, "RoundResult").fields["seats"].type)
    assert {"seat", "bid", "tricks", "points"} <= set(seat_result.fields)  # type: ignore[union-attr]


def _default(field) -> str | None:  # type: ignore[no-untyped-def]
    """A field's default as written in the SDL (None: no default)."""
    node = field.ast_node.default_value
    return None if node is None else print_ast(node)


def test_create_match_input_defaults(schema):
    fields = schema.get_type("CreateMatchInput").fields  # type: ignore[union-attr]
    assert _default(fields["ruleset"]) == "WIZARD"
    assert _default(fields["variants"]) == "[]"
    assert _default(fields["rated"]) == "false"
    for name in ("players", "moveTimeoutMs", "seed", "firstDealer", "deals"):
        # API.md gives these defaults (or makes them optional): clients may leave them out
        assert _default(fields[name]) is not None or not str(fields[name].type).endswith("!"), (
            f"CreateMatchInput.{name} must be optional"
        )


ENUMS = {
    "Suit": {"BLUE", "GREEN", "RED", "YELLOW"},
    "Ruleset": {"WIZARD", "WIZARD_JUNIOR", "WIZARD_JUNIOR_CLASSIC"},
    "Variant": {"PLUS_MINUS_ONE", "HIDDEN_BIDS", "SECRET_BIDS", "CLAIRVOYANCE", "SINGLE_SUIT"},
    "Phase": {"CHOOSE_TRUMP", "BID", "PLAY", "FINISHED"},
    "MatchStatus": {"WAITING", "ACTIVE", "FINISHED", "ABORTED"},
}


@pytest.mark.parametrize("name", sorted(ENUMS))
def test_enum_values_exactly(schema, name):
    assert set(schema.get_type(name).values) == ENUMS[name]  # type: ignore[union-attr]


def test_house_bot_kinds(schema):
    assert {"RANDOM", "HEURISTIC"} <= set(schema.get_type("HouseBotKind").values)  # type: ignore[union-attr]
