"""The deadline sweeper: when a seat misses its deadline, the server makes its move (the
RANDOM policy; a house seat its own bot) through the same compare-and-set as a bot's move,
so a late bot move and the timeout can never both apply.

Deadlines sit in Redis sorted sets, one per home (``service.store.keys``: a match's is in its
slot), written atomically with each match change. RQ's scheduler ticks once a second, far
too coarse for move deadlines, so each worker process runs this loop as well: it reads the
earliest deadlines of every home in one pipelined round, settles every due match, and sleeps
until the earliest deadline left (at most ``POLL_SECONDS``, so a deadline added meanwhile is
not missed by more than that).
Any number of sweepers may run; the compare-and-set makes their work idempotent.
"""

from __future__ import annotations

import asyncio
import logging

from service.domain.services import Services

log = logging.getLogger("wizard_arena.deadlines")

POLL_SECONDS = 0.01
BATCH = 200


async def sweep_once(services: Services) -> int | None:
    """Settle every match whose deadline has passed; when the next one falls due (ms; None:
    no match is waiting for anything), as read before these were settled."""
    due, upcoming = await services.matches.due(BATCH)
    if not due:
        return upcoming
    made = await asyncio.gather(*(services.matches.apply_overdue(match_id) for match_id in due), return_exceptions=True)
    for match_id, result in zip(due, made, strict=True):
        if isinstance(result, BaseException):
            log.error("deadline of match %s", match_id, exc_info=result)
        elif result == 0:
            await services.matches.resync_deadline(match_id)
    return upcoming
