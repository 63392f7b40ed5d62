"""The direct completion of plain-attribute types (service.api.graphql.execution) answers every
selection exactly as graphql-core's general completion does: the same documents run through
both, on matches in every phase, for every seat and a spectator."""

from __future__ import annotations

import random
from typing import Any

import pytest
import strawberry
from strawberry.extensions import ParserCache
from strawberry.schema.config import StrawberryConfig

from contract import MATCH
from service.api.graphql import execution
from service.api.graphql.execution import ArenaExecutionContext
from service.api.graphql.types import LiveMatchType, Match, match_type
from service.model.live_match import LiveMatch, MatchSettings, SeatHolder
from wizard import MatchConfig, new_match


@strawberry.type
class Query:
    @strawberry.field
    def match(self, info: strawberry.Info, seat: int | None = None) -> Match:
        return match_type(info.context["live"], seat)

    @strawberry.field
    def broken(self, info: strawberry.Info) -> Match:
        return BrokenMatch(info.context["live"], None)


class BrokenMatch(LiveMatchType):
    """A match whose reading goes wrong: a null where a value is promised, a field that raises."""

    version = property(lambda self: None)

    @property
    def round(self) -> int:  # type: ignore[override]
        raise RuntimeError("no round here")


def _schema(execution_context_class: Any) -> strawberry.Schema:
    return strawberry.Schema(  # the documents parsed once, as the service's DocumentCache does
        query=Query, extensions=[ParserCache], config=StrawberryConfig(disable_field_suggestions=True),
        execution_context_class=execution_context_class,
    )


DIRECT = _schema(ArenaExecutionContext)
GENERAL = _schema(None)

DOCUMENTS = [
    f"query($s: Int) {{ match(seat: $s) {{ {MATCH.selection()} }} }}",
    "query($s: Int) { match(seat: $s) { version status phase toAct hand legalMoves { bid card trump } "
    "currentTrick { seat card } seats { seat score bid tricks } } }",
    "query($s: Int) { a: match(seat: $s) { v: version h: hand __typename seats { __typename s: seat } } "
    "b: match(seat: $s) { version } }",
    "query($s: Int) { match(seat: $s) { ...Turn ... on Match { phase lastTrick { plays { seat card } winner } } "
    "... { completedTricks { leader winner plays { card } } } } } "
    "fragment Turn on Match { version legalMoves { card } seats { seat ...S } } fragment S on Seat { bid tricks }",
    "query($s: Int, $yes: Boolean!) { match(seat: $s) { version hand @include(if: $yes) "
    "seats @skip(if: $yes) { seat } winners trumpCard leadSuit } }",
    "query($s: Int) { match(seat: $s) { version version seats { seat } seats { score } } }",
]


def _matches() -> list[LiveMatch]:
    """Matches of several rulesets and variants at many points: waiting, under way, finished."""
    rng = random.Random(7)
    found = []
    for ruleset, players, variants in [
        ("WIZARD", 4, ()), ("WIZARD", 3, ("HIDDEN_BIDS",)), ("WIZARD_JUNIOR_CLASSIC", 4, ("PLUS_MINUS_ONE",)), ("WIZARD_JUNIOR", 5, ("SECRET_BIDS",)),
        ("WIZARD", 6, ("CLAIRVOYANCE",)), ("WIZARD", 4, ("SINGLE_SUIT",)),
    ]:
        config = MatchConfig.create(ruleset, players, variants)
        settings = MatchSettings(config, 10_000, False, False, "creator", 0)
        live = LiveMatch.new(f"x-{ruleset}-{players}", settings, new_match(config, f"seed-{len(found)}"))
        found.append(live.copy())
        for seat in range(players):
            if seat == players - 1:
                live.join(seat, SeatHolder("house-random", "House Random #1", "RANDOM"), 0)
            else:
                live.join(seat, SeatHolder(f"bot-{seat}", f"Bot {seat}"), 0)
        moves = 0
        while not live.ended:
            seat = live.awaiting()[0]
            live.play(seat, rng.choice(live.state.legal_actions(seat)), "bot", moves)
            moves += 1
            if moves % 37 == 1:
                found.append(live.copy())
        found.append(live.copy())
    return found


MATCHES = _matches()


def _run(schema: strawberry.Schema, document: str, live: LiveMatch, seat: int | None) -> Any:
    result = schema.execute_sync(document, variable_values={"s": seat, "yes": seat is not None}, context_value={"live": live})
    assert result.errors is None, result.errors
    return result.data


@pytest.mark.parametrize("document", DOCUMENTS)
def test_every_selection_answers_as_graphql_core_does(document: str) -> None:
    checked = 0
    for live in MATCHES:
        for seat in [None, *range(live.settings.config.players)]:
            assert _run(DIRECT, document, live, seat) == _run(GENERAL, document, live, seat)
            checked += 1
    assert checked > 300


def test_a_version_is_completed_once_for_all_who_see_it_alike() -> None:
    document = DOCUMENTS[1]
    live = MATCHES[len(MATCHES) // 2]
    first = DIRECT.execute_sync(document, variable_values={"s": None}, context_value={"live": live})
    again = DIRECT.execute_sync(document, variable_values={"s": None}, context_value={"live": live})
    seated = DIRECT.execute_sync(document, variable_values={"s": 0}, context_value={"live": live})
    assert first.data is not None and again.data is not None and seated.data is not None
    assert again.data["match"] is first.data["match"]  # spectators share one answer
    assert seated.data["match"] is not first.data["match"]  # a seat sees its own
    other_selection = DIRECT.execute_sync(DOCUMENTS[5], variable_values={"s": None}, context_value={"live": live})
    assert other_selection.data is not None and other_selection.data["match"] is not first.data["match"]


def test_a_null_where_a_value_is_promised_or_a_raising_field_is_reported_at_its_field_as_before() -> None:
    for document in ["{ broken { id version } }", "{ broken { id round } }", "{ match { id } broken { dealer round } }"]:
        direct = DIRECT.execute_sync(document, context_value={"live": MATCHES[3]})
        general = GENERAL.execute_sync(document, context_value={"live": MATCHES[3]})
        assert direct.errors and general.errors
        assert direct.data == general.data
        assert [(e.message, e.path) for e in direct.errors] == [(e.message, e.path) for e in general.errors]


def test_a_selection_whose_fields_a_variable_chooses_answers_each_request_by_its_own_variables() -> None:
    """Under ``@include``/``@skip`` the same nodes collect other fields for other variables:
    neither the compiled selection nor the shared answer of one request may serve another."""
    document = (
        "query($s: Int, $yes: Boolean!) { match(seat: $s) { version seats { seat score @include(if: $yes) "
        "...B } } } fragment B on Seat { bid @skip(if: $yes) }"
    )
    live = MATCHES[len(MATCHES) // 2]
    for yes in [True, False, True]:
        direct = DIRECT.execute_sync(document, variable_values={"s": 0, "yes": yes}, context_value={"live": live})
        general = GENERAL.execute_sync(document, variable_values={"s": 0, "yes": yes}, context_value={"live": live})
        assert direct.errors is None and direct.data == general.data
        assert all(("score" in seat) is yes and ("bid" in seat) is not yes for seat in direct.data["match"]["seats"])


def test_a_selection_is_compiled_once_and_answers_later_versions_alike() -> None:
    document = DOCUMENTS[1]
    for live in MATCHES[:12]:
        assert _run(DIRECT, document, live, 1) == _run(GENERAL, document, live, 1)
    compiled = [entry for entry in execution._compiled.entries.values() if entry[1] is not None]
    assert len({id(entry[1]) for entry in compiled}) == len(compiled)  # one entry a selection
    before = dict(execution._compiled.entries)
    _run(DIRECT, document, MATCHES[20], 2)
    assert execution._compiled.entries == before  # the same nodes, compiled already
