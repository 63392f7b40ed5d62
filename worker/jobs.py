"""RQ jobs, queued by the workers' clock (``worker.clock``) by function. Each takes ids, not
objects, and is idempotent: run twice, or again after a worker died half way, it leaves what
one run leaves (the domain code it calls guarantees that: ratings and results are written
once, tables are created under fixed ids).

RQ runs each job in a fresh work-horse process; a job opens its own Redis pool and, before
it returns, lets the house bots it set moving finish their moves."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

from service.domain.services import Services
from service.settings import Settings


def _run(work: Callable[[Services], Awaitable[Any]]) -> Any:
    async def main() -> Any:
        services = Services.open(Settings(), role="job")
        try:
            result = await work(services)
            await services.matches.drain()
            return result
        finally:
            await services.close()

    return asyncio.run(main())


def settle_match(match_id: str) -> None:
    """An ended match: its rating change, its tournament's next step."""
    _run(lambda s: s.settlement.settle(match_id))


def advance_tournament(tournament_id: str) -> None:
    """A tournament's next step (the clock advances tournaments itself; this is for by hand)."""
    _run(lambda s: s.tournaments.advance(tournament_id))


def fit_ratings(ruleset: str) -> int:
    """Refit the FITTED leaderboard of one ruleset from its whole history."""
    return int(_run(lambda s: s.ratings.fit(ruleset)))
