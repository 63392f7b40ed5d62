"""The REST API's routes, all in one table (:data:`OPERATIONS`): a bot's whole life over plain
HTTP, beside GraphQL, with the same rules and error codes.

Most routes run a GraphQL operation (:mod:`service.api.rest_graphql`). The hot ones a simple
bot calls every move (its view of a match, a move, the turn long-poll) and the ones that stream
or answer what no GraphQL field does (records, replays, exports, listings, statistics) are
served by :mod:`service.api.rest` directly (``direct=True``); their documents here say what they
answer, for the OpenAPI document (:mod:`service.api.openapi`), which is made from this table."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from starlette.requests import Request
from starlette.routing import Route

from contract import MATCH
from service.api.rest_graphql import GraphQLRoutes, Operation
from service.domain.services import Services

MATCH_FIELDS = MATCH.selection()
BOT_FIELDS = (
    "id name house houseKind description homepage createdAt retired retiredAt ratings { ruleset rating games deviation provisional }"
)
#: the caller's own bot: what anyone sees of it, and what only it sees
ME_FIELDS = f"{BOT_FIELDS} invitationPolicy challengePolicy ladders {{ ruleset players state joinedAt pausedAt pausedReason playing }}"
TOKEN_FIELDS = "id name createdAt lastUsedAt"
WEBHOOK_FIELDS = "url status failures lastError lastErrorAt pausedUntil"
TOURNAMENT_SUMMARY = (
    "id name ruleset variants playersPerMatch format rounds durationMinutes startsAt startedAt finishedAt "
    "moveTimeoutMs rated duplicate status createdBy cancelledReason"
)
TOURNAMENT_FIELDS = (
    f"{TOURNAMENT_SUMMARY} entrants {{ id name }} standings {{ rank bot {{ id name }} points matches score }} "
    "matches { id status version round rounds seats { seat bot { id name } houseBot score } winners }"
)
PAGE_INFO = "pageInfo { hasNextPage endCursor }"
CHALLENGE_FIELDS = (
    "id status open ruleset players variants moveTimeoutMs rated createdAt expiresAt closedAt matchId "
    "challenger { id name } bots { bot { id name } answer answeredAt reason } accepted { id name }"
)
INVITATION_FIELDS = f"id status invitedAt answeredAt reason invitedBy {{ id name }} tournament {{ {TOURNAMENT_SUMMARY} }}"

MATCHES = "Matches"
BOTS = "Bots"
TOURNAMENTS = "Tournaments"
INVITATIONS = "Invitations"
CHALLENGES = "Challenges"
RATINGS = "Ratings"
LADDERS = "Ladders"
LADDER_FIELDS = "bot { id name } ruleset players state joinedAt pausedAt pausedReason playing"

#: the whole record as GET /api/matches/{id}/record answers it (RULES.md's record, and the match's facts)
RECORD_SCHEMA: dict[str, Any] = {
    "type": "object",
    "description": "The finished match's record: config, seed and salt, every move, the final scores, every "
                   "round's dealt hands; with matchId, seedHash, seedChosen, winners, seats and timeouts. "
                   "`MatchRecord.from_dict` in the engine reads it; `wizard-arena replay` checks it.",
    "required": ["format", "config", "seed", "moves", "scores", "rounds", "matchId", "seedHash"],
    "properties": {
        "format": {"type": "integer"},
        "dealAlgorithm": {"type": "integer"},
        "config": {"type": "object"},
        "seed": {"type": "string"},
        "salt": {"type": ["string", "null"]},
        "moves": {"type": "array", "items": {"type": "object"}},
        "scores": {"type": ["array", "null"], "items": {"type": "integer"}},
        "rounds": {"type": "array", "items": {"type": "object"}},
        "matchId": {"type": "string"},
        "seedHash": {"type": "string"},
        "moveNotes": {"type": "array", "items": {"type": "object"},
                      "description": "per move, in the order of moves: byServer (a fallback move at a deadline) "
                                     "and thinkMs, and for a bot reading with its token, debug on its own moves "
                                     "that sent some (submitMove's debug); absent for a match finished before "
                                     "they were kept"},
    },
}
REPLAY_SCHEMA: dict[str, Any] = {
    "type": "object",
    "description": "The finished match (as GET /api/matches/{id} answers it) and the table at its start and "
                   "after every move, every hand face up (README: Web pages).",
    "required": ["match", "frames"],
    "properties": {"match": {"type": "object"}, "frames": {"type": "array", "items": {"type": "object"}}},
}

OPERATIONS: list[Operation] = [
    # ------------------------------------------------------------------ bots
    Operation(
        "POST", "/api/bots", "registerBot", "Register a bot", BOTS,
        "mutation($name: String!, $webhook: String) { registerBot(name: $name, webhook: $webhook) "
        "{ token bot { id name } webhookSecret } }",
        body="fields", status=201,
        description="The token is shown this once (the server keeps only its hash): send it as "
                    "`Authorization: Bearer <token>`. Names are unique, case-insensitively. With `webhook` (an "
                    "http(s) URL) the server calls the bot when it must act; `webhookSecret` signs the calls.",
    ),
    Operation(
        "GET", "/api/me/webhook", "webhook", "Your bot's webhook and its health", BOTS,
        f"query {{ me {{ webhook {{ {WEBHOOK_FIELDS} }} }} }}", needs_token=True, pick=("me", "webhook"),
        nullable=True, description="null while the bot has no webhook.",
    ),
    Operation(
        "PUT", "/api/me/webhook", "setWebhook", "Be called when your bot must act (a webhook)", BOTS,
        f"mutation($url: String!) {{ setWebhook(url: $url) {{ secret webhook {{ {WEBHOOK_FIELDS} }} }} }}",
        body="fields", needs_token=True,
        description="`url`: http or https. The server POSTs each turn (and each match's start and end) there, "
                    "signed with `secret` (shown this once; a new one each time): README, Webhook bots.",
    ),
    Operation(
        "DELETE", "/api/me/webhook", "removeWebhook", "No more webhook calls", BOTS,
        "mutation { removeWebhook { id name } }", needs_token=True,
    ),
    Operation(
        "GET", "/api/me", "me", "The authenticated bot", BOTS,
        f"query {{ me {{ {ME_FIELDS} }} }}", needs_token=True,
    ),
    Operation(
        "PATCH", "/api/me", "updateBot", "Describe your bot", BOTS,
        f"mutation($input: UpdateBotInput!) {{ updateBot(input: $input) {{ {ME_FIELDS} }} }}",
        body="input", needs_token=True, description="`description` and `homepage` (an http(s) URL); null clears one.",
    ),
    Operation(
        "POST", "/api/me/retire", "retireBot", "Retire your bot for good", BOTS,
        f"mutation {{ retireBot {{ {ME_FIELDS} }} }}", body="fields", needs_token=True,
        description="No new matches, tournaments or tokens; matches under way play on; its name, history and "
                    "ratings stay.",
    ),
    Operation(
        "GET", "/api/me/tokens", "tokens", "Your bot's tokens (never their secrets)", BOTS,
        f"query {{ me {{ tokens {{ {TOKEN_FIELDS} }} }} }}", needs_token=True, pick=("me", "tokens"),
    ),
    Operation(
        "POST", "/api/me/tokens", "createToken", "A new named token", BOTS,
        f"mutation($name: String!) {{ createToken(name: $name) {{ token info {{ {TOKEN_FIELDS} }} }} }}",
        body="fields", status=201, needs_token=True, description="The token is shown this once.",
    ),
    Operation(
        "DELETE", "/api/me/tokens/{id}", "revokeToken", "Revoke a token (not your last)", BOTS,
        f"mutation($id: ID!) {{ revokeToken(id: $id) {{ {TOKEN_FIELDS} }} }}", needs_token=True,
        description="It stops working at once, on every server. The answer: the tokens left.",
    ),
    Operation(
        "GET", "/api/bots/{id}", "bot", "A bot and its ratings", BOTS,
        f"query($id: ID!) {{ bot(id: $id) {{ {BOT_FIELDS} }} }}", missing="no bot with id {id!r}",
    ),
    Operation(
        "GET", "/api/bots/{id}/rating-history", "ratingHistory", "A bot's rating after each rated match", RATINGS,
        "query($id: ID!, $ruleset: Ruleset!, $last: Int! = 1000) "
        "{ bot(id: $id) { ratingHistory(ruleset: $ruleset, last: $last) { rating matchId at } } }",
        missing="no bot with id {id!r}", pick=("bot", "ratingHistory"),
        description="Oldest first: the latest `last` points (at most 10000).",
    ),
    Operation(
        "GET", "/api/bots/{id}/stats", "botStats", "A bot's figures over its settled matches", BOTS,
        "query($id: ID!, $ruleset: Ruleset!) "
        "{ bot(id: $id) { stats(ruleset: $ruleset) { ruleset matches rounds meanScore meanPlace bidAccuracy timeouts } } }",
        missing="no bot with id {id!r}", pick=("bot", "stats"), direct=True,
    ),
    Operation(
        "GET", "/api/bots/{id}/records", "botRecords", "Export a bot's finished matches' records (NDJSON)", BOTS,
        "query($id: ID!, $since: String, $until: String, $ruleset: Ruleset) { bot(id: $id) { id } }", direct=True,
        description="Newest first, one record a line, each as GET /api/matches/{id}/record answers it (so with "
                    "the bot's own token, with the debug text of its moves). `since` (inclusive) and `until` "
                    "(exclusive): ISO 8601 or milliseconds since the epoch.",
        response={"application/x-ndjson": {"schema": {"type": "string"}}},
    ),
    # ------------------------------------------------------------------ matches
    Operation(
        "GET", "/api/matches", "matches", "Matches, newest first, live and archived", MATCHES,
        "query($status: MatchStatus, $botId: ID, $tournamentId: ID, $ruleset: Ruleset, $rated: Boolean, "
        "$first: Int! = 20, $after: String) { matches(filter: {status: $status, botId: $botId, "
        "tournamentId: $tournamentId, ruleset: $ruleset, rated: $rated}, first: $first, after: $after) "
        f"{{ edges {{ cursor node {{ {MATCH_FIELDS} }} }} {PAGE_INFO} }} }}",
        direct=True, description="Pass `pageInfo.endCursor` as `after` for the next page.",
    ),
    Operation(
        "POST", "/api/matches", "createMatch", "Create a match", MATCHES,
        f"mutation($input: CreateMatchInput!) {{ createMatch(input: $input) {{ {MATCH_FIELDS} }} }}",
        body="input", status=201, needs_token=True,
        description="The creator is not seated: join it, or add house bots. It starts when the last seat fills.",
    ),
    Operation(
        "GET", "/api/matches/{id}", "match", "The caller's view of a match", MATCHES,
        f"query($id: ID!) {{ match(id: $id) {{ {MATCH_FIELDS} }} }}", missing="no match with id {id!r}", direct=True,
        description="Seated, your own hand and legal moves; otherwise only what is public.",
    ),
    Operation(
        "POST", "/api/matches/{id}/join", "joinMatch", "Take a seat", MATCHES,
        f"mutation($id: ID!, $seat: Int) {{ joinMatch(matchId: $id, seat: $seat) {{ {MATCH_FIELDS} }} }}",
        body="fields", description="A given seat, or the lowest free one.", needs_token=True,
    ),
    Operation(
        "POST", "/api/matches/{id}/house-bots", "addHouseBot", "Seat a house bot", MATCHES,
        f"mutation($id: ID!, $kind: HouseBotKind!) {{ addHouseBot(matchId: $id, kind: $kind) {{ {MATCH_FIELDS} }} }}",
        body="fields", description="By the match's creator or a bot seated in it.", needs_token=True,
    ),
    Operation(
        "POST", "/api/matches/{id}/moves", "submitMove", "Make a move", MATCHES,
        "mutation($id: ID!, $move: MoveInput!, $expectedVersion: Int, $debug: String) "
        f"{{ submitMove(matchId: $id, move: $move, expectedVersion: $expectedVersion, debug: $debug) {{ {MATCH_FIELDS} }} }}",
        direct=True, flat_body=("move", "expectedVersion", "debug"), needs_token=True,
        description='One of `{"bid": 2}`, `{"card": "R7"}`, `{"trump": "BLUE"}`, with `expectedVersion` to be '
                    "refused with STALE_VERSION when the match has moved on, and `debug` (at most 4096 bytes of "
                    "text, kept with the move for your bot's eyes only: its record's moveNotes). The answer is "
                    "your view after it.",
    ),
    Operation(
        "GET", "/api/turns", "awaitTurn", "Wait for your turn (long poll)", MATCHES,
        f"query($matchId: ID, $timeoutMs: Int) {{ awaitTurn(matchId: $matchId, timeoutMs: $timeoutMs) {{ {MATCH_FIELDS} }} }}",
        direct=True, nullable=True, needs_token=True,
        headers={"X-Turn-Reason": "why the wait ended: YOUR_TURN, TIMED_OUT or MATCH_OVER"},
        description="Answers as soon as you have a move to make (in `matchId`, or any of your matches), or null "
                    "after `timeoutMs` (bounded by the server).",
    ),
    Operation(
        "GET", "/api/turns/next", "nextTurn", "Wait for your turn, and say why the wait ended", MATCHES,
        "query($matchId: ID, $timeoutMs: Int, $invitations: Boolean! = false, $challenges: Boolean! = false) "
        "{ nextTurn(matchId: $matchId, timeoutMs: $timeoutMs, invitations: $invitations, challenges: $challenges) "
        f"{{ reason match {{ {MATCH_FIELDS} }} invitation {{ {INVITATION_FIELDS} }} "
        f"challenge {{ {CHALLENGE_FIELDS} }} }} }}",
        needs_token=True,
        description="`reason`: YOUR_TURN (`match` is where you move), TIMED_OUT or MATCH_OVER (`match`: the match "
                    "waited on as it is then, null after a wait on all your matches); with `invitations=true` (and "
                    "no `matchId`) also INVITATION (`invitation` waits for your answer); with `challenges=true` "
                    "(and no `matchId`) also CHALLENGE (`challenge` names you and waits for your answer).",
    ),
    Operation(
        "POST", "/api/matches/{id}/leave", "leaveMatch", "Give up your seat in a match not yet started", MATCHES,
        f"mutation($id: ID!) {{ leaveMatch(matchId: $id) {{ {MATCH_FIELDS} }} }}", body="fields", needs_token=True,
    ),
    Operation(
        "POST", "/api/matches/{id}/cancel", "cancelMatch", "Cancel a match not yet started (its creator)", MATCHES,
        f"mutation($id: ID!) {{ cancelMatch(matchId: $id) {{ {MATCH_FIELDS} }} }}", body="fields", needs_token=True,
        description="The match is ABORTED with its `abortReason`.",
    ),
    Operation(
        "GET", "/api/matches/{id}/record", "matchRecord", "A finished match's record", MATCHES,
        "query($id: ID!) { match(id: $id) { id } }", direct=True, response={"application/json": {"schema": RECORD_SCHEMA}},
        description="With the token of a bot seated in it, the moveNotes of that bot's own moves carry the debug "
                    "text it sent with them; nobody else ever sees it.",
    ),
    Operation(
        "GET", "/api/matches/{id}/replay", "matchReplay", "A finished match move by move", MATCHES,
        "query($id: ID!) { match(id: $id) { id } }", direct=True, response={"application/json": {"schema": REPLAY_SCHEMA}},
    ),
    # ------------------------------------------------------------------ tournaments and ratings
    Operation(
        "GET", "/api/tournaments", "tournaments", "Tournaments, newest first", TOURNAMENTS,
        "query($status: TournamentStatus, $first: Int! = 20, $after: String) "
        f"{{ tournaments(status: $status, first: $first, after: $after) "
        f"{{ edges {{ cursor node {{ {TOURNAMENT_SUMMARY} }} }} {PAGE_INFO} }} }}",
        description="Pass `pageInfo.endCursor` as `after` for the next page.",
    ),
    Operation(
        "POST", "/api/tournaments", "createTournament", "Create a tournament", TOURNAMENTS,
        f"mutation($input: CreateTournamentInput!) {{ createTournament(input: $input) {{ {TOURNAMENT_FIELDS} }} }}",
        body="input", status=201, needs_token=True,
    ),
    Operation(
        "GET", "/api/tournaments/{id}", "tournament", "A tournament: entrants, standings, matches", TOURNAMENTS,
        f"query($id: ID!) {{ tournament(id: $id) {{ {TOURNAMENT_FIELDS} }} }}", missing="no tournament with id {id!r}",
    ),
    Operation(
        "POST", "/api/tournaments/{id}/join", "joinTournament", "Enter a tournament", TOURNAMENTS,
        f"mutation($id: ID!) {{ joinTournament(tournamentId: $id) {{ {TOURNAMENT_FIELDS} }} }}",
        body="fields", needs_token=True,
    ),
    Operation(
        "POST", "/api/tournaments/{id}/cancel", "cancelTournament", "Cancel a tournament (its creator)", TOURNAMENTS,
        f"mutation($id: ID!, $reason: String) {{ cancelTournament(tournamentId: $id, reason: $reason) "
        f"{{ {TOURNAMENT_FIELDS} }} }}",
        body="fields", needs_token=True, description="`reason` is shown as the tournament's `cancelledReason`.",
    ),
    # ------------------------------------------------------------------ invitations
    Operation(
        "GET", "/api/invitations", "invitations", "Your invitations to tournaments, newest first", INVITATIONS,
        "query($status: InvitationStatus, $first: Int! = 50) "
        f"{{ invitations(status: $status, first: $first) {{ {INVITATION_FIELDS} }} }}",
        needs_token=True, description="Those whose tournaments are still live; a bot enters a tournament only by "
                                      "joining it or accepting an invitation.",
    ),
    Operation(
        "POST", "/api/invitations/{id}/accept", "acceptInvitation", "Accept an invitation", INVITATIONS,
        f"mutation($id: ID!) {{ acceptInvitation(invitationId: $id) {{ {INVITATION_FIELDS} }} }}",
        body="fields", needs_token=True, description="The same answer again changes nothing.",
    ),
    Operation(
        "POST", "/api/invitations/{id}/decline", "declineInvitation", "Decline an invitation", INVITATIONS,
        f"mutation($id: ID!, $reason: String) {{ declineInvitation(invitationId: $id, reason: $reason) "
        f"{{ {INVITATION_FIELDS} }} }}",
        body="fields", needs_token=True,
    ),
    Operation(
        "PUT", "/api/me/invitation-policy", "setInvitationPolicy", "Your standing answer to invitations", INVITATIONS,
        "mutation($policy: InvitationPolicy!) { setInvitationPolicy(policy: $policy) }",
        body="fields", needs_token=True, description="ACCEPT_ALL, DECLINE_ALL or ASK (the default), for the "
                                                     "invitations that come from now on.",
    ),
    # ------------------------------------------------------------------ challenges
    Operation(
        "GET", "/api/challenges", "challenges", "Your challenges, newest first", CHALLENGES,
        "query($status: ChallengeStatus, $first: Int! = 50) "
        f"{{ challenges(status: $status, first: $first) {{ {CHALLENGE_FIELDS} }} }}",
        needs_token=True, description="Those you made or are named in, and the open ones (naming nobody) your "
                                      "challenge policy does not refuse.",
    ),
    Operation(
        "POST", "/api/challenges", "createChallenge", "Challenge bots to a match", CHALLENGES,
        f"mutation($input: CreateChallengeInput!) {{ createChallenge(input: $input) {{ {CHALLENGE_FIELDS} }} }}",
        body="input", status=201, needs_token=True,
        description="`bots` (none: an open challenge, anyone may accept), and createMatch's terms. You take a seat; "
                    "the match is made and starts once enough bots have accepted.",
    ),
    Operation(
        "GET", "/api/challenges/{id}", "challenge", "A challenge", CHALLENGES,
        f"query($id: ID!) {{ challenge(id: $id) {{ {CHALLENGE_FIELDS} }} }}", missing="no challenge with id {id!r}",
    ),
    Operation(
        "POST", "/api/challenges/{id}/accept", "acceptChallenge", "Accept a challenge", CHALLENGES,
        f"mutation($id: ID!) {{ acceptChallenge(id: $id) {{ {CHALLENGE_FIELDS} }} }}",
        body="fields", needs_token=True, description="The last seat taken makes the match (`matchId`). An answer is final (the same one again changes nothing).",
    ),
    Operation(
        "POST", "/api/challenges/{id}/decline", "declineChallenge", "Decline a challenge", CHALLENGES,
        f"mutation($id: ID!, $reason: String) {{ declineChallenge(id: $id, reason: $reason) {{ {CHALLENGE_FIELDS} }} }}",
        body="fields", needs_token=True, description="`reason` is shown to the challenger (and to anyone who reads the challenge). An answer is final (the same one again changes nothing).",
    ),
    Operation(
        "POST", "/api/challenges/{id}/cancel", "cancelChallenge", "Withdraw your challenge", CHALLENGES,
        f"mutation($id: ID!) {{ cancelChallenge(id: $id) {{ {CHALLENGE_FIELDS} }} }}",
        body="fields", needs_token=True,
    ),
    Operation(
        "PUT", "/api/me/challenge-policy", "setChallengePolicy", "Your standing rule for challenges", CHALLENGES,
        "mutation($policy: ChallengePolicy!) { setChallengePolicy(policy: $policy) }",
        body="fields", needs_token=True, description="ACCEPT_ANY (the default), REFUSE_RATED or REFUSE_ALL.",
    ),
    Operation(
        "GET", "/api/leaderboard/{ruleset}", "leaderboard", "Bots by rating, highest first", RATINGS,
        "query($ruleset: Ruleset!, $method: RatingMethod! = ELO, $first: Int! = 50, $offset: Int! = 0, "
        "$provisional: Boolean! = true) "
        "{ leaderboard(ruleset: $ruleset, method: $method, first: $first, offset: $offset, provisional: $provisional) "
        "{ rank bot { id name } rating games method deviation provisional } }",
        description="Each with its deviation and provisional mark; provisional=false leaves provisional bots out "
                    "(ranks counted among those shown).",
    ),
    # ------------------------------------------------------------------ the ladder
    Operation(
        "GET", "/api/ladders/{ruleset}/{players}", "ladder", "A ladder's members", LADDERS,
        "query($ruleset: Ruleset!, $players: Int!, $first: Int! = 100) "
        f"{{ ladder(ruleset: $ruleset, players: $players, first: $first) {{ {LADDER_FIELDS} }} }}",
        description="The house bots of ARENA_LADDER_HOUSE_BOTS, then the bots by when they joined, each ACTIVE or "
                    "PAUSED (with the reason and since when) and the ladder matches it sits in now.",
    ),
    Operation(
        "POST", "/api/ladders/{ruleset}/{players}/join", "joinLadder", "Join a ladder (rated play, no organiser)",
        LADDERS,
        f"mutation($ruleset: Ruleset!, $players: Int!) {{ joinLadder(ruleset: $ruleset, players: $players) "
        f"{{ {LADDER_FIELDS} }} }}",
        body="fields", needs_token=True,
        description="Your consent to rated ladder play: the workers pair you into rated matches until you leave. "
                    "Again: you stay a member, and a pause is lifted.",
    ),
    Operation(
        "POST", "/api/ladders/{ruleset}/{players}/leave", "leaveLadder", "Leave a ladder", LADDERS,
        f"mutation($ruleset: Ruleset!, $players: Int!) {{ leaveLadder(ruleset: $ruleset, players: $players) "
        f"{{ {LADDER_FIELDS} }} }}",
        body="fields", needs_token=True, description="No new ladder matches; those in play finish. Again changes nothing.",
    ),
]


def routes(schema: Any, services_of: Callable[[Request], Services]) -> list[Route]:
    """The routes of the operations that run GraphQL (the direct ones are :mod:`service.api.rest`'s)."""
    runner = GraphQLRoutes(schema, services_of)
    return [
        Route(operation.path, runner.endpoint(operation), methods=[operation.method], name=operation.name)
        for operation in OPERATIONS
        if not operation.direct
    ]
