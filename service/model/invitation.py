"""An invitation to a tournament, as a value: a bot named in ``createTournament``'s ``bots``
is invited, and enters only by its own act (accepting, or joining). Pure: the store keeps
it as JSON, the domain answers it."""

from __future__ import annotations

from dataclasses import dataclass, replace
from enum import Enum
from typing import Any


class InvitationStatus(str, Enum):
    PENDING = "PENDING"
    ACCEPTED = "ACCEPTED"
    DECLINED = "DECLINED"
    #: not accepted by the start (or by a cancellation before it): the bot is left out
    EXPIRED = "EXPIRED"


class InvitationPolicy(str, Enum):
    """A bot's standing answer to invitations, applied when it is invited."""

    ACCEPT_ALL = "ACCEPT_ALL"
    DECLINE_ALL = "DECLINE_ALL"
    ASK = "ASK"


#: the reason an invitation declined by the bot's policy gives
DECLINED_BY_POLICY = "declined by the bot's invitation policy (DECLINE_ALL)"


@dataclass(frozen=True)
class Invitation:
    tournament_id: str
    bot_id: str
    #: as stored: PENDING, ACCEPTED or DECLINED (EXPIRED is read from the tournament: :meth:`seen`)
    status: InvitationStatus
    invited_by: str
    invited_by_name: str
    invited_ms: int
    answered_ms: int | None = None
    #: the bot's reason for declining (None: none given)
    reason: str | None = None

    @property
    def id(self) -> str:
        """``<tournament>-<bot>``: a tournament's id has no ``-``, so the id names both."""
        return f"{self.tournament_id}-{self.bot_id}"

    @staticmethod
    def parse_id(invitation_id: str) -> tuple[str, str] | None:
        """(tournament id, bot id) of an invitation id, or None for what no invitation is called."""
        tournament_id, dash, bot_id = invitation_id.partition("-")
        return (tournament_id, bot_id) if dash and tournament_id and bot_id else None

    def seen(self, tournament_open: bool) -> Invitation:
        """The invitation as it stands: one still PENDING once its tournament no longer takes
        entrants (started, or cancelled) has EXPIRED. Derived on reading, so no write at the
        start can be missed or race an answer (answers check the tournament in one script)."""
        if self.status is InvitationStatus.PENDING and not tournament_open:
            return replace(self, status=InvitationStatus.EXPIRED)
        return self

    def answered(self, status: InvitationStatus, at_ms: int, reason: str | None = None) -> Invitation:
        return replace(self, status=status, answered_ms=at_ms, reason=reason)

    def to_dict(self) -> dict[str, Any]:
        data: dict[str, Any] = {"status": self.status.value, "by": self.invited_by, "byName": self.invited_by_name,
                                "at": self.invited_ms}
        if self.answered_ms is not None:
            data["answered"] = self.answered_ms
        if self.reason is not None:
            data["reason"] = self.reason
        return data

    @classmethod
    def from_dict(cls, tournament_id: str, bot_id: str, data: dict[str, Any]) -> Invitation:
        return cls(tournament_id, bot_id, InvitationStatus(data["status"]), data["by"], data["byName"], data["at"],
                   data.get("answered"), data.get("reason"))
