"""Retired bots (``retireBot``) stay, with their history and ratings, but take part in
nothing new: every way into a match or a tournament asks here first."""

from __future__ import annotations

from collections.abc import Iterable

from service.errors import Forbidden
from service.store.bots import BotStore


async def refuse_retired(bots: BotStore, bot_ids: Iterable[str], what: str) -> None:
    """FORBIDDEN when any of these bots is retired (``what``: what a retired bot cannot do)."""
    retired = await bots.retired_among(bot_ids)
    if retired:
        raise Forbidden(f"bot {retired[0]} is retired: a retired bot cannot {what}")
