"""Batched reads for the fields a list repeats: every ``Bot.ratings`` (or ``ratingHistory``)
that one request resolves in one event-loop turn is read in one Redis round trip, however
many bots a leaderboard, a tournament's entrants or aliased fields hold. Nothing is cached:
over a WebSocket the same loaders serve a subscription's every result, which must be fresh."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from strawberry.dataloader import DataLoader

from service.domain.bots import BotProfile, BotService
from service.domain.ratings import RatingService


class Loaders:
    def __init__(self, ratings: RatingService, bots: BotService) -> None:
        self._ratings = ratings
        self._bots = bots
        #: a bot's id -> its profile (description, homepage, retired; None: no such bot)
        self.profiles: DataLoader[str, BotProfile | None] = DataLoader(self._profiles, cache=False)
        #: a bot's id -> its current Elo rating per ruleset
        self.ratings: DataLoader[str, list[dict[str, Any]]] = DataLoader(self._current, cache=False)
        #: a bot's id -> its FITTED rating per ruleset
        self.fitted: DataLoader[str, list[dict[str, Any]]] = DataLoader(self._fitted, cache=False)
        #: (bot, ruleset, last) -> its latest ``last`` history points
        self.history: DataLoader[tuple[str, str, int], list[dict[str, Any]]] = DataLoader(self._histories, cache=False)

    async def _current(self, bot_ids: Sequence[str]) -> list[list[dict[str, Any]]]:
        return await self._ratings.current(bot_ids)

    async def _fitted(self, bot_ids: Sequence[str]) -> list[list[dict[str, Any]]]:
        return await self._ratings.fitted(bot_ids)

    async def _profiles(self, bot_ids: Sequence[str]) -> list[BotProfile | None]:
        return await self._bots.profiles(list(bot_ids))

    async def _histories(self, wanted: Sequence[tuple[str, str, int]]) -> list[list[dict[str, Any]]]:
        return await self._ratings.histories(wanted)
