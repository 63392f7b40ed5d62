"""Every name the service gives a Redis key or channel: this module, and only this one,
knows them (the scripts name channels after their keys, as below).

Keys (hash tags keep each match's keys, and each bot's, in one Cluster slot):
- ``{m:<id>}:match``   hash: version, settings (JSON), state (engine bytes), live (JSON),
  eid (id of the match's latest event), record (JSON, once finished)
- ``{m:<id>}:events``  stream: one entry per change, ``v`` (version) and ``e`` (event JSON);
  the match's event log and replay source
- ``{m:<id>}:wake``    pub/sub channel: each event as it is committed, ``<version>|<event id>|<event
  JSON>``; what wakes the waiters of every API process (``service.feed``)
- ``deadlines``        sorted set: match id by when the workers' sweeper must look at it (ms):
  the deadline of its seats to act, or while seats are free, when it is aborted unless taken
- ``{b:<id>}:bot``     hash: name, created; ``botname:<casefolded name>`` -> bot id
- ``botlook:<look-alike key>`` -> bot id (``service.bot_names``); ``botnames:lookalike-index``
  the key version that index is built for (absent: to be built)
- ``{t:<sha256>}:bot`` the bot a token hash belongs to (tokens themselves are never stored)
- ``{b:<id>}:matches`` set: matches the bot sits in that have not ended
- ``{b:<id>}:waiting`` sorted set: matches the bot created whose seats are not all taken yet,
  by when they are aborted if they still are not
- ``{b:<id>}:wake``    pub/sub channel: a match's id when the bot is seated in it
- ``{t:<sha256>}:rate`` a token's request bucket
- ``registrations:<address>`` bots registered from a client address this hour
"""

from __future__ import annotations

DEADLINES = "deadlines"
#: Ended matches not yet settled (ratings, tournament standings), by when they ended.
UNSETTLED = "matches:unsettled"
#: the version of ``service.domain.bot_names`` keys the look-alike index holds
LOOKALIKE_INDEX = "botnames:lookalike-index"




def match_key(match_id: str) -> str:
    return f"{{m:{match_id}}}:match"


def events_key(match_id: str) -> str:
    return f"{{m:{match_id}}}:events"


def match_channel(match_id: str) -> bytes:
    """The pub/sub channel the commit script publishes a match's events on (named after its keys)."""
    return f"{{m:{match_id}}}:wake".encode()


def bot_channel(bot_id: str) -> bytes:
    """The pub/sub channel the commit script names the matches a bot is seated in on."""
    return f"{{b:{bot_id}}}:wake".encode()


def bot_waiting_key(bot_id: str) -> str:
    """The matches a bot created that still have free seats, by when they are aborted."""
    return f"{{b:{bot_id}}}:waiting"


def bot_key(bot_id: str) -> str:
    return f"{{b:{bot_id}}}:bot"


def bot_matches_key(bot_id: str) -> str:
    return f"{{b:{bot_id}}}:matches"


def registrations_key(address: str) -> str:
    return f"registrations:{address}"


def lookalike_key_name(key: str) -> str:
    return f"botlook:{key}"


def ratings_key(bot_id: str) -> str:
    return f"{{b:{bot_id}}}:ratings"


def fit_claim_key(ruleset: str) -> str:
    """Held while a refit of ``ruleset`` waits in the queue (the job releases it as it starts)."""
    return f"ratings:fit-queued:{ruleset}"


def leaderboard_key(ruleset: str, method: str) -> str:
    return f"leaderboard:{ruleset}:{method}"


def history_key(bot_id: str, ruleset: str) -> str:
    return f"{{b:{bot_id}}}:history:{ruleset}"
