"""A ``Match`` and the objects in it, as GraphQL (and the REST mirror) answer them.

>>> PLAY.selection()
'seat card'
>>> TRICK.selection()
'leader plays { seat card } winner'
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Field:
    """One field: its name in the API, its GraphQL type, and the shape of the object it holds
    (None for a scalar or an enum)."""

    name: str
    type: str
    shape: Shape | None = None


@dataclass(frozen=True)
class Shape:
    """An object type: its name in the schema and its fields, in the schema's order.
    ``partial`` shapes list only the fields a Match selects of a larger type (a seat's bot)."""

    name: str
    fields: tuple[Field, ...]
    partial: bool = False

    def selection(self) -> str:
        """Every field, nested objects' too, as a GraphQL selection."""
        return " ".join(f.name if f.shape is None else f"{f.name} {{ {f.shape.selection()} }}" for f in self.fields)

    def shapes(self) -> list[Shape]:
        """This shape and every shape under it, each once."""
        found: dict[str, Shape] = {self.name: self}
        for f in self.fields:
            if f.shape is not None:
                for inner in f.shape.shapes():
                    found.setdefault(inner.name, inner)
        return list(found.values())


MOVE = Shape("Move", (Field("bid", "Int"), Field("card", "String"), Field("trump", "Suit")))
PLAY = Shape("Play", (Field("seat", "Int!"), Field("card", "String!")))
TRICK = Shape("Trick", (Field("leader", "Int!"), Field("plays", "[Play!]!", PLAY), Field("winner", "Int!")))
SEAT_RESULT = Shape(
    "SeatResult", (Field("seat", "Int!"), Field("bid", "Int!"), Field("tricks", "Int!"), Field("points", "Int!"))
)
ROUND_RESULT = Shape("RoundResult", (Field("round", "Int!"), Field("seats", "[SeatResult!]!", SEAT_RESULT)))
BOT = Shape("Bot", (Field("id", "ID!"), Field("name", "String!")), partial=True)
SEAT = Shape(
    "Seat",
    (
        Field("seat", "Int!"), Field("bot", "Bot", BOT), Field("houseBot", "HouseBotKind"), Field("score", "Int!"),
        Field("bid", "Int"), Field("tricks", "Int!"), Field("timeouts", "Int!"), Field("hand", "[String!]"),
    ),
)
MATCH = Shape(
    "Match",
    (
        Field("id", "ID!"), Field("ruleset", "Ruleset!"), Field("variants", "[Variant!]!"), Field("players", "Int!"),
        Field("status", "MatchStatus!"), Field("version", "Int!"), Field("round", "Int!"), Field("rounds", "Int!"),
        Field("handSize", "Int!"), Field("dealer", "Int!"), Field("phase", "Phase!"), Field("trumpCard", "String"),
        Field("trumpSuit", "Suit"), Field("leadSuit", "Suit"), Field("toAct", "Int"), Field("awaiting", "[Int!]!"),
        Field("deadline", "DateTime"), Field("moveTimeoutMs", "Int!"), Field("rated", "Boolean!"),
        Field("stacked", "Boolean!"), Field("seedChosen", "Boolean!"), Field("createdBy", "ID!"),
        Field("createdAt", "DateTime!"), Field("mySeat", "Int"), Field("hand", "[String!]"),
        Field("legalMoves", "[Move!]!", MOVE), Field("seats", "[Seat!]!", SEAT), Field("currentTrick", "[Play!]!", PLAY),
        Field("completedTricks", "[Trick!]!", TRICK), Field("lastTrick", "Trick", TRICK),
        Field("roundResults", "[RoundResult!]!", ROUND_RESULT), Field("winners", "[Int!]"), Field("movesMade", "Int!"),
        Field("seedHash", "String!"), Field("seed", "String"), Field("salt", "String"), Field("timeLeftMs", "Int"),
        Field("abortReason", "String"),
    ),
)
