"""Wizard Arena's bot SDK: write a :class:`Bot`, run it against a server with
:func:`run_bot` (or ``wizard-arena play``), or against other bots locally with
``wizard-arena tournament run``."""

from sdk.bot import Bot, BotSpecError, Decision, HouseBotPlayer, load_bot
from sdk.client import ArenaClient, ArenaError, ArenaUnavailable, Match
from sdk.runner import BotRunner, run_bot

__all__ = [
    "ArenaClient", "ArenaError", "ArenaUnavailable", "Bot", "BotRunner", "BotSpecError", "Decision", "HouseBotPlayer",
    "Match", "load_bot", "run_bot",
]
