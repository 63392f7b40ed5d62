"""Listings: matches and tournaments newest first, live ones (Redis) and archived ones
(``service.store.archive``) in one list, paged by opaque cursors; a bot's statistics.

A page is a merge of two sources, each in the same order, (created ms, id) descending:
- the live ones: each home's ``live`` set (``service.store.keys``; ``tournaments:listed``), a
  sorted set by creation time that a match joins when it is created and leaves when
  settlement has archived it; the homes' sets are read in pipelined batches from Redis,
  merged, and filtered here;
- the archived ones: one SQL query with the filter, after the cursor, ``first + 1`` rows.

A match may be in both for a moment (archived, not yet off the live set): the two are one
entry, by id. The cursor is the position of an entry, base64 of ``<created ms>:<id>``, and the
next page is what comes strictly after it, so pages neither skip nor repeat an entry however
the sources change between them (a match leaving Redis for the archive keeps its position).
"""

from __future__ import annotations

import base64
import binascii
from collections import deque
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from redis.asyncio import Redis

from service.errors import BadInput
from service.model.homes import ALL_HOMES
from service.model.live_match import LiveMatch, MatchStatus
from service.model.tournament import Tournament, TournamentStatus
from service.store.archive import Archive
from service.store.keys import LISTED_TOURNAMENTS, home_key, match_home_key
from service.store.matches import MatchStore
from service.store.tournaments import TournamentStore
from wizard import Ruleset

#: ``first``: the default page and the largest allowed
DEFAULT_FIRST = 20
MAX_FIRST = 100
#: live candidates read from Redis at once
BATCH = 200

T = TypeVar("T")
Key = tuple[int, str]


def check_first(first: object) -> int:
    if isinstance(first, bool) or not isinstance(first, int) or not 1 <= first <= MAX_FIRST:
        raise BadInput(f"first must be a whole number from 1 to {MAX_FIRST}, not {first!r}")
    return first


def encode_cursor(key: Key) -> str:
    return base64.urlsafe_b64encode(f"{key[0]}:{key[1]}".encode()).decode()


def decode_cursor(cursor: str | None) -> Key | None:
    """The position ``after`` names (None: from the start); BAD_INPUT for anything but a cursor
    this server gave."""
    if cursor is None:
        return None
    problem = BadInput(
        f"after must be a cursor this listing gave (an edge's cursor or pageInfo.endCursor), not {cursor!r}"
    )
    if not isinstance(cursor, str) or not 0 < len(cursor) <= 200:
        raise problem
    try:
        ms, sep, key_id = base64.urlsafe_b64decode(cursor.encode("ascii")).decode().partition(":")
        created = int(ms)
    except (ValueError, UnicodeError, binascii.Error):
        raise problem from None
    if not sep or not key_id or created < 0 or not ms.isdigit():
        raise problem
    return created, key_id


def one_of(value: str | None, allowed: Sequence[str], name: str) -> str | None:
    """``value`` (None: not given), or BAD_INPUT naming what ``name`` may be."""
    if value is None:
        return None
    if value not in allowed:
        raise BadInput(f"{name} must be one of {', '.join(allowed)}, not {value!r}")
    return value


@dataclass(frozen=True, slots=True)
class MatchFilter:
    """What a match listing keeps (None: any)."""

    status: str | None = None
    bot_id: str | None = None
    tournament_id: str | None = None
    ruleset: str | None = None
    rated: bool | None = None

    def checked(self) -> MatchFilter:
        """The filter, or BAD_INPUT saying which values are allowed."""
        one_of(self.status, [s.value for s in MatchStatus], "status")
        one_of(self.ruleset, [r.value for r in Ruleset], "ruleset")
        for name, value in (("botId", self.bot_id), ("tournamentId", self.tournament_id)):
            if value is not None and (not isinstance(value, str) or not 0 < len(value) <= 64):
                raise BadInput(f"{name} must be an id of 1 to 64 characters, not {value!r}")
        if self.rated is not None and not isinstance(self.rated, bool):
            raise BadInput(f"rated must be true or false, not {self.rated!r}")
        return self

    def keeps(self, settings: dict[str, Any], live: dict[str, Any]) -> bool:
        """Whether a match passes, by its stored settings and live part (MatchStore.heads)."""
        return (
            (self.status is None or live["status"] == self.status)
            and (self.ruleset is None or settings["ruleset"] == self.ruleset)
            and (self.rated is None or settings["rated"] == self.rated)
            and (self.tournament_id is None or settings.get("tournament") == self.tournament_id)
            and (self.bot_id is None or any(h is not None and h["id"] == self.bot_id for h in live["seats"]))
        )

    @property
    def archived_only_live(self) -> bool:
        """Whether no archived match can pass (the archive holds ended matches only)."""
        return self.status in (MatchStatus.WAITING.value, MatchStatus.ACTIVE.value)


@dataclass(slots=True)
class Page(Generic[T]):
    """One page: its entries with their cursors, and whether more follow."""

    entries: list[tuple[str, T]]
    has_next: bool

    @property
    def end_cursor(self) -> str | None:
        return self.entries[-1][0] if self.entries else None


@dataclass(frozen=True, slots=True)
class BotStats:
    ruleset: str
    matches: int
    rounds: int
    mean_score: float | None
    mean_place: float | None
    bid_accuracy: float | None
    timeouts: int


class Listings:
    def __init__(
        self, redis: Redis, matches: MatchStore, tournaments: TournamentStore, archive: Archive | None
    ) -> None:
        self.redis = redis
        self.matches = matches
        self.tournaments = tournaments
        self.archive = archive

    # ------------------------------------------------------------------ matches
    async def match_page(self, where: MatchFilter, first: int, after: str | None) -> Page[LiveMatch]:
        first = check_first(first)
        where = where.checked()
        before = decode_cursor(after)
        want = first + 1

        async def keep(keys: list[Key]) -> list[tuple[Key, str]]:
            # filtered on what Redis holds besides the engine's state (small JSON): the
            # matches of the page alone are read whole, below
            heads = await self.matches.heads([k[1] for k in keys])
            kept = []
            for key, head in zip(keys, heads, strict=True):
                if head is None:  # gone from Redis: archived meanwhile (the archive lists it), or expired
                    stale.append(key[1])
                elif where.keeps(*head):
                    kept.append((key, key[1]))
            return kept

        stale: list[str] = []
        live = await self._live([home_key(home, "live") for home in ALL_HOMES], before, want, keep)
        if stale:  # not while paging through the sets: their offsets would shift
            async with self.redis.pipeline(transaction=False) as pipe:
                for match_id in stale:
                    pipe.zrem(match_home_key(match_id, "live"), match_id)
                await pipe.execute()
        archived: list[Key] = []
        if self.archive is not None and not where.archived_only_live:
            archived = await self.archive.list_matches(
                before=before, limit=want, status=where.status, bot_id=where.bot_id,
                tournament_id=where.tournament_id, ruleset=where.ruleset, rated=where.rated,
            )
        keys = _merge([k for k, _ in live], archived, want)
        page = [k[1] for k in keys[:first]]
        known = {m: s.match for m, s in zip(page, await self.matches.load_many(page), strict=True) if s is not None}
        entries = [(encode_cursor(k), known[k[1]]) for k in keys[:first] if k[1] in known]
        return Page(entries, len(keys) > first)

    # ------------------------------------------------------------------ tournaments
    async def tournament_page(self, status: str | None, first: int, after: str | None) -> Page[Tournament]:
        first = check_first(first)
        one_of(status, [s.value for s in TournamentStatus], "status")
        before = decode_cursor(after)
        want = first + 1

        async def keep(keys: list[Key]) -> list[tuple[Key, Tournament]]:
            out = []
            for key in keys:
                t = await self.tournaments.load(key[1])
                if t is None:
                    stale.append(key[1])
                elif status is None or t.status.value == status:
                    out.append((key, t))
            return out

        stale: list[str] = []
        live = await self._live([LISTED_TOURNAMENTS], before, want, keep)
        if stale:
            await self.redis.zrem(LISTED_TOURNAMENTS, *stale)
        archived: list[Key] = []
        if self.archive is not None and status not in (TournamentStatus.SCHEDULED.value, TournamentStatus.RUNNING.value):
            archived = await self.archive.list_tournaments(before=before, limit=want, status=status)
        keys = _merge([k for k, _ in live], archived, want)
        known = {k[1]: t for k, t in live}
        missing = [k[1] for k in keys[:first] if k[1] not in known]
        for tid in missing:
            found = await self.tournaments.load(tid)  # (from the archive once gone from Redis)
            if found is not None:
                known[tid] = found
        entries = [(encode_cursor(k), known[k[1]]) for k in keys[:first] if k[1] in known]
        return Page(entries, len(keys) > first)

    # ------------------------------------------------------------------ statistics
    async def bot_stats(self, bot_id: str, ruleset: str) -> BotStats:
        """A bot's figures over its archived finished matches under ``ruleset``."""
        one_of(ruleset, [r.value for r in Ruleset], "ruleset")
        if self.archive is None:
            raw = {"matches": 0, "score": 0, "place": 0, "timeouts": 0, "rounds": 0, "exact": 0}
        else:
            raw = await self.archive.bot_stats(bot_id, ruleset)
        played, rounds = raw["matches"], raw["rounds"]
        return BotStats(
            ruleset=ruleset,
            matches=played,
            rounds=rounds,
            mean_score=raw["score"] / played if played else None,
            mean_place=raw["place"] / played if played else None,
            bid_accuracy=raw["exact"] / rounds if rounds else None,
            timeouts=raw["timeouts"],
        )

    # ------------------------------------------------------------------ the live half
    async def _live(
        self, keys: Sequence[str], before: Key | None, want: int,
        keep: Callable[[list[Key]], Awaitable[list[tuple[Key, T]]]],
    ) -> list[tuple[Key, T]]:
        """Up to ``want`` entries of live sorted sets (one, or every home's) after ``before``
        that ``keep`` keeps, newest first (equal scores: Redis orders members byte by byte, as
        the cursor does): the sets merged, each read in pipelined rounds of growing batches."""
        sets = [_LiveSet(key, min(BATCH, max(_FIRST_BATCH, 2 * want // len(keys)))) for key in keys]
        top: Any = "+inf" if before is None else before[0]
        out: list[tuple[Key, T]] = []
        while len(out) < want:
            hungry = [live for live in sets if not live.rows and not live.exhausted]
            if hungry:
                async with self.redis.pipeline(transaction=False) as pipe:
                    for live in hungry:
                        pipe.zrevrangebyscore(live.key, top, "-inf", start=live.offset, num=live.batch, withscores=True)
                    for live, rows in zip(hungry, await pipe.execute(), strict=True):
                        live.took(rows, before)
            # the newest entries of all the sets, while each set that may hold more has some
            # in hand (an empty one is read again first: it may hold the next newest)
            merged: list[Key] = []
            while len(merged) < BATCH:
                unread = [live for live in sets if live.rows or not live.exhausted]
                if not unread or any(not live.rows for live in unread):
                    break
                merged.append(max(unread, key=lambda live: live.rows[0]).rows.popleft())
            if merged:
                out += await keep(merged)
            elif all(live.exhausted and not live.rows for live in sets):
                break
        return out[:want]


#: how many entries of each live set the first read takes at least (a listing over every
#: home's set reads a few of each at first, then more of those it goes deeper into)
_FIRST_BATCH = 4


class _LiveSet:
    """One live sorted set being read newest first: the entries read and not yet merged."""

    __slots__ = ("batch", "exhausted", "key", "offset", "rows")

    def __init__(self, key: str, batch: int) -> None:
        self.key = key
        self.batch = batch
        self.offset = 0
        self.rows: deque[Key] = deque()
        self.exhausted = False

    def took(self, rows: list[tuple[bytes, float]], before: Key | None) -> None:
        """The set's next entries as read (those after ``before`` kept); the next read is larger."""
        self.offset += len(rows)
        self.exhausted = len(rows) < self.batch
        self.batch = min(BATCH, self.batch * 2)
        keys = ((int(score), member.decode()) for member, score in rows)
        self.rows.extend(k for k in keys if before is None or k < before)


def _merge(live: list[Key], archived: list[Key], want: int) -> list[Key]:
    """Both lists' keys, newest first, each id once, the first ``want``."""
    merged: list[Key] = []
    seen: set[str] = set()
    for key in sorted([*live, *archived], reverse=True):
        if key[1] not in seen:
            seen.add(key[1])
            merged.append(key)
            if len(merged) == want:
                break
    return merged
