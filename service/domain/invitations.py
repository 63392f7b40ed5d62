"""A bot's invitations: listed, told on the bot's stream of turns (with the challenges it is
named in: one channel and one stream for both), and its standing policy.

A bot named in ``createTournament``'s ``bots`` is invited (:mod:`service.domain.tournaments`
answers invitations, since an answer changes the entrants); it enters only by its own act.
"""

from __future__ import annotations

import time
from collections.abc import AsyncGenerator
from contextlib import aclosing
from dataclasses import dataclass

from service.domain.challenges import ChallengeService
from service.domain.matches import Caller, MatchService, TurnWait, WaitEnd
from service.domain.tournaments import TournamentService
from service.errors import BadInput
from service.model.challenge import Challenge
from service.model.invitation import Invitation, InvitationPolicy, InvitationStatus
from service.model.live_match import LiveMatch
from service.model.tournament import Tournament
from service.store.keys import bot_invited_channel, challenge_of_notice

#: invitations listed at most at once (newest first)
MAX_LISTED = 100


@dataclass(frozen=True)
class InvitationToTournament:
    """An invitation as it stands (EXPIRED once its tournament took no more entrants) and its
    tournament as it is now."""

    invitation: Invitation
    tournament: Tournament


class InvitationService:
    def __init__(self, tournaments: TournamentService, matches: MatchService, challenges: ChallengeService) -> None:
        self.tournaments = tournaments
        self.matches = matches
        self.challenges = challenges

    async def policy(self, bot_id: str) -> InvitationPolicy:
        return (await self.tournaments.bots.invitation_policies([bot_id]))[bot_id]

    async def set_policy(self, caller: Caller, policy: InvitationPolicy) -> InvitationPolicy:
        """The caller's standing answer to the invitations it gets from now on (those pending
        keep waiting for an answer)."""
        await self.tournaments.bots.set_invitation_policy(caller.bot_id, policy)
        return policy

    async def of(
        self, caller: Caller, status: InvitationStatus | None = None, first: int = 50
    ) -> list[InvitationToTournament]:
        """The caller's invitations, newest first: ``first`` (1 to 100) of those with ``status``
        (any when None), among its latest 100 whose tournaments are still live."""
        if isinstance(first, bool) or not isinstance(first, int) or not 1 <= first <= MAX_LISTED:
            raise BadInput(f"first must be from 1 to {MAX_LISTED}, not {first!r}")
        found = await self._read(caller.bot_id, await self.tournaments.store.invited_to(caller.bot_id, MAX_LISTED))
        return [i for i in found if status is None or i.invitation.status is status][:first]

    async def _read(self, bot_id: str, tids: list[str]) -> list[InvitationToTournament]:
        """The bot's invitations to ``tids`` as they stand; a tournament gone from Redis (to the
        archive, where invitations are not kept) leaves the bot's list."""
        found: list[InvitationToTournament] = []
        gone: list[str] = []
        for tid in tids:
            invitation = await self.tournaments.store.invitation(tid, bot_id)
            t = await self.tournaments.store.load(tid) if invitation is not None else None
            if invitation is None or t is None:
                gone.append(tid)
                continue
            found.append(InvitationToTournament(invitation.seen(t.open_to_entrants), t))
        await self.tournaments.store.forget_invitations(bot_id, gone)
        return found

    async def next_turn_or_invitation(
        self, caller: Caller, timeout_ms: int | None, invitations: bool = True, challenges: bool = False
    ) -> tuple[TurnWait, InvitationToTournament | Challenge | None]:
        """``nextTurn`` over all the caller's matches that also ends on an invitation waiting
        for its answer (INVITATION, with it), and with ``challenges`` on a challenge that
        names it waiting for its answer (CHALLENGE, with it); one already pending answers at
        once. So a bot on plain HTTP learns of both on the long poll it waits for turns on."""
        end = time.monotonic() + self.matches.wait_seconds(timeout_ms)
        async with aclosing(self.turns_and_invitations(caller, invitations, challenges, end)) as stream:
            async for item in stream:
                if isinstance(item, LiveMatch):
                    return TurnWait(WaitEnd.YOUR_TURN, item), None
                if isinstance(item, Challenge):
                    if self.challenges.waits_for(item, caller.bot_id):
                        return TurnWait(WaitEnd.CHALLENGE, None), item
                elif item.invitation.status is InvitationStatus.PENDING:
                    return TurnWait(WaitEnd.INVITATION, None), item
        return TurnWait(WaitEnd.TIMED_OUT, None), None

    async def turns_and_invitations(
        self, caller: Caller, invitations: bool = True, challenges: bool = False, end: float | None = None
    ) -> AsyncGenerator[LiveMatch | InvitationToTournament | Challenge, None]:
        """The caller's turns as ``myTurns`` yields them, and on the same stream (the bot's
        ``{b:<id>}:invited`` channel carries both) its invitations and, with ``challenges``,
        the challenges it made or is named in: those waiting for its answer when it starts
        listening (and again after a gap), then each new one and each change of status as it
        comes, whatever its policy answered. Each invitation and challenge once per status.
        Until closed, or until ``end`` (``time.monotonic()``: what is there already comes first)."""
        told: dict[str, str] = {}
        channel = bot_invited_channel(caller.bot_id)
        async for item in self.matches.turns_and_notices(caller, channel, end):
            if isinstance(item, LiveMatch):
                yield item
                continue
            found: list[InvitationToTournament | Challenge] = []
            if item.payload is None:
                if invitations:
                    tids = await self.tournaments.store.invited_to(caller.bot_id, MAX_LISTED)
                    pending = [i for i in await self._read(caller.bot_id, tids)
                               if i.invitation.status is InvitationStatus.PENDING]
                    found += reversed(pending)  # oldest first: in the order they came
                if challenges:
                    found += await self.challenges.awaiting_answer(caller.bot_id)
            elif (challenge_id := challenge_of_notice(item.payload)) is not None:
                if challenges:
                    found += await self.challenges.read(caller.bot_id, [challenge_id])
            elif invitations:
                found += await self._read(caller.bot_id, [item.payload])
            for offer in found:
                key, status = (
                    (f"c:{offer.id}", offer.status.value) if isinstance(offer, Challenge)
                    else (offer.invitation.id, offer.invitation.status.value)
                )
                if told.get(key) != status:
                    told[key] = status
                    yield offer
