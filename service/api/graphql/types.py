"""GraphQL types. A ``Match`` is built from the engine's view for the caller's seat (or a
spectator's), so the API can show nothing the engine would not."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime
from functools import cached_property
from typing import TYPE_CHECKING, Annotated, Any, cast

import strawberry
from strawberry.types import Info
from strawberry.types.arguments import InputContext

from service.api.graphql.context import RequestContext
from service.api.graphql.limits import ListBound
from service.domain import bots, listings, webhooks
from service.domain.listings import DEFAULT_FIRST, MAX_FIRST
from service.domain.ratings import RatingMethod
from service.errors import BadInput, Forbidden
from service.model.challenge import ChallengePolicy
from service.model.invitation import InvitationPolicy
from service.model.live_match import HouseBotKind, LiveMatch, MatchStatus
from service.store.clock import now_ms
from wizard import MatchView, Phase, Ruleset, Suit, Variant
from wizard.rules import RULESETS, SINGLE_SUIT_EXTRA_CARDS, SINGLE_SUIT_ROUNDS

if TYPE_CHECKING:
    from service.api.graphql.ladder_types import LadderMembership

#: the ladders a bot can be a member of at most: each ruleset's numbers of players
MAX_LADDERS = len(Ruleset) * 6

# What the rules allow at most, for the bounds of the lists a Match holds (the query cost).
MAX_PLAYERS = max(p for info in RULESETS.values() for p in info.rounds_by_players)
MAX_ROUNDS = max(SINGLE_SUIT_ROUNDS, *(r for info in RULESETS.values() for r in info.rounds_by_players.values()))
MAX_HAND = max(MAX_ROUNDS, SINGLE_SUIT_ROUNDS + SINGLE_SUIT_EXTRA_CARDS)
#: a seat's moves at once: a bid from 0 to its hand size (more than its cards, or the suits)
MAX_LEGAL_MOVES = MAX_HAND + 1
#: ``Bot.ratingHistory(last:)``
RATING_HISTORY = ListBound(10_000, argument="last", default=1_000)
#: a listing's page (``matches(first:)``, ``tournaments(first:)``): on the connection field;
#: its ``edges`` are bounded by 1 (the page is counted once, at ``first``)
LISTING = ListBound(MAX_FIRST, argument="first", default=DEFAULT_FIRST)
EDGES = ListBound(1)
#: a bot's tokens
TOKENS = ListBound(bots.MAX_TOKENS_PER_BOT)

# The engine's and the model's enums are the schema's: registered here under their names.
strawberry.enum(Ruleset, name="Ruleset", description="The rule texts a match follows (RULES.md).")
strawberry.enum(Variant, name="Variant", description="Optional rules (RULES.md).")
strawberry.enum(webhooks.WebhookStatus, name="WebhookStatus", description="A webhook's health.")
strawberry.enum(Suit, name="Suit", description="Card codes use the suit's first letter.")
strawberry.enum(Phase, name="Phase")
strawberry.enum(MatchStatus, name="MatchStatus")
strawberry.enum(HouseBotKind, name="HouseBotKind", description="Built-in bots the server plays itself.")
strawberry.enum(
    RatingMethod, name="RatingMethod",
    description="ELO: moved by every rated match as it ends. FITTED: a fit of the whole history of "
    "final scores (refitted after each tournament and on demand).",
)
strawberry.enum(
    InvitationPolicy, name="InvitationPolicy",
    description="A bot's standing answer to each invitation it gets: ACCEPT_ALL enters it at once, DECLINE_ALL "
    "declines at once, ASK (the default) leaves the invitation PENDING for the bot to answer.",
)
strawberry.enum(
    ChallengePolicy, name="ChallengePolicy",
    description="A bot's standing rule for the challenges others make it: ACCEPT_ANY (the default) lets any "
    "challenge name it; REFUSE_RATED refuses rated ones; REFUSE_ALL refuses all (createChallenge naming it fails "
    "with CHALLENGE_REFUSED, and the open challenges it refuses are not listed for it).",
)


@strawberry.type(description="A bot's rating under one ruleset (filled by rated matches), with its doubt.")
class Rating:
    ruleset: Ruleset
    rating: float
    games: int
    deviation: float = strawberry.field(
        description="One standard deviation of the rating, Elo points: the true strength lies within 1.96 "
        "deviations of the rating about 95 times in 100. ELO: Glicko-2's rating deviation, tracked beside the Elo "
        "rating (350 for a new bot, narrowing with every rated match to a floor of about 60, as a fixed-K Elo "
        "rating keeps moving); FITTED: the fit's posterior spread of the bot's strength."
    )
    provisional: bool = strawberry.field(
        description="Fewer rated matches of the ruleset than the server's provisional threshold "
        "(ARENA_PROVISIONAL_GAMES, 15 by default): the rating is still finding its level."
    )

    @classmethod
    def of(cls, row: dict[str, Any]) -> Rating:
        return cls(
            ruleset=Ruleset(row["ruleset"]), rating=row["rating"], games=row["games"],
            deviation=row["deviation"], provisional=row["provisional"],
        )


@strawberry.type(description="One of a bot's tokens; its secret is shown only by createToken, once.")
class TokenInfo:
    id: strawberry.ID
    name: str
    created_at: datetime
    last_used_at: datetime | None = strawberry.field(
        description="When a request last used it (true to the server's rate-limit lease, half a second by default); "
        "null: never used."
    )

    @classmethod
    def of(cls, info: bots.TokenInfo) -> TokenInfo:
        return cls(
            id=strawberry.ID(info.id), name=info.name, created_at=_datetime(info.created_ms),  # type: ignore[arg-type]
            last_used_at=_datetime(info.last_used_ms),
        )


@strawberry.type(description="A bot's webhook (setWebhook): the URL the server calls when the bot must act.")
class Webhook:
    url: str
    status: webhooks.WebhookStatus = strawberry.field(
        description="ACTIVE; FAILING (its last calls failed); PAUSED (called no more until pausedUntil: its seats "
        "get the fallback move at their deadlines; the first call after tries it again)."
    )
    failures: int = strawberry.field(description="Calls that failed in a row (0 after one that went well).")
    last_error: str | None = strawberry.field(description="Why the latest failed call failed; null: none failed.")
    last_error_at: datetime | None
    paused_until: datetime | None = strawberry.field(description="Set while (and after) it was paused.")

    @classmethod
    def of(cls, found: webhooks.WebhookInfo) -> Webhook:
        return cls(
            url=found.url, status=found.status, failures=found.failures, last_error=found.last_error,
            last_error_at=_datetime(found.last_error_ms), paused_until=_datetime(found.paused_until_ms),
        )


@strawberry.type(description="setWebhook's answer: the signing secret is shown only this once.")
class WebhookGrant:
    secret: str = strawberry.field(
        description="Keys the HMAC-SHA256 of each call's Wizard-Signature header (README: Webhook bots)."
    )
    webhook: Webhook


@strawberry.type(description="createToken's answer: the token is shown only this once.")
class TokenGrant:
    token: str
    info: TokenInfo


@strawberry.type(description="A registered bot, or a house bot (house: true).")
class Bot:
    id: strawberry.ID
    name: str

    async def _profile(self, info: Info[RequestContext, None]) -> bots.BotProfile | None:
        return await info.context.loaders.profiles.load(str(self.id))

    @strawberry.field(description="A house bot: one the server plays itself (its kind in houseKind).")
    def house(self) -> bool:
        return bots.house_kind_of_id(str(self.id)) is not None

    @strawberry.field(description="The house bot's kind; null for a registered bot.")
    def house_kind(self) -> HouseBotKind | None:
        kind = bots.house_kind_of_id(str(self.id))
        return None if kind is None else HouseBotKind(kind)

    @strawberry.field(description="What the bot says of itself (updateBot); null: nothing said.")
    async def description(self, info: Info[RequestContext, None]) -> str | None:
        found = await self._profile(info)
        return None if found is None else found.description

    @strawberry.field(description="The bot's http(s) homepage (updateBot); null: none given.")
    async def homepage(self, info: Info[RequestContext, None]) -> str | None:
        found = await self._profile(info)
        return None if found is None else found.homepage

    @strawberry.field(description="When the bot registered (null for a house bot).")
    async def created_at(self, info: Info[RequestContext, None]) -> datetime | None:
        found = await self._profile(info)
        return None if found is None else _datetime(found.created_ms)

    @strawberry.field(description="Retired (retireBot): it plays no more; its history and ratings stay.")
    async def retired(self, info: Info[RequestContext, None]) -> bool:
        found = await self._profile(info)
        return found is not None and found.retired_ms is not None

    @strawberry.field(description="When the bot retired; null while it has not.")
    async def retired_at(self, info: Info[RequestContext, None]) -> datetime | None:
        found = await self._profile(info)
        return None if found is None else _datetime(found.retired_ms)

    @strawberry.field(
        description="The bot's tokens, oldest first, never their secrets: readable by the bot itself only (`me`); "
        "FORBIDDEN for any other bot.",
        metadata=TOKENS.metadata(),
    )
    async def tokens(self, info: Info[RequestContext, None]) -> list[TokenInfo]:
        caller = await info.context.caller()
        if caller.bot_id != str(self.id):
            raise Forbidden("a bot's tokens are its own: read yours as me { tokens { id name } }")
        return [TokenInfo.of(t) for t in await info.context.services.bots.tokens(caller)]

    @strawberry.field(
        description="Ratings per ruleset, each with its deviation and provisional mark (method: which rating; "
        "default ELO). ELO: empty until the bot has played a rated match; FITTED: the rulesets whose latest refit "
        "rated it.",
        metadata=ListBound(len(Ruleset)).metadata(),
    )
    async def ratings(self, info: Info[RequestContext, None], method: RatingMethod = RatingMethod.ELO) -> list[Rating]:
        loader = info.context.loaders.fitted if method is RatingMethod.FITTED else info.context.loaders.ratings
        return [Rating.of(r) for r in await loader.load(str(self.id))]

    @strawberry.field(
        description="The ladders the bot is a member of (joinLadder), each with its state (ACTIVE, or PAUSED with the "
        "reason and since when) and the ladder matches it sits in now; a house bot of ARENA_LADDER_HOUSE_BOTS is a "
        "member of every ladder.",
        metadata=ListBound(MAX_LADDERS).metadata(),
    )
    async def ladders(
        self, info: Info[RequestContext, None]
    ) -> list[Annotated[LadderMembership, strawberry.lazy("service.api.graphql.ladder_types")]]:
        from service.api.graphql.ladder_types import membership_type  # (it imports this module)

        found = await info.context.services.ladders.memberships(str(self.id), self.name)
        return [membership_type(m) for m in found]

    @strawberry.field(
        description="The Elo rating after each rated match, oldest first: the latest `last` of them "
        f"(default {RATING_HISTORY.default}, at most {RATING_HISTORY.size}).",
        metadata=RATING_HISTORY.metadata(),
    )
    async def rating_history(
        self, info: Info[RequestContext, None], ruleset: Ruleset, last: int = RATING_HISTORY.default  # type: ignore[assignment]
    ) -> list[RatingPoint]:
        rows = await info.context.loaders.history.load((str(self.id), ruleset.value, RATING_HISTORY.check(last)))
        return [RatingPoint(rating=r["rating"], match_id=strawberry.ID(r["matchId"]), at=_datetime(r["at"])) for r in rows]  # type: ignore[arg-type]

    @strawberry.field(
        description="The matches the bot sits in, newest first, live and archived (filter.botId is this bot): "
        f"`first` of them (default {LISTING.default}, at most {LISTING.size}) after the cursor `after`.",
        metadata=LISTING.metadata(),
    )
    async def matches(
        self, info: Info[RequestContext, None], filter: MatchFilter | None = None,
        first: int = LISTING.default, after: str | None = None,  # type: ignore[assignment]
    ) -> MatchConnection:
        given = filter or MatchFilter()
        if given.bot_id is not None and str(given.bot_id) != str(self.id):
            raise BadInput(f"Bot.matches lists bot {self.id}'s matches: leave filter.botId out (or use Query.matches)")
        return await match_connection(info, given, str(self.id), first, after)

    @strawberry.field(
        description="The bot's standing answer to invitations (setInvitationPolicy): shown to the bot itself "
        "only, null to anyone else."
    )
    async def invitation_policy(self, info: Info[RequestContext, None]) -> InvitationPolicy | None:
        caller = await info.context.optional_caller()
        if caller is None or caller.bot_id != str(self.id):
            return None
        return await info.context.services.invitations.policy(caller.bot_id)

    @strawberry.field(
        description="The bot's standing rule for challenges (setChallengePolicy): shown to the bot itself only, "
        "null to anyone else."
    )
    async def challenge_policy(self, info: Info[RequestContext, None]) -> ChallengePolicy | None:
        caller = await info.context.optional_caller()
        if caller is None or caller.bot_id != str(self.id):
            return None
        return await info.context.services.challenges.policy(caller.bot_id)

    @strawberry.field(
        description="The bot's webhook (setWebhook) and its health: shown to the bot itself only, null to anyone "
        "else (and while it has none)."
    )
    async def webhook(self, info: Info[RequestContext, None]) -> Webhook | None:
        caller = await info.context.optional_caller()
        if caller is None or caller.bot_id != str(self.id):
            return None
        found = await info.context.services.webhooks.info(caller.bot_id)
        return None if found is None else Webhook.of(found)

    @strawberry.field(
        description="The bot's figures over its finished matches under `ruleset` (from the archive: settled matches)."
    )
    async def stats(self, info: Info[RequestContext, None], ruleset: Ruleset) -> BotStats:
        figures = await info.context.services.listings.bot_stats(str(self.id), ruleset.value)
        return BotStats(
            ruleset=ruleset, matches=figures.matches, rounds=figures.rounds, mean_score=figures.mean_score,
            mean_place=figures.mean_place, bid_accuracy=figures.bid_accuracy, timeouts=figures.timeouts,
        )


@strawberry.type
class RatingPoint:
    rating: float
    match_id: strawberry.ID
    at: datetime


@strawberry.type(description="registerBot's answer: the token is shown only this once.")
class BotRegistration:
    token: str
    bot: Bot
    webhook_secret: str | None = strawberry.field(
        default=None, description="With registerBot(webhook:), its signing secret (shown only this once); else null."
    )


@strawberry.type(description="A move: exactly one field is set.")
class Move:
    bid: int | None = None
    card: str | None = None
    trump: Suit | None = None


@strawberry.type
class Play:
    seat: int
    card: str


@strawberry.type
class Trick:
    leader: int
    plays: list[Play] = strawberry.field(metadata=ListBound(MAX_PLAYERS).metadata())
    winner: int


@strawberry.type
class SeatResult:
    seat: int
    bid: int
    tricks: int
    points: int


@strawberry.type
class RoundResult:
    round: int
    seats: list[SeatResult] = strawberry.field(metadata=ListBound(MAX_PLAYERS).metadata())


@strawberry.type
class Seat:
    seat: int
    bot: Bot | None = strawberry.field(description="Who sits here; null while the seat is free.")
    house_bot: HouseBotKind | None = strawberry.field(description="The house bot's kind, for a house seat.")
    score: int
    bid: int | None = strawberry.field(description="Null until made, and while hidden from the caller.")
    tricks: int
    timeouts: int = strawberry.field(description="How many of this seat's moves the server made for it.")
    hand: list[str] | None = strawberry.field(description="The seat's cards as far as the caller may see them.")


@strawberry.type(description="One match as the caller may see it.")
class Match:
    id: strawberry.ID
    ruleset: Ruleset
    variants: list[Variant]
    players: int
    status: MatchStatus
    version: int = strawberry.field(description="Grows by one with every change of the match.")
    round: int
    rounds: int
    hand_size: int
    dealer: int
    phase: Phase
    trump_card: str | None
    trump_suit: Suit | None
    lead_suit: Suit | None
    to_act: int | None = strawberry.field(description="The seat to move; null while bids are simultaneous.")
    awaiting: list[int] = strawberry.field(description="Every seat that has a move to make now.")
    deadline: datetime | None = strawberry.field(description="When the seat(s) to act time out (UTC).")
    move_timeout_ms: int
    rated: bool
    stacked: bool = strawberry.field(description="Whether the creator stacked a round's deal.")
    seed_chosen: bool = strawberry.field(
        description="Whether the creator chose the seed (`createMatch(seed:)`) rather than the server: such a match "
        "is never rated. (For a match from before this field: true unless rated or a tournament's.)"
    )
    created_by: strawberry.ID
    created_at: datetime
    my_seat: int | None
    hand: list[str] | None
    legal_moves: list[Move] = strawberry.field(metadata=ListBound(MAX_LEGAL_MOVES).metadata())
    seats: list[Seat] = strawberry.field(metadata=ListBound(MAX_PLAYERS).metadata())
    current_trick: list[Play] = strawberry.field(metadata=ListBound(MAX_PLAYERS).metadata())
    completed_tricks: list[Trick] = strawberry.field(metadata=ListBound(MAX_HAND).metadata())
    last_trick: Trick | None
    round_results: list[RoundResult] = strawberry.field(metadata=ListBound(MAX_ROUNDS).metadata())
    winners: list[int] | None
    moves_made: int
    seed_hash: str = strawberry.field(
        description="Published at the start: SHA-256 (hex) of salt + \":\" + seed (UTF-8), or of the seed alone "
        "for a match without a salt (made before salts, or a tournament's). RULES.md shows how to check it."
    )
    seed: str | None = strawberry.field(description="The seed, once the match has finished.")
    salt: str | None = strawberry.field(
        description="The server-drawn salt hashed with the seed into seedHash (lowercase hex), once the match has "
        "finished; null before, and for a match without one."
    )
    time_left_ms: int | None = strawberry.field(
        description="Milliseconds until `deadline` by the server's clock when this answer was made (0 once it has "
        "passed); null when nobody has to act."
    )
    abort_reason: str | None = strawberry.field(
        description="Why the match was aborted (cancelled by its creator, its seats not all taken in time); null "
        "unless ABORTED."
    )


def time_left_ms(live: LiveMatch) -> int | None:
    """``Match.timeLeftMs``: until the deadline, by the server's clock now."""
    return None if live.deadline_ms is None else max(0, live.deadline_ms - now_ms())


def _datetime(ms: int | None) -> datetime | None:
    return None if ms is None else datetime.fromtimestamp(ms / 1000, tz=UTC)


class LiveMatchType(Match):
    """A ``Match`` whose fields are read on demand from the live match and the engine's view
    for the caller's seat: a request that selects ``version`` builds no view at all."""

    def __init__(self, live: LiveMatch, viewer_seat: int | None) -> None:
        self._live = live
        self._seat = viewer_seat

    @property
    def live(self) -> LiveMatch:
        return self._live

    @property
    def viewer_seat(self) -> int | None:
        return self._seat

    @cached_property
    def _view(self) -> MatchView:
        return self._live.view(self._seat)

    id = property(lambda self: strawberry.ID(self._live.id))
    ruleset = property(lambda self: self._live.ruleset)
    variants = property(lambda self: list(self._live.variants))
    players = property(lambda self: self._live.settings.config.players)
    status = property(lambda self: self._live.status)
    version = property(lambda self: self._live.version)
    round = property(lambda self: self._live.state.round)
    rounds = property(lambda self: self._live.settings.config.rounds)
    hand_size = property(lambda self: self._live.state.hand_size())
    dealer = property(lambda self: self._live.state.dealer)
    phase = property(lambda self: self._live.state.phase)
    trump_card = property(lambda self: self._view.trump_card)
    trump_suit = property(lambda self: self._view.trump_suit)
    lead_suit = property(lambda self: self._view.lead_suit)
    to_act = property(lambda self: self._live.state.to_act if self._live.status is MatchStatus.ACTIVE else None)
    awaiting = property(lambda self: list(self._live.awaiting()))
    deadline = property(lambda self: _datetime(self._live.deadline_ms))
    move_timeout_ms = property(lambda self: self._live.settings.move_timeout_ms)
    rated = property(lambda self: self._live.settings.rated)
    stacked = property(lambda self: self._live.settings.stacked)
    seed_chosen = property(lambda self: self._live.settings.seed_chosen)
    created_by = property(lambda self: strawberry.ID(self._live.settings.created_by))
    created_at = property(lambda self: _datetime(self._live.settings.created_at_ms))
    my_seat = property(lambda self: self._seat)
    hand = property(lambda self: None if self._view.hand is None else list(self._view.hand))
    # the engine's moves, plays, tricks and round results have the fields of the API's types
    # (the same names and values): they are answered as they are, not copied into them
    legal_moves = property(lambda self: self._view.legal_moves)
    current_trick = property(lambda self: self._view.current_trick)
    completed_tricks = property(lambda self: self._view.completed_tricks)
    last_trick = property(lambda self: self._view.last_trick)
    round_results = property(lambda self: self._view.round_results)
    winners = property(lambda self: None if self._view.winners is None else list(self._view.winners))
    moves_made = property(lambda self: self._live.state.moves_made)
    seed_hash = property(lambda self: self._live.state.seed_hash)
    seed = property(lambda self: self._view.seed)
    salt = property(lambda self: self._view.salt)
    time_left_ms = property(lambda self: time_left_ms(self._live))
    abort_reason = property(lambda self: self._live.abort_reason if self._live.status is MatchStatus.ABORTED else None)

    @property
    def seats(self) -> list[Seat]:  # type: ignore[override]
        live = self._live
        out = []
        for s in self._view.seats:
            holder = live.seats[s.seat]
            out.append(
                Seat(
                    seat=s.seat,
                    bot=None if holder is None else Bot(id=strawberry.ID(holder.id), name=holder.name),
                    house_bot=None if holder is None or holder.house is None else HouseBotKind(holder.house),
                    score=s.score,
                    bid=s.bid,
                    tricks=s.tricks,
                    timeouts=live.timeouts[s.seat],
                    hand=None if s.hand is None else list(s.hand),
                )
            )
        return out


# Every field of Match is read on demand: a field without its reader here would fail each request.
_unread = [f for f in Match.__strawberry_definition__.fields if not isinstance(LiveMatchType.__dict__.get(f.python_name), property)]  # type: ignore[attr-defined]
if _unread:
    raise TypeError(f"LiveMatchType reads no {', '.join(f.python_name for f in _unread)}")


def match_type(live: LiveMatch, viewer_seat: int | None) -> Match:
    """The ``Match`` for a caller sitting in ``viewer_seat`` (None: not seated)."""
    return LiveMatchType(live, viewer_seat)


@strawberry.input(description="A move: set exactly one field.")
class MoveInput:
    # named outright: strawberry derives a name again on every conversion of a move otherwise
    bid: int | None = strawberry.field(default=None, name="bid")
    card: str | None = strawberry.field(default=None, name="card")
    trump: Suit | None = strawberry.field(default=None, name="trump")

    def to_dict(self) -> dict[str, object]:
        """The move as the engine's ``Move.from_dict`` reads it."""
        given: dict[str, object] = {}
        if self.bid is not None:
            given["bid"] = self.bid
        if self.card is not None:
            given["card"] = self.card
        if self.trump is not None:
            given["trump"] = self.trump.name
        return given

    @staticmethod
    def _from_input(cls: type[MoveInput], value: Mapping[str, Any], context: InputContext) -> MoveInput:
        """Built straight from the input graphql-core has already checked (an Int, a String,
        a Suit): strawberry's general conversion, field by field, cost a move more than the
        rest of its arguments together."""
        trump = value.get("trump")
        return cls(
            bid=value.get("bid"),
            card=value.get("card"),
            trump=None if trump is None else cast(Suit, context.convert(trump, Suit, "trump")),
        )


MoveInput.__strawberry_definition__.from_input = MoveInput._from_input  # type: ignore[attr-defined]


@strawberry.input(description="updateBot's input: a field left out stays as it is; an empty string clears it.")
class UpdateBotInput:
    description: str | None = strawberry.field(default=None, description="Up to 500 characters.")
    homepage: str | None = strawberry.field(default=None, description="An http:// or https:// URL.")


@strawberry.input
class CreateMatchInput:
    ruleset: Ruleset = Ruleset.WIZARD
    players: int = 4
    variants: list[Variant] = strawberry.field(default_factory=list)
    move_timeout_ms: int | None = strawberry.field(default=None, description="Default: the server's (10000).")
    rated: bool = False
    seed: str | None = strawberry.field(default=None, description="Same seed, same deals.")
    first_dealer: int | None = None
    deals: list[list[str]] | None = strawberry.field(
        default=None, description="Stacked deck per round, in dealing order (RULES.md); never rated."
    )


# ---------------------------------------------------------------------- listings


@strawberry.input(description="What a match listing keeps; every field left out matches any.")
class MatchFilter:
    status: MatchStatus | None = None
    bot_id: strawberry.ID | None = strawberry.field(default=None, description="Matches this bot sits in.")
    tournament_id: strawberry.ID | None = None
    ruleset: Ruleset | None = None
    rated: bool | None = None

    def domain(self, bot_id: str | None = None) -> listings.MatchFilter:
        return listings.MatchFilter(
            status=None if self.status is None else self.status.value,
            bot_id=bot_id if bot_id is not None else (None if self.bot_id is None else str(self.bot_id)),
            tournament_id=None if self.tournament_id is None else str(self.tournament_id),
            ruleset=None if self.ruleset is None else self.ruleset.value,
            rated=self.rated,
        )


@strawberry.type
class PageInfo:
    has_next_page: bool
    end_cursor: str | None = strawberry.field(description="Pass as `after` for the next page (null: empty page).")


@strawberry.type
class MatchEdge:
    cursor: str
    node: Match


@strawberry.type(description="A page of matches, newest first.")
class MatchConnection:
    edges: list[MatchEdge] = strawberry.field(metadata=EDGES.metadata())
    page_info: PageInfo


@strawberry.type(description="A bot's figures over its finished (and archived) matches under one ruleset.")
class BotStats:
    ruleset: Ruleset
    matches: int
    rounds: int = strawberry.field(description="Rounds played in those matches.")
    mean_score: float | None = strawberry.field(description="Mean final score (null: no match).")
    mean_place: float | None = strawberry.field(description="Mean place, 1 for a win, ties sharing (null: no match).")
    bid_accuracy: float | None = strawberry.field(description="Share of rounds where bid == tricks (null: no round).")
    timeouts: int = strawberry.field(description="Moves the server made for the bot in those matches.")


async def match_connection(
    info: Info[RequestContext, None], given: MatchFilter, bot_id: str | None, first: int, after: str | None
) -> MatchConnection:
    """A page of matches as the caller may see them: its own seat's view where it sits, a
    spectator's elsewhere (the same ``Match`` as ``match(id:)``)."""
    caller = await info.context.optional_caller()
    page = await info.context.services.listings.match_page(given.domain(bot_id), first, after)
    edges = [
        MatchEdge(cursor=cursor, node=match_type(live, live.seat_of(caller.bot_id) if caller else None))
        for cursor, live in page.entries
    ]
    return MatchConnection(edges=edges, page_info=PageInfo(has_next_page=page.has_next, end_cursor=page.end_cursor))
