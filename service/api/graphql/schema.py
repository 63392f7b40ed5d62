"""The GraphQL schema: each resolver is one call of the domain services."""

from __future__ import annotations

from collections.abc import AsyncGenerator
from datetime import UTC, datetime
from typing import Annotated, Any

import strawberry
from graphql import DocumentNode, GraphQLError, GraphQLSchema, OperationDefinitionNode
from strawberry.extensions import MaxTokensLimiter
from strawberry.schema.config import StrawberryConfig
from strawberry.schema.exceptions import CannotGetOperationTypeError
from strawberry.types import ExecutionContext, ExecutionResult, Info
from strawberry.types.execution import PreExecutionError
from strawberry.types.graphql import OperationType

from contract import MATCH, Shape
from service.api.graphql.context import RequestContext
from service.api.graphql.documents import DocumentCache, Documents
from service.api.graphql.errors import ErrorCodes
from service.api.graphql.execution import ArenaExecutionContext
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
    Bot,
    BotRegistration,
    CreateMatchInput,
    Match,
    MatchConnection,
    MatchFilter,
    MoveInput,
    PageInfo,
    match_connection,
    match_type,
)
from service.domain.matches import Caller, NewMatch
from service.domain.ratings import RatingMethod
from service.domain.tournaments import NewTournament
from service.errors import BadInput, NotFound
from service.model.live_match import HouseBotKind, LiveMatch
from service.model.tournament import TournamentStatus
from service.settings import Settings
from wizard import Ruleset

Ctx = Info[RequestContext, None]


def _for(live: LiveMatch, caller: Caller | None) -> Match:
    return match_type(live, live.seat_of(caller.bot_id) if caller else None)


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

    @strawberry.field
    async def bot(self, info: Ctx, id: strawberry.ID) -> Bot | None:
        found = await info.context.services.bots.get(str(id))
        return None if found is None else Bot(id=strawberry.ID(found["id"]), name=found["name"])

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
        live = await info.context.services.matches.await_turn(
            caller, None if match_id is None else str(match_id), timeout_ms
        )
        return None if live is None else _for(live, caller)

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
        description="Bots by rating, highest first (method: which rating; default ELO).",
        metadata=LEADERBOARD.metadata(),
    )
    async def leaderboard(
        self, info: Ctx, ruleset: Ruleset, first: int = LEADERBOARD.default, offset: int = 0,  # type: ignore[assignment]
        method: RatingMethod = RatingMethod.ELO,
    ) -> list[LeaderboardEntry]:
        LEADERBOARD.check(first)
        if isinstance(offset, bool) or not isinstance(offset, int) or not 0 <= offset <= 1_000_000:
            raise BadInput(f"offset must be from 0 to 1000000, not {offset!r}")
        rows = await info.context.services.ratings.leaderboard(ruleset.value, method, first, offset)
        return [
            LeaderboardEntry(
                rank=r["rank"], bot=Bot(id=strawberry.ID(r["id"]), name=r["name"]), rating=r["rating"],
                games=r["games"], method=method,
            )
            for r in rows
        ]


@strawberry.type
class Mutation:
    @strawberry.mutation(description="Registers a bot; the token is shown once and only its hash is kept.")
    async def register_bot(self, info: Ctx, name: str, secret: str | None = None) -> BotRegistration:
        token, bot = await info.context.services.bots.register(name, secret, info.context.address)
        return BotRegistration(token=token, bot=Bot(id=strawberry.ID(bot["id"]), name=bot["name"]))

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

    @strawberry.mutation(description="Seats the caller (the given seat, or the lowest free one).")
    async def join_match(self, info: Ctx, match_id: strawberry.ID, seat: int | None = None) -> Match:
        caller = await info.context.caller()
        return _for(await info.context.services.matches.join(caller, str(match_id), seat), caller)

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
    ) -> Match:
        caller = await info.context.caller()
        live = await info.context.services.matches.submit_move(caller, str(match_id), move.to_dict(), expected_version)
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

    @strawberry.mutation(description="Enters the caller (until the tournament starts).")
    async def join_tournament(self, info: Ctx, tournament_id: strawberry.ID) -> Tournament:
        caller = await info.context.caller()
        return tournament_type(await info.context.services.tournaments.join(caller, str(tournament_id)))

    @strawberry.mutation(description="Cancels a tournament (its creator only); matches under way play on.")
    async def cancel_tournament(self, info: Ctx, tournament_id: strawberry.ID) -> Tournament:
        caller = await info.context.caller()
        return tournament_type(await info.context.services.tournaments.cancel(caller, str(tournament_id)))

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
        async for live in info.context.services.matches.my_turns(caller):
            yield _for(live, caller)


class ArenaSchema(strawberry.Schema):
    async def execute(self, *args: Any, **kwargs: Any) -> ExecutionResult:
        # One execution is a query or a mutation; a subscription is a stream (WebSocket), and
        # executed once over HTTP it would fail inside. Refused instead, as a client error.
        allowed = kwargs.get("allowed_operation_types") or (OperationType.QUERY, OperationType.MUTATION)
        kwargs["allowed_operation_types"] = set(allowed) - {OperationType.SUBSCRIPTION}
        return await super().execute(*args, **kwargs)

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
        if refused is None and document is not None:
            problem = operation_choice_problem(document, context._provided_operation_name)
            if problem is not None:
                context.pre_execution_errors = [GraphQLError(problem, original_error=BadInput(problem))]
                refused = PreExecutionError(data=None, errors=context.pre_execution_errors)
        return refused


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
