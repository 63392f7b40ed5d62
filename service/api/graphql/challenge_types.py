"""GraphQL types of challenges (README: Challenges)."""

from __future__ import annotations

from datetime import datetime

import strawberry
from strawberry.types import Info

from service.api.graphql.context import RequestContext
from service.api.graphql.limits import ListBound
from service.api.graphql.types import Bot, Match, _datetime, match_type
from service.domain.challenges import MAX_LISTED, MAX_NAMED, NewChallenge
from service.errors import NotFound
from service.model import challenge as model
from service.model.challenge import ChallengeAnswer, ChallengeStatus
from wizard import Ruleset, Variant

#: ``challenges(first:)``
CHALLENGES = ListBound(MAX_LISTED, argument="first", default=50)
#: the seats of a match at most: the bots that accepted a challenge
SEATS = ListBound(6)

strawberry.enum(
    ChallengeStatus, name="ChallengeStatus",
    description="OPEN: waiting for answers. ACCEPTED: enough bots accepted, `match` is made and started. DECLINED: "
    "too few of the named bots are left to fill its seats. EXPIRED: not accepted by enough bots by `expiresAt`. "
    "CANCELLED: withdrawn by its challenger.",
)
strawberry.enum(ChallengeAnswer, name="ChallengeAnswer", description="One bot's answer to a challenge.")


@strawberry.type(description="A bot named in a challenge, with its answer.")
class ChallengeReply:
    bot: Bot
    answer: ChallengeAnswer
    answered_at: datetime | None = strawberry.field(description="When it answered (null: not yet).")
    reason: str | None = strawberry.field(description="The reason it gave for declining (null: none).")


@strawberry.type(
    description="A bot's invitation of named bots (or of anyone, when it names none) to a match on these terms; "
    "the match is made, every seat taken in an order drawn at random, once enough bots have accepted."
)
class Challenge:
    id: strawberry.ID
    challenger: Bot = strawberry.field(description="The bot that made it; it takes a seat in the match.")
    bots: list[ChallengeReply] = strawberry.field(
        description="The bots it names, in the order named, each with its answer (empty for an open challenge).",
        metadata=ListBound(MAX_NAMED).metadata(),
    )
    open: bool = strawberry.field(description="Whether it names nobody: any bot may accept it.")
    accepted: list[Bot] = strawberry.field(
        description="The bots that accepted, in the order they did.", metadata=SEATS.metadata()
    )
    ruleset: Ruleset
    players: int
    variants: list[Variant]
    move_timeout_ms: int
    rated: bool
    status: ChallengeStatus
    created_at: datetime
    expires_at: datetime = strawberry.field(description="When it expires unless enough bots have accepted.")
    closed_at: datetime | None = strawberry.field(description="When it stopped being OPEN (null: it is OPEN).")
    match_id: strawberry.ID | None = strawberry.field(description="The match, once made (ACCEPTED).")

    @strawberry.field(description="The match, once made (ACCEPTED), as the caller sees it.")
    async def match(self, info: Info[RequestContext, None]) -> Match | None:
        if self.match_id is None:
            return None
        caller = await info.context.optional_caller()
        try:
            live = await info.context.services.matches.get(str(self.match_id))
        except NotFound:
            return None
        return match_type(live, live.seat_of(caller.bot_id) if caller else None)


def challenge_type(c: model.Challenge) -> Challenge:
    t = c.terms
    replies = [
        ChallengeReply(bot=Bot(id=strawberry.ID(r.bot_id), name=r.name), answer=r.answer,
                       answered_at=_datetime(r.answered_ms), reason=r.reason)
        for r in c.replies
    ]
    return Challenge(
        id=strawberry.ID(c.id),
        challenger=Bot(id=strawberry.ID(c.challenger_id), name=c.challenger_name),
        bots=replies if c.named else [],
        open=not c.named,
        accepted=[Bot(id=strawberry.ID(b), name=c.name_of(b)) for b in c.accepted],
        ruleset=Ruleset(t.ruleset),
        players=t.players,
        variants=[Variant(v) for v in t.variants],
        move_timeout_ms=t.move_timeout_ms,
        rated=t.rated,
        status=c.status,
        created_at=_datetime(c.created_ms),  # type: ignore[arg-type]
        expires_at=_datetime(c.expires_ms),  # type: ignore[arg-type]
        closed_at=_datetime(c.closed_ms),
        match_id=None if c.match_id is None else strawberry.ID(c.match_id),
    )


@strawberry.input(description="createChallenge's input: createMatch's terms (the same defaults and checks), and "
                               "the bots challenged.")
class CreateChallengeInput:
    bots: list[strawberry.ID] = strawberry.field(
        default_factory=list,
        description=f"The bots challenged (at least one for each seat besides yours, at most {MAX_NAMED}); empty: an "
        "open challenge, any bot may accept.",
    )
    ruleset: Ruleset = Ruleset.WIZARD
    players: int = 4
    variants: list[Variant] = strawberry.field(default_factory=list)
    move_timeout_ms: int | None = strawberry.field(default=None, description="Default: the server's (10000).")
    rated: bool = False

    def domain(self) -> NewChallenge:
        return NewChallenge(
            bots=[str(b) for b in self.bots], ruleset=self.ruleset.value, players=self.players,
            variants=tuple(v.value for v in self.variants), move_timeout_ms=self.move_timeout_ms, rated=self.rated,
        )
