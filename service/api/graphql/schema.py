"""The GraphQL schema: each resolver is one call of the domain services."""

from __future__ import annotations

from collections.abc import AsyncGenerator
from datetime import UTC, datetime
from functools import cached_property
from typing import Annotated, Any

import strawberry
from graphql import DocumentNode, GraphQLError, GraphQLSchema, OperationDefinitionNode
from strawberry.extensions import MaxTokensLimiter, SchemaExtension
from strawberry.schema.config import StrawberryConfig
from strawberry.schema.exceptions import CannotGetOperationTypeError
from strawberry.types import ExecutionContext, ExecutionResult, Info
from strawberry.types.execution import PreExecutionError
from strawberry.types.graphql import OperationType

from contract import MATCH, MOVE_DEBUG_MAX_BYTES, Shape
from service.api.graphql.challenge_types import CHALLENGES, Challenge, CreateChallengeInput, challenge_type
from service.api.graphql.context import RequestContext
from service.api.graphql.documents import DocumentCache, Documents
from service.api.graphql.errors import ErrorCodes
from service.api.graphql.execution import ArenaExecutionContext
from service.api.graphql.extension_hooks import HooksRunner
from service.api.graphql.invitation_types import INVITATIONS, Invitation, TurnOrInvitation, invitation_type, offer_type
from service.api.graphql.ladder_types import LADDER_MEMBERS, LadderMembership, membership_type
from service.api.graphql.limits import DocumentMeter, Limits
from service.api.graphql.tournament_types import (
    LEADERBOARD,
    CreateTournamentInput,
    LeaderboardEntry,
    Tournament,
    TournamentConnection,
    TournamentEdge,
    tournament_type,
)
from service.api.graphql.types import (
    LISTING,
    TOKENS,
    Bot,
    BotRegistration,
    CreateMatchInput,
    Match,
    MatchConnection,
    MatchFilter,
    MoveInput,
    PageInfo,
    TokenGrant,
    TokenInfo,
    UpdateBotInput,
    Webhook,
    WebhookGrant,
    match_connection,
    match_type,
)
from service.domain.invitations import InvitationToTournament
from service.domain.matches import Caller, NewMatch, TurnWait, WaitEnd
from service.domain.ratings import RatingMethod
from service.domain.tournaments import NewTournament
from service.errors import BadInput, NotFound
from service.metrics import operation_label, time_turn_when_written
from service.model.challenge import Challenge as ChallengeValue
from service.model.challenge import ChallengePolicy, ChallengeStatus
from service.model.invitation import InvitationPolicy, InvitationStatus
from service.model.live_match import HouseBotKind, LiveMatch
from service.model.tournament import TournamentStatus
from service.settings import Settings
from wizard import Ruleset

Ctx = Info[RequestContext, None]


def _for(live: LiveMatch, caller: Caller | None) -> Match:
    return match_type(live, live.seat_of(caller.bot_id) if caller else None)


strawberry.enum(WaitEnd, name="TurnWaitReason", description="Why a wait for a turn ended.")


@strawberry.type(name="TurnWait", description="nextTurn's answer: why the wait ended, and the match as the caller sees it then.")
class TurnWaitResult:
    reason: WaitEnd = strawberry.field(
        description="YOUR_TURN: the caller has a move to make in `match`; TIMED_OUT: timeoutMs passed first; "
        "MATCH_OVER: the match waited on is FINISHED or ABORTED; INVITATION (asked for with invitations: true): "
        "`invitation` waits for the caller's answer; CHALLENGE (asked for with challenges: true): `challenge` "
        "names the caller and waits for its answer."
    )
    match: Match | None = strawberry.field(
        description="The match where it is the caller's turn; the match waited on (matchId) when it is over or the "
        "time ran out; null when a wait on all the caller's matches timed out."
    )
    invitation: Invitation | None = strawberry.field(
        default=None, description="With reason INVITATION: the invitation waiting for the caller's answer."
    )
    challenge: Challenge | None = strawberry.field(
        default=None, description="With reason CHALLENGE: the challenge waiting for the caller's answer."
    )


def _wait(wait: TurnWait, caller: Caller, offer: InvitationToTournament | ChallengeValue | None = None) -> TurnWaitResult:
    return TurnWaitResult(
        reason=wait.reason, match=None if wait.match is None else _for(wait.match, caller),
        invitation=invitation_type(offer) if isinstance(offer, InvitationToTournament) else None,
        challenge=challenge_type(offer) if isinstance(offer, ChallengeValue) else None,
    )


def _time_turn(info: Ctx, wait: TurnWait) -> None:
    request = info.context.request
    if request is not None:
        time_turn_when_written(request.scope, wait.committed_at)


def _epoch_ms(moment: datetime | None) -> int | None:
    """A DateTime input in ms since the epoch (a time without a zone is taken as UTC)."""
    if moment is None:
        return None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    try:
        return int(moment.timestamp() * 1000)
    except (ValueError, OverflowError):
        raise BadInput(f"{moment.isoformat()} is not a time the server can schedule") from None


@strawberry.type
class Query:
    @strawberry.field(description="The authenticated bot (null without a token).")
    async def me(self, info: Ctx) -> Bot | None:
        caller = await info.context.optional_caller()
        return None if caller is None else Bot(id=strawberry.ID(caller.bot_id), name=caller.name)

    @strawberry.field(description="A bot by its id: a registered one, or a house bot (`house-heuristic`, ...).")
    async def bot(self, info: Ctx, id: strawberry.ID) -> Bot | None:
        found = await info.context.services.bots.profile(str(id))
        return None if found is None else Bot(id=strawberry.ID(found.id), name=found.name)

    @strawberry.field(description="The caller's view of a match: a seated bot sees its own seat's cards.")
    async def match(self, info: Ctx, id: strawberry.ID) -> Match | None:
        caller = await info.context.optional_caller()
        try:
            live = await info.context.services.matches.get(str(id))
        except NotFound:
            return None
        return _for(live, caller)

    @strawberry.field(
        description="Answers as soon as the caller has a move to make (in matchId, or in any of its "
        "matches), or null after timeoutMs (bounded by the server)."
    )
    async def await_turn(self, info: Ctx, match_id: strawberry.ID | None = None, timeout_ms: int | None = None) -> Match | None:
        caller = await info.context.caller()
        wait = await info.context.services.matches.next_turn(caller, None if match_id is None else str(match_id), timeout_ms)
        if wait.reason is not WaitEnd.YOUR_TURN or wait.match is None:
            return None
        _time_turn(info, wait)
        return _for(wait.match, caller)

    @strawberry.field(
        description="awaitTurn that says why it ended: the caller's turn (in matchId, or in any of its matches), "
        "timeoutMs passed (bounded by the server), or the match waited on is over."
    )
    async def next_turn(
        self, info: Ctx, match_id: strawberry.ID | None = None, timeout_ms: int | None = None,
        invitations: Annotated[bool, strawberry.argument(description=(
            "Also end the wait on an invitation to a tournament waiting for an answer (reason INVITATION; one "
            "pending already answers at once): for bots that wait on all their matches (no matchId)."
        ))] = False,
        challenges: Annotated[bool, strawberry.argument(description=(
            "Also end the wait on a challenge naming the caller that waits for its answer (reason CHALLENGE; one "
            "pending already answers at once): for bots that wait on all their matches (no matchId)."
        ))] = False,
    ) -> TurnWaitResult:
        caller = await info.context.caller()
        services = info.context.services
        if invitations or challenges:
            if match_id is not None:
                raise BadInput("invitations: true and challenges: true wait on all your matches: leave matchId out")
            wait, offer = await services.invitations.next_turn_or_invitation(caller, timeout_ms, invitations, challenges)
            return _wait(wait, caller, offer)
        wait = await services.matches.next_turn(caller, None if match_id is None else str(match_id), timeout_ms)
        _time_turn(info, wait)
        return _wait(wait, caller)

    @strawberry.field(
        description="Matches newest first, live and archived in one list, as the caller may see them: `first` "
        f"of them (default {LISTING.default}, at most {LISTING.size}) after the cursor `after`.",
        metadata=LISTING.metadata(),
    )
    async def matches(
        self, info: Ctx, filter: MatchFilter | None = None, first: int = LISTING.default,  # type: ignore[assignment]
        after: str | None = None,
    ) -> MatchConnection:
        return await match_connection(info, filter or MatchFilter(), None, first, after)

    @strawberry.field(
        description="Tournaments newest first, live and archived in one list: `first` of them (default "
        f"{LISTING.default}, at most {LISTING.size}) after the cursor `after`.",
        metadata=LISTING.metadata(),
    )
    async def tournaments(
        self, info: Ctx, status: TournamentStatus | None = None, first: int = LISTING.default,  # type: ignore[assignment]
        after: str | None = None,
    ) -> TournamentConnection:
        page = await info.context.services.listings.tournament_page(
            None if status is None else status.value, first, after
        )
        return TournamentConnection(
            edges=[TournamentEdge(cursor=cursor, node=tournament_type(t)) for cursor, t in page.entries],
            page_info=PageInfo(has_next_page=page.has_next, end_cursor=page.end_cursor),
        )

    @strawberry.field
    async def tournament(self, info: Ctx, id: strawberry.ID) -> Tournament | None:
        try:
            return tournament_type(await info.context.services.tournaments.get(str(id)))
        except NotFound:
            return None

    @strawberry.field(
        description="The authenticated bot's invitations to tournaments, newest first (those whose tournaments "
        f"are still live): `first` of them (default {INVITATIONS.default}, at most {INVITATIONS.size}) with "
        "`status` (any when left out).",
        metadata=INVITATIONS.metadata(),
    )
    async def invitations(
        self, info: Ctx, status: InvitationStatus | None = None, first: int = INVITATIONS.default,  # type: ignore[assignment]
    ) -> list[Invitation]:
        caller = await info.context.caller()
        return [invitation_type(i) for i in await info.context.services.invitations.of(caller, status, first)]

    @strawberry.field(
        description="The authenticated bot's challenges, newest first: those it made or is named in (its latest "
        "100), and the open ones (naming nobody) its challenge policy does not refuse; `first` of them (default "
        f"{CHALLENGES.default}, at most {CHALLENGES.size}) with `status` (any when left out).",
        metadata=CHALLENGES.metadata(),
    )
    async def challenges(
        self, info: Ctx, status: ChallengeStatus | None = None, first: int = CHALLENGES.default,  # type: ignore[assignment]
    ) -> list[Challenge]:
        caller = await info.context.caller()
        return [challenge_type(c) for c in await info.context.services.challenges.of(caller, status, first)]

    @strawberry.field(description="A challenge by its id (null: none).")
    async def challenge(self, info: Ctx, id: strawberry.ID) -> Challenge | None:
        try:
            return challenge_type(await info.context.services.challenges.get(str(id)))
        except NotFound:
            return None

    @strawberry.field(
        description="Bots by rating, highest first (method: which rating; default ELO), each with its deviation and "
        "provisional mark. provisional: false leaves provisional bots out, ranks counted among those shown.",
        metadata=LEADERBOARD.metadata(),
    )
    async def leaderboard(
        self, info: Ctx, ruleset: Ruleset, first: int = LEADERBOARD.default, offset: int = 0,  # type: ignore[assignment]
        method: RatingMethod = RatingMethod.ELO, provisional: bool = True,
    ) -> list[LeaderboardEntry]:
        LEADERBOARD.check(first)
        rows = await info.context.services.ratings.leaderboard(ruleset.value, method, first, offset, provisional)
        return [
            LeaderboardEntry(
                rank=r["rank"], bot=Bot(id=strawberry.ID(r["id"]), name=r["name"]), rating=r["rating"],
                games=r["games"], method=method, deviation=r["deviation"], provisional=r["provisional"],
            )
            for r in rows
        ]


    @strawberry.field(
        description="The members of the continuous rated ladder of `ruleset` with `players` a table: the house bots "
        "of ARENA_LADDER_HOUSE_BOTS (permanent members), then the bots by when they joined, each with its state and "
        f"the ladder matches it sits in now: `first` of them (default {LADDER_MEMBERS.default}, at most "
        f"{LADDER_MEMBERS.size}). Its ratings are the ruleset's leaderboard.",
        metadata=LADDER_MEMBERS.metadata(),
    )
    async def ladder(
        self, info: Ctx, ruleset: Ruleset, players: int, first: int = LADDER_MEMBERS.default,  # type: ignore[assignment]
    ) -> list[LadderMembership]:
        LADDER_MEMBERS.check(first)
        found = await info.context.services.ladders.members(ruleset.value, players, first)
        return [membership_type(m) for m in found]


@strawberry.type
class Mutation:
    @strawberry.mutation(
        description="Registers a bot; the token is shown once and only its hash is kept. With `webhook`, the bot is "
        "called at that URL when it must act (as setWebhook), and webhookSecret is its signing secret."
    )
    async def register_bot(
        self, info: Ctx, name: str, secret: str | None = None, webhook: str | None = None
    ) -> BotRegistration:
        services = info.context.services
        if webhook is not None:
            services.webhooks.check(webhook)  # before the bot exists: a bad URL registers nothing
        token, bot = await services.bots.register(name, secret, info.context.address)
        signing = None
        if webhook is not None:
            signing, _ = await services.webhooks.set(Caller(bot["id"], bot["name"]), webhook)
        return BotRegistration(
            token=token, bot=Bot(id=strawberry.ID(bot["id"]), name=bot["name"]), webhook_secret=signing
        )

    @strawberry.mutation(
        description="The server calls this http(s) URL when the caller must act, in any match or tournament (and when "
        "its matches start and end), signed with the secret in the answer (shown only this once; a new one each "
        "time). Replaces any webhook the bot had. README: Webhook bots."
    )
    async def set_webhook(self, info: Ctx, url: str) -> WebhookGrant:
        caller = await info.context.caller()
        secret, found = await info.context.services.webhooks.set(caller, url)
        return WebhookGrant(secret=secret, webhook=Webhook.of(found))

    @strawberry.mutation(description="No more webhook calls: the bot plays by asking again (idempotent).")
    async def remove_webhook(self, info: Ctx) -> Bot:
        caller = await info.context.caller()
        await info.context.services.webhooks.remove(caller)
        return Bot(id=strawberry.ID(caller.bot_id), name=caller.name)

    @strawberry.mutation(description="Another token for the caller's bot, named after where it is used; shown once.")
    async def create_token(self, info: Ctx, name: str) -> TokenGrant:
        caller = await info.context.caller()
        token, made = await info.context.services.bots.create_token(caller, name)
        return TokenGrant(token=token, info=TokenInfo.of(made))

    @strawberry.mutation(
        description="Revokes one of the caller's tokens (not its last): it stops working at once. The tokens left.",
        metadata=TOKENS.metadata(),
    )
    async def revoke_token(self, info: Ctx, id: strawberry.ID) -> list[TokenInfo]:
        caller = await info.context.caller()
        await info.context.services.bots.revoke_token(caller, str(id))
        return [TokenInfo.of(t) for t in await info.context.services.bots.tokens(caller)]

    @strawberry.mutation(description="Sets the caller's description and homepage (a field left out stays; \"\" clears).")
    async def update_bot(self, info: Ctx, input: UpdateBotInput) -> Bot:
        caller = await info.context.caller()
        found = await info.context.services.bots.update(caller, input.description, input.homepage)
        return Bot(id=strawberry.ID(found.id), name=found.name)

    @strawberry.mutation(
        description="Retires the caller's bot for good: no new matches, tournaments or tokens; matches under way play "
        "on, and its name, history and ratings stay (retired: true)."
    )
    async def retire_bot(self, info: Ctx) -> Bot:
        caller = await info.context.caller()
        found = await info.context.services.bots.retire(caller)
        return Bot(id=strawberry.ID(found.id), name=found.name)

    @strawberry.mutation(description="Creates a match; the creator is not seated by creating.")
    async def create_match(self, info: Ctx, input: CreateMatchInput) -> Match:
        caller = await info.context.caller()
        spec = NewMatch(
            ruleset=input.ruleset.value,
            players=input.players,
            variants=tuple(v.value for v in input.variants),
            move_timeout_ms=input.move_timeout_ms,
            rated=input.rated,
            seed=input.seed,
            first_dealer=input.first_dealer,
            deals=input.deals,
        )
        return _for(await info.context.services.matches.create(caller, spec), caller)

    @strawberry.mutation(
        description="Seats the caller (the given seat, or the lowest free one). Idempotent: a bot already seated gets "
        "the match (BAD_INPUT only if it asks for another seat than its own)."
    )
    async def join_match(self, info: Ctx, match_id: strawberry.ID, seat: int | None = None) -> Match:
        caller = await info.context.caller()
        return _for(await info.context.services.matches.join(caller, str(match_id), seat), caller)

    @strawberry.mutation(
        description="Gives the caller's seat of a WAITING match back (idempotent: without a seat there, the match as it "
        "is)."
    )
    async def leave_match(self, info: Ctx, match_id: strawberry.ID) -> Match:
        caller = await info.context.caller()
        return _for(await info.context.services.matches.leave(caller, str(match_id)), caller)

    @strawberry.mutation(
        description="Aborts a WAITING match (its creator only; idempotent): status ABORTED, abortReason says so. A "
        "started match cannot be cancelled (MATCH_NOT_ACTIVE)."
    )
    async def cancel_match(self, info: Ctx, match_id: strawberry.ID) -> Match:
        caller = await info.context.caller()
        return _for(await info.context.services.matches.cancel(caller, str(match_id)), caller)

    @strawberry.mutation(description="Seats a built-in bot in the lowest free seat.")
    async def add_house_bot(self, info: Ctx, match_id: strawberry.ID, kind: HouseBotKind) -> Match:
        caller = await info.context.caller()
        live = await info.context.services.matches.add_house_bot(caller, str(match_id), kind.value)
        return _for(live, caller)

    @strawberry.mutation(description="Makes the caller's move; the answer is its view just after the move.")
    async def submit_move(
        self,
        info: Ctx,
        # named outright: strawberry derives each name again on every move otherwise
        match_id: Annotated[strawberry.ID, strawberry.argument(name="matchId")],
        move: Annotated[MoveInput, strawberry.argument(name="move")],
        expected_version: Annotated[int | None, strawberry.argument(name="expectedVersion")] = None,
        debug: Annotated[
            str | None,
            strawberry.argument(
                name="debug",
                description=f"What the bot's program wrote while deciding (its stderr, say), at most "
                f"{MOVE_DEBUG_MAX_BYTES} bytes in UTF-8 (BAD_INPUT above). Kept with the move and shown to this bot "
                "alone, in the moveNotes of the finished match's record (GET /api/matches/{id}/record and its "
                "export GET /api/bots/{id}/records, with its token); never to another bot or a spectator, live or "
                "after the match. A seat keeps at most "
                "ARENA_MATCH_DEBUG_BYTES_PER_SEAT bytes over a match; past it the rest is cut off.",
            ),
        ] = None,
    ) -> Match:
        caller = await info.context.caller()
        live = await info.context.services.matches.submit_move(
            caller, str(match_id), move.to_dict(), expected_version, debug
        )
        return _for(live, caller)

    @strawberry.mutation(description="Schedules a tournament (the workers start it at startsAt).")
    async def create_tournament(self, info: Ctx, input: CreateTournamentInput) -> Tournament:
        caller = await info.context.caller()
        spec = NewTournament(
            name=input.name,
            ruleset=input.ruleset.value,
            variants=[v.value for v in input.variants],
            players_per_match=input.players_per_match,
            format=input.format,
            rounds=input.rounds,
            duration_minutes=input.duration_minutes,
            starts_at_ms=_epoch_ms(input.starts_at),
            move_timeout_ms=input.move_timeout_ms,
            rated=input.rated,
            duplicate=input.duplicate,
            bots=[str(b) for b in input.bots],
            house_bots=[k.value for k in input.house_bots],
        )
        return tournament_type(await info.context.services.tournaments.create(caller, spec))

    @strawberry.mutation(
        description="Enters the caller (until the tournament starts); accepts its invitation there, if it has one."
    )
    async def join_tournament(self, info: Ctx, tournament_id: strawberry.ID) -> Tournament:
        caller = await info.context.caller()
        return tournament_type(await info.context.services.tournaments.join(caller, str(tournament_id)))

    @strawberry.mutation(
        description="Cancels a tournament (its creator only, with an optional reason, kept in cancelledReason); "
        "matches under way play on."
    )
    async def cancel_tournament(self, info: Ctx, tournament_id: strawberry.ID, reason: str | None = None) -> Tournament:
        caller = await info.context.caller()
        return tournament_type(await info.context.services.tournaments.cancel(caller, str(tournament_id), reason))

    @strawberry.mutation(description="Accepts the caller's invitation: it enters the tournament (until the start).")
    async def accept_invitation(self, info: Ctx, invitation_id: strawberry.ID) -> Invitation:
        caller = await info.context.caller()
        found = await info.context.services.tournaments.accept_invitation(caller, str(invitation_id))
        return invitation_type(InvitationToTournament(*found))

    @strawberry.mutation(description="Declines the caller's invitation (until the start), with an optional reason.")
    async def decline_invitation(
        self, info: Ctx, invitation_id: strawberry.ID, reason: str | None = None
    ) -> Invitation:
        caller = await info.context.caller()
        found = await info.context.services.tournaments.decline_invitation(caller, str(invitation_id), reason)
        return invitation_type(InvitationToTournament(*found))

    @strawberry.mutation(
        description="Sets the caller's standing answer to the invitations it gets from now on (default ASK)."
    )
    async def set_invitation_policy(self, info: Ctx, policy: InvitationPolicy) -> InvitationPolicy:
        caller = await info.context.caller()
        return await info.context.services.invitations.set_policy(caller, policy)

    @strawberry.mutation(
        description="Challenges bots to a match on createMatch's terms (or, naming none, anyone): the caller takes a "
        "seat, and the match is made and starts once enough bots have accepted; unanswered, it expires "
        "(ARENA_CHALLENGE_TTL_SECONDS). It counts among the caller's matches whose seats are not all taken "
        "(ARENA_WAITING_MATCHES_PER_BOT)."
    )
    async def create_challenge(self, info: Ctx, input: CreateChallengeInput) -> Challenge:
        caller = await info.context.caller()
        return challenge_type(await info.context.services.challenges.create(caller, input.domain()))

    @strawberry.mutation(
        description="Accepts a challenge that names the caller (or an open one): the last seat taken makes the match, "
        "which starts at once (status ACCEPTED, `match`). An answer is final (the same one again changes nothing)."
    )
    async def accept_challenge(self, info: Ctx, id: strawberry.ID) -> Challenge:
        caller = await info.context.caller()
        return challenge_type(await info.context.services.challenges.accept(caller, str(id)))

    @strawberry.mutation(
        description="Declines a challenge, with an optional reason its challenger sees; one left with too few named "
        "bots to fill its seats is DECLINED. An answer is final (the same one again changes nothing)."
    )
    async def decline_challenge(self, info: Ctx, id: strawberry.ID, reason: str | None = None) -> Challenge:
        caller = await info.context.caller()
        return challenge_type(await info.context.services.challenges.decline(caller, str(id), reason))

    @strawberry.mutation(description="Withdraws an OPEN challenge (its challenger only; idempotent): status CANCELLED.")
    async def cancel_challenge(self, info: Ctx, id: strawberry.ID) -> Challenge:
        caller = await info.context.caller()
        return challenge_type(await info.context.services.challenges.cancel(caller, str(id)))

    @strawberry.mutation(
        description="Sets the caller's standing rule for the challenges made to it from now on (default ACCEPT_ANY)."
    )
    async def set_challenge_policy(self, info: Ctx, policy: ChallengePolicy) -> ChallengePolicy:
        caller = await info.context.caller()
        return await info.context.services.challenges.set_policy(caller, policy)

    @strawberry.mutation(
        description="Joins the continuous rated ladder of `ruleset` with `players` a table: the caller's consent to "
        "rated ladder play; the workers pair it into rated matches (at most ARENA_LADDER_MAX_MATCHES at once) until "
        "it leaves. Again: it stays a member, and a pause is lifted."
    )
    async def join_ladder(self, info: Ctx, ruleset: Ruleset, players: int) -> LadderMembership:
        caller = await info.context.caller()
        return membership_type(await info.context.services.ladders.join(caller, ruleset.value, players))

    @strawberry.mutation(
        description="Leaves the ladder: no new ladder matches (those in play finish); state LEFT. Again changes nothing."
    )
    async def leave_ladder(self, info: Ctx, ruleset: Ruleset, players: int) -> LadderMembership:
        caller = await info.context.caller()
        return membership_type(await info.context.services.ladders.leave(caller, ruleset.value, players))

    @strawberry.mutation(description="Asks the workers to refit a ruleset's FITTED ratings from its whole history.")
    async def refit_ratings(self, info: Ctx, ruleset: Ruleset) -> bool:
        await info.context.caller()
        await info.context.services.ratings.request_fit(ruleset.value)
        return True


@strawberry.type
class Subscription:
    @strawberry.subscription(description="The subscriber's view now and after every change; ends with the match.")
    async def match_updates(self, info: Ctx, match_id: strawberry.ID) -> AsyncGenerator[Match, None]:
        caller = await info.context.optional_caller()
        async for live in info.context.services.matches.updates(str(match_id), info.context.waiter(caller)):
            yield _for(live, caller)

    @strawberry.subscription(description="The bot's view of any match where it now has to move.")
    async def my_turns(self, info: Ctx) -> AsyncGenerator[Match, None]:
        caller = await info.context.caller()
        metrics = info.context.services.metrics
        async for wait in info.context.services.matches.my_turns(caller):
            assert wait.match is not None
            yield _for(wait.match, caller)
            # asked for the next one: strawberry has written this one's frame (it sends each
            # result before it asks for the next, in the same step of this operation's task)
            metrics.turn_written(wait.committed_at, "websocket")


    @strawberry.subscription(
        description="myTurns and the bot's invitations on one stream: each Match where it now has to move, and "
        "each Invitation: those PENDING when it subscribes, then every new one as it comes (whatever the "
        "bot's policy answered)."
    )
    async def my_turns_and_invitations(
        self, info: Ctx,
        challenges: Annotated[bool, strawberry.argument(description=(
            "Also each Challenge the bot made or is named in: those waiting for its answer when it subscribes, then "
            "each new one and each change of status."
        ))] = False,
    ) -> AsyncGenerator[TurnOrInvitation, None]:
        caller = await info.context.caller()
        async for item in info.context.services.invitations.turns_and_invitations(caller, challenges=challenges):
            yield _for(item, caller) if isinstance(item, LiveMatch) else offer_type(item)


class ArenaSchema(strawberry.Schema):
    @cached_property
    def root_fields(self) -> frozenset[str]:
        return root_fields(self._schema)

    async def execute(self, *args: Any, **kwargs: Any) -> ExecutionResult:
        # One execution is a query or a mutation; a subscription is a stream (WebSocket), and
        # executed once over HTTP it would fail inside. Refused instead, as a client error.
        allowed = kwargs.get("allowed_operation_types") or (OperationType.QUERY, OperationType.MUTATION)
        kwargs["allowed_operation_types"] = set(allowed) - {OperationType.SUBSCRIPTION}
        return await super().execute(*args, **kwargs)

    def create_extensions_runner(self, execution_context: ExecutionContext, extensions: list[SchemaExtension]) -> HooksRunner:
        return HooksRunner(execution_context=execution_context, extensions=extensions)

    def process_errors(self, errors: list[GraphQLError], execution_context: ExecutionContext | None = None) -> None:
        # Client errors are answers, not incidents; ErrorCodes logs the unexpected ones.
        return None

    async def _prepare_operation_async(self, context: ExecutionContext, extensions_runner: Any) -> PreExecutionError | None:
        # Which operation of the document runs, as the GraphQL spec's GetOperation says: the
        # one operationName names, or the only one. strawberry (0.341) instead runs the first
        # operation of a document that names none, and fails an unknown operationName outside
        # GraphQL (an HTTP 400, a closed WebSocket). Both are refused here, for HTTP and the
        # WebSocket alike (both prepare through this method), as a BAD_INPUT error.
        try:
            refused = await super()._prepare_operation_async(context, extensions_runner)
        except CannotGetOperationTypeError:
            refused = None  # no operation of that name (or none at all): said below
        document = context.graphql_document
        _note_operation(context, document, self.root_fields)
        if refused is None and document is not None:
            problem = operation_choice_problem(document, context._provided_operation_name)
            if problem is not None:
                context.pre_execution_errors = [GraphQLError(problem, original_error=BadInput(problem))]
                refused = PreExecutionError(data=None, errors=context.pre_execution_errors)
        return refused


#: the request scope's key for the GraphQL operation's metrics label (service.api.app.RequestMetrics)
OPERATION_SCOPE_KEY = "wizard_arena.operation"


def root_fields(schema: GraphQLSchema) -> frozenset[str]:
    """Every field of the schema's root types: the GraphQL operations' metric labels."""
    roots = (schema.query_type, schema.mutation_type, schema.subscription_type)
    return frozenset(name for root in roots if root is not None for name in root.fields)


def _note_operation(context: ExecutionContext, document: DocumentNode | None, known: frozenset[str]) -> None:
    """Tell the request's metrics which operation it runs (HTTP only: a WebSocket's operations
    are streams, not timed requests)."""
    scope = getattr(getattr(context.context, "request", None), "scope", None)
    if scope is not None and scope.get("type") == "http":
        scope[OPERATION_SCOPE_KEY] = operation_label(document, context._provided_operation_name, known)


def operation_choice_problem(document: DocumentNode, operation_name: str | None) -> str | None:
    """Why no operation of ``document`` can run for ``operation_name`` (None: one can)."""
    names = [d.name.value if d.name else None for d in document.definitions if isinstance(d, OperationDefinitionNode)]
    if not names:
        return "this document has no operation: send a query, a mutation or a subscription"
    if operation_name is None:
        if len(names) > 1:
            return f"this document has {len(names)} operations: name one with operationName"
        return None
    if operation_name not in names:
        known = ", ".join(n for n in names if n) or "none has a name"
        return f"this document has no operation named {operation_name!r} (its operations: {known}): fix operationName"
    return None


def build_schema(settings: Settings) -> strawberry.Schema:
    documents = Documents(maxsize=512)
    schema = ArenaSchema(
        query=Query,
        mutation=Mutation,
        subscription=Subscription,
        config=StrawberryConfig(disable_field_suggestions=True),
        execution_context_class=ArenaExecutionContext,
        # Factories, not instances: each request gets its own extension objects (an instance
        # shared by concurrent requests would see another request's execution context).
        extensions=[
            lambda: MaxTokensLimiter(max_token_count=settings.max_tokens),
            lambda: DocumentCache(documents),
            ErrorCodes,
        ],
    )
    check_shapes(schema._schema, MATCH)
    documents.meter = DocumentMeter(
        schema._schema,
        Limits(
            max_depth=settings.max_query_depth,
            max_aliases=settings.max_aliases,
            max_cost=settings.max_query_cost,
            max_fragment_depth=settings.max_fragment_depth,
            max_repeats=settings.max_repeated_fields,
        ),
    )
    return schema


def check_shapes(schema: GraphQLSchema, shape: Shape) -> None:
    """The schema's types answer exactly the fields the contract (``contract``) describes, or
    the schema is not built: the SDK and the tests ask for the contract's fields."""
    problems = []
    for expected in shape.shapes():
        graphql_type = schema.get_type(expected.name)
        fields = getattr(graphql_type, "fields", None)
        if fields is None:
            problems.append(f"no type {expected.name}")
            continue
        actual = {name: str(f.type) for name, f in fields.items()}
        wanted = {f.name: f.type for f in expected.fields}
        if expected.partial:
            actual = {name: t for name, t in actual.items() if name in wanted}
        if actual != wanted:
            problems.append(f"{expected.name}: the schema has {actual}, the contract {wanted}")
    if problems:
        raise TypeError("the GraphQL types and contract/ disagree: " + "; ".join(problems))


def schema_sdl() -> str:
    """The schema as SDL: what ``schema.graphql`` holds."""
    return build_schema(Settings()).as_str() + "\n"
