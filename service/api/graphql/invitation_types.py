"""GraphQL types of invitations to tournaments, and the stream of turns, invitations and challenges."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated

import strawberry

from service.api.graphql.challenge_types import Challenge, challenge_type
from service.api.graphql.limits import ListBound
from service.api.graphql.tournament_types import Tournament, tournament_type
from service.api.graphql.types import Bot, Match, _datetime
from service.domain.invitations import MAX_LISTED, InvitationToTournament
from service.model.challenge import Challenge as ChallengeValue
from service.model.invitation import InvitationStatus

#: ``invitations(first:)``
INVITATIONS = ListBound(MAX_LISTED, argument="first", default=50)

strawberry.enum(
    InvitationStatus, name="InvitationStatus",
    description="PENDING: not answered yet. ACCEPTED: the bot entered. DECLINED: it did not. EXPIRED: not "
    "accepted before the tournament started (or was cancelled): the bot is left out.",
)


@strawberry.type(description="An invitation of a bot to a tournament; the bot enters only by accepting it (or joining).")
class Invitation:
    id: strawberry.ID
    tournament: Tournament
    status: InvitationStatus
    invited_by: Bot = strawberry.field(description="The bot that created the tournament and named this one.")
    invited_at: datetime
    answered_at: datetime | None = strawberry.field(description="When it was accepted or declined (null: not yet).")
    reason: str | None = strawberry.field(description="The reason given when declining (null: none).")


def invitation_type(found: InvitationToTournament) -> Invitation:
    i = found.invitation
    return Invitation(
        id=strawberry.ID(i.id),
        tournament=tournament_type(found.tournament),
        status=i.status,
        invited_by=Bot(id=strawberry.ID(i.invited_by), name=i.invited_by_name),
        invited_at=_datetime(i.invited_ms),  # type: ignore[arg-type]
        answered_at=_datetime(i.answered_ms),
        reason=i.reason,
    )


TurnOrInvitation = Annotated[
    Match | Invitation | Challenge,
    strawberry.union(
        "TurnOrInvitation",
        description="What myTurnsAndInvitations yields: a Match where the bot now has to move, an Invitation, or "
        "(asked for with challenges: true) a Challenge.",
    ),
]


def offer_type(found: InvitationToTournament | ChallengeValue) -> Invitation | Challenge:
    """An invitation or a challenge met on a bot's turn stream, as its GraphQL type."""
    return challenge_type(found) if isinstance(found, ChallengeValue) else invitation_type(found)
