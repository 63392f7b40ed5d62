"""Challenges: a bot invites named bots (or anyone, naming none) to a match on createMatch's
terms, and the match is made, every seat taken, once enough have accepted.

Every change is decided on the challenge as read and committed by a compare-and-set on its
version (:class:`~service.store.challenges.ChallengeStore`): of racing answers one applies and
the others are decided again on what it left, so the answer that takes the last seat is one,
and it alone turns the challenge ACCEPTED. The match's id and seed are fixed by the challenge,
so making it twice (that process died in between and the workers' clock made it again)
changes nothing. Expiry is derived on reading (:meth:`Challenge.seen`) and written by the
workers' clock (:meth:`ChallengeService.sweep`), which frees the challenger's limit and tells
the bots; every answer is decided on the challenge as it stands then, and the clock's write
and an answer decided just before the expiry cannot both apply (one loses the compare-and-set).
"""

from __future__ import annotations

import logging
import secrets
from dataclasses import dataclass, field, replace

from service.domain.matches import COMMIT_ATTEMPTS, Caller, MatchService, NewMatch
from service.domain.retirement import refuse_retired
from service.errors import (
    REDIS_AWAY,
    BadInput,
    ChallengeAnswered,
    ChallengeNotOpen,
    ChallengeRefused,
    Forbidden,
    LimitExceeded,
    NotFound,
    StaleVersion,
)
from service.model.challenge import (
    Challenge,
    ChallengeAnswer,
    ChallengePolicy,
    ChallengeStatus,
    ChallengeTerms,
    Reply,
)
from service.model.live_match import MatchSettings, SeatHolder
from service.settings import Settings
from service.store.bots import BotStore
from service.store.challenges import ChallengeStore, TooManyWaiting
from service.store.clock import now_ms
from service.store.keys import new_challenge_id
from wizard import MatchConfig

log = logging.getLogger("wizard_arena.challenges")

#: challenges listed at most at once (newest first)
MAX_LISTED = 100
#: bots one challenge may name at most
MAX_NAMED = 20
#: the longest reason a bot may give for declining
MAX_REASON = 200
#: how long the workers' clock leaves a change to the process making it before it completes
#: the change itself, should that process have died in between: the match of an ACCEPTED
#: challenge, or what a challenge made or changed writes outside its slot (its bots' lists, the
#: open challenges, the telling)
START_GRACE_MS = 5_000
#: how long after the clock failed to bring a challenge up to date it tries again
SWEEP_RETRY_MS = 30_000


@dataclass(slots=True)
class NewChallenge:
    """createChallenge's input, as plain values (the GraphQL layer fills it)."""

    bots: list[str] = field(default_factory=list)
    ruleset: str = "WIZARD"
    players: int = 4
    variants: tuple[str, ...] = ()
    move_timeout_ms: int | None = None
    rated: bool = False


def _awaits_answer(c: Challenge, bot_id: str) -> bool:
    """Whether the challenge is OPEN and names ``bot_id``, which has not answered it."""
    reply = c.reply_of(bot_id)
    return c.status is ChallengeStatus.OPEN and c.named and reply is not None and reply.answer is ChallengeAnswer.PENDING


class ChallengeService:
    def __init__(self, store: ChallengeStore, matches: MatchService, settings: Settings) -> None:
        self.store = store
        self.matches = matches
        self.bots: BotStore = matches.bots
        self.settings = settings

    # ------------------------------------------------------------------ policy
    async def policy(self, bot_id: str) -> ChallengePolicy:
        return (await self.bots.challenge_policies([bot_id]))[bot_id]

    async def set_policy(self, caller: Caller, policy: ChallengePolicy) -> ChallengePolicy:
        """The caller's rule for the challenges made to it from now on (those made before
        stand: it may still answer them)."""
        await self.bots.set_challenge_policy(caller.bot_id, policy)
        return policy

    # ------------------------------------------------------------------ making
    async def create(self, caller: Caller, spec: NewChallenge) -> Challenge:
        s = self.settings
        named = list(dict.fromkeys(spec.bots))
        if len(named) != len(spec.bots):
            twice = next(b for b in named if spec.bots.count(b) > 1)
            raise BadInput(f"bot {twice!r} is named twice in bots: name each bot once")
        if caller.bot_id in named:
            raise BadInput("you cannot challenge yourself: your bot takes a seat as the challenger; name the others")
        if len(named) > MAX_NAMED:
            raise LimitExceeded(f"a challenge names at most {MAX_NAMED} bots, not {len(named)}")
        config, timeout = self.matches.checked_terms(NewMatch(
            ruleset=spec.ruleset, players=spec.players, variants=spec.variants, move_timeout_ms=spec.move_timeout_ms,
            rated=spec.rated,
        ))
        if named and len(named) < config.players - 1:
            raise BadInput(
                f"a {config.players}-player challenge names at least {config.players - 1} bots (one for each seat "
                f"besides yours), not {len(named)}; or none: an open challenge, any bot may accept"
            )
        found = await self.bots.get_many(named)
        for bot_id in named:
            if bot_id not in found:
                raise NotFound(f"no bot with id {bot_id!r}: challenge registered bots by their ids (house bots take "
                               "no challenges: seat them with createMatch and addHouseBot)")
        await refuse_retired(self.bots, [caller.bot_id, *named], "make or take challenges")
        await self._refuse_if_a_policy_refuses(named, found, spec.rated)
        await self.matches.refuse_if_seated_too_often(caller.bot_id)
        created = now_ms()
        challenge = Challenge(
            new_challenge_id(caller.bot_id), caller.bot_id, caller.name,
            ChallengeTerms(config.ruleset.value, config.players, tuple(sorted(v.value for v in config.variants)),
                           timeout, spec.rated),
            tuple(Reply(b, found[b]["name"]) for b in named), bool(named), ChallengeStatus.OPEN, created,
            created + s.challenge_ttl_seconds * 1000, version=1,
        )
        try:
            await self.store.create(challenge, secrets.token_urlsafe(24), s.waiting_matches_per_bot, tell=named,
                                    repair_at_ms=created + START_GRACE_MS)
        except TooManyWaiting as full:
            raise LimitExceeded(
                f"you already have {s.waiting_matches_per_bot} matches whose seats are not all taken and challenges "
                "still open (they count together): fill or cancel some, or wait until the first ends",
                retryAfterSeconds=max(0.001, round((full.until_ms - now_ms()) / 1000, 3)),
            ) from None
        try:
            # a policy set while it was being made (after the check above) refuses it too: it
            # is withdrawn at once (unless a named bot answered it meanwhile: then it stands)
            await self._refuse_if_a_policy_refuses(named, found, spec.rated)
        except ChallengeRefused:
            if await self._commit(challenge, challenge.closed(ChallengeStatus.CANCELLED, now_ms()), caller.bot_id):
                raise
        log.info("challenge %s made by %s", challenge.id, caller.name)
        return challenge

    async def _refuse_if_a_policy_refuses(self, named: list[str], found: dict[str, dict[str, str]], rated: bool) -> None:
        """Raises ChallengeRefused when a named bot's challenge policy refuses the challenge."""
        policies = await self.bots.challenge_policies(named)
        for bot_id in named:
            if policies[bot_id].refuses(rated):
                what = "rated challenges" if policies[bot_id] is ChallengePolicy.REFUSE_RATED else "all challenges"
                raise ChallengeRefused(
                    f"bot {found[bot_id]['name']} ({bot_id}) refuses {what} (its challenge policy is "
                    f"{policies[bot_id].value}): leave it out" + (", or make the match unrated" if rated else "")
                )

    # ------------------------------------------------------------------ reading
    async def get(self, challenge_id: str) -> Challenge:
        """The challenge as it stands (anyone may read one: nothing of it is secret)."""
        found = await self._load(challenge_id)
        return found.seen(now_ms())

    async def _load(self, challenge_id: str) -> Challenge:
        found = None
        if isinstance(challenge_id, str) and 0 < len(challenge_id) <= 64:
            found = await self.store.load(challenge_id)
        if found is None:
            raise NotFound(f"no challenge with id {challenge_id!r}: the ids are in the challenges query")
        return found

    async def of(self, caller: Caller, status: ChallengeStatus | None = None, first: int = 50) -> list[Challenge]:
        """The caller's challenges, newest first: those it made or is named in (its latest
        100), and the open ones that name nobody, unless its policy refuses them; ``first``
        (1 to 100) of those with ``status`` (any when None)."""
        if isinstance(first, bool) or not isinstance(first, int) or not 1 <= first <= MAX_LISTED:
            raise BadInput(f"first must be from 1 to {MAX_LISTED}, not {first!r}")
        now = now_ms()
        mine = await self.store.of_bot(caller.bot_id, MAX_LISTED)
        found = await self.read(caller.bot_id, mine)
        if status in (None, ChallengeStatus.OPEN):
            policy = await self.policy(caller.bot_id)
            known = set(mine)
            offered = [i for i in await self.store.open_to_anyone(now, MAX_LISTED) if i not in known]
            found += [c for c in await self.read(caller.bot_id, offered, forget=False)
                      if c.status is ChallengeStatus.OPEN and not policy.refuses(c.terms.rated)]
        found.sort(key=lambda c: c.created_ms, reverse=True)
        return [c for c in found if status is None or c.status is status][:first]

    async def read(self, bot_id: str, challenge_ids: list[str], forget: bool = True) -> list[Challenge]:
        """The challenges as they stand; those gone from Redis leave the bot's list."""
        loaded = await self.store.load_many(challenge_ids) if challenge_ids else []
        now = now_ms()
        if forget:
            await self.store.forget(bot_id, [i for i, c in zip(challenge_ids, loaded, strict=True) if c is None])
        return [c.seen(now) for c in loaded if c is not None]

    async def awaiting_answer(self, bot_id: str, challenge_ids: list[str] | None = None) -> list[Challenge]:
        """Of ``challenge_ids`` (None: all of the bot's), those OPEN that wait for the bot's
        answer, oldest first."""
        ids = await self.store.of_bot(bot_id, MAX_LISTED) if challenge_ids is None else challenge_ids
        found = [c for c in await self.read(bot_id, ids) if _awaits_answer(c, bot_id)]
        return sorted(found, key=lambda c: c.created_ms)

    @staticmethod
    def waits_for(c: Challenge, bot_id: str) -> bool:
        """Whether ``c`` waits for ``bot_id``'s answer (a turn stream ends its wait on it)."""
        return _awaits_answer(c, bot_id)

    # ------------------------------------------------------------------ answering
    async def accept(self, caller: Caller, challenge_id: str) -> Challenge:
        """The caller takes a seat; the last seat taken makes the match, which starts at once."""
        return await self._answer(caller, challenge_id, ChallengeAnswer.ACCEPTED, None)

    async def decline(self, caller: Caller, challenge_id: str, reason: str | None) -> Challenge:
        """The caller declines (its reason, if given, is kept); a named challenge with too few
        bots left to fill its seats is DECLINED."""
        if reason is not None and (not isinstance(reason, str) or len(reason) > MAX_REASON):
            raise BadInput(f"a reason is at most {MAX_REASON} characters")
        return await self._answer(caller, challenge_id, ChallengeAnswer.DECLINED, reason or None)

    async def _answer(self, caller: Caller, challenge_id: str, answer: ChallengeAnswer, reason: str | None) -> Challenge:
        for _ in range(COMMIT_ATTEMPTS):
            read = await self._load(challenge_id)
            now = now_ms()
            seen = read.seen(now)
            if caller.bot_id == read.challenger_id:
                raise BadInput(f"you made challenge {read.id}: it seats you already (cancelChallenge withdraws it)")
            if read.named and read.reply_of(caller.bot_id) is None:
                raise Forbidden(f"challenge {read.id} names other bots: only they may answer it")
            reply = seen.reply_of(caller.bot_id)
            if reply is not None and reply.answer is answer:
                return seen  # the same answer again (a retry after a lost reply): the challenge as it is
            if reply is not None and reply.answer is not ChallengeAnswer.PENDING:
                raise ChallengeAnswered(
                    f"you have {reply.answer.value.lower()} challenge {read.id} already: an answer is final"
                    + (f" (its match: {seen.match_id})" if seen.match_id else "")
                )
            if seen.status is not ChallengeStatus.OPEN:
                raise ChallengeNotOpen(f"challenge {read.id} is {seen.status.value}: it takes no more answers")
            if answer is ChallengeAnswer.ACCEPTED:
                await refuse_retired(self.bots, [caller.bot_id], "make or take challenges")
                await self.matches.refuse_if_seated_too_often(caller.bot_id)
            after = read.answered(caller.bot_id, caller.name, answer, now, reason)
            if await self._commit(read, after, caller.bot_id):
                if after.status is ChallengeStatus.ACCEPTED:
                    await self._start(after)
                return replace(after, version=read.version + 1)
        raise StaleVersion(f"challenge {challenge_id} is changing too fast: try again")

    async def cancel(self, caller: Caller, challenge_id: str) -> Challenge:
        """Withdraw an OPEN challenge (its challenger only). Idempotent: cancelling one
        cancelled already answers it as it is."""
        for _ in range(COMMIT_ATTEMPTS):
            read = await self._load(challenge_id)
            seen = read.seen(now_ms())
            if caller.bot_id != read.challenger_id:
                raise Forbidden(f"only the challenger of challenge {read.id} may cancel it")
            if seen.status is ChallengeStatus.CANCELLED:
                return seen
            if seen.status is not ChallengeStatus.OPEN:
                raise ChallengeNotOpen(f"challenge {read.id} is {seen.status.value}: only an OPEN one can be cancelled")
            after = read.closed(ChallengeStatus.CANCELLED, now_ms())
            if await self._commit(read, after, caller.bot_id):
                return replace(after, version=read.version + 1)
        raise StaleVersion(f"challenge {challenge_id} is changing too fast: try again")

    async def _commit(self, read: Challenge, after: Challenge, actor: str | None) -> bool:
        """Store ``after`` if nobody changed ``read`` meanwhile. A change of status is told to
        every bot it involves but the one that made it (the clock tells them, should this
        process die first); an OPEN challenge stays due at its expiry, an ACCEPTED one until
        its match is made; a bot answering an open challenge lists it among its own from then
        on."""
        now = now_ms()
        due = {ChallengeStatus.OPEN: after.expires_ms, ChallengeStatus.ACCEPTED: now + START_GRACE_MS}
        changes = after.status is not read.status
        tell = [b for b in after.involves() if b != actor] if changes else []
        repair_at = now + START_GRACE_MS if changes else None
        return await self.store.commit(read, after, due.get(after.status), tell, repair_at)

    async def _start(self, c: Challenge) -> None:
        """Make the match of an ACCEPTED challenge, every seat taken (again: nothing changes),
        and take the challenge off the clock's list."""
        seed = await self.store.seed(c.id)
        if seed is None:  # gone from Redis: nothing left to make
            await self.store.not_due(c.id)
            return
        t = c.terms
        config = MatchConfig.create(t.ruleset, t.players, t.variants)
        settings = MatchSettings(config, t.move_timeout_ms, t.rated, False, c.challenger_id, now_ms())
        holders = [SeatHolder(b, c.name_of(b)) for b in c.seating(seed)]
        if await self.matches.create_seated(c.match_id_to_be, config, seed, settings, holders) is not None:
            log.info("challenge %s accepted: match %s", c.id, c.match_id_to_be)
        await self.store.not_due(c.id)

    # ------------------------------------------------------------------ the workers' clock
    async def sweep(self, limit: int = 100) -> int:
        """What the workers' clock does for the challenges due: an OPEN one past its expiry is
        written EXPIRED (its bots told, its challenger's limit freed); an ACCEPTED one whose
        match the accepting process did not make gets it. Idempotent; returns the handled."""
        handled = 0
        for challenge_id in await self.store.due(now_ms(), limit):
            try:
                await self._sweep_one(challenge_id)
            except REDIS_AWAY:
                raise  # the clock says so once, and goes round again
            except Exception:  # one challenge's trouble holds up neither the others nor the clock
                log.exception("challenge %s: the clock could not bring it up to date", challenge_id)
                # looked at again later: left at its old time, it would stay among the first
                # `limit` due, and enough such would keep the others from ever being looked at
                await self.store.due_again(challenge_id, now_ms() + SWEEP_RETRY_MS)
            handled += 1
        return handled

    async def _sweep_one(self, challenge_id: str) -> None:
        """Besides expiry and the match of an ACCEPTED challenge, the clock completes what a
        process that died left undone (``service.store.challenges``): a challenge due before
        its time was made or changed by it, and is published as it stands, its bots told again
        (telling twice changes nothing: a turn stream tells each status once)."""
        read = await self.store.load(challenge_id)
        now = now_ms()
        if read is None:  # gone, or its making refused or cut short before it was stored
            await self.store.not_due(challenge_id)
        elif read.status is ChallengeStatus.ACCEPTED:
            await self.store.publish(read, read.involves())
            await self._start(read)
        elif read.status is ChallengeStatus.OPEN:
            seen = read.seen(now)
            if seen.status is ChallengeStatus.EXPIRED:  # (a race lost: the next round sees it again)
                await self._commit(read, seen, None)
            else:
                await self.store.publish(read, [r.bot_id for r in read.replies if _awaits_answer(read, r.bot_id)])
                await self.store.due_at(read.id, read.expires_ms)
        else:
            await self.store.publish(read, read.involves())
            await self.store.not_due(read.id)
