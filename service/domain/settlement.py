"""What an ended match leads to, each part once however often it runs: its rating change
(``service.domain.ratings``) and, for a tournament's match, its result and its tournament's
next step (``service.domain.tournaments``), for a ladder's, its table's next step
(``service.domain.ladders``).

A match is settled by the workers, never by the request that ended it: the commit that ends
a match puts it in its home's settlement queue (``{<home>}:unsettled``) in the same script, the
workers' clock claims it and runs a job (``worker.jobs.settle_match``) that calls
:meth:`Settlement.settle`; a job that a dead worker left unfinished is claimed again.

Its steps, each of which may run again: the ratings (applied once, marked in the same
script), the tournament's next step, the match's leaving its bots' open matches, the archive
(an upsert by match id, with the rating changes read back), and last the match's leaving the
queue with its keys set to expire. A
worker killed between any two steps leaves the match queued, and the next run does what is
left and repeats what is done without doubling it.

The archive's database away: everything before the archive is done (play, ratings and
tournaments go on), :class:`ArchiveUnavailable` is raised and the match stays queued; the
job says so once and the match is claimed again later (``ARENA_ARCHIVE_RETRY_SECONDS``).

An ended tournament (FINISHED or CANCELLED, whoever ended it) is put among those the
archive awaits by the same script that ends it; :meth:`Settlement.archive_tournament` writes
it there (an upsert by tournament id), then takes it off."""

from __future__ import annotations

from service.domain.archiving import archived_match, tournament_document, tournament_standings
from service.domain.ladders import LadderService
from service.domain.ratings import RatingService
from service.domain.tournaments import TournamentService
from service.model.live_match import LiveMatch
from service.model.tournament import TournamentStatus
from service.store.archive import UNAVAILABLE, Archive, ArchiveUnavailable
from service.store.clock import now_ms
from service.store.matches import MatchStore
from service.store.tournaments import tournament_of

#: when a match whose tournament another run held is claimed again
HELD_RETRY_SECONDS = 1


class Settlement:
    def __init__(
        self, matches: MatchStore, tournaments: TournamentService, ratings: RatingService, ladders: LadderService,
        archive: Archive | None,
    ) -> None:
        self.matches = matches
        self.tournaments = tournaments
        self.ratings = ratings
        self.ladders = ladders
        self.archive = archive

    async def claim(self, limit: int, claim_seconds: int) -> list[str]:
        """Ended matches to settle now, claimed for ``claim_seconds`` (see MatchStore.claim_unsettled)."""
        return await self.matches.claim_unsettled(limit, claim_seconds)

    async def settle(self, match_id: str) -> None:
        """Settle one ended match (its id from the settlement queue), then take it off.
        ArchiveUnavailable: done but for the archive; the match stays queued."""
        await self.settle_many([match_id])

    async def settle_many(self, match_ids: list[str]) -> None:
        """Settle ended matches, their archive rows written in one transaction (one commit for
        all), then take them off the queue. A tournament's match whose tournament another run
        holds stays queued. ArchiveUnavailable: done but for the archive; all stay queued."""
        settled: list[tuple[str, bool]] = []
        ready = []
        held: list[str] = []
        for match_id, stored in zip(match_ids, await self.matches.load_many(match_ids), strict=True):
            archived_now = False  # (a match not found, or not ended, is only taken off the queue)
            if stored is not None and stored.match.ended:
                if not await self._rate_or_advance(stored.match):
                    held.append(match_id)
                    continue
                ready.append(stored)
                archived_now = self.archive is not None
            settled.append((match_id, archived_now))
        if ready:  # (the commit that ended each did so too, unless its process died right after)
            await self.matches.drop_open(stored.match for stored in ready)
        if ready and self.archive is not None:
            ids = [stored.match.id for stored in ready]
            ended = await self.matches.ended_ms(ids)
            changes = await self.ratings.changes([stored.match for stored in ready])
            records = await self.matches.live_records(ids)  # (not the archive's: not there yet)
            archived = [
                archived_match(stored.match, stored.event_id, record, changed, ended_ms or now_ms())
                for stored, ended_ms, changed, record in zip(ready, ended, changes, records, strict=True)
            ]
            try:
                await self.archive.put_matches(archived)
            except UNAVAILABLE as error:
                raise ArchiveUnavailable(f"matches {', '.join(ids)}: {_reason(error)}") from error
        if settled:
            await self.matches.settled(settled)
        if held:  # claimed again soon, not when their claims lapse: the tournament's run is short
            await self.matches.retry_settling(held, HELD_RETRY_SECONDS)

    async def _rate_or_advance(self, match: LiveMatch) -> bool:
        """A match's rating change, or its tournament's next step; False when another run
        holds the tournament (a cancel under way, another worker): retried later."""
        tid = match.settings.tournament
        if not tid:
            await self.ratings.settle(match)
            if match.settings.ladder_table:
                await self.ladders.settle(match)  # a duplicate set's next match, or the table's end
            return True
        # settles the table once it is complete
        if not await self.tournaments.advance(tid):
            return False
        t = await self.tournaments.store.load(tid)
        if t is not None and t.status is TournamentStatus.CANCELLED:
            await self.tournaments.settle_cut_short(t)  # it played on after the cancel
        return True

    async def retry_later(self, match_ids: list[str], seconds: int) -> None:
        """Settlements the archive did not take: claimed again in ``seconds``."""
        await self.matches.retry_settling(match_ids, seconds)

    # ------------------------------------------------------------------ tournaments
    async def claim_tournaments(self, limit: int, claim_seconds: int) -> list[str]:
        """Ended tournaments to archive now, claimed for ``claim_seconds``."""
        return await self.tournaments.store.claim_unarchived(limit, claim_seconds)

    async def archive_tournament(self, tid: str) -> None:
        """Write an ended tournament to the archive (as the API shows it, and its standings),
        then take it off those the archive awaits. ArchiveUnavailable: it stays awaited."""
        store = self.tournaments.store
        fields = await store.fields(tid)  # None: gone from Redis, so archived already
        t = None if fields is None else tournament_of(tid, fields)
        if t is not None and t.status.over and self.archive is not None:
            ended_ms = t.finished_ms or now_ms()
            try:
                await self.archive.put_tournament(
                    t.id, t.status.value, t.spec.ruleset, t.created_ms or t.spec.starts_at_ms, ended_ms,
                    tournament_document(t), tournament_standings(t), fields,
                )
            except UNAVAILABLE as error:
                raise ArchiveUnavailable(f"tournament {tid}: {_reason(error)}") from error
        await store.archived(tid)

    async def retry_tournament_later(self, tid: str, seconds: int) -> None:
        await self.tournaments.store.retry_archiving(tid, seconds)


def _reason(error: BaseException) -> str:
    """One line for the log: the error's kind and first line (no traceback)."""
    text = str(error).strip().splitlines()
    return f"{type(error).__name__}: {text[0]}" if text else type(error).__name__
