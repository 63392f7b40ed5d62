"""The house bots by kind, the names the API, tournaments and the SDK know them by:
``RANDOM`` and ``HEURISTIC`` (:mod:`wizard.bots`), ``SEARCH`` (:mod:`wizard.search`).

>>> sorted(HOUSE_BOTS)
['HEURISTIC', 'RANDOM', 'SEARCH']
"""

from __future__ import annotations

from wizard.bots import HeuristicBot, HouseBot, RandomBot
from wizard.search import SearchBot

HOUSE_BOTS: dict[str, type[HouseBot]] = {"RANDOM": RandomBot, "HEURISTIC": HeuristicBot, "SEARCH": SearchBot}
