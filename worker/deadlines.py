"""The deadline sweeper: when a seat misses its deadline, the server makes its move (the
RANDOM policy; a house seat its own bot) through the same compare-and-set as a bot's move,
so a late bot move and the timeout can never both apply.

Deadlines sit in Redis sorted sets, one per home (``service.store.keys``: a match's is in its
slot), written atomically with each match change. RQ's scheduler ticks once a second, far
too coarse for move deadlines, so each worker process runs this loop as well: it sleeps
until the earliest deadline it knows of (at most ``POLL_SECONDS``) and settles every due
match.

Reading all 65 homes every round would cost 65 commands per 10 ms (most of a round's time on
a busy host, and lateness with it). So a home's earliest deadlines, once read, are trusted
for ``TRUST_SECONDS``: a deadline set after the read falls due a move timeout after it was
set (``ARENA_MIN_MOVE_TIMEOUT_MS`` at least, 100 ms by default), so none falls due before the
home is read again, unless its match's timeout is shorter than that (then it is late by at
most ``TRUST_SECONDS``). A round reads, in one pipelined round trip, the homes whose earliest
deadline has come or whose trust has run out: a few of them in a round.
Any number of sweepers may run; the compare-and-set makes their work idempotent.
"""

from __future__ import annotations

import asyncio
import logging

from service.domain.services import Services
from service.model.homes import ALL_HOMES
from service.store.clock import now_ms

log = logging.getLogger("wizard_arena.deadlines")

POLL_SECONDS = 0.01
BATCH = 200
#: how long a home's earliest deadlines are trusted once read (see the module's docstring)
TRUST_SECONDS = 0.05
#: how many of a home's earliest deadlines a read takes (a home with more due is read again at once)
PER_HOME = 3


class Sweeper:
    """One worker's deadline sweep, and when it must read each home again."""

    def __init__(self, services: Services) -> None:
        self.services = services
        #: where the deadline index is read and put right: a store's work, no rule of a match in it
        self.store = services.matches.matches
        trust_ms = min(TRUST_SECONDS * 1000, services.settings.min_move_timeout_ms / 2)
        self._trust_ms = max(1, int(trust_ms))
        #: when each home must be read again (ms)
        self._read_at: dict[int | None, int] = dict.fromkeys(ALL_HOMES, 0)

    async def sweep(self) -> int:
        """Settle every match whose deadline has passed; when the sweeper must look again
        (ms: the earliest deadline known, or the soonest a home must be read again)."""
        now = now_ms()
        homes = [home for home, at in self._read_at.items() if at <= now]
        due: list[tuple[int, str, int | None]] = []
        if homes:
            for home, rows in zip(homes, await self.store.earliest_deadlines(homes, PER_HOME), strict=True):
                later = [due_ms for _, due_ms in rows if due_ms > now]
                due += [(due_ms, match_id, home) for match_id, due_ms in rows if due_ms <= now]
                if later:
                    self._read_at[home] = min(later[0], now + self._trust_ms)
                else:  # (all those read are due: there may be more)
                    self._read_at[home] = now if len(rows) == PER_HOME else now + self._trust_ms
        due.sort()
        for _, _, home in due[BATCH:]:  # left for the next round
            self._read_at[home] = now
        await self._settle([match_id for _, match_id, _ in due[:BATCH]])
        return min(self._read_at.values())

    async def _settle(self, due: list[str]) -> None:
        matches = self.services.matches
        made = await asyncio.gather(*(matches.apply_overdue(match_id) for match_id in due), return_exceptions=True)
        for match_id, result in zip(due, made, strict=True):
            if isinstance(result, BaseException):
                log.error("deadline of match %s", match_id, exc_info=result)
            elif result == 0:
                await self.store.resync_due(match_id)
