"""GraphQL types of the continuous rated ladder (``service.domain.ladders``)."""

from __future__ import annotations

from datetime import datetime

import strawberry

from service.api.graphql.limits import ListBound
from service.api.graphql.types import Bot, _datetime
from service.domain.ladders import MAX_LISTED_MEMBERS, LadderState, Membership
from wizard import Ruleset

#: ``ladder(first:)``
LADDER_MEMBERS = ListBound(MAX_LISTED_MEMBERS, argument="first", default=100)

strawberry.enum(
    LadderState, name="LadderState",
    description="ACTIVE: the workers pair the bot. PAUSED: a member the workers do not pair, for pausedReason (it let "
    "moves time out at ARENA_LADDER_PAUSE_AFTER_TIMEOUTS tables in a row), until it answers again: it waits for a "
    "turn (awaitTurn, nextTurn, myTurns, GET /api/turns) or calls joinLadder. LEFT: not a member (it left, or never "
    "joined).",
)


@strawberry.type(description="A bot's place in the ladder of one ruleset and number of players.")
class LadderMembership:
    bot: Bot
    ruleset: Ruleset
    players: int
    state: LadderState
    joined_at: datetime | None = strawberry.field(description="When the bot joined (null: not a member, or a house bot, a member always).")
    paused_at: datetime | None = strawberry.field(description="Since when the bot is PAUSED (null: it is not).")
    paused_reason: str | None = strawberry.field(description="Why the bot is PAUSED, and how it resumes (null: it is not).")
    playing: int = strawberry.field(description="The matches of this ladder the bot plays now, a duplicate set counting one per seat (with those of its other ladders, at most ARENA_LADDER_MAX_MATCHES; house bots: no limit).")


def membership_type(m: Membership) -> LadderMembership:
    return LadderMembership(
        bot=Bot(id=strawberry.ID(m.bot_id), name=m.name),
        ruleset=Ruleset(m.ruleset),
        players=m.players,
        state=m.state,
        joined_at=_datetime(m.joined_ms),
        paused_at=None if m.pause is None else _datetime(m.pause.since_ms),
        paused_reason=None if m.pause is None else m.pause.reason,
        playing=m.playing,
    )
