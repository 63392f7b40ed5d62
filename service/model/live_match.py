"""A live match as the service keeps it: the engine's state plus who sits where, the seats'
timeout marks, the status and the deadline. Pure: no I/O.

Every change is an *event* (a small JSON-able dict). The writer builds an event, applies it
with :meth:`LiveMatch.apply_event` and commits the new snapshot and the event together; a
follower (a subscription, another API process) applies the same events in the same order
with the same function and so holds the same match at every version. The event stream is
therefore also the match's replay log.

Events:
- ``{"t": "join", "seat": s, "bot": {"id", "name", "house"}, "dl": ms|None}``
- ``{"t": "move", "seat": s, "a": action, "by": "bot"|"house"|"timeout", "dl": ms|None,
  "th": ms, "dbg": text}`` (``th``: the mover's think time, from when it had to act; absent in
  events written before it was kept; ``dbg``: what the mover's program wrote to its debug
  output for the move, kept for its own bot's eyes only (``LiveMatch.debug``); absent: none)
- ``{"t": "leave", "seat": s, "bot": id}`` (a bot gives its seat of a WAITING match back)
- ``{"t": "abort", "why": text}``

``dl`` is the deadline after the event (milliseconds since the epoch), fixed by the writer,
so every follower shows the same one.

Besides the engine's state a live match keeps, per seat, ``seen``: the version after the
latest event that changed what the seat sees (the engine's
:meth:`~wizard.MatchState.saw_last_move`), so that ``expectedVersion`` refuses a move only
when its seat's view has changed since the version it read (:meth:`LiveMatch.stale_for`).
"""

from __future__ import annotations

import json
from collections.abc import Container, Iterable, Sequence
from dataclasses import dataclass, field
from enum import Enum
from typing import Any

import orjson

from wizard import HOUSE_BOTS, MatchConfig, MatchState, MatchView, Phase, Ruleset, Variant, new_match
from wizard.record import state_from_bytes


class HouseBotKind(str, Enum):
    """The built-in bots the server plays itself: the engine's house bots, by name."""

    RANDOM = "RANDOM"
    HEURISTIC = "HEURISTIC"
    SEARCH = "SEARCH"


if {k.value for k in HouseBotKind} != set(HOUSE_BOTS):  # one list of kinds: the engine's
    raise RuntimeError(f"HouseBotKind {[k.value for k in HouseBotKind]} is not the engine's HOUSE_BOTS {list(HOUSE_BOTS)}")


class MatchStatus(str, Enum):
    WAITING = "WAITING"
    ACTIVE = "ACTIVE"
    FINISHED = "FINISHED"
    ABORTED = "ABORTED"


@dataclass(frozen=True, slots=True)
class SeatHolder:
    """Who sits in a seat: a registered bot, or a house bot (``house`` is its kind)."""

    id: str
    name: str
    house: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {"id": self.id, "name": self.name, "house": self.house}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> SeatHolder:
        return cls(data["id"], data["name"], data.get("house"))


@dataclass(slots=True)
class MatchSettings:
    """What is fixed when a match is created.

    A match whose deals its creator stacked or whose seed its creator chose is never rated:
    such settings cannot be made (``ValueError``), so no path can rate one."""

    config: MatchConfig
    move_timeout_ms: int
    rated: bool
    #: whether the creator stacked a round's deal
    stacked: bool
    created_by: str
    created_at_ms: int
    #: the tournament the match belongs to, and its duplicate set (matches dealt alike)
    tournament: str | None = None
    group: str | None = None
    #: when a match created with free seats is aborted if they are not all taken by then
    waiting_until_ms: int | None = None
    #: whether the creator chose the seed (else the server drew it)
    seed_chosen: bool = False
    #: the ladder table the match belongs to (``<ruleset>:<players>:<table>``), None: none
    ladder_table: str | None = None

    def __post_init__(self) -> None:
        if self.rated and (self.stacked or self.seed_chosen):
            raise ValueError("a match with stacked deals or a chosen seed is never rated")

    def to_json(self) -> str:
        c = self.config
        return json.dumps(
            {
                "ruleset": c.ruleset.value,
                "players": c.players,
                "variants": sorted(v.value for v in c.variants),
                "firstDealer": c.first_dealer,
                "moveTimeoutMs": self.move_timeout_ms,
                "rated": self.rated,
                "stacked": self.stacked,
                "createdBy": self.created_by,
                "createdAt": self.created_at_ms,
                "tournament": self.tournament,
                "group": self.group,
                "waitingUntil": self.waiting_until_ms,
                "seedChosen": self.seed_chosen,
                **({"ladderTable": self.ladder_table} if self.ladder_table else {}),
            },
            separators=(",", ":"),
        )

    @classmethod
    def from_json(cls, text: str | bytes, config: MatchConfig) -> MatchSettings:
        data = orjson.loads(text)
        seed_chosen = data.get("seedChosen")
        if seed_chosen is None:
            # stored before the flag: the server drew the seed of a rated or a tournament's
            # match; of any other it cannot tell, so it says chosen (a warning, not a claim)
            seed_chosen = not (data["rated"] or data.get("tournament"))
        return cls(
            # (stored before deals of empty rounds were refused, such a match said stacked)
            config, data["moveTimeoutMs"], data["rated"], data["stacked"] and config.stacked, data["createdBy"],
            data["createdAt"], data.get("tournament"), data.get("group"), data.get("waitingUntil"), seed_chosen,
            data.get("ladderTable"),
        )


@dataclass(slots=True, weakref_slot=True)  # weakref: the API keeps answers with the match
class LiveMatch:
    id: str
    settings: MatchSettings
    state: MatchState
    version: int = 1
    status: MatchStatus = MatchStatus.WAITING
    seats: list[SeatHolder | None] = field(default_factory=list)
    timeouts: list[int] = field(default_factory=list)
    deadline_ms: int | None = None
    #: a finished match of a duplicate set still being played shows nothing of its play
    sealed: bool = False
    #: the id of the match's latest event in Redis, as last read or written (not stored)
    event_id: bytes | None = None
    #: by seat, the version after the latest event that changed what the seat sees
    seen: list[int] = field(default_factory=list)
    #: each move's think time in ms (the engine's moves, in order), None for a match whose
    #: moves began before think times were kept
    think_ms: list[int] | None = field(default_factory=list)
    #: the indexes (among the engine's moves) of the moves the server made for a seat that
    #: did not move in time
    fallbacks: list[int] = field(default_factory=list)
    #: why the match was aborted (None: it was not)
    abort_reason: str | None = None
    #: debug text sent with moves, as ``(move index, seat, text)`` (only the moves that had
    #: some): shown to the seat's own bot in the record, to nobody else
    debug: list[tuple[int, int, str]] = field(default_factory=list)

    @classmethod
    def new(cls, match_id: str, settings: MatchSettings, state: MatchState) -> LiveMatch:
        n = settings.config.players
        return cls(match_id, settings, state, seats=[None] * n, timeouts=[0] * n, seen=[1] * n)

    def copy(self) -> LiveMatch:
        return LiveMatch(
            self.id, self.settings, self.state.copy(), self.version, self.status,
            list(self.seats), list(self.timeouts), self.deadline_ms, self.sealed, self.event_id,
            list(self.seen), None if self.think_ms is None else list(self.think_ms), list(self.fallbacks),
            self.abort_reason, list(self.debug),
        )

    # ------------------------------------------------------------------ reading
    @property
    def ruleset(self) -> Ruleset:
        return self.settings.config.ruleset

    @property
    def variants(self) -> tuple[Variant, ...]:
        return tuple(sorted(self.settings.config.variants, key=lambda v: v.value))

    def seat_of(self, bot_id: str | None) -> int | None:
        if bot_id is None:
            return None
        for seat, holder in enumerate(self.seats):
            if holder is not None and holder.house is None and holder.id == bot_id:
                return seat
        return None

    def free_seats(self) -> list[int]:
        return [s for s, holder in enumerate(self.seats) if holder is None]

    @property
    def ended(self) -> bool:
        return self.status in (MatchStatus.FINISHED, MatchStatus.ABORTED)

    def awaiting(self) -> tuple[int, ...]:
        """Seats that have a move to make now (none unless the match is under way)."""
        return self.state.awaiting() if self.status is MatchStatus.ACTIVE else ()

    def stale_for(self, seat: int, version: int) -> bool:
        """Whether a move by ``seat`` decided on the match at ``version`` is stale: something
        the seat sees changed after that version (a version the match has not reached is
        stale too). Another seat's hidden bid, or the seats still to bid, change nothing."""
        return not self.seen[seat] <= version <= self.version

    @property
    def due_ms(self) -> int | None:
        """When the deadline sweeper must next look at the match: the deadline of the seats
        to act, or while seats are free, when it is aborted unless they are taken."""
        if self.status is MatchStatus.WAITING:
            return self.settings.waiting_until_ms
        return self.deadline_ms

    def debug_bytes(self, seat: int) -> int:
        """How many bytes (UTF-8) of debug text ``seat`` has had kept in this match."""
        return sum(len(text.encode()) for _, s, text in self.debug if s == seat)

    def bot_ids(self) -> set[str]:
        return {h.id for h in self.seats if h is not None and h.house is None}

    def view(self, seat: int | None) -> MatchView:
        """The engine's view for ``seat`` (None: a spectator). Before the start and after an
        abort nobody sees a hand: every caller gets the spectator's view. A sealed match (its
        duplicate set, dealt alike, is still being played) shows its start to everyone, as a
        spectator saw it, so that nothing of its deals or play helps the set's other matches."""
        if self.sealed and self.status is MatchStatus.FINISHED:
            return new_match(self.settings.config, self.state.seed, self.state.salt).view(None)
        if self.status in (MatchStatus.WAITING, MatchStatus.ABORTED):
            return self.state.view(None)
        return self.state.view(seat)

    def calls_due(self, event: dict[str, Any] | None) -> list[tuple[int, str, str]]:
        """What the registered seats' bots are to be told after ``event`` (None: the match was
        created with every seat taken), as ``(seat, bot id, kind)``: ``start`` when the match
        started with it, ``end`` when it ended with it, ``turn`` for each seat that must act
        on something it has not seen (its view changed with this version: under simultaneous
        bids, another seat's hidden bid makes no new turn). The webhook dispatcher makes these
        calls, each once, for the bots that have a webhook."""
        registered = [(seat, h.id) for seat, h in enumerate(self.seats) if h is not None and h.house is None]
        if not registered:
            return []
        if self.ended:
            return [(seat, bot, "end") for seat, bot in registered]
        calls = []
        if self.status is MatchStatus.ACTIVE and (event is None or event["t"] == "join"):
            calls = [(seat, bot, "start") for seat, bot in registered]
        awaiting = self.awaiting()
        calls += [(seat, bot, "turn") for seat, bot in registered if seat in awaiting and self.seen[seat] == self.version]
        return calls

    # ------------------------------------------------------------------ events
    def join(self, seat: int, holder: SeatHolder, now_ms: int) -> dict[str, Any]:
        """Seat ``holder``; the match starts (and its first deadline runs) with the last seat."""
        event: dict[str, Any] = {"t": "join", "seat": seat, "bot": holder.to_dict(), "dl": None}
        self.apply_event(event)
        self._restart_deadline(event, (), now_ms)
        return event

    def play(self, seat: int, action: int, by: str, now_ms: int, debug: str | None = None) -> dict[str, Any]:
        """``seat`` plays ``action`` (raises the engine's typed error if it may not), with
        ``debug``, the text its program wrote while deciding (kept as given: the caller
        checks its size).

        The deadline restarts whenever a seat must act anew (also the seat that just moved,
        when it leads the next trick); only while simultaneous bids are being collected (the
        awaited seats a strict subset of those before) does it stay where it was."""
        before = self.awaiting()
        started = None if self.deadline_ms is None else self.deadline_ms - self.settings.move_timeout_ms
        think = 0 if started is None else max(0, now_ms - started)
        event: dict[str, Any] = {"t": "move", "seat": seat, "a": action, "by": by, "dl": self.deadline_ms, "th": think}
        if debug:
            event["dbg"] = debug
        self.apply_event(event)
        self._restart_deadline(event, before, now_ms)
        return event

    def leave(self, seat: int) -> dict[str, Any]:
        """The bot in ``seat`` of a WAITING match gives the seat back."""
        holder = self.seats[seat]
        assert holder is not None and self.status is MatchStatus.WAITING
        event: dict[str, Any] = {"t": "leave", "seat": seat, "bot": holder.id, "dl": None}
        self.apply_event(event)
        return event

    def abort(self, why: str) -> dict[str, Any]:
        event: dict[str, Any] = {"t": "abort", "why": why, "dl": None}
        self.apply_event(event)
        return event

    def _restart_deadline(self, event: dict[str, Any], before: tuple[int, ...], now_ms: int) -> None:
        after = self.awaiting()
        if not after:
            deadline = None
        elif set(after) < set(before) and self.deadline_ms is not None:
            deadline = self.deadline_ms
        else:
            deadline = now_ms + self.settings.move_timeout_ms
        event["dl"] = self.deadline_ms = deadline

    def apply_event(self, event: dict[str, Any]) -> None:
        """Apply one event: the single place where a live match changes. Writers go through
        :meth:`join`, :meth:`play` and :meth:`abort`, which also fix the event's deadline."""
        kind = event["t"]
        version = self.version + 1
        if kind == "move":
            seat = event["seat"]
            self.state.apply_action(seat, event["a"])
            if event["by"] == "timeout":
                self.timeouts[seat] += 1
                self.fallbacks.append(self.state.moves_made - 1)
            if self.think_ms is not None:
                think = event.get("th")
                if think is None:  # written before think times were kept: none for this match
                    self.think_ms = None
                else:
                    self.think_ms.append(think)
            if "dbg" in event:
                self.debug.append((self.state.moves_made - 1, seat, event["dbg"]))
            if self.state.is_finished:
                self.status = MatchStatus.FINISHED
            unseen = self.state.last_move_unseen_by()
            self.seen = [v if s in unseen else version for s, v in enumerate(self.seen)]
        else:
            if kind == "join":
                self.seats[event["seat"]] = SeatHolder.from_dict(event["bot"])
                if not self.free_seats():
                    self.status = MatchStatus.ACTIVE
            elif kind == "leave":
                self.seats[event["seat"]] = None
            elif kind == "abort":
                self.status = MatchStatus.ABORTED
                self.abort_reason = event.get("why")
            else:  # pragma: no cover - a newer writer's event; refuse rather than diverge
                raise ValueError(f"unknown match event {kind!r}")
            self.seen = [version] * len(self.seen)  # seats and status: everyone sees them
        self.deadline_ms = event.get("dl")
        self.version = version

    # ------------------------------------------------------------------ storage form
    def live_json(self) -> bytes:
        """The mutable part besides the engine state, as stored next to it."""
        return orjson.dumps(
            {
                "status": self.status.value,
                "seats": [None if h is None else h.to_dict() for h in self.seats],
                "timeouts": self.timeouts,
                "deadline": self.deadline_ms,
                "seen": self.seen,
                "think": self.think_ms,
                "fallbacks": self.fallbacks,
                **({} if self.abort_reason is None else {"why": self.abort_reason}),
                **({"debug": self.debug} if self.debug else {}),
            }
        )

    @classmethod
    def from_stored(
        cls, match_id: str, version: int, settings_json: bytes, state_bytes: bytes, live_json: bytes
    ) -> LiveMatch:
        state = state_from_bytes(state_bytes)
        settings = MatchSettings.from_json(settings_json, state.config)
        live = orjson.loads(live_json)
        seats = len(live["seats"])
        # stored before these were kept: every seat counts as having seen every version so
        # far (expectedVersion as strict as it was), and the think times are unknown
        return cls(
            match_id,
            settings,
            state,
            version=version,
            status=MatchStatus(live["status"]),
            seats=[None if h is None else SeatHolder.from_dict(h) for h in live["seats"]],
            timeouts=list(live["timeouts"]),
            deadline_ms=live["deadline"],
            seen=live.get("seen") or [version] * seats,
            think_ms=live.get("think", None if state.moves_made else []),
            fallbacks=live.get("fallbacks", []),
            abort_reason=live.get("why"),
            debug=[(index, seat, text) for index, seat, text in live.get("debug", ())],
        )


def put_debug(notes: list[dict[str, Any]], debug: Iterable[Sequence[Any]], seats: Container[int]) -> None:
    """Puts each ``(move index, seat, text)`` of ``debug`` whose seat is in ``seats`` into the
    record's ``moveNotes`` (``notes``) as ``"debug"``: the record as those seats' bot reads it."""
    for index, seat, text in debug:
        if seat in seats and 0 <= index < len(notes):
            notes[index]["debug"] = text


__all__ = ["HouseBotKind", "LiveMatch", "MatchSettings", "MatchStatus", "Phase", "SeatHolder", "put_debug"]
