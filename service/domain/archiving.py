"""What the archive keeps of an ended match (service.store.archive): its Redis fields, so it
is read back as it was, and what listings and statistics query, taken from the match itself;
and of an ended tournament: the tournament as the API shows it (``Tournament`` in
schema.graphql, but its ``matches``, which are archived each on its own, listed here by id)."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from service.domain.matches import full_record
from service.model.live_match import LiveMatch, MatchStatus
from service.model.tournament import Tournament
from service.store.archive import ArchivedMatch, RoundRow, SeatRow
from wizard.record import state_to_bytes


def places(scores: list[int]) -> list[int]:
    """Each seat's place by final score: 1 for the highest, ties sharing a place.

    >>> places([30, 50, 30, 10])
    [2, 1, 2, 4]
    """
    return [1 + sum(other > score for other in scores) for score in scores]


def archived_match(
    match: LiveMatch, event_id: bytes, stored_record: bytes | None, rating_changes: list[dict[str, Any]] | None,
    ended_ms: int,
) -> ArchivedMatch:
    finished = match.status is MatchStatus.FINISHED
    scores = list(match.state.scores)
    seat_places = places(scores) if finished else [None] * len(scores)
    view = match.state.view(None)
    seats = [
        SeatRow(
            seat, None if holder is None else holder.id, None if holder is None else holder.name,
            None if holder is None else holder.house, scores[seat], seat_places[seat], match.timeouts[seat],
        )
        for seat, holder in enumerate(match.seats)
    ]
    rounds = [RoundRow(r.round, s.seat, s.bid, s.tricks, s.points) for r in view.round_results for s in r.seats]
    outcome = match.state.outcome
    settings = match.settings
    return ArchivedMatch(
        id=match.id,
        status=match.status.value,
        ruleset=match.ruleset.value,
        players=settings.config.players,
        rated=settings.rated,
        tournament_id=settings.tournament,
        created_ms=settings.created_at_ms,
        ended_ms=ended_ms,
        seed=match.state.seed if finished else None,
        scores=scores,
        winners=None if outcome is None else list(outcome.winners),
        record=full_record(match, stored_record) if finished else None,
        rating_changes=rating_changes,
        version=match.version,
        settings=settings.to_json(),
        state=state_to_bytes(match.state),
        live=match.live_json().decode(),
        event_id=event_id.decode(),
        sealed=match.sealed,
        seats=seats,
        rounds=rounds,
    )


def _iso(ms: int | None) -> str | None:
    """A time as the API writes it (GraphQL's DateTime: ISO 8601 in UTC)."""
    return None if ms is None else datetime.fromtimestamp(ms / 1000, tz=UTC).isoformat()


def tournament_standings(t: Tournament) -> list[dict[str, Any]]:
    """The standings as the API shows them (``Tournament.standings``)."""
    return [
        {"rank": s.rank, "bot": {"id": t.entrants[s.entrant].id, "name": t.entrants[s.entrant].name},
         "points": s.points, "matches": s.matches, "score": s.score}
        for s in t.standings()
    ]


def tournament_document(t: Tournament) -> dict[str, Any]:
    """The tournament as the API shows it (GraphQL's field names), with its match ids
    (``matchIds``, oldest table first) in place of its matches."""
    spec = t.spec
    return {
        "id": t.id,
        "name": spec.name,
        "ruleset": spec.ruleset,
        "variants": list(spec.variants),
        "playersPerMatch": spec.players_per_match,
        "format": spec.format.value,
        "rounds": spec.rounds,
        "durationMinutes": spec.duration_minutes,
        "startsAt": _iso(spec.starts_at_ms),
        "startedAt": _iso(t.started_ms),
        "finishedAt": _iso(t.finished_ms),
        "moveTimeoutMs": spec.move_timeout_ms,
        "rated": spec.rated,
        "duplicate": spec.duplicate,
        "status": t.status.value,
        "createdBy": spec.created_by,
        "entrants": [{"id": e.id, "name": e.name} for e in t.entrants],
        "standings": tournament_standings(t),
        "matchIds": t.all_match_ids(),
    }
