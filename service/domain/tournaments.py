"""Tournaments and match settlement (ratings, standings).

A tournament is a set of *tables* ("slots"); each table is one match, or under
``duplicate`` a set of as many matches as seats, dealt alike (one seed) and played one after
another with the seats rotated. Match ids are derived from the tournament, the table and the
turn, so creating a table twice (a worker died half way and another retried) changes
nothing. Everything here is idempotent and safe to run again at any time: the workers call
:meth:`TournamentService.advance` whenever a tournament's match ends, at its start time, and
every second as a safety net.

Settlement of an ended match happens once, whatever runs it how often: its Elo change is
applied by a Redis script that marks the match (``RatingStore.apply``), its tournament result
is written only if absent.
"""

from __future__ import annotations

import asyncio
import json
import logging
import random
import secrets
from dataclasses import asdict, dataclass, field
from typing import Any

from redis.asyncio import Redis

from service.errors import BadInput, Forbidden, LimitExceeded, MatchNotActive, NotFound
from service.domain.live_match import LiveMatch, MatchSettings, MatchStatus, SeatHolder
from service.domain.matches import Caller, MatchService
from ranking.pairing import placement_points, rotation, round_robin_round, swiss_round
from ranking.ratings import INITIAL_RATING, elo_update, fit_scores
from service.settings import Settings
from service.store.bots import BotStore
from service.store.clock import now_ms
from service.store.keys import fit_claim_key
from service.store.matches import MatchStore
from service.store.ratings import RatingStore
from wizard import HOUSE_BOTS, MatchConfig

log = logging.getLogger("wizard_arena.tournaments")

FORMATS = ("ROUND_ROBIN", "SWISS", "ARENA")
#: entrants of one tournament at most (bots and house bots)
MAX_ENTRANTS = 512
ACTIVE = "tournaments:active"
FILL_KIND = "HEURISTIC"


def tournament_key(tid: str) -> str:
    return f"{{tn:{tid}}}:tournament"


def _slots_key(tid: str) -> str:
    return f"{{tn:{tid}}}:slots"


def _results_key(tid: str) -> str:
    return f"{{tn:{tid}}}:results"


def rated_as(holder: SeatHolder) -> str:
    """Whose rating a seat moves: a house bot's kind shares one rating however it was seated."""
    return f"house-{holder.house.lower()}" if holder.house else holder.id


@dataclass
class TournamentSpec:
    name: str
    ruleset: str
    variants: list[str]
    players_per_match: int
    format: str
    rounds: int | None
    duration_minutes: float | None
    starts_at_ms: int
    move_timeout_ms: int
    rated: bool
    duplicate: bool
    created_by: str


@dataclass
class Tournament:
    id: str
    spec: TournamentSpec
    status: str
    entrants: list[dict[str, Any]] = field(default_factory=list)  # {"id", "name", "house"}
    started_ms: int | None = None
    finished_ms: int | None = None
    slots: dict[str, dict[str, Any]] = field(default_factory=dict)
    results: dict[str, dict[str, Any]] = field(default_factory=dict)

    def holder(self, entrant: int | None) -> SeatHolder:
        if entrant is None:
            return SeatHolder(f"house-{FILL_KIND.lower()}", f"House {FILL_KIND.title()} (fill)", FILL_KIND)
        e = self.entrants[entrant]
        return SeatHolder(e["id"], e["name"], e.get("house"))

    def match_ids(self, slot_id: str) -> list[str]:
        turns = self.spec.players_per_match if self.spec.duplicate else 1
        return [f"{self.id}-{slot_id}-{turn}" for turn in range(turns)]

    def standings(self) -> list[dict[str, Any]]:
        """Entrants by points (placement), then total score; house fill seats do not count."""
        table = {i: {"entrant": i, "points": 0.0, "matches": 0, "score": 0} for i in range(len(self.entrants))}
        for result in self.results.values():
            if result.get("aborted"):
                continue
            for entrant, points, score in zip(result["entrants"], result["points"], result["scores"], strict=True):
                if entrant is not None:
                    row = table[entrant]
                    row["points"] += points
                    row["matches"] += 1
                    row["score"] += score
        ordered = sorted(table.values(), key=lambda r: (-r["points"], -r["score"], r["entrant"]))
        rank = 0
        previous: tuple[float, int] | None = None
        for position, row in enumerate(ordered, 1):
            if (row["points"], row["score"]) != previous:
                rank = position
                previous = (row["points"], row["score"])
            row["rank"] = rank
        return ordered


class TournamentStore:
    def __init__(self, redis: Redis) -> None:
        self.redis = redis

    async def save_new(self, t: Tournament) -> None:
        async with self.redis.pipeline(transaction=True) as pipe:
            pipe.hset(tournament_key(t.id), mapping={
                "spec": json.dumps(asdict(t.spec)), "status": t.status, "entrants": json.dumps(t.entrants),
            })
            pipe.zadd(ACTIVE, {t.id: t.spec.starts_at_ms})
            await pipe.execute()

    async def load(self, tid: str) -> Tournament | None:
        async with self.redis.pipeline(transaction=False) as pipe:
            pipe.hgetall(tournament_key(tid))
            pipe.hgetall(_slots_key(tid))
            pipe.hgetall(_results_key(tid))
            head, slots, results = await pipe.execute()
        if not head:
            return None
        data = {k.decode(): v for k, v in head.items()}
        t = Tournament(
            tid,
            TournamentSpec(**json.loads(data["spec"])),
            data["status"].decode(),
            json.loads(data["entrants"]),
            int(data["started"]) if "started" in data else None,
            int(data["finished"]) if "finished" in data else None,
        )
        t.slots = {k.decode(): json.loads(v) for k, v in slots.items()}
        t.results = {k.decode(): json.loads(v) for k, v in results.items()}
        return t

    async def set_entrants(self, tid: str, before: list[dict[str, Any]], after: list[dict[str, Any]]) -> bool:
        """Replace the entrants, only if still SCHEDULED and nobody changed them meanwhile."""
        script = """
        if redis.call('HGET', KEYS[1], 'status') ~= 'SCHEDULED' then return 0 end
        if redis.call('HGET', KEYS[1], 'entrants') ~= ARGV[1] then return 0 end
        redis.call('HSET', KEYS[1], 'entrants', ARGV[2])
        return 1"""
        return bool(await self.redis.eval(script, 1, tournament_key(tid), json.dumps(before), json.dumps(after)))

    async def move_status(self, tid: str, expected: str, new: str, stamp: str | None = None) -> bool:
        """Change the status only from ``expected`` (one worker wins a race)."""
        script = """
        if redis.call('HGET', KEYS[1], 'status') ~= ARGV[1] then return 0 end
        redis.call('HSET', KEYS[1], 'status', ARGV[2])
        if ARGV[3] ~= '' then redis.call('HSET', KEYS[1], ARGV[3], ARGV[4]) end
        if ARGV[2] == 'FINISHED' or ARGV[2] == 'CANCELLED' then redis.call('ZREM', KEYS[2], ARGV[5]) end
        return 1"""
        return bool(await self.redis.eval(script, 2, tournament_key(tid), ACTIVE, expected, new, stamp or "", now_ms(), tid))

    async def add_slots(self, tid: str, slots: dict[str, dict[str, Any]]) -> dict[str, dict[str, Any]]:
        """Store new tables all at once (a round is stored whole or not at all; a table
        stored before is kept) and answer them as stored."""
        async with self.redis.pipeline(transaction=True) as pipe:
            for slot_id, slot in slots.items():
                pipe.hsetnx(_slots_key(tid), slot_id, json.dumps(slot))
            pipe.hmget(_slots_key(tid), list(slots))
            *_, stored = await pipe.execute()
        return {slot_id: json.loads(value) for slot_id, value in zip(slots, stored, strict=True)}

    async def update_slot(self, tid: str, slot_id: str, slot: dict[str, Any]) -> None:
        await self.redis.hset(_slots_key(tid), slot_id, json.dumps(slot))

    async def add_result(self, tid: str, match_id: str, result: dict[str, Any]) -> None:
        await self.redis.hsetnx(_results_key(tid), match_id, json.dumps(result))

    async def due(self, now: int) -> list[str]:
        return [t.decode() for t in await self.redis.zrangebyscore(ACTIVE, "-inf", now)]

    async def lock(self, tid: str, seconds: float = 10) -> str | None:
        token = secrets.token_hex(8)
        ok = await self.redis.set(f"{{tn:{tid}}}:lock", token, nx=True, px=int(seconds * 1000))
        return token if ok else None

    async def unlock(self, tid: str, token: str) -> None:
        script = "if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end return 0"
        await self.redis.eval(script, 1, f"{{tn:{tid}}}:lock", token)


class TournamentService:
    def __init__(self, redis: Redis, matches: MatchService, settings: Settings, enqueue_fit: Any = None) -> None:
        self.store = TournamentStore(redis)
        self.ratings = RatingStore(redis)
        self.matches = matches
        self.match_store: MatchStore = matches.matches
        self.bots: BotStore = matches.bots
        self.settings = settings
        self.enqueue_fit = enqueue_fit  # callable(ruleset) -> awaitable; set by the worker

    # ------------------------------------------------------------------ API
    async def create(self, caller: Caller, spec: dict[str, Any], bot_ids: list[str], house: list[str]) -> Tournament:
        s = self.settings
        fmt = spec["format"]
        if fmt not in FORMATS:
            raise BadInput(f"format must be one of {', '.join(FORMATS)}, not {fmt!r}")
        name = spec["name"]
        if not isinstance(name, str) or not name.strip() or len(name) > 80:
            raise BadInput("name must be 1 to 80 characters")
        players = spec["players_per_match"]
        MatchConfig.create(spec["ruleset"], players, spec["variants"])  # refuses what RULES.md rules out
        rounds, duration = spec.get("rounds"), spec.get("duration_minutes")
        if fmt in ("ROUND_ROBIN", "SWISS") and (not isinstance(rounds, int) or not 1 <= rounds <= 200):
            raise BadInput(f"{fmt} needs rounds from 1 to 200")
        if fmt == "ARENA" and (not isinstance(duration, int | float) or not 0.05 <= duration <= 7 * 24 * 60):
            raise BadInput("ARENA needs durationMinutes from 0.05 to 10080")
        timeout = spec.get("move_timeout_ms") or s.default_move_timeout_ms
        if not s.min_move_timeout_ms <= timeout <= s.max_move_timeout_ms:
            raise BadInput(f"moveTimeoutMs must be from {s.min_move_timeout_ms} to {s.max_move_timeout_ms}")
        starts = spec.get("starts_at_ms") or now_ms()
        if starts < now_ms() - 60_000:
            raise BadInput("startsAt is in the past: leave it out to start now")
        if starts > now_ms() + 366 * 86_400_000:
            raise BadInput("startsAt is more than a year ahead: schedule it nearer the time")
        if len(bot_ids) + len(house) > MAX_ENTRANTS:
            raise LimitExceeded(f"a tournament takes at most {MAX_ENTRANTS} entrants")
        entrants: list[dict[str, Any]] = []
        if bot_ids:
            found = await self.bots.get_many(bot_ids)
            for bot_id in dict.fromkeys(bot_ids):
                if bot_id not in found:
                    raise NotFound(f"no bot with id {bot_id!r}")
                entrants.append({"id": bot_id, "name": found[bot_id]["name"], "house": None})
        for n, kind in enumerate(house):
            if kind not in HOUSE_BOTS:
                raise BadInput(f"house bot kinds are {', '.join(HOUSE_BOTS)}, not {kind!r}")
            entrants.append({"id": f"house-{kind.lower()}-{n}", "name": f"House {kind.title()} {n}", "house": kind})
        t = Tournament(
            secrets.token_hex(6),
            TournamentSpec(
                name.strip(), spec["ruleset"], sorted(spec["variants"]), players, fmt,
                rounds if fmt != "ARENA" else None, duration if fmt == "ARENA" else None,
                starts, timeout, bool(spec.get("rated", True)), bool(spec.get("duplicate", False)), caller.bot_id,
            ),
            "SCHEDULED",
            entrants,
        )
        await self.store.save_new(t)
        return t

    async def get(self, tid: str) -> Tournament:
        t = await self.store.load(tid) if isinstance(tid, str) and len(tid) <= 64 else None
        if t is None:
            raise NotFound(f"no tournament with id {tid!r}")
        return t

    async def join(self, caller: Caller, tid: str) -> Tournament:
        for _ in range(20):
            t = await self.get(tid)
            if t.status != "SCHEDULED":
                raise MatchNotActive(f"tournament {tid} is {t.status}: entrants may join only before it starts")
            if any(e["id"] == caller.bot_id for e in t.entrants):
                return t
            if len(t.entrants) >= MAX_ENTRANTS:
                raise LimitExceeded(f"tournament {tid} is full: it takes at most {MAX_ENTRANTS} entrants")
            entrants = [*t.entrants, {"id": caller.bot_id, "name": caller.name, "house": None}]
            if await self.store.set_entrants(tid, t.entrants, entrants):
                t.entrants = entrants
                return t
        raise MatchNotActive(f"tournament {tid} is busy with joins; try again")

    async def cancel(self, caller: Caller, tid: str) -> Tournament:
        t = await self.get(tid)
        if t.spec.created_by != caller.bot_id:
            raise Forbidden("only the tournament's creator may cancel it")
        # under the advance lock: an advance under way (which read RUNNING) would otherwise
        # start the next round just after the cancel. A lock still held after a few seconds
        # is a dead worker's: cancel anyway.
        token = None
        for _ in range(60):
            token = await self.store.lock(tid)
            if token is not None:
                break
            await asyncio.sleep(0.05)
        try:
            t = await self.get(tid)
            if t.status not in ("SCHEDULED", "RUNNING") or not await self.store.move_status(tid, t.status, "CANCELLED", "finished"):
                raise MatchNotActive(f"tournament {tid} is {t.status}: it can no longer be cancelled")
            await self._settle_cut_short(t)
        finally:
            if token is not None:
                await self.store.unlock(tid, token)
        return await self.get(tid)

    # ------------------------------------------------------------------ running it
    async def advance(self, tid: str) -> bool:
        """Bring the tournament up to date: start it when due, settle ended tables, create
        the next matches, finish it. Safe to run any number of times, by any worker. False
        when another run holds it (a cancel, or another worker): nothing was done."""
        token = await self.store.lock(tid)
        if token is None:
            return False
        try:
            await self._advance(tid)
        finally:
            await self.store.unlock(tid, token)
        return True

    async def _advance(self, tid: str) -> None:
        t = await self.store.load(tid)
        if t is None:
            return
        now = now_ms()
        if t.status == "SCHEDULED":
            if now < t.spec.starts_at_ms:
                return
            if len(t.entrants) < 2:
                await self.store.move_status(tid, "SCHEDULED", "CANCELLED", "finished")
                log.info("tournament %s cancelled: fewer than 2 entrants", tid)
                return
            await self.store.move_status(tid, "SCHEDULED", "RUNNING", "started")
            t = await self.store.load(tid)
            assert t is not None
        if t.status != "RUNNING":
            return
        busy = await self._settle_slots(t)
        if t.spec.format == "ARENA":
            await self._arena(t, busy, now)
        else:
            await self._rounds(t, busy)

    async def _settle_slots(self, t: Tournament) -> set[int]:
        """Carry each table forward (next duplicate turn, results once all its matches end);
        the entrants still playing."""
        busy: set[int] = set()
        for slot_id, slot in sorted(t.slots.items()):
            if slot.get("done"):
                continue
            ids = t.match_ids(slot_id)
            stored = await self.match_store.load_many(ids)
            existing = [s.match for s in stored if s is not None]
            if not existing:
                await self._create_turn(t, slot_id, slot, 0)
                busy.update(e for e in slot["table"] if e is not None)
                continue
            latest = existing[-1]
            if not latest.ended:
                busy.update(e for e in slot["table"] if e is not None)
                continue
            if len(existing) < len(ids):
                await self._create_turn(t, slot_id, slot, len(existing))
                busy.update(e for e in slot["table"] if e is not None)
                continue
            for turn, match in enumerate(existing):
                await self.settle_match(match, t, slot, turn)
            if t.spec.duplicate:
                await self.match_store.unseal(ids)
            slot["done"] = True
            slot["ended"] = now_ms()
            await self.store.update_slot(t.id, slot_id, slot)
        return busy

    async def _create_turn(self, t: Tournament, slot_id: str, slot: dict[str, Any], turn: int) -> None:
        spec = t.spec
        config = MatchConfig.create(spec.ruleset, spec.players_per_match, spec.variants)
        match_id = t.match_ids(slot_id)[turn]
        settings = MatchSettings(
            config, spec.move_timeout_ms, spec.rated, False, spec.created_by, now_ms(),
            tournament=t.id, group=f"{t.id}-{slot_id}" if spec.duplicate else None,
        )
        holders = [t.holder(e) for e in rotation(slot["table"], turn)]
        await self.matches.create_seated(match_id, config, slot["seed"], settings, holders, sealed=spec.duplicate)

    async def _new_slots(self, t: Tournament, tables: dict[str, tuple[list[int | None], int | None]]) -> None:
        """Store new tables (all of a round at once), then start each one's first match.
        What Redis holds wins: a table stored by an earlier run keeps its seed and seats."""
        created = now_ms()
        fresh = {
            slot_id: {"table": table, "seed": secrets.token_urlsafe(18), "round": round_number, "created": created}
            for slot_id, (table, round_number) in tables.items()
        }
        stored = await self.store.add_slots(t.id, fresh)
        t.slots.update(stored)
        for slot_id, slot in stored.items():
            await self._create_turn(t, slot_id, slot, 0)

    async def _rounds(self, t: Tournament, busy: set[int]) -> None:
        current = max((s["round"] for s in t.slots.values()), default=0)
        if current and any(not s.get("done") for s in t.slots.values() if s["round"] == current):
            return
        if current >= (t.spec.rounds or 0):
            await self._finish(t)
            return
        history = [
            [s["table"] for _, s in sorted(t.slots.items()) if s["round"] == r] for r in range(1, current + 1)
        ]
        n, k = len(t.entrants), t.spec.players_per_match
        if t.spec.format == "SWISS" and current:
            order = [row["entrant"] for row in t.standings()]
            tables = swiss_round(order, k, history)
        else:
            tables = round_robin_round(n, k, history, random.Random(f"{t.id}:{current + 1}"))
        await self._new_slots(t, {f"r{current + 1}t{i}": (table, current + 1) for i, table in enumerate(tables)})

    async def _arena(self, t: Tournament, busy: set[int], now: int) -> None:
        started = t.started_ms or now
        end = started + int((t.spec.duration_minutes or 0) * 60_000)
        if now >= end:
            if not busy:
                await self._finish(t)
            return
        k = t.spec.players_per_match
        played: dict[int, int] = {}
        last_played: dict[int, int] = {}
        for slot in t.slots.values():
            for e in slot["table"]:
                if e is not None:
                    played[e] = played.get(e, 0) + 1
                    last_played[e] = max(last_played.get(e, 0), slot.get("ended", slot["created"]))
        # fewest tables so far first, then the longest wait: everyone plays about as often
        free = sorted(
            (e for e in range(len(t.entrants)) if e not in busy),
            key=lambda e: (played.get(e, 0), last_played.get(e, 0), e),
        )
        count = len(t.slots)
        # a table as soon as enough entrants are free; house bots fill in when nobody else
        # is playing (so no entrant waits for a table that would never fill)
        while len(free) >= k or (free and not busy):
            table: list[int | None] = list(free[:k]) + [None] * max(0, k - len(free))
            free = free[k:]
            await self._new_slots(t, {f"a{count}": (table, None)})
            busy.update(e for e in table if e is not None)
            count += 1

    async def _finish(self, t: Tournament) -> None:
        if await self.store.move_status(t.id, "RUNNING", "FINISHED", "finished"):
            log.info("tournament %s finished", t.id)
            if t.spec.rated and self.enqueue_fit is not None:
                await self.enqueue_fit(t.spec.ruleset)

    # ------------------------------------------------------------------ settling matches
    async def settle_match(
        self, match: LiveMatch, t: Tournament | None = None, slot: dict[str, Any] | None = None, turn: int = 0
    ) -> None:
        """Everything an ended match leads to, each part at most once: its rating change and,
        in a tournament, its result."""
        if match.status is MatchStatus.FINISHED and match.settings.rated and not match.settings.stacked:
            await self.apply_elo(match)
        if t is not None and slot is not None:
            entrants = rotation(slot["table"], turn)
            if match.status is MatchStatus.FINISHED:
                scores = list(match.state.scores)
                result = {"entrants": entrants, "scores": scores, "points": placement_points(scores), "slot": slot}
            else:
                result = {"entrants": entrants, "aborted": True}
            await self.store.add_result(t.id, match.id, result)
            t.results.setdefault(match.id, result)

    async def settle(self, match_id: str) -> None:
        """The settlement job for one ended match (its id from the settlement queue)."""
        stored = await self.match_store.load(match_id)
        if stored is not None and stored.match.ended:
            match = stored.match
            if match.settings.tournament:
                # settles the table once it is complete; when another run holds the tournament
                # (a cancel under way, another worker), the match stays queued and is retried
                if not await self.advance(match.settings.tournament):
                    return
                t = await self.store.load(match.settings.tournament)
                if t is not None and t.status == "CANCELLED":
                    await self._settle_cut_short(t)  # it played on after the cancel
            else:
                await self.settle_match(match)
        await self.match_store.redis.zrem("matches:unsettled", match_id)

    async def _settle_cut_short(self, t: Tournament) -> None:
        """The unsettled tables of a cancelled tournament (no more turns or rounds come):
        each whose matches have all ended gets their rating changes, once, and a duplicate
        set cut short publishes its matches (no standings: the tournament has none)."""
        for slot_id, slot in t.slots.items():
            if slot.get("done"):
                continue
            ids = t.match_ids(slot_id)
            existing = [s.match for s in await self.match_store.load_many(ids) if s is not None]
            if existing and all(m.ended for m in existing):
                for match in existing:
                    await self.settle_match(match)
                if t.spec.duplicate:
                    await self.match_store.unseal(ids)

    async def apply_elo(self, match: LiveMatch) -> None:
        ruleset = match.ruleset.value
        holders = [h for h in match.seats if h is not None]
        identities = [rated_as(h) for h in holders]
        names = {rated_as(h): (f"House {h.house.title()}" if h.house else h.name) for h in holders}
        unique = list(dict.fromkeys(identities))
        scores = list(match.state.scores)
        for _ in range(20):
            if await self.ratings.is_applied(match.id):
                return
            current = dict(zip(unique, await self.ratings.elo(unique, ruleset), strict=True))
            before = [current[i][0] if current[i] else INITIAL_RATING for i in identities]
            after = elo_update(before, scores)
            delta: dict[str, float] = {}
            for identity, old, new in zip(identities, before, after, strict=True):
                delta[identity] = delta.get(identity, 0.0) + new - old
            changes = []
            for identity in unique:
                rating, games = current[identity] or (INITIAL_RATING, 0)
                changes.append((identity, names[identity], games, rating + delta[identity]))
            result = {"matchId": match.id, "bots": identities, "scores": scores}
            if await self.ratings.apply(match.id, ruleset, changes, result) >= 0:
                return
        raise RuntimeError(f"ratings for match {match.id} kept changing; the settlement will be retried")

    async def fit(self, ruleset: str) -> int:
        """Refit the whole history of ``ruleset`` (the FITTED leaderboard); matches used."""
        await self.ratings.redis.delete(fit_claim_key(ruleset))  # later asks queue a new refit
        results = await self.ratings.results(ruleset)
        fit = fit_scores([(r["bots"], r["scores"]) for r in results])
        await self.ratings.store_fit(ruleset, {str(b): v for b, v in fit.ratings.items()}, {str(b): g for b, g in fit.games.items()})
        return len(results)

