"""RQ jobs, queued by the workers' clock (``worker.clock``) by function. Each takes ids, not
objects, and is idempotent: run twice, or again after a worker died half way, it leaves what
one run leaves (the domain code it calls guarantees that: ratings and results are written
once, tables are created under fixed ids).

RQ runs each job in a fresh work-horse process; a job opens its own Redis pool and, before
it returns, lets the house bots it set moving finish their moves."""

from __future__ import annotations

import asyncio
import functools
import logging
from collections.abc import Awaitable, Callable
from typing import Any

from service.domain.services import Services
from service.settings import Settings
from service.store.archive import ArchiveUnavailable
from service.store.clock import now_ms
from service.store.keys import ARCHIVE_OUTAGE

log = logging.getLogger("wizard_arena.jobs")


def _run(work: Callable[[Services], Awaitable[Any]]) -> Any:
    async def main() -> Any:
        services = await Services.start(Settings(), role="job")
        try:
            result = await work(services)
            await services.matches.drain()
            return result
        finally:
            await services.close()

    return asyncio.run(main())


def settle_match(match_id: str) -> None:
    """An ended match: its rating change, its tournament's next step, the archive."""
    settle_matches([match_id])


def settle_matches(match_ids: list[str]) -> None:
    """Ended matches in one job (one process, one set of connections: the clock queues them by
    the batch), their archive rows in one transaction. The archive's database away: they stay
    queued, tried again in ARENA_ARCHIVE_RETRY_SECONDS (the log says the outage once, and its end). Any
    other failure: they are settled one by one, so that one failing leaves only itself queued
    (its claim lapses) and the job then fails with the first, for RQ to show."""

    async def work(services: Services) -> None:
        settlement = services.settlement
        try:  # all at once: one transaction in the archive
            await _or_later(services, settlement.settle_many(match_ids), functools.partial(settlement.retry_later, match_ids))
            return
        except Exception:  # one after another, so that one failing holds up none of the others
            log.warning("settling %d matches at once failed; settling them one by one", len(match_ids), exc_info=True)
        failed: Exception | None = None
        for match_id in match_ids:
            try:
                await _or_later(services, settlement.settle(match_id), functools.partial(settlement.retry_later, [match_id]))
            except Exception as error:  # the others are settled first; raised below
                log.exception("settling match %s failed; it stays queued", match_id)
                failed = failed or error
        if failed is not None:
            raise failed

    _run(work)


def archive_tournament(tournament_id: str) -> None:
    """An ended tournament into the archive (retried like a settlement while it is away)."""
    _run(lambda s: _or_later(
        s, s.settlement.archive_tournament(tournament_id), lambda t: s.settlement.retry_tournament_later(tournament_id, t)
    ))


async def _or_later(services: Services, work: Awaitable[None], retry: Callable[[int], Awaitable[None]]) -> None:
    """Run ``work``; with the archive away, have it claimed again later. The log says the
    outage once, whichever job meets it first, and once more when a job finds it over (jobs
    are processes of their own: the mark is in Redis)."""
    try:
        await work
    except ArchiveUnavailable as error:
        seconds = services.settings.archive_retry_seconds
        if await services.redis.set(ARCHIVE_OUTAGE, now_ms(), nx=True):
            log.warning("the archive is unavailable (%s); settlements and tournaments wait and are tried again every "
                        "%d s, and the log says here when it is back", error, seconds)
        await retry(seconds)
        return
    began = await services.redis.getdel(ARCHIVE_OUTAGE)
    if began is not None:
        log.warning("the archive is back after %.1f s; what waited is being archived", (now_ms() - int(began)) / 1000)


def advance_tournament(tournament_id: str) -> None:
    """A tournament's next step (the clock advances tournaments itself; this is for by hand)."""
    _run(lambda s: s.tournaments.advance(tournament_id))


def fit_ratings(ruleset: str) -> int:
    """Refit the FITTED leaderboard of one ruleset from its whole history."""
    return int(_run(lambda s: s.ratings.fit(ruleset)))
