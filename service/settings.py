"""The service's configuration: one pydantic-settings class, read from the environment.

Every field can be set by an environment variable ``ARENA_<FIELD>`` (for example
``ARENA_RATE_LIMIT_PER_SECOND=20``); the Redis server is named by plain ``REDIS_URL``.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Literal

from pydantic import AliasChoices, Field, field_validator
from pydantic_settings import BaseSettings, NoDecode, SettingsConfigDict


class Settings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="ARENA_", extra="ignore")

    redis_url: str | None = Field(
        default=None,
        validation_alias=AliasChoices("REDIS_URL", "ARENA_REDIS_URL"),
        description="redis:// or unix:// URL of the Redis server, or of any node of a Redis Cluster (found out by "
        "itself); unset: `up` starts an embedded one",
    )
    queue_url: str | None = Field(
        default=None,
        description="redis:// URL of the Redis server that holds the workers' RQ job queue; unset: REDIS_URL (which "
        "must then be one server: RQ does not run on a Redis Cluster)",
    )
    database_url: str | None = Field(
        default=None,
        validation_alias=AliasChoices("DATABASE_URL", "ARENA_DATABASE_URL"),
        description="postgresql:// URL of the archive's database (finished matches, tournaments); unset: `up` starts "
        "an embedded PostgreSQL, and `serve` and `worker` run without an archive (finished matches stay in Redis)",
    )
    archive_grace_seconds: int = Field(
        default=600, ge=0,
        description="how long an archived match's keys stay in Redis after its settlement (its readers move to the "
        "archive)",
    )
    archive_retry_seconds: int = Field(
        default=5, ge=1,
        description="how long a settlement that the archive's database did not take (it is away) waits before it "
        "is tried again; the match stays queued meanwhile",
    )
    match_events_kept: int = Field(
        default=64, ge=0,
        description="latest events a live match's stream keeps in Redis, about, for followers catching up after a lost "
        "connection (one further behind reads the match whole); 0: all of them",
    )
    data_dir: Path = Field(
        default=Path(".wizard-arena"),
        description="where the embedded Redis server keeps its data (append-only file) and socket",
    )
    data_dir_wait_seconds: float = Field(
        default=30.0, ge=0,
        description="how long `up` waits for the processes of an `up` that ended (a killed one's Redis and worker) "
        "to let go of the data folder before it says which processes hold it",
    )
    registration_secret: str | None = Field(
        default=None,
        description="when set, registerBot requires this secret (closed registration)",
    )
    default_move_timeout_ms: int = Field(default=10_000, ge=1)
    min_move_timeout_ms: int = Field(default=100, ge=1)
    max_move_timeout_ms: int = Field(default=600_000, ge=1)
    match_debug_bytes_per_seat: int = Field(
        default=16_384, ge=0,
        description="debug text (submitMove's debug, UTF-8 bytes) a seat keeps over one match: past it, the rest is cut "
        "off. It is kept in the match's live part, which every move rewrites, so the bound keeps moves cheap",
    )
    await_turn_max_ms: int = Field(default=30_000, ge=0, description="upper bound of awaitTurn's timeoutMs")
    rate_limit_per_second: float = Field(default=200.0, gt=0, description="sustained requests per token")
    rate_limit_burst: int = Field(default=400, ge=1, description="requests a token may make at once")
    rate_limit_lease_max: int = Field(
        default=16, ge=1,
        description="requests an API process may take from a busy token's bucket at once, to spend without asking "
        "Redis (1: ask on every request); unspent ones count against the token until they lapse",
    )
    rate_limit_lease_ms: int = Field(
        default=500, ge=1, description="how long an API process may spend requests it took from a token's bucket"
    )
    tokens_per_bot: int = Field(
        default=20, ge=1, description="tokens one bot may have at once (createToken); 1000 at most, whatever the setting"
    )
    cors_allowed_origins: list[str] = Field(
        default=["*"],
        description="origins whose web pages may call /graphql and /api/* from a browser (CORS), as a JSON list "
        "(`[\"https://example.org\"]`); `[\"*\"]`: any; `[]`: none. Tokens travel in the Authorization header, never "
        "a cookie, so no request is sent with credentials",
    )
    max_body_bytes: int = Field(default=65_536, ge=1024, description="largest HTTP request body accepted")
    http_header_timeout_seconds: float = Field(
        default=10.0, gt=0, description="time a request's headers may take to arrive (from the connection, or its first byte)"
    )
    http_body_timeout_seconds: float = Field(
        default=20.0, gt=0, description="time a request's body may take to arrive, from the end of its headers"
    )
    max_query_depth: int = Field(default=10, ge=1)
    max_aliases: int = Field(default=30, ge=1)
    max_tokens: int = Field(default=4_000, ge=10, description="GraphQL tokens in one document")
    max_query_cost: int = Field(
        default=20_000, ge=100,
        description="most fields one operation's answer may hold, each list counted at its bound",
    )
    max_fragment_depth: int = Field(default=16, ge=1, description="deepest nesting of fragment spreads")
    max_repeated_fields: int = Field(
        default=16, ge=1, description="most times one response name may be selected in one selection set"
    )
    bot_name_max_length: int = Field(default=40, ge=1)
    ws_init_timeout_seconds: float = Field(default=5.0, gt=0, description="time to send connection_init")
    ws_max_operations: int = Field(default=20, ge=1, description="subscriptions at once per WebSocket")
    ws_per_message_deflate: bool = Field(
        default=False,
        description="offer permessage-deflate on WebSockets: smaller frames, but its zlib state costs each "
        "WebSocket about 50 KB for as long as it is open",
    )
    max_waits_per_client: int = Field(
        default=250, ge=1,
        description="waits (awaitTurn, GET /api/turns) and subscriptions open at once in one API process, per bot "
        "token, or per client address for requests without a token",
    )
    redis_pool_size: int = Field(
        default=8, ge=2,
        description="Redis connections an API process or worker opens at most for its requests (beyond them, "
        "requests wait for a free one); waiting takes none of them",
    )
    commit_replicas: int = Field(
        default=0, ge=0,
        description="replicas that must have each committed change (a move, a join) before it is answered: Redis's "
        "WAIT on the connection that ran the commit, up to ARENA_COMMIT_REPLICA_TIMEOUT_MS; a change fewer replicas "
        "acknowledged in time is answered all the same (it stands on the master), logged and counted in "
        "wizard_arena_commit_replica_shortfalls_total; 0: answered without waiting",
    )
    commit_replica_timeout_ms: int = Field(
        default=100, ge=1, le=5_000,
        description="the longest a commit waits for ARENA_COMMIT_REPLICAS replicas (after a commit that waited it "
        "all, a process waits for no replica of that master for 5 s, counting its commits short)",
    )
    waiting_matches_per_bot: int = Field(
        default=20, ge=1, description="matches a bot may have created whose seats are not all taken yet"
    )
    waiting_match_ttl_seconds: int = Field(
        default=3600, ge=1, description="a match whose seats are not all taken this long after its creation is aborted"
    )
    challenge_ttl_seconds: int = Field(
        default=600, ge=1,
        description="a challenge not accepted by enough bots this long after it was made expires",
    )
    registrations_per_address_per_hour: int = Field(
        default=30, ge=1, description="bots one client address may register in an hour"
    )
    open_matches_per_bot: int = Field(default=200, ge=1, description="unfinished matches a bot may sit in at once")
    snapshot_cache_size: int = Field(
        default=4096, ge=0, description="matches whose last snapshot a process keeps as a guess (0: off)"
    )
    search_seconds: float = Field(
        default=0.05, gt=0, description="the SEARCH house bot's thinking time per move, in seconds"
    )
    search_processes: int = Field(
        default=1, ge=1,
        description="processes a service process keeps for SEARCH house moves, so a search never runs on its event loop",
    )
    log_format: Literal["text", "json"] = Field(
        default="text",
        description="log lines as text, or one JSON object a line (time, level, logger, message, request_id, "
        "match_id)",
    )
    clock_stale_seconds: float = Field(
        default=10.0, gt=0,
        description="/readyz fails (and `worker --check` on a worker's host) once no worker's clock has gone round "
        "for this long; a clock beats about once a second",
    )
    provisional_games: int = Field(
        default=15, ge=0,
        description="a rating is provisional (marked, and left out of leaderboards asked for without provisional "
        "bots) until its bot has played this many rated matches of the ruleset",
    )
    webhook_concurrency: int = Field(
        default=256, ge=1, description="webhook calls one worker makes at once, to all bots together"
    )
    webhook_concurrency_per_bot: int = Field(
        default=8, ge=1, description="webhook calls one worker makes at once to one bot (the others wait their turn)"
    )
    webhook_max_answer_bytes: int = Field(
        default=16_384, ge=256, description="largest answer a bot's webhook may give (a larger one is refused)"
    )
    webhook_notice_timeout_seconds: float = Field(
        default=5.0, gt=0, description="time a webhook has to answer a start or end call (a turn's is its deadline)"
    )
    webhook_pause_after_failures: int = Field(
        default=5, ge=1,
        description="failed webhook calls in a row after which the bot's webhook is paused (its seats get the "
        "fallback move at their deadlines)",
    )
    webhook_pause_seconds: float = Field(
        default=5.0, gt=0,
        description="the first pause of a failing webhook; each failure after it doubles the pause, up to "
        "ARENA_WEBHOOK_PAUSE_MAX_SECONDS; the first call after a pause tries the webhook again",
    )
    webhook_pause_max_seconds: float = Field(default=300.0, gt=0, description="the longest pause of a failing webhook")
    webhook_allow_private: bool = Field(
        default=False,
        description="let webhooks reach loopback, private, link-local and multicast addresses (tests, a closed "
        "network); off, such URLs are refused where they resolve to such an address",
    )
    ladder_house_bots: Annotated[list[str], NoDecode] = Field(
        default=["HEURISTIC", "RANDOM"],
        description="the house bot kinds every ladder has as permanent members (comma-separated, "
        "`HEURISTIC,RANDOM`; empty: none), so that a lone bot always finds opponents; each kind shares one rating",
    )
    ladder_pair_seconds: float = Field(
        default=2.0, gt=0, description="how often the workers run each ladder's pairing pass (one at a time)"
    )
    ladder_max_matches: int = Field(
        default=2, ge=1,
        description="ladder matches one bot sits in at once at most, in all its ladders together (house bots: no limit)",
    )
    ladder_duplicate_sets: bool = Field(
        default=False,
        description="deal a ladder table as a duplicate set (one deal, the seats rotated) when its bots have room "
        "under ARENA_LADDER_MAX_MATCHES: only for bots trusted not to remember cards across matches (the same bots "
        "play every rotation, so one that does knows the hands of the seats it held before)",
    )
    ladder_pause_after_timeouts: int = Field(
        default=3, ge=1,
        description="ladder tables in a row in which a bot let a move time out, after which it is paused (not "
        "paired) until it answers again: waits for a turn (awaitTurn, nextTurn, myTurns, GET /api/turns) or "
        "calls joinLadder",
    )
    ladder_move_timeout_ms: int = Field(default=10_000, ge=1, description="the move timeout of ladder matches")

    @field_validator("ladder_house_bots", mode="before")
    @classmethod
    def _comma_separated(cls, value: object) -> object:
        """``HEURISTIC,RANDOM`` as well as a JSON list (the kinds are checked by the ladders)."""
        if isinstance(value, str):
            text = value.strip()
            return json.loads(text) if text.startswith("[") else [k.strip() for k in text.split(",") if k.strip()]
        return value
