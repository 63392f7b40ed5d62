"""Tournaments: created, joined and cancelled by bots, and run by the workers.

A tournament is a set of *tables*; each table is one match, or under ``duplicate`` a set of
as many matches as seats, dealt alike (one seed) and played one after another with the seats
rotated. Match ids are derived from the tournament, the table and the turn, so creating a
table twice (a worker died half way and another retried) changes nothing. Everything here is
idempotent and safe to run again at any time: the workers call :meth:`TournamentService.advance`
whenever a tournament's match ends, and their clock every half second for tournaments due or
running. An ended match's rating change is applied by :mod:`service.domain.settlement`, its
result written only if absent. The clock's look also completes what a process that died half
way through a creation or an end left undone (the store makes such a tournament due at once:
:mod:`service.store.tournaments`).
"""

from __future__ import annotations

import asyncio
import logging
import random
import secrets
from dataclasses import dataclass, field

from ranking.pairing import placement_points, round_robin_round, swiss_round
from service.domain.bots import house_bot_profile
from service.domain.matches import Caller, MatchService
from service.domain.ratings import RatingService
from service.domain.retirement import refuse_retired
from service.errors import (
    BadInput,
    Forbidden,
    InvitationAnswered,
    LimitExceeded,
    NotFound,
    TournamentBusy,
    TournamentCannotRun,
    TournamentNotOpen,
    TournamentOver,
)
from service.model.invitation import DECLINED_BY_POLICY, Invitation, InvitationPolicy, InvitationStatus
from service.model.live_match import LiveMatch, MatchSettings, MatchStatus
from service.model.tournament import (
    MAX_ENTRANTS,
    Entrant,
    Table,
    TableResult,
    Tournament,
    TournamentFormat,
    TournamentSpec,
    TournamentStatus,
)
from service.settings import Settings
from service.store.bots import BotStore
from service.store.clock import now_ms
from service.store.matches import MatchStore
from service.store.tournaments import TournamentStore
from wizard import HOUSE_BOTS, MatchConfig

log = logging.getLogger("wizard_arena.tournaments")

#: the longest reason a bot may give for declining, or a creator for cancelling
MAX_REASON = 200


@dataclass(slots=True)
class NewTournament:
    """createTournament's input, as plain values (the GraphQL layer fills it)."""

    name: str
    ruleset: str = "WIZARD"
    variants: list[str] = field(default_factory=list)
    players_per_match: int = 4
    format: TournamentFormat = TournamentFormat.ROUND_ROBIN
    rounds: int | None = None
    duration_minutes: float | None = None
    starts_at_ms: int | None = None
    move_timeout_ms: int | None = None
    rated: bool = True
    duplicate: bool = False
    bots: list[str] = field(default_factory=list)
    house_bots: list[str] = field(default_factory=list)


def _house_bots_apart(bot_ids: list[str]) -> tuple[list[str], list[str]]:
    """``bots`` as named at creation: the registered bots' ids (to invite), and the kinds of
    the house bots named by their ids (``house-heuristic``, as ``bot(id:)`` finds them), which
    enter as ``houseBots`` do: the server plays them, so they accept by themselves. A bot
    named twice is named once."""
    registered: list[str] = []
    kinds: list[str] = []
    for bot_id in dict.fromkeys(bot_ids):
        house = house_bot_profile(bot_id)
        if house is not None and house.house is not None:
            kinds.append(house.house)
        else:
            registered.append(bot_id)
    return registered, kinds


def _refuse_if_too_few_at_once(entrants: list[Entrant], invitations: list[Invitation]) -> None:
    """A tournament that starts at once can never run with fewer than 2 entrants entered at
    creation: invited bots need time to accept, other bots time to join. (A later start
    leaves that time, so it is never refused: any bot may join until then.)"""
    if len(entrants) >= 2:
        return
    waiting = sum(1 for i in invitations if i.status is InvitationStatus.PENDING)
    raise TournamentCannotRun(
        f"a tournament starting now has only the entrants entered at creation ({len(entrants)}), and it needs "
        f"at least 2; {waiting} invited bots have not accepted yet (a bot enters only by accepting, or by its "
        "ACCEPT_ALL policy): give them time with a later startsAt, or add houseBots"
    )


def _result(match: LiveMatch, entrants: list[int | None]) -> TableResult:
    """How an ended match counts in its tournament's standings (``entrants`` by seat)."""
    if match.status is not MatchStatus.FINISHED:
        return TableResult(entrants, aborted=True)
    scores = list(match.state.scores)
    return TableResult(entrants, scores, placement_points(scores))


class TournamentService:
    def __init__(
        self, store: TournamentStore, matches: MatchService, ratings: RatingService, settings: Settings
    ) -> None:
        self.store = store
        self.matches = matches
        self.match_store: MatchStore = matches.matches
        self.bots: BotStore = matches.bots
        self.ratings = ratings
        self.settings = settings

    # ------------------------------------------------------------------ API
    async def create(self, caller: Caller, spec: NewTournament) -> Tournament:
        s = self.settings
        registered, house_kinds = _house_bots_apart(spec.bots)
        house_kinds += spec.house_bots
        await refuse_retired(self.bots, [caller.bot_id, *registered], "create or enter tournaments")
        fmt = spec.format
        name = spec.name
        if not isinstance(name, str) or not name.strip() or len(name) > 80:
            raise BadInput("name must be 1 to 80 characters")
        MatchConfig.create(spec.ruleset, spec.players_per_match, spec.variants)  # refuses what RULES.md rules out
        rounds, duration = spec.rounds, spec.duration_minutes
        if fmt is not TournamentFormat.ARENA and (not isinstance(rounds, int) or not 1 <= rounds <= 200):
            raise BadInput(f"{fmt.value} needs rounds from 1 to 200")
        if fmt is TournamentFormat.ARENA and (
            not isinstance(duration, int | float) or not 0.05 <= duration <= 7 * 24 * 60
        ):
            raise BadInput("ARENA needs durationMinutes from 0.05 to 10080")
        timeout = spec.move_timeout_ms or s.default_move_timeout_ms
        if not s.min_move_timeout_ms <= timeout <= s.max_move_timeout_ms:
            raise BadInput(f"moveTimeoutMs must be from {s.min_move_timeout_ms} to {s.max_move_timeout_ms}")
        starts = spec.starts_at_ms or now_ms()
        if starts < now_ms() - 60_000:
            raise BadInput("startsAt is in the past: leave it out to start now")
        if starts > now_ms() + 366 * 86_400_000:
            raise BadInput("startsAt is more than a year ahead: schedule it nearer the time")
        if len(registered) + len(house_kinds) > MAX_ENTRANTS:
            raise LimitExceeded(f"a tournament takes at most {MAX_ENTRANTS} entrants")
        tid = secrets.token_hex(6)
        entrants, invitations = await self._invite(caller, tid, registered)
        for n, kind in enumerate(house_kinds):
            if kind not in HOUSE_BOTS:
                raise BadInput(f"house bot kinds are {', '.join(HOUSE_BOTS)}, not {kind!r}")
            entrants.append(Entrant(f"house-{kind.lower()}-{n}", f"House {kind.title()} {n}", kind))
        if spec.starts_at_ms is None or starts <= now_ms():
            _refuse_if_too_few_at_once(entrants, invitations)
        t = Tournament(
            tid,
            TournamentSpec(
                name.strip(), spec.ruleset, sorted(spec.variants), spec.players_per_match, fmt,
                rounds if fmt is not TournamentFormat.ARENA else None,
                duration if fmt is TournamentFormat.ARENA else None,
                starts, timeout, spec.rated, spec.duplicate, caller.bot_id,
            ),
            TournamentStatus.SCHEDULED,
            entrants,
            created_ms=now_ms(),
        )
        await self.store.save_new(t, invitations)
        return t

    async def _invite(self, caller: Caller, tid: str, bot_ids: list[str]) -> tuple[list[Entrant], list[Invitation]]:
        """The entrants and invitations of the bots named at creation: the creator naming
        itself enters at once (its own act); every other bot is invited, and its standing
        policy answers at once unless it is ASK."""
        entrants: list[Entrant] = []
        invitations: list[Invitation] = []
        if not bot_ids:
            return entrants, invitations
        found = await self.bots.get_many(bot_ids)
        policies = await self.bots.invitation_policies(b for b in found if b != caller.bot_id)
        at = now_ms()
        for bot_id in dict.fromkeys(bot_ids):
            if bot_id not in found:
                raise NotFound(f"no bot with id {bot_id!r}")
            entrant = Entrant(bot_id, found[bot_id]["name"])
            if bot_id == caller.bot_id:
                entrants.append(entrant)
                continue
            invitation = Invitation(tid, bot_id, InvitationStatus.PENDING, caller.bot_id, caller.name, at)
            if policies[bot_id] is InvitationPolicy.ACCEPT_ALL:
                invitation = invitation.answered(InvitationStatus.ACCEPTED, at)
                entrants.append(entrant)
            elif policies[bot_id] is InvitationPolicy.DECLINE_ALL:
                invitation = invitation.answered(InvitationStatus.DECLINED, at, DECLINED_BY_POLICY)
            invitations.append(invitation)
        return entrants, invitations

    async def get(self, tid: str) -> Tournament:
        t = await self.store.load(tid) if isinstance(tid, str) and len(tid) <= 64 else None
        if t is None:
            raise NotFound(f"no tournament with id {tid!r}")
        return t

    async def matches_of(self, t: Tournament, first: int, offset: int) -> list[LiveMatch]:
        """``first`` of the tournament's matches from ``offset``, oldest table first."""
        stored = await self.match_store.load_many(t.all_match_ids()[offset : offset + first])
        return [s.match for s in stored if s is not None]

    async def join(self, caller: Caller, tid: str) -> Tournament:
        """Enter the caller (its own act), until the start; again changes nothing. A bot
        invited to the tournament accepts its invitation by joining, whatever it answered."""
        await refuse_retired(self.bots, [caller.bot_id], "enter tournaments")
        t, _ = await self._answer(caller, tid, InvitationStatus.ACCEPTED, None, by_join=True)
        return t

    async def accept_invitation(self, caller: Caller, invitation_id: str) -> tuple[Invitation, Tournament]:
        """The caller accepts its invitation and is entered; again changes nothing."""
        await refuse_retired(self.bots, [caller.bot_id], "enter tournaments")
        t, invitation = await self._answer(caller, self._invited_to(caller, invitation_id), InvitationStatus.ACCEPTED,
                                           None, by_join=False)
        assert invitation is not None
        return invitation, t

    async def decline_invitation(
        self, caller: Caller, invitation_id: str, reason: str | None
    ) -> tuple[Invitation, Tournament]:
        """The caller declines its invitation (a reason given is kept on the invitation);
        again changes nothing."""
        if reason is not None and len(reason) > MAX_REASON:
            raise BadInput(f"a reason is at most {MAX_REASON} characters")
        t, invitation = await self._answer(caller, self._invited_to(caller, invitation_id), InvitationStatus.DECLINED,
                                           reason or None, by_join=False)
        assert invitation is not None
        return invitation, t

    @staticmethod
    def _invited_to(caller: Caller, invitation_id: str) -> str:
        """The tournament of the caller's invitation ``invitation_id``."""
        parsed = Invitation.parse_id(invitation_id) if isinstance(invitation_id, str) else None
        if parsed is None or parsed[1] != caller.bot_id:
            raise NotFound(f"you have no invitation {invitation_id!r}: the ids are in the invitations query")
        return parsed[0]

    async def _answer(
        self, caller: Caller, tid: str, answer: InvitationStatus, reason: str | None, by_join: bool
    ) -> tuple[Tournament, Invitation | None]:
        """Enter the caller (``answer`` ACCEPTED) or not (DECLINED), and answer its invitation
        with it, in one step that fails if the tournament started meanwhile. The same answer
        twice is one answer; the opposite one (unless by joining) is refused."""
        for _ in range(20):
            t = await self.get(tid)
            read = await self.store.invitation(tid, caller.bot_id)
            if read is None and not by_join:
                raise NotFound(f"you have no invitation to tournament {tid}")
            entered = any(e.id == caller.bot_id for e in t.entrants)
            seen = None if read is None else read.seen(t.open_to_entrants)
            if seen is not None and seen.status is answer and (entered or answer is InvitationStatus.DECLINED):
                return t, seen
            if read is None and entered:
                return t, None
            if seen is not None and not by_join and seen.status in (InvitationStatus.ACCEPTED, InvitationStatus.DECLINED):
                raise InvitationAnswered(
                    f"you have {seen.status.value.lower()} the invitation to tournament {tid}: an answer is final"
                    + (" (joinTournament enters you until the start)" if t.open_to_entrants else "")
                )
            if not t.open_to_entrants:
                raise TournamentNotOpen(
                    f"tournament {tid} is {t.status.value}: bots enter only before it starts"
                    + ("" if seen is None else f"; your invitation {seen.status.value}")
                )
            if answer is InvitationStatus.ACCEPTED and not entered and len(t.entrants) >= MAX_ENTRANTS:
                raise LimitExceeded(f"tournament {tid} is full: it takes at most {MAX_ENTRANTS} entrants")
            entrants = t.entrants
            if answer is InvitationStatus.ACCEPTED and not entered:
                entrants = [*t.entrants, Entrant(caller.bot_id, caller.name)]
            new = None if read is None else read.answered(answer, now_ms(), reason)
            if await self.store.set_entrants(tid, t.entrants, entrants, None if new is None else (read, new)):
                t.entrants = entrants
                return t, new
        raise TournamentBusy(f"tournament {tid} is busy with entrants coming in: try again")

    async def cancel(self, caller: Caller, tid: str, reason: str | None = None) -> Tournament:
        """Cancel the tournament (its creator only), with the creator's reason if it gives one."""
        if reason is not None and len(reason) > MAX_REASON:
            raise BadInput(f"a reason is at most {MAX_REASON} characters")
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
            why = f"cancelled by its creator ({caller.name})" + (f": {reason}" if reason else "")
            if t.status.over or not await self.store.move_status(
                tid, t.status, TournamentStatus.CANCELLED, "finished", reason=why
            ):
                raise TournamentOver(f"tournament {tid} is {t.status.value}: it can no longer be cancelled")
            await self.settle_cut_short(t)
        finally:
            if token is not None:
                await self.store.unlock(tid, token)
        return await self.get(tid)

    # ------------------------------------------------------------------ running it
    async def due(self) -> list[str]:
        """Tournaments whose start has come and that have not ended: to advance."""
        return await self.store.due(now_ms())

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
        now = now_ms()
        if t is None:
            await self.store.drop_abandoned(tid, now)  # a creation cut short before the tournament was stored
            return
        if t.status.over:
            if await self.store.is_active(tid):  # an end cut short before it left the active ones
                await self.store.unlist_ended(tid, t.finished_ms or now)
            return
        if t.status is TournamentStatus.SCHEDULED:
            # a creation cut short after the tournament was stored is completed (its bots told
            # only while they can still answer), and it is due at its start again
            await self.store.make_visible(t, tell=now < t.spec.starts_at_ms)
            if now < t.spec.starts_at_ms:
                return
            if len(t.entrants) < 2:
                why = await self._too_few_at_the_start(t)
                await self.store.move_status(tid, TournamentStatus.SCHEDULED, TournamentStatus.CANCELLED, "finished",
                                             reason=why)
                log.info("tournament %s %s", tid, why)
                return
            await self.store.move_status(tid, TournamentStatus.SCHEDULED, TournamentStatus.RUNNING, "started")
            t = await self.store.load(tid)
            assert t is not None
        if t.status is not TournamentStatus.RUNNING:
            return
        busy = await self._settle_tables(t)
        if t.spec.format is TournamentFormat.ARENA:
            await self._arena(t, busy, now)
        else:
            await self._rounds(t, busy)

    async def _too_few_at_the_start(self, t: Tournament) -> str:
        invitations = await self.store.invitations(t.id)
        unanswered = sum(1 for i in invitations if i.status is InvitationStatus.PENDING)
        declined = sum(1 for i in invitations if i.status is InvitationStatus.DECLINED)
        return (
            f"cancelled at the start: it needs at least 2 entrants and had {len(t.entrants)}"
            f" ({unanswered} invitations not accepted by the start, {declined} declined)"
        )

    async def _settle_tables(self, t: Tournament) -> set[int]:
        """Carry each table forward (next duplicate turn, results once all its matches end);
        the entrants still playing."""
        busy: set[int] = set()
        for table_id, table in sorted(t.tables.items()):
            if table.done:
                continue
            ids = t.match_ids(table_id)
            existing = [s.match for s in await self.match_store.load_many(ids) if s is not None]
            if not existing:
                await self._create_turn(t, table_id, table, 0)
                busy |= table.playing()
                continue
            if not existing[-1].ended:
                busy |= table.playing()
                continue
            if len(existing) < len(ids):
                await self._create_turn(t, table_id, table, len(existing))
                busy |= table.playing()
                continue
            for turn, match in enumerate(existing):
                await self._settle_in(t, table, turn, match)
            if t.spec.duplicate:
                await self.match_store.unseal(ids)
            table.done = True
            table.ended_ms = now_ms()
            await self.store.update_table(t.id, table_id, table)
        return busy

    async def _create_turn(self, t: Tournament, table_id: str, table: Table, turn: int) -> None:
        spec = t.spec
        config = MatchConfig.create(spec.ruleset, spec.players_per_match, spec.variants)
        settings = MatchSettings(
            config, spec.move_timeout_ms, spec.rated, False, spec.created_by, now_ms(),
            tournament=t.id, group=f"{t.id}-{table_id}" if spec.duplicate else None,
        )
        holders = [t.holder(e) for e in table.seated(turn)]
        match_id = t.match_ids(table_id)[turn]
        await self.matches.create_seated(match_id, config, table.seed, settings, holders, sealed=spec.duplicate)

    async def _new_tables(self, t: Tournament, tables: dict[str, tuple[list[int | None], int | None]]) -> None:
        """Store new tables (all of a round at once), then start each one's first match.
        What Redis holds wins: a table stored by an earlier run keeps its seed and seats."""
        created = now_ms()
        fresh = {
            table_id: Table(entrants, secrets.token_urlsafe(18), round_number, created)
            for table_id, (entrants, round_number) in tables.items()
        }
        stored = await self.store.add_tables(t.id, fresh)
        t.tables.update(stored)
        for table_id, table in stored.items():
            await self._create_turn(t, table_id, table, 0)

    async def _rounds(self, t: Tournament, busy: set[int]) -> None:
        current = max((table.round or 0 for table in t.tables.values()), default=0)
        if current and any(not table.done for table in t.tables.values() if table.round == current):
            return
        if current >= (t.spec.rounds or 0):
            await self._finish(t)
            return
        history = [
            [table.entrants for _, table in sorted(t.tables.items()) if table.round == r]
            for r in range(1, current + 1)
        ]
        n, k = len(t.entrants), t.spec.players_per_match
        if t.spec.format is TournamentFormat.SWISS and current:
            order = [row.entrant for row in t.standings()]
            seated = swiss_round(order, k, history)
        else:
            seated = round_robin_round(n, k, history, random.Random(f"{t.id}:{current + 1}"))
        await self._new_tables(t, {f"r{current + 1}t{i}": (table, current + 1) for i, table in enumerate(seated)})

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
        for table in t.tables.values():
            for e in table.playing():
                played[e] = played.get(e, 0) + 1
                last_played[e] = max(last_played.get(e, 0), table.ended_ms or table.created_ms)
        # fewest tables so far first, then the longest wait: everyone plays about as often
        free = sorted(
            (e for e in range(len(t.entrants)) if e not in busy),
            key=lambda e: (played.get(e, 0), last_played.get(e, 0), e),
        )
        count = len(t.tables)
        # a table as soon as enough entrants are free; house bots fill in when nobody else
        # is playing (so no entrant waits for a table that would never fill)
        while len(free) >= k or (free and not busy):
            seated: list[int | None] = list(free[:k]) + [None] * max(0, k - len(free))
            free = free[k:]
            await self._new_tables(t, {f"a{count}": (seated, None)})
            busy.update(e for e in seated if e is not None)
            count += 1

    async def _finish(self, t: Tournament) -> None:
        if await self.store.move_status(t.id, TournamentStatus.RUNNING, TournamentStatus.FINISHED, "finished"):
            log.info("tournament %s finished", t.id)
            if t.spec.rated:
                await self.ratings.request_fit(t.spec.ruleset)

    # ------------------------------------------------------------------ settling matches
    async def _settle_in(self, t: Tournament, table: Table, turn: int, match: LiveMatch) -> None:
        """A table's ended match: its rating change, and its result, each at most once."""
        await self.ratings.settle(match)
        result = _result(match, table.seated(turn))
        await self.store.add_result(t.id, match.id, result)
        t.results.setdefault(match.id, result)

    async def settle_cut_short(self, t: Tournament) -> None:
        """The unsettled tables of a cancelled tournament (no more turns or rounds come):
        each whose matches have all ended gets their rating changes, once, and a duplicate
        set cut short publishes its matches (no standings: the tournament has none)."""
        for table_id, table in t.tables.items():
            if table.done:
                continue
            ids = t.match_ids(table_id)
            existing = [s.match for s in await self.match_store.load_many(ids) if s is not None]
            if existing and all(m.ended for m in existing):
                for match in existing:
                    await self.ratings.settle(match)
                if t.spec.duplicate:
                    await self.match_store.unseal(ids)
