"""A challenge, as a value: a bot invites named bots (or anyone, when it names none) to a match
of its terms; the match is created, every seat taken, once enough have accepted. Pure: the
store keeps it as JSON and commits each change by a compare-and-set on its version, the
domain (:mod:`service.domain.challenges`) decides the changes."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from enum import Enum
from random import Random
from typing import Any

from service.model.homes import homed_match_id


class ChallengeStatus(str, Enum):
    #: waiting for answers
    OPEN = "OPEN"
    #: enough bots accepted: the match is created (``match_id``)
    ACCEPTED = "ACCEPTED"
    #: too few of the named bots are left to accept
    DECLINED = "DECLINED"
    #: not accepted by enough bots before ``expires_ms``
    EXPIRED = "EXPIRED"
    #: withdrawn by its challenger
    CANCELLED = "CANCELLED"


class ChallengeAnswer(str, Enum):
    PENDING = "PENDING"
    ACCEPTED = "ACCEPTED"
    DECLINED = "DECLINED"


class ChallengePolicy(str, Enum):
    """A bot's standing rule for the challenges others make it."""

    ACCEPT_ANY = "ACCEPT_ANY"
    REFUSE_RATED = "REFUSE_RATED"
    REFUSE_ALL = "REFUSE_ALL"

    def refuses(self, rated: bool) -> bool:
        """Whether a bot with this policy may not be challenged to a match ``rated`` or not."""
        return self is ChallengePolicy.REFUSE_ALL or (self is ChallengePolicy.REFUSE_RATED and rated)


@dataclass(frozen=True)
class Reply:
    """One bot's answer to a challenge: a bot it names (PENDING until it answers), or a bot
    that answered an open challenge."""

    bot_id: str
    name: str
    answer: ChallengeAnswer = ChallengeAnswer.PENDING
    answered_ms: int | None = None
    #: the reason given when declining (None: none)
    reason: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {"id": self.bot_id, "name": self.name, "answer": self.answer.value, "at": self.answered_ms,
                "reason": self.reason}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Reply:
        return cls(data["id"], data["name"], ChallengeAnswer(data["answer"]), data.get("at"), data.get("reason"))


@dataclass(frozen=True)
class ChallengeTerms:
    """The match a challenge offers: createMatch's terms (checked by the same code)."""

    ruleset: str
    players: int
    variants: tuple[str, ...]
    move_timeout_ms: int
    rated: bool

    def to_dict(self) -> dict[str, Any]:
        return {"ruleset": self.ruleset, "players": self.players, "variants": list(self.variants),
                "moveTimeoutMs": self.move_timeout_ms, "rated": self.rated}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> ChallengeTerms:
        return cls(data["ruleset"], data["players"], tuple(data["variants"]), data["moveTimeoutMs"], data["rated"])


@dataclass(frozen=True)
class Challenge:
    id: str
    challenger_id: str
    challenger_name: str
    terms: ChallengeTerms
    #: the named bots' replies, in the order named; for an open challenge, each bot's that answered
    replies: tuple[Reply, ...]
    #: whether it names its bots (False: open, anyone may accept)
    named: bool
    status: ChallengeStatus
    created_ms: int
    expires_ms: int
    #: the bots that accepted, in the order they did (the first ``players - 1`` take the seats)
    accepted: tuple[str, ...] = ()
    #: the match, once created (``ACCEPTED``)
    match_id: str | None = None
    #: when it left OPEN
    closed_ms: int | None = None
    #: the version its store compares and sets
    version: int = field(default=0, compare=False)

    @property
    def seats_to_fill(self) -> int:
        """Bots still to accept before the match is made."""
        return self.terms.players - 1 - len(self.accepted)

    def reply_of(self, bot_id: str) -> Reply | None:
        return next((r for r in self.replies if r.bot_id == bot_id), None)

    def names(self, bot_id: str) -> bool:
        return self.named and self.reply_of(bot_id) is not None

    def involves(self) -> list[str]:
        """The bots told of its changes: the challenger and every bot named or that answered."""
        return list(dict.fromkeys([self.challenger_id, *(r.bot_id for r in self.replies)]))

    def seen(self, now_ms: int) -> Challenge:
        """The challenge as it stands: one still OPEN at its expiry has EXPIRED. Derived on
        reading (the workers' clock also writes it, to free the challenger's limit and tell
        the bots), so no reader sees an expired challenge as open and no answer is decided
        on one; the clock's write and an answer decided just before the expiry cannot both
        apply (one loses the compare-and-set, and is decided again or seen next round)."""
        if self.status is ChallengeStatus.OPEN and now_ms >= self.expires_ms:
            return replace(self, status=ChallengeStatus.EXPIRED, closed_ms=self.expires_ms)
        return self

    def answered(self, bot_id: str, name: str, answer: ChallengeAnswer, at_ms: int, reason: str | None) -> Challenge:
        """After ``bot_id``'s answer: ACCEPTED with the match id once the last seat is taken,
        DECLINED once too few named bots are left to fill the seats."""
        reply = Reply(bot_id, name, answer, at_ms, reason)
        if self.reply_of(bot_id) is None:
            replies = (*self.replies, reply)
        else:
            replies = tuple(reply if r.bot_id == bot_id else r for r in self.replies)
        accepted = (*self.accepted, bot_id) if answer is ChallengeAnswer.ACCEPTED else self.accepted
        changed = replace(self, replies=replies, accepted=accepted)
        if changed.seats_to_fill <= 0:
            return replace(changed, status=ChallengeStatus.ACCEPTED, match_id=self.match_id_to_be, closed_ms=at_ms)
        if self.named:
            still = sum(1 for r in replies if r.answer is not ChallengeAnswer.DECLINED)
            if still < self.terms.players - 1:
                return replace(changed, status=ChallengeStatus.DECLINED, closed_ms=at_ms)
        return changed

    def closed(self, status: ChallengeStatus, at_ms: int) -> Challenge:
        return replace(self, status=status, closed_ms=at_ms)

    @property
    def match_id_to_be(self) -> str:
        """The id of the match it makes, fixed by the challenge: making it twice (a process
        died in between, the clock made it again) changes nothing."""
        return homed_match_id(f"c{self.id}")

    def seating(self, seed: str) -> list[str]:
        """The bots in their seats: the challenger and the accepting bots in an order drawn
        from the match's secret seed, so no bot chooses its seat by when it accepts."""
        bots = [self.challenger_id, *self.accepted[: self.terms.players - 1]]
        Random(f"{seed}:seats").shuffle(bots)
        return bots

    def name_of(self, bot_id: str) -> str:
        if bot_id == self.challenger_id:
            return self.challenger_name
        reply = self.reply_of(bot_id)
        return bot_id if reply is None else reply.name

    def to_dict(self) -> dict[str, Any]:
        return {
            "by": self.challenger_id, "byName": self.challenger_name, "terms": self.terms.to_dict(),
            "replies": [r.to_dict() for r in self.replies], "named": self.named, "status": self.status.value,
            "created": self.created_ms, "expires": self.expires_ms, "accepted": list(self.accepted),
            "match": self.match_id, "closed": self.closed_ms,
        }

    @classmethod
    def from_dict(cls, challenge_id: str, data: dict[str, Any], version: int) -> Challenge:
        return cls(
            challenge_id, data["by"], data["byName"], ChallengeTerms.from_dict(data["terms"]),
            tuple(Reply.from_dict(r) for r in data["replies"]), data["named"], ChallengeStatus(data["status"]),
            data["created"], data["expires"], tuple(data["accepted"]), data.get("match"), data.get("closed"),
            version,
        )
