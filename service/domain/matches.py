"""The match domain: create, join, move, wait. Every operation of the API on matches is one
call here; the GraphQL and REST layers only translate. Moves are checked by the engine and
committed by one compare-and-set on the match's version (``MatchStore.commit``), so two
racing changes never both apply and a change that loses the race is decided again on the
new state.
"""

from __future__ import annotations

import asyncio
import functools
import json
import logging
import multiprocessing
import os
import secrets
import time
from collections import OrderedDict
from collections.abc import AsyncGenerator, AsyncIterator, Awaitable, Callable
from concurrent.futures import ProcessPoolExecutor
from contextlib import aclosing
from dataclasses import dataclass
from enum import Enum
from random import Random
from typing import Any

import orjson

from contract import MOVE_DEBUG_MAX_BYTES, utf8_prefix
from service import logs
from service.domain.retirement import refuse_retired
from service.errors import BadInput, Forbidden, LimitExceeded, MatchNotActive, NotFound, ServiceError, StaleVersion
from service.model.homes import new_match_id
from service.model.live_match import LiveMatch, MatchSettings, MatchStatus, SeatHolder, put_debug
from service.settings import Settings
from service.store.bots import BotStore
from service.store.clock import now_ms
from service.store.feed import RESYNC, EventFeed, Watch
from service.store.house_play import HousePlayQueue
from service.store.keys import bot_channel, match_channel
from service.store.matches import MatchEvent, MatchStore, Notice, Seated, Stored, WaitingFull, after_event
from wizard import HOUSE_BOTS, MatchConfig, MatchView, Move, WizardError, fallback_move, new_match
from wizard.record import record_of
from wizard.search import house_move

log = logging.getLogger("wizard_arena.matches")

#: How often a change that lost the compare-and-set is decided again before giving up.
COMMIT_ATTEMPTS = 50
#: Longest single wait for the feed (waits without an end loop over it).
WAIT_SLICE_S = 60.0


#: how much lower the SEARCH processes' scheduling priority is than the service's (nice)
SEARCH_NICENESS = 10


@dataclass(frozen=True, slots=True)
class Caller:
    """An authenticated bot."""

    bot_id: str
    name: str


@dataclass(slots=True)
class NewMatch:
    """createMatch's input, as plain values (the GraphQL and REST layers fill it)."""

    ruleset: str = "WIZARD"
    players: int = 4
    variants: tuple[str, ...] = ()
    move_timeout_ms: int | None = None
    rated: bool = False
    seed: str | None = None
    first_dealer: int | None = None
    deals: list[list[str]] | None = None


class WaitEnd(str, Enum):
    """Why a wait for a turn ended."""

    YOUR_TURN = "YOUR_TURN"
    TIMED_OUT = "TIMED_OUT"
    MATCH_OVER = "MATCH_OVER"
    #: an invitation to a tournament waits for the caller's answer (a wait that asked for them)
    INVITATION = "INVITATION"
    #: a challenge naming the caller waits for its answer (a wait that asked for them)
    CHALLENGE = "CHALLENGE"


@dataclass(frozen=True, slots=True)
class TurnWait:
    """A wait's end: why, and the match (the one where the caller must move; the match waited
    on when it ended or the time ran out; None after a wait on all of the caller's matches
    that timed out). ``committed_at``, for YOUR_TURN: when the commit that gave the caller
    this turn happened (Redis's clock, seconds since the epoch), if the wait was open then and
    heard it; None when the turn was there already as the wait began, or was read whole (what
    ``wizard_arena_turn_frame_seconds`` leaves out: a bot's own slowness, not the server's)."""

    reason: WaitEnd
    match: LiveMatch | None
    committed_at: float | None = None


class RecentSnapshots:
    """The last snapshot this process committed for each of its busiest matches: a bounded
    guess, never the truth (every commit is checked against Redis), so nothing is lost when
    the process goes and another process serves the match."""

    def __init__(self, size: int) -> None:
        self.size = size
        self._by_id: OrderedDict[str, LiveMatch] = OrderedDict()

    def get(self, match_id: str) -> LiveMatch | None:
        return self._by_id.get(match_id)

    def put(self, match: LiveMatch) -> None:
        if self.size <= 0:
            return
        if match.status is not MatchStatus.ACTIVE:
            self._by_id.pop(match.id, None)
            return
        self._by_id[match.id] = match
        self._by_id.move_to_end(match.id)
        while len(self._by_id) > self.size:
            self._by_id.popitem(last=False)

    def pop(self, match_id: str) -> None:
        self._by_id.pop(match_id, None)


#: ``Match.abortReason`` of a match its creator cancelled
CANCELLED = "cancelled by its creator"


class _AlreadySeated(Exception):
    def __init__(self, match: LiveMatch) -> None:
        super().__init__(match.id)
        self.match = match


def _awaits(match: LiveMatch, caller: Caller) -> bool:
    """Whether the caller has a move to make in ``match`` now."""
    return match.seat_of(caller.bot_id) in match.awaiting()


def _wakes_waiter_for_turns(caller: Caller, item: MatchEvent | Seated | Notice | tuple[str]) -> bool:
    """Whether a wait for the caller's turns has something to do for ``item`` now: anything
    but an event after which the caller has no move to make in a match still on (that one it
    applies when it wakes for something else)."""
    if not isinstance(item, MatchEvent) or item.match is None:
        return True
    return item.match.ended or _awaits(item.match, caller)


def full_record(match: LiveMatch, stored: bytes | None) -> dict[str, Any]:
    """A finished match's record as published (``GET /api/matches/{id}/record``, the archive):
    the engine's record (as stored with the match's last move, else made from its state) with
    who sat where and the match's own facts, among them ``moveNotes`` beside the engine's
    ``moves`` (whose entries the engine's format fixes), absent for a match from before."""
    record: dict[str, Any] = json.loads(stored) if stored else record_of(match.state).to_dict()
    record["matchId"] = match.id
    # the hash the match published at its start, from the live state, so that a replay
    # checking the record's seed against it checks something the record did not derive
    state = match.state
    record["seedHash"] = state.seed_hash
    record["seedChosen"] = match.settings.seed_chosen
    outcome = state.outcome
    record["winners"] = None if outcome is None else list(outcome.winners)
    record["seats"] = [None if h is None else {"id": h.id, "name": h.name, "house": h.house} for h in match.seats]
    record["timeouts"] = match.timeouts
    notes = move_notes(match)
    if notes is not None and len(notes) == len(record["moves"]):
        record["moveNotes"] = notes
    return record


def move_notes(match: LiveMatch) -> list[dict[str, Any]] | None:
    """Per move of the engine's record, in its order: ``byServer`` (the server made it for a
    seat that did not move by its deadline) and ``thinkMs`` (from when the seat had to act to
    its move). None for a match whose moves began before these were kept."""
    if match.think_ms is None:
        return None
    fallbacks = set(match.fallbacks)
    return [{"byServer": i in fallbacks, "thinkMs": think} for i, think in enumerate(match.think_ms)]


def add_own_debug(record: dict[str, Any], match: LiveMatch, bot_id: str) -> None:
    """Puts ``debug`` into the ``moveNotes`` of the moves ``bot_id``'s seats made that carried
    debug text: the record as that bot alone may read it. The published record (the archive's,
    the exports) never holds it."""
    notes = record.get("moveNotes")
    if notes is not None:
        own = {seat for seat, h in enumerate(match.seats) if h is not None and h.house is None and h.id == bot_id}
        put_debug(notes, match.debug, own)


def check_debug(debug: object) -> None:
    """Refuses a move's ``debug`` that is not text or is over :data:`MOVE_DEBUG_MAX_BYTES`."""
    if debug is None:
        return
    if not isinstance(debug, str):
        raise BadInput(f"debug must be text (what your program wrote while deciding), not {debug!r}")
    try:
        size = len(debug.encode())
    except UnicodeEncodeError:
        raise BadInput("debug is not valid Unicode text (it holds a lone surrogate): send it as UTF-8") from None
    if size > MOVE_DEBUG_MAX_BYTES:
        raise BadInput(
            f"debug is {size} bytes (UTF-8); a move keeps at most {MOVE_DEBUG_MAX_BYTES}: send its first "
            f"{MOVE_DEBUG_MAX_BYTES} bytes (the SDK's line bots cut it so)"
        )


class MatchService:
    def __init__(
        self,
        matches: MatchStore,
        bots: BotStore,
        settings: Settings,
        feed: EventFeed,
        on_change: Callable[[LiveMatch, dict[str, Any]], None] | None = None,
    ) -> None:
        self.matches = matches
        self.bots = bots
        self.settings = settings
        #: what the waiting of this process follows matches through
        self.feed = feed
        self._on_change = on_change
        self._house_tasks: set[asyncio.Task[None]] = set()
        #: the processes SEARCH house moves are made in, started with the first one
        self._search_pool: ProcessPoolExecutor | None = None
        self._recent = RecentSnapshots(settings.snapshot_cache_size)
        self._closed = False
        #: told the bot's id as it starts waiting for a turn (the ladders lift a pause: it answers again)
        self.on_waiting: Callable[[str], Awaitable[None]] | None = None
        #: where the workers hand a house-only match they start, for any worker's job to play
        #: (None: this process plays it, as the API does; see _hand_off_house_match)
        self.house_play: HousePlayQueue | None = None

    # ------------------------------------------------------------------ reading
    async def get(self, match_id: str) -> LiveMatch:
        return (await self._load(match_id)).match

    @staticmethod
    def _check_id(match_id: object) -> None:
        if not isinstance(match_id, str) or not 0 < len(match_id) <= 64:
            raise NotFound(f"no match with id {match_id!r}")

    async def _load(self, match_id: str) -> Stored:
        self._check_id(match_id)
        stored = await self.matches.load(match_id)
        if stored is None:
            raise NotFound(f"no match with id {match_id!r}: check the id (matchId from createMatch)")
        return stored

    async def record(self, match_id: str, caller: Caller | None = None) -> dict[str, Any]:
        """A finished match's full record (config, seed, every move, the result); for a bot
        seated in it, with the debug text of its own moves (:func:`add_own_debug`)."""
        match = await self.published(match_id)
        record = full_record(match, await self.matches.record(match_id))
        if caller is not None:
            add_own_debug(record, match, caller.bot_id)
        return record

    async def published(self, match_id: str) -> LiveMatch:
        """A match whose play is public: finished, and not of a duplicate set still being
        played (its record, its replay)."""
        stored = await self._load(match_id)
        if stored.match.status is not MatchStatus.FINISHED:
            raise MatchNotActive(
                f"match {match_id} is {stored.match.status.value}; its record and replay are published once it has finished"
            )
        if stored.match.sealed:
            raise MatchNotActive(
                f"match {match_id} belongs to a duplicate set still being played (same deals); its record and replay are "
                "published when the whole set has finished"
            )
        return stored.match

    # ------------------------------------------------------------------ creating and seating
    async def create(self, caller: Caller, spec: NewMatch) -> LiveMatch:
        s = self.settings
        await refuse_retired(self.bots, [caller.bot_id], "create matches")
        config, timeout = self.checked_terms(spec)
        seed = spec.seed if spec.seed is not None else secrets.token_urlsafe(24)
        # the salt (128 random bits) hides the seed in the published seedHash until the end:
        # a seed its creator chose ("1234") cannot be found by trying likely seeds against it
        state = new_match(config, seed, secrets.token_hex(16))
        created = now_ms()
        settings = MatchSettings(
            config, timeout, spec.rated, config.stacked, caller.bot_id, created,
            waiting_until_ms=created + s.waiting_match_ttl_seconds * 1000, seed_chosen=spec.seed is not None,
        )
        match = LiveMatch.new(new_match_id(), settings, state)
        try:
            await self.matches.create(match, waiting_limit=s.waiting_matches_per_bot)
        except WaitingFull as full:
            raise LimitExceeded(
                f"you already created {s.waiting_matches_per_bot} matches whose seats are not all taken: fill them "
                f"(addHouseBot, joinMatch), or wait until the first is aborted for want of players",
                retryAfterSeconds=max(0.001, round((full.until_ms - now_ms()) / 1000, 3)),
            ) from None
        logs.match_id.set(match.id)
        log.info("match %s created by %s", match.id, caller.name)
        return match

    def checked_terms(self, spec: NewMatch) -> tuple[MatchConfig, int]:
        """createMatch's terms checked (BAD_INPUT for any the server does not take): the
        match's config and its move timeout. ``createChallenge`` checks its terms here too."""
        s = self.settings
        timeout = s.default_move_timeout_ms if spec.move_timeout_ms is None else spec.move_timeout_ms
        if isinstance(timeout, bool) or not isinstance(timeout, int) or not s.min_move_timeout_ms <= timeout <= s.max_move_timeout_ms:
            raise BadInput(
                f"moveTimeoutMs must be from {s.min_move_timeout_ms} to {s.max_move_timeout_ms}, not {timeout!r}"
            )
        if spec.deals is not None and spec.rated:
            raise BadInput("a match with stacked deals is never rated: drop `deals` or set rated: false")
        if spec.seed is not None and spec.rated:
            raise BadInput("a rated match is dealt from a seed the server draws: drop `seed` or set rated: false")
        config = MatchConfig.create(spec.ruleset, spec.players, spec.variants, spec.first_dealer, spec.deals)
        if spec.deals is not None and not config.stacked:
            raise BadInput(
                "deals stacks no round: give at least one round's cards (the whole deck in dealing order, "
                "RULES.md); rounds left empty are shuffled from the seed. For no stacked deal, leave deals out"
            )
        return config, timeout

    async def create_seated(
        self,
        match_id: str,
        config: MatchConfig,
        seed: str,
        settings: MatchSettings,
        holders: list[SeatHolder],
        sealed: bool = False,
    ) -> LiveMatch | None:
        """A match created with every seat taken (a tournament's), so it starts at once; None
        when a match with this id exists already (creating it again changes nothing)."""
        match = LiveMatch.new(match_id, settings, new_match(config, seed))
        now = now_ms()
        events = [match.join(seat, holder, now) for seat, holder in enumerate(holders)]
        match.sealed = sealed
        if not await self.matches.create(match, events, sealed):  # (its bots' start calls queued with it)
            return None
        self._start_house_turns(match)
        return match

    async def refuse_if_seated_too_often(self, bot_id: str) -> None:
        """LIMIT_EXCEEDED for a bot that sits in as many unfinished matches as it may
        (``open_matches_per_bot``): joining a match, or accepting a challenge. At the limit,
        its open matches are checked first: an entry a step that was to drop it did not
        (:meth:`MatchStore.commit`) counts no more."""
        limit = self.settings.open_matches_per_bot
        if await self.bots.count_open_matches(bot_id) >= limit and len(await self.open_matches(bot_id)) >= limit:
            raise LimitExceeded(
                f"you already sit in {self.settings.open_matches_per_bot} unfinished matches: finish some first"
            )

    async def open_matches(self, bot_id: str) -> list[str]:
        """The bot's open matches, each checked: those it is noted in that ended, or that it
        holds no seat in and can no longer join (its entry left by a step that did not finish,
        see :meth:`MatchStore.commit`), or that are nowhere, are dropped. A WAITING match it
        holds no seat in is kept: its join may be under way."""
        noted = await self.bots.open_matches(bot_id)
        stale = [
            match_id for match_id, stored in zip(noted, await self.matches.load_many(noted), strict=True)
            if stored is None or stored.match.ended or (
                stored.match.seat_of(bot_id) is None and stored.match.status is not MatchStatus.WAITING
            )
        ]
        if not stale:
            return noted
        await self.bots.forget_open_matches(bot_id, stale)
        dropped = set(stale)
        return [match_id for match_id in noted if match_id not in dropped]

    async def join(self, caller: Caller, match_id: str, seat: int | None) -> LiveMatch:
        """Seat the caller. Idempotent: a bot already seated gets the match as it is (a join
        sent again after a lost answer finds its seat), unless it asks for another seat."""
        seated = await self._seated(caller, match_id, seat)
        if seated is not None:
            return seated
        await refuse_retired(self.bots, [caller.bot_id], "join matches")
        await self.refuse_if_seated_too_often(caller.bot_id)
        holder = SeatHolder(caller.bot_id, caller.name)

        def decide(match: LiveMatch) -> int:
            if match.seat_of(caller.bot_id) is not None:
                raise _AlreadySeated(match)
            return self._free_seat(match, seat)

        try:
            return await self._seat(match_id, holder, decide)
        except _AlreadySeated as already:  # seated meanwhile, by a join of its own sent twice at once
            return self._already_seated(already.match, caller, seat)

    async def _seated(self, caller: Caller, match_id: str, seat: int | None) -> LiveMatch | None:
        """The match, when the caller sits in it already (None: it does not)."""
        match = (await self._load(match_id)).match
        if match.seat_of(caller.bot_id) is None:
            return None
        return self._already_seated(match, caller, seat)

    @staticmethod
    def _already_seated(match: LiveMatch, caller: Caller, seat: int | None) -> LiveMatch:
        mine = match.seat_of(caller.bot_id)
        if seat is not None and seat != mine:
            raise BadInput(
                f"you already sit in seat {mine} of match {match.id}, not seat {seat}: to change seats, leaveMatch "
                "first, then joinMatch with the seat you want (while the match is WAITING)"
            )
        return match

    async def leave(self, caller: Caller, match_id: str) -> LiveMatch:
        """Free the caller's seat of a WAITING match. Idempotent: a bot without a seat there
        gets the match as it is."""
        for _ in range(COMMIT_ATTEMPTS):
            match = (await self._load(match_id)).match
            seat = match.seat_of(caller.bot_id)
            if seat is None:
                return match
            if match.status is not MatchStatus.WAITING:
                raise MatchNotActive(
                    f"match {match.id} is {match.status.value}: a seat can only be left while the match is WAITING"
                )
            event = match.leave(seat)
            if await self.matches.commit(match, event):
                await self._committed(match, event)
                return match
        raise StaleVersion(f"match {match_id} is changing too fast; try again", currentVersion=match.version)

    async def cancel(self, caller: Caller, match_id: str) -> LiveMatch:
        """Abort a WAITING match: its creator only. Idempotent: cancelling a match its creator
        cancelled already answers it as it is."""
        for _ in range(COMMIT_ATTEMPTS):
            match = (await self._load(match_id)).match
            if caller.bot_id != match.settings.created_by:
                raise Forbidden(f"only the creator of match {match.id} may cancel it")
            if match.status is MatchStatus.ABORTED and match.abort_reason == CANCELLED:
                return match
            if match.status is not MatchStatus.WAITING:
                raise MatchNotActive(
                    f"match {match.id} is {match.status.value}: only a WAITING match can be cancelled (a started match "
                    "is played to its end)"
                )
            event = match.abort(CANCELLED)
            if await self.matches.commit(match, event):
                await self._committed(match, event)
                return match
        raise StaleVersion(f"match {match_id} is changing too fast; try again", currentVersion=match.version)

    async def add_house_bot(self, caller: Caller, match_id: str, kind: str) -> LiveMatch:
        if kind not in HOUSE_BOTS:
            raise BadInput(f"kind must be one of {', '.join(HOUSE_BOTS)}, not {kind!r}")

        def decide(match: LiveMatch) -> int:
            if caller.bot_id != match.settings.created_by and match.seat_of(caller.bot_id) is None:
                raise Forbidden("only the match's creator or a bot seated in it may add house bots")
            return self._free_seat(match, None)

        def holder(match: LiveMatch, seat: int) -> SeatHolder:
            return SeatHolder(f"house-{kind.lower()}", f"House {kind.title()} #{seat}", kind)

        return await self._seat(match_id, holder, decide)

    @staticmethod
    def _free_seat(match: LiveMatch, seat: int | None) -> int:
        if match.status is not MatchStatus.WAITING:
            raise MatchNotActive(f"match {match.id} is {match.status.value}: seats can only be taken while it is WAITING")
        free = match.free_seats()
        if seat is None:
            return free[0]
        if isinstance(seat, bool) or not isinstance(seat, int) or not 0 <= seat < match.settings.config.players:
            raise BadInput(f"seat must be from 0 to {match.settings.config.players - 1}, not {seat!r}")
        if seat not in free:
            raise BadInput(f"seat {seat} is taken; free seats: {free}")
        return seat

    async def _seat(
        self,
        match_id: str,
        holder: SeatHolder | Callable[[LiveMatch, int], SeatHolder],
        decide: Callable[[LiveMatch], int],
    ) -> LiveMatch:
        for _ in range(COMMIT_ATTEMPTS):
            match = (await self._load(match_id)).match
            seat = decide(match)
            who = holder(match, seat) if callable(holder) else holder
            event = match.join(seat, who, now_ms())
            if await self.matches.commit(match, event):
                await self._committed(match, event)
                return match
        raise StaleVersion(f"match {match_id} is changing too fast; try again", currentVersion=match.version)

    # ------------------------------------------------------------------ moving
    async def submit_move(
        self, caller: Caller, match_id: str, move: Move | dict[str, Any], expected_version: int | None = None,
        debug: str | None = None,
    ) -> LiveMatch:
        """Apply the caller's move; the answer is the match just after it. ``debug`` (what the
        bot's program wrote while deciding, at most :data:`MOVE_DEBUG_MAX_BYTES`) is kept with
        the move for the caller's own eyes (:meth:`record`), as much of it as the seat's
        budget for the match has room for.

        The first attempt may start from the snapshot this process committed last for the
        match (a guess that saves a read): the compare-and-set refuses it if anything changed
        since, and any refusal it leads to is decided again on what Redis holds."""
        logs.match_id.set(match_id)  # this request's log lines name the match
        if expected_version is not None and (isinstance(expected_version, bool) or not isinstance(expected_version, int)):
            raise BadInput(f"expectedVersion must be a whole number, not {expected_version!r}")
        check_debug(debug)
        if not isinstance(move, Move):
            move = Move.from_dict(move)
        guess = self._recent.get(match_id)
        for _ in range(COMMIT_ATTEMPTS):
            if guess is not None:
                match, guessed = guess.copy(), True
            else:
                match, guessed = (await self._load(match_id)).match, False
            guess = None
            try:
                event = self._play(caller, match, move, expected_version, debug)
            except (ServiceError, WizardError):
                if guessed:
                    continue
                raise
            # (the match is not changed after its commit: the feed may take it for its snapshot)
            if await self.matches.commit(match, event, self._record_if_finished(match), self.feed.committing):
                self._recent.put(match)
                await self._committed(match, event)
                return match
            # lost the race: decided again on what is stored, where expectedVersion is checked
            # against what the seat can see (another seat's hidden bid does not make it stale)
            self._recent.pop(match_id)
        raise StaleVersion(f"match {match_id} is changing too fast; try again", currentVersion=match.version)

    def _play(
        self, caller: Caller, match: LiveMatch, move: Move, expected_version: int | None, debug: str | None = None
    ) -> dict[str, Any]:
        """Check the caller may make ``move`` now and make it on ``match``; the event.

        ``expected_version`` is stale only when what the caller's seat sees changed after it
        (:meth:`LiveMatch.stale_for`): under simultaneous bids the other seats' hidden bids
        move the version, not the seat's view."""
        seat = match.seat_of(caller.bot_id)
        if seat is None:
            raise Forbidden(f"you have no seat in match {match.id}: join it first")
        if expected_version is not None and match.stale_for(seat, expected_version):
            raise StaleVersion(
                f"match {match.id} is at version {match.version}, not {expected_version}, and what your seat sees "
                f"changed since: read it again and decide",
                currentVersion=match.version,
            )
        if match.status is not MatchStatus.ACTIVE:
            raise MatchNotActive(self._not_active(match))
        action = match.state.action_of(seat, move)
        if debug:
            room = self.settings.match_debug_bytes_per_seat - match.debug_bytes(seat)
            debug = utf8_prefix(debug, max(0, room))
        return match.play(seat, action, "bot", now_ms(), debug)

    @staticmethod
    def _not_active(match: LiveMatch) -> str:
        if match.status is MatchStatus.WAITING:
            return f"match {match.id} has not started: it starts when its last seat is taken"
        return f"match {match.id} is {match.status.value}: no more moves"

    @staticmethod
    def _record_if_finished(match: LiveMatch) -> bytes:
        if match.status is not MatchStatus.FINISHED:
            return b""
        return orjson.dumps(record_of(match.state).to_dict(), option=orjson.OPT_NON_STR_KEYS)

    async def _committed(self, match: LiveMatch, event: dict[str, Any]) -> None:
        """What follows a commit in this process (``match`` is not changed after it): the
        feed's snapshot, metrics, and the house bots' turns."""
        self.feed.committed(match)
        if self._on_change is not None:
            self._on_change(match, event)
        self._start_house_turns(match)

    def _start_house_turns(self, match: LiveMatch) -> None:
        """Let the house bots that must act now move, in the background (promptly: the deadline
        sweeper only catches up if this process goes away)."""
        if not match.ended and self._house_to_act(match) and not self._closed:
            play = self.play_house_turns if self.house_play is None or match.bot_ids() else self._hand_off_house_match
            task = asyncio.create_task(play(match.id))
            self._house_tasks.add(task)
            task.add_done_callback(self._house_tasks.discard)

    @staticmethod
    def _house_to_act(match: LiveMatch) -> list[int]:
        return [s for s in match.awaiting() if match.seats[s] is not None and match.seats[s].house]  # type: ignore[union-attr]

    async def _hand_off_house_match(self, match_id: str) -> None:
        """A house-only match started here (a worker's): handed over, so that whichever worker
        has room makes its moves (``worker.clock.HousePlayer``), not all in this process.
        Should the hand-over fail, its seats' deadline has the sweeper play it."""
        assert self.house_play is not None
        logs.match_id.set(match_id)
        try:
            await self.house_play.request(match_id)
        except Exception:  # a background task: log, the deadline sweeper will catch up
            log.exception("handing over the house bots of match %s", match_id)

    async def play_house_turns(self, match_id: str) -> None:
        """Make every house bot's move that is due, until a registered bot must act."""
        logs.match_id.set(match_id)
        try:
            await self._act_for_seats(match_id, overdue_only=False)
        except Exception:  # a background task: log, the deadline sweeper will catch up
            log.exception("house bots of match %s", match_id)

    async def apply_overdue(self, match_id: str) -> int:
        """The deadline sweeper's job for one match: every seat past its deadline gets the
        fallback move (house seats their own policy). Returns the moves made."""
        logs.match_id.set(match_id)  # the sweeper runs each match as a task of its own
        return await self._act_for_seats(match_id, overdue_only=True)

    async def _act_for_seats(self, match_id: str, overdue_only: bool) -> int:
        """Make the house bots' moves (and, with ``overdue_only``, the fallback moves of seats
        past their deadline) until a registered bot must act in time. After a commit the
        match in hand is the stored one, so it is read again only after a lost race."""
        made = lost = 0
        match: LiveMatch | None = None
        while lost < COMMIT_ATTEMPTS:
            if match is None:
                stored = await self.matches.load(match_id)
                if stored is None:
                    return made
                match = stored.match
            now = now_ms()
            if overdue_only and match.status is MatchStatus.WAITING:
                until = match.settings.waiting_until_ms
                if until is None or until > now:
                    return made
                minutes = round((until - match.settings.created_at_ms) / 60_000)
                event = match.abort(f"its seats were not all taken within {minutes} minutes")
                if await self.matches.commit(match, event):
                    if self._on_change is not None:
                        self._on_change(match, event)
                    return made
                lost += 1
                match = None
                continue
            overdue = match.deadline_ms is not None and match.deadline_ms <= now
            house = self._house_to_act(match)
            if house:
                seat, by = house[0], "house"
            elif overdue_only and overdue and match.awaiting():
                seat, by = match.awaiting()[0], "timeout"
            else:
                return made
            view = match.state.view(seat)
            seed = f"{match_id}:{match.version}:{seat}"
            kind = match.seats[seat].house if by == "house" else None  # type: ignore[union-attr]
            if kind == "SEARCH":
                move = await self._search_move(view, seed)
                now = now_ms()
            else:
                rng = Random(seed)
                move = HOUSE_BOTS[kind]().act(view, rng) if kind else fallback_move(view, rng)
            event = match.play(seat, match.state.action_of(seat, move), by, now)
            if await self.matches.commit(match, event, self._record_if_finished(match)):
                made += 1
                if self._on_change is not None:
                    self._on_change(match, event)
            else:
                lost += 1
                match = None  # changed by someone else meanwhile: decide again on what is stored
        return made

    async def _search_move(self, view: MatchView, seed: str) -> Move:
        """A SEARCH house move, made in this service's search processes: a search thinks for
        ``search_seconds`` of pure Python, which on the event loop (or in a thread, holding
        the GIL) would hold up every other match's moves, waits and deadlines."""
        if self._search_pool is None:
            # spawned, not forked (nothing of this process's sockets or loop is inherited), and
            # niced: the deadlines and requests of this host come before a house bot's thinking
            self._search_pool = ProcessPoolExecutor(
                self.settings.search_processes, mp_context=multiprocessing.get_context("spawn"),
                initializer=os.nice, initargs=(SEARCH_NICENESS,),
            )
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._search_pool, house_move, view, seed, self.settings.search_seconds)

    # ------------------------------------------------------------------ waiting
    async def next_turn(self, caller: Caller, match_id: str | None, timeout_ms: int | None) -> TurnWait:
        """The first match (``match_id``, or any of the caller's) where the caller must move,
        as soon as there is one, saying why the wait ended: the caller's turn, the time ran
        out (after ``timeout_ms``), or the match waited on is over (FINISHED or ABORTED)."""
        end = time.monotonic() + self.wait_seconds(timeout_ms)
        async with aclosing(self._turns(caller, match_id, end)) as turns:  # its wait ends here, not when collected
            async for wait in turns:
                if isinstance(wait, TurnWait):  # (no notices are followed here)
                    return wait
        raise AssertionError("a wait with an end always says how it ended")  # pragma: no cover

    def wait_seconds(self, timeout_ms: int | None) -> float:
        """How long a wait for a turn lasts at most: ``timeoutMs`` (checked), bounded by the
        server's ``await_turn_max_ms`` (which is also the default)."""
        limit = self.settings.await_turn_max_ms
        if timeout_ms is None:
            timeout_ms = limit
        if isinstance(timeout_ms, bool) or not isinstance(timeout_ms, int) or timeout_ms < 0:
            raise BadInput(f"timeoutMs must be a whole number of milliseconds >= 0, not {timeout_ms!r}")
        return min(timeout_ms, limit) / 1000

    async def my_turns(self, caller: Caller) -> AsyncIterator[TurnWait]:
        """Each match where the caller now has to move, once per version (YOUR_TURN waits);
        runs until closed."""
        async for wait in self._turns(caller, None, None):
            if isinstance(wait, TurnWait) and wait.match is not None:  # (no notices are followed here)
                yield wait

    async def turns_and_notices(
        self, caller: Caller, channel: bytes, end: float | None = None
    ) -> AsyncIterator[LiveMatch | Notice]:
        """:meth:`my_turns`, and on the same wait, each message on the caller's ``channel``
        as a :class:`Notice`: first a Notice(None) once the channel is followed (read what it
        names now), again after the feed lost messages; runs until closed, or until ``end``
        (``time.monotonic()``; what is there already is yielded first, however near it is)."""
        async for item in self._turns(caller, None, end, channel):
            if isinstance(item, Notice):
                yield item
            elif item.match is not None:
                yield item.match
            elif item.reason is WaitEnd.TIMED_OUT:
                return

    async def _turns(
        self, caller: Caller, match_id: str | None, end: float | None, notices: bytes | None = None
    ) -> AsyncGenerator[TurnWait | Notice, None]:
        """Matches where the caller must move, each version at most once, until ``end``; then
        (TIMED_OUT), or once the match ``match_id`` is over (MATCH_OVER), how the wait ended
        (and with ``notices``, the messages on that channel of the caller's).

        The matches are followed through the process's feed (:mod:`service.store.feed`), which
        keeps each followed match current by applying its events once for all the process's
        waiters: a waiter reads no match from Redis and applies no event itself. A match is
        read whole only when it is new to the process, or after the feed lost messages."""
        if self.on_waiting is not None:
            await self.on_waiting(caller.bot_id)
        with self.feed.watch(caller.bot_id) as watch:
            watch.wakes_for = functools.partial(_wakes_waiter_for_turns, caller)
            followed: dict[str, LiveMatch] = {}
            #: by match followed: when its version in ``followed`` was committed, if its event
            #: reached this wait (TurnWait.committed_at)
            heard_at: dict[str, float | None] = {}
            to_read: set[str] = set()
            changed: list[str] = []
            if notices is not None:
                await watch.follow(notices)  # then read: nothing told later is missed
                yield Notice(caller.bot_id, None)
            if match_id is None:
                await watch.follow(bot_channel(caller.bot_id))  # then read: no seat taken later is missed
                to_read.update(await self.bots.open_matches(caller.bot_id))
            else:
                match = await self._follow_and_read(watch, match_id)
                if match.seat_of(caller.bot_id) is None:
                    watch.unfollow(match_channel(match_id), linger=False)
                    raise Forbidden(f"you have no seat in match {match_id}")
                followed[match_id] = match
                changed.append(match_id)
            yielded: dict[str, int] = {}
            while True:
                if to_read:
                    ids = sorted(to_read)
                    to_read.clear()
                    await watch.follow(*(match_channel(i) for i in ids))
                    for read_id, match in (await self.feed.current(ids)).items():
                        if match.seat_of(caller.bot_id) is not None:
                            followed[read_id] = match
                            heard_at[read_id] = None
                            changed.append(read_id)
                for changed_id in dict.fromkeys(changed):
                    match = followed[changed_id]
                    if _awaits(match, caller) and yielded.get(changed_id) != match.version:
                        yielded[changed_id] = match.version
                        yield TurnWait(WaitEnd.YOUR_TURN, match, heard_at.get(changed_id))
                    if match.ended:
                        if match_id is not None:
                            yield TurnWait(WaitEnd.MATCH_OVER, match)
                            return
                        del followed[changed_id]
                        heard_at.pop(changed_id, None)
                        watch.unfollow(match_channel(changed_id))
                changed.clear()
                remaining = WAIT_SLICE_S if end is None else end - time.monotonic()
                if remaining <= 0 or (end is not None and self.feed.draining):
                    # a long poll's timeout, or this process stopping (null, ask again)
                    yield TurnWait(WaitEnd.TIMED_OUT, None if match_id is None else followed.get(match_id))
                    return
                for item in await watch.next(min(remaining, WAIT_SLICE_S)):
                    if item is RESYNC:  # the feed lost messages: read everything again
                        await watch.ready()
                        to_read.update(followed)
                        if match_id is None:
                            to_read.update(await self.bots.open_matches(caller.bot_id))
                        if notices is not None:
                            yield Notice(caller.bot_id, None)
                    elif isinstance(item, Notice):
                        yield item
                    elif isinstance(item, Seated):
                        to_read.add(item.match_id)
                    elif isinstance(item, MatchEvent) and item.match_id in followed:
                        if item.match is None:  # the feed could not apply it (it is reading the match)
                            to_read.add(item.match_id)
                        elif item.match.version > followed[item.match_id].version:
                            followed[item.match_id] = item.match
                            heard_at[item.match_id] = item.committed_at if item.match.version == item.version else None
                            changed.append(item.match_id)

    async def _follow_and_read(self, watch: Watch, match_id: str) -> LiveMatch:
        """Follow a match, then read it (in this order: no later change is missed). An unknown
        match is not followed on."""
        self._check_id(match_id)
        await watch.follow(match_channel(match_id))
        match = (await self.feed.current([match_id])).get(match_id)
        if match is None:
            watch.unfollow(match_channel(match_id), linger=False)
            raise NotFound(f"no match with id {match_id!r}: check the id (matchId from createMatch)")
        return match

    async def updates(self, match_id: str, owner: str) -> AsyncIterator[LiveMatch]:
        """The match now, then after every change, until it ends; no version is skipped: each
        comes from the feed as it applied the event, or where it could not (after it lost its
        connection), from the events read from the match's stream."""
        with self.feed.watch(owner) as watch:
            match = await self._follow_and_read(watch, match_id)
            yield match
            while not match.ended:
                for item in await watch.next(WAIT_SLICE_S):
                    if isinstance(item, MatchEvent) and item.version > match.version:
                        if item.version == match.version + 1 and item.match is not None:
                            missed = [item]
                        else:
                            missed = await self.matches.events_after(match_id, match.event_id)
                    elif item is RESYNC:
                        await watch.ready()
                        missed = await self.matches.events_after(match_id, match.event_id)
                    else:
                        continue
                    for event in missed:
                        if event.version <= match.version:
                            continue
                        after = event.match if event.match is not None else after_event(match, event)
                        match = after if after is not None else (await self._load(match_id)).match
                        yield match
                        if match.ended:
                            return

    async def drain(self) -> None:
        """Wait until the house bots started by this process have made their moves."""
        while self._house_tasks:
            await asyncio.gather(*list(self._house_tasks), return_exceptions=True)

    async def close(self) -> None:
        self._closed = True
        for task in list(self._house_tasks):
            task.cancel()
        await asyncio.gather(*self._house_tasks, return_exceptions=True)
        if self._search_pool is not None:
            self._search_pool.shutdown(wait=False, cancel_futures=True)
            self._search_pool = None
