"""The continuous rated ladder: rated play with no organiser.

A ladder is a ruleset and a number of players (``WIZARD:4``). A bot joins it (``joinLadder``:
its consent to rated ladder play) and leaves it; the kinds of house bot named by
``ARENA_LADDER_HOUSE_BOTS`` are permanent members, each with the one rating its kind shares.
The workers' clock runs a *pairing pass* per ladder every ``ARENA_LADDER_PAIR_SECONDS``, one
at a time across all workers (a lock with an expiry): it reads the members, their ratings and
deviations, the ladder matches each sits in now and how often each pair met, asks
:func:`ranking.ladder.pair_ladder` for the tables that teach the ratings most, and starts
them as rated matches with every seat taken (the path tournaments take), a duplicate set
(one deal, the seats rotated, one match after another) where the table says so.

A table stays *in play* until its last match is settled (:meth:`LadderService.settle`, from
the settlement of every ended match): the Elo change of each match is applied there as for
any rated match, a duplicate set's next match is started, and at the table's end a refit of
the ruleset's FITTED ratings is asked for. A bot that let a move time out at
``ARENA_LADDER_PAUSE_AFTER_TIMEOUTS`` tables in a row is *paused*: not paired, the reason and
the time shown on its memberships, until it answers again: it waits for a turn (awaitTurn,
nextTurn, myTurns, GET /api/turns) or calls joinLadder.

Every step is idempotent: tables are stored once under ids from a counter and their matches
created under ids derived from the table, so a pass or a settlement run again changes
nothing; a table is listed as unstarted until its first match is created, so a pass that
died in between is finished by the next pass (or, a minute on, the table is dropped).
"""

from __future__ import annotations

import logging
import random
import secrets
import time
from dataclasses import dataclass
from enum import Enum
from typing import Any

from ranking.ladder import LadderBot, free_bots, pair_ladder
from ranking.pairing import rotation
from ranking.ratings import INITIAL_RATING
from service.domain.matches import Caller, MatchService
from service.domain.ratings import RatingService, house_kind_of, kept_deviation
from service.domain.retirement import refuse_retired
from service.errors import BadInput
from service.model.homes import homed_match_id
from service.model.live_match import LiveMatch, MatchSettings, MatchStatus, SeatHolder
from service.settings import Settings
from service.store.clock import now_ms
from service.store.ladders import LadderStore, LockLost, Pause
from service.store.ratings import StoredRating
from wizard import HOUSE_BOTS, ConfigError, MatchConfig, Ruleset

log = logging.getLogger("wizard_arena.ladders")

#: how long a pass may hold a ladder's lock before another may take it (a dead worker's)
LOCK_SECONDS = 30.0
#: a table whose first match is still missing this long after it was stored is dropped
UNSTARTED_TABLE_MS = 60_000
#: how long a bot found not paused is taken to be so by this process without asking Redis
#: again: waiting for a turn (once a move, for a bot that plays) costs no Redis read, and a
#: pause is lifted at the bot's first wait this long after the last one that asked
NOT_PAUSED_FOR_S = 5.0
#: how many such bots a process keeps in mind at most (then it forgets them all and asks anew)
NOT_PAUSED_KEPT = 100_000
#: the most members a ladder lists at once (``ladder(first:)``)
MAX_LISTED_MEMBERS = 1000
#: who created ladder matches (the settings' ``createdBy``)
LADDER_CREATOR = "ladder"


class LadderState(str, Enum):
    """Where a bot stands in a ladder."""

    #: paired by the workers
    ACTIVE = "ACTIVE"
    #: a member, but not paired: it let moves time out (``pausedReason``) until it answers again
    PAUSED = "PAUSED"
    #: not a member (it left, or never joined)
    LEFT = "LEFT"


@dataclass(frozen=True, slots=True)
class Membership:
    """A bot's place in one ladder."""

    bot_id: str
    name: str
    ruleset: str
    players: int
    state: LadderState
    joined_ms: int | None
    pause: Pause | None
    #: the ladder matches it sits in now (its tables in play)
    playing: int


def house_kinds(named: list[str]) -> list[str]:
    """ARENA_LADDER_HOUSE_BOTS's kinds, checked (a process with a wrong one does not start)."""
    kinds = list(dict.fromkeys(k.upper() for k in named))
    unknown = [k for k in kinds if k not in HOUSE_BOTS]
    if unknown:
        raise ValueError(f"ARENA_LADDER_HOUSE_BOTS: house bot kinds are {', '.join(HOUSE_BOTS)}, not {', '.join(unknown)}")
    return kinds


def ladder_name(ruleset: str, players: int) -> str:
    return f"{ruleset}:{players}"


def ladder_standing(fitted: StoredRating | None, elo: StoredRating | None) -> tuple[float, float]:
    """A bot's rating and its deviation (Elo scale) for the pairing: its rating in the latest
    refit when that rated it (the score fit is what the ladder's pairing was measured with),
    else its Elo rating, else a new bot's; each with the deviation kept beside it (one kept
    before deviations were, or none: the one its games give, ``kept_deviation``)."""
    rated = fitted if fitted is not None else elo
    if rated is None:
        return INITIAL_RATING, kept_deviation(0, None)
    return rated.rating, kept_deviation(rated.games, rated.deviation)


def _house_identity(kind: str) -> str:
    return f"house-{kind.lower()}"


def ladder_match_id(ladder: str, table_id: str, table: dict[str, Any], turn: int) -> str:
    """The id of a table's ``turn``-th match, fixed by the ladder, the table and the turn: homed
    unless the table was stored before matches had homes (its matches keep their ids)."""
    ruleset, players = ladder.split(":")
    base = f"ladder-{ruleset.lower().replace('_', '-')}-{players}-{table_id}-{turn}"
    return homed_match_id(base) if table.get("homed") else base


class LadderService:
    def __init__(self, store: LadderStore, matches: MatchService, ratings: RatingService, settings: Settings) -> None:
        self.store = store
        self.matches = matches
        self.ratings = ratings
        self.settings = settings
        #: the house bot kinds every ladder has (ARENA_LADDER_HOUSE_BOTS)
        self.house_kinds = house_kinds(settings.ladder_house_bots)
        #: bots found not paused, until when (``time.monotonic()``) that is taken as still so
        self._not_paused: dict[str, float] = {}

    # ------------------------------------------------------------------ the API
    @staticmethod
    def ladder_of(ruleset: str, players: int) -> str:
        """The ladder's name, BAD_INPUT for a ruleset and number of players RULES.md rules out."""
        if isinstance(players, bool) or not isinstance(players, int):
            raise BadInput(f"players must be a whole number, not {players!r}")
        try:
            MatchConfig.create(ruleset, players, [])
        except ConfigError as error:
            raise BadInput(f"no ladder for {ruleset} with {players} players: {error}") from error
        return ladder_name(Ruleset(ruleset).value, players)

    async def join(self, caller: Caller, ruleset: str, players: int) -> Membership:
        """Make the caller a member (its consent to rated ladder play); again: it stays one,
        and a pause is lifted (calling it is answering again)."""
        ladder = self.ladder_of(ruleset, players)
        await refuse_retired(self.matches.bots, [caller.bot_id], "join ladders")
        await self.store.join(ladder, caller.bot_id)
        return await self.membership(caller.bot_id, caller.name, ruleset, players)

    async def leave(self, caller: Caller, ruleset: str, players: int) -> Membership:
        """The caller is paired no more (its matches in play finish); again changes nothing."""
        ladder = self.ladder_of(ruleset, players)
        await self.store.leave(ladder, caller.bot_id)
        return await self.membership(caller.bot_id, caller.name, ruleset, players)

    async def membership(self, bot_id: str, name: str, ruleset: str, players: int) -> Membership:
        ladder = self.ladder_of(ruleset, players)
        joined, pause, playing = await self.store.memberships(bot_id)
        return _membership(bot_id, name, ladder, joined.get(ladder), pause, playing.get(ladder, 0))

    async def memberships(self, bot_id: str, name: str) -> list[Membership]:
        """The bot's ladders, by name (a house bot: every ladder, always ACTIVE)."""
        kind = house_kind_of(bot_id)
        if kind is not None:
            if kind not in self.house_kinds:
                return []
            out = []
            for ladder in await self.store.ladders():
                out.append(_membership(bot_id, name, ladder, None, None,
                                       _playing(await self.store.tables(ladder)).get(bot_id, 0)))
            return out
        # (one read of the bot's own keys: a list of many bots' ladders reads no ladder's tables)
        joined, pause, playing = await self.store.memberships(bot_id)
        return [_membership(bot_id, name, ladder, joined[ladder], pause, playing.get(ladder, 0)) for ladder in sorted(joined)]

    async def members(self, ruleset: str, players: int, first: int) -> list[Membership]:
        """The ladder's members: the house bots, then the bots by when they joined."""
        ladder = self.ladder_of(ruleset, players)
        if isinstance(first, bool) or not isinstance(first, int) or not 1 <= first <= MAX_LISTED_MEMBERS:
            raise BadInput(f"first must be from 1 to {MAX_LISTED_MEMBERS}, not {first!r}")
        playing = _playing(await self.store.tables(ladder))
        houses = [
            _membership(_house_identity(k), f"House {k.title()}", ladder, None, None,
                        playing.get(_house_identity(k), 0))
            for k in self.house_kinds
        ]
        rows = await self.store.members(ladder, first)
        ids = [bot_id for bot_id, _ in rows]
        facts = await self.store.facts(ladder, ids)
        bots = [
            _membership(bot_id, f.name or bot_id, ladder, f.joined_ms, f.paused, playing.get(bot_id, 0))
            for bot_id, f in zip(ids, facts, strict=True)
            if f.joined_ms is not None  # (on the ladder's list, not a member: a join or leave died half way)
        ]
        return (houses + bots)[:first]

    async def resume(self, bot_id: str) -> None:
        """The bot answers again (it waits for a turn): a pause is lifted. Asked of Redis at
        most once every NOT_PAUSED_FOR_S a bot, so a bot's waits cost no read each."""
        now = time.monotonic()
        if self._not_paused.get(bot_id, 0.0) > now:
            return
        if await self.store.is_paused(bot_id) and await self.store.resume(bot_id):
            log.info("bot %s answers again: its ladder pause is lifted", bot_id)
        if len(self._not_paused) >= NOT_PAUSED_KEPT:
            self._not_paused.clear()
        self._not_paused[bot_id] = now + NOT_PAUSED_FOR_S

    # ------------------------------------------------------------------ the workers
    async def ladders(self) -> list[str]:
        return await self.store.ladders()

    async def pair(self, ladder: str) -> int:
        """One pairing pass of the ladder (skipped while another runs it); the tables started."""
        token = await self.store.lock(ladder, LOCK_SECONDS)
        if token is None:
            return 0
        try:
            return await self._pair(ladder, token)
        except LockLost:
            log.warning("the pairing pass of %s outlasted its lock (%.0f s); the next pass goes on", ladder, LOCK_SECONDS)
            return 0
        finally:
            await self.store.unlock(ladder, token)

    async def _pair(self, ladder: str, token: str) -> int:
        ruleset, players_text = ladder.split(":")
        players = int(players_text)
        for table_id, held in (await self.store.pending(ladder)).items():
            # (a dead pass's: under the lock, no other pass is storing one now)
            await self.store.release_pending(ladder, table_id, _registered(held))
        tables = await self.store.tables(ladder)
        await self._finish_unstarted(ladder, tables)
        members = [bot_id for bot_id, _ in await self.store.members(ladder, 10**9)]
        if not members:
            return 0
        facts = await self.store.facts(ladder, members)
        houses = [_house_identity(k) for k in self.house_kinds]
        standings = dict(zip(members + houses, await self.ratings.standings(ruleset, members + houses), strict=True))
        playing = _playing(tables)
        bots: list[LadderBot] = []
        names: dict[str, str] = {}
        for bot_id, f in zip(members, facts, strict=True):
            if f.playing_here != playing.get(bot_id, 0):
                # a place at no table in play: one a pass that lost its lock reserved after the
                # next one cleaned its pending tables up (no other pass stores one now)
                for table_id in await self.store.places(ladder, bot_id):
                    if table_id not in tables:
                        await self.store.release_places(ladder, table_id, [bot_id])
            if f.name is None or f.retired:
                await self.store.leave(ladder, bot_id)  # a retired bot takes part in nothing new
                continue
            if f.joined_ms is None or f.paused is not None:
                continue
            # the cap is per bot: a registered bot counts its matches in all ladders
            bots.append(LadderBot(bot_id, *ladder_standing(*standings[bot_id]), f.playing, False))
            names[bot_id] = f.name
        for kind, identity in zip(self.house_kinds, houses, strict=True):
            bots.append(LadderBot(identity, *ladder_standing(*standings[identity]), playing.get(identity, 0), True))
            names[identity] = f"House {kind.title()}"
        if not any(not b.house for b in bots):
            return 0
        # only the meetings of the bots free to play, with each other (all a pairing reads): a
        # ladder's meetings grow towards every pair of its bots (500,000 for 1,000 bots, seconds to read)
        free = [b.id for b in free_bots(bots, self.settings.ladder_max_matches)]
        chosen = pair_ladder(bots, players, await self.store.meetings_among(ladder, free),
                             self.settings.ladder_max_matches, random.Random())
        started = 0
        for table in chosen:
            if all(house_kind_of(b) is not None for b in table.bots):
                continue  # (house bots alone teach no rating anything)
            table_id = await self.store.next_table_id(ladder)
            stored = {
                "seats": [
                    {"id": b, "name": names[b], "house": house_kind_of(b)} for b in table.bots
                ],
                "seed": secrets.token_urlsafe(18),
                # (the same bots play every rotation: a bot that remembers the cards of the set's
                # earlier matches knows its opponents' hands, so only when the operator trusts them)
                "duplicate": table.duplicate and self.settings.ladder_duplicate_sets,
                "created": now_ms(),
                "homed": True,
            }
            if await self.store.store_table(ladder, token, table_id, stored, _turns(stored), table.bots,
                                            _registered(stored), self.settings.ladder_max_matches):
                await self._start(ladder, table_id, stored, 0)
                await self.store.started(ladder, table_id)
                started += 1
        return started

    async def _finish_unstarted(self, ladder: str, tables: dict[str, dict[str, Any]]) -> None:
        """Tables a pass stored but died before starting (under the ladder's lock, no other
        pass is starting one now): started, or dropped when older than UNSTARTED_TABLE_MS
        (their first match would be long overdue) and their first match is still missing."""
        for table_id in await self.store.unstarted(ladder):
            table = tables.get(table_id)
            if table is not None and now_ms() - table["created"] < UNSTARTED_TABLE_MS:
                await self._start(ladder, table_id, table, 0)
            elif table is not None and await self.matches.matches.load(ladder_match_id(ladder, table_id, table, 0)) is None:
                # (a pass that died after creating the first match, not before: the table is
                # in play, and its settlement ends it; dropping it would free its bots' cap
                # under a match still played, and leave a duplicate set sealed and unfinished)
                await self.store.drop_table(ladder, table_id, _registered(table))
                tables.pop(table_id)
            await self.store.started(ladder, table_id)

    async def _start(self, ladder: str, table_id: str, table: dict[str, Any], turn: int) -> None:
        """The table's ``turn``-th match (created once: its id is the table's and the turn's)."""
        ruleset, players = ladder.split(":")
        config = MatchConfig.create(ruleset, int(players), [])
        seats = [SeatHolder(s["id"], s["name"], s["house"]) for s in table["seats"]]
        duplicate = bool(table["duplicate"])
        settings = MatchSettings(
            config, self.settings.ladder_move_timeout_ms, True, False, LADDER_CREATOR, now_ms(),
            group=f"ladder-{ladder}-{table_id}" if duplicate else None, ladder_table=f"{ladder}:{table_id}",
        )
        holders = [seats[i] for i in rotation(list(range(len(seats))), turn) if i is not None]
        await self.matches.create_seated(ladder_match_id(ladder, table_id, table, turn), config, table["seed"], settings, holders,
                                         sealed=duplicate)

    # ------------------------------------------------------------------ settling
    async def settle(self, match: LiveMatch) -> None:
        """A ladder match has ended (its Elo change is applied already): a duplicate set's
        next match, or the table's end (its bots' timeout streaks, pauses, and a refit of the
        ruleset's FITTED ratings). Idempotent."""
        assert match.settings.ladder_table is not None
        ruleset, players, table_id = match.settings.ladder_table.split(":")
        ladder = ladder_name(ruleset, int(players))
        table = await self.store.table(ladder, table_id)
        if table is None:
            return  # ended already
        turns = _turns(table)
        ids = [ladder_match_id(ladder, table_id, table, turn) for turn in range(turns)]
        turn = ids.index(match.id) if match.id in ids else turns - 1
        if match.status is MatchStatus.FINISHED and turn + 1 < turns:
            await self._start(ladder, table_id, table, turn + 1)
            return
        played = [s.match for s in await self.matches.matches.load_many(ids[:turn + 1]) if s is not None]
        timed_out = dict.fromkeys(_registered(table), False)
        for m in played:
            for seat, holder in enumerate(m.seats):
                if holder is not None and holder.house is None:
                    timed_out[holder.id] = timed_out.get(holder.id, False) or m.timeouts[seat] > 0
        if table["duplicate"]:
            await self.matches.matches.unseal(ids[:turn + 1])
        limit = self.settings.ladder_pause_after_timeouts
        reason = (f"it let moves time out in {limit} ladder table{'s' if limit > 1 else ''} in a row; it is paired "
                  "again once it answers: wait for a turn (awaitTurn, nextTurn, myTurns, GET /api/turns) or call "
                  "joinLadder")
        if await self.store.end_table(ladder, table_id, timed_out, limit, reason):
            await self.ratings.request_fit(ruleset)


def _registered(table: dict[str, Any]) -> list[str]:
    """The table's registered bots (not its house bots)."""
    return [s["id"] for s in table["seats"] if s["house"] is None]


def _turns(table: dict[str, Any]) -> int:
    """The matches of a table: one, or a duplicate set's one per seat."""
    return len(table["seats"]) if table["duplicate"] else 1


def _playing(tables: dict[str, dict[str, Any]]) -> dict[str, int]:
    """The ladder matches each bot plays now: those of each table in play it sits at (a
    duplicate set's one per seat, played one after another), as the cap counts them."""
    counts: dict[str, int] = {}
    for table in tables.values():
        for seat in {s["id"] for s in table["seats"]}:
            counts[seat] = counts.get(seat, 0) + _turns(table)
    return counts


def _membership(bot_id: str, name: str, ladder: str, joined_ms: int | None, pause: Pause | None,
                playing: int) -> Membership:
    ruleset, players = ladder.split(":")
    house = house_kind_of(bot_id) is not None
    if house:
        state = LadderState.ACTIVE
    elif joined_ms is None:
        state = LadderState.LEFT
    else:
        state = LadderState.PAUSED if pause is not None else LadderState.ACTIVE
    return Membership(bot_id, name, ruleset, int(players), state, joined_ms,
                      pause if state is LadderState.PAUSED else None, playing)

