"""Wizard Arena's bot SDK: write a :class:`Bot`, run it against a server with
:func:`run_bot` (or ``wizard-arena play``), or against other bots locally with
``wizard-arena tournament run``."""

from sdk.bot import Bot, BotSpecError, HouseBotPlayer, load_bot

__all__ = ["Bot", "BotSpecError", "HouseBotPlayer", "load_bot"]
