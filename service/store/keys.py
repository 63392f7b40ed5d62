"""Every name the service gives a Redis key or channel: this module, and only this one,
knows them (the scripts name channels after their keys, as below).

Keys (hash tags keep each match's keys, and each bot's, in one Cluster slot):
- ``{m:<id>}:match``   hash: version, settings (JSON), state (engine bytes), live (JSON),
  eid (id of the match's latest event), record (JSON, once finished)
- ``{m:<id>}:events``  stream: one entry per change, ``v`` (version) and ``e`` (event JSON);
  the match's event log and replay source
- ``{m:<id>}:wake``    pub/sub channel: each event as it is committed, ``<version>|<event id>|<event
  JSON>``; what wakes the waiters of every API process (``service.store.feed``)
- ``deadlines``        sorted set: match id by when the workers' sweeper must look at it (ms):
  the deadline of its seats to act, or while seats are free, when it is aborted unless taken
- ``{b:<id>}:bot``     hash: name, created; ``botname:<casefolded name>`` -> bot id
- ``botlook:<look-alike key>`` -> bot id (``service.domain.bot_names``); ``botnames:lookalike-index``
  the key version that index is built for (absent: to be built)
- ``{t:<sha256>}:bot`` the bot a token hash belongs to (tokens themselves are never stored)
- ``{b:<id>}:matches`` set: matches the bot sits in that have not ended
- ``{b:<id>}:waiting`` sorted set: matches the bot created whose seats are not all taken yet,
  by when they are aborted if they still are not
- ``{b:<id>}:wake``    pub/sub channel: a match's id when the bot is seated in it
- ``{t:<sha256>}:rate`` a token's request bucket
- ``registrations:<address>`` bots registered from a client address this hour
- ``matches:unsettled`` sorted set: ended matches not yet settled, by when they ended;
  ``settle-claim:<match>`` held while one's settlement job is queued or running
- ``{b:<id>}:ratings`` hash: ruleset -> the bot's Elo rating and games; ``{b:<id>}:history:<ruleset>``
  list: its rating after each rated match; ``leaderboard:<ruleset>:<ELO|FITTED>`` sorted sets;
  ``ratings:applied`` set of matches whose change is applied; ``ratings:results:<ruleset>``
  list: each rated match's result, for the fit; ``ratings:names``, ``ratings:fitted:<ruleset>``;
  ``ratings:fit-requests`` set: rulesets to refit; ``ratings:fit-queued:<ruleset>`` held while
  a refit waits in the queue
- ``{tn:<id>}:tournament`` hash: spec, status, entrants (JSON), started, finished;
  ``{tn:<id>}:slots`` hash: table id -> table (JSON); ``{tn:<id>}:results`` hash: match id ->
  result (JSON); ``{tn:<id>}:lock`` held by the one run advancing it; ``tournaments:active``
  sorted set: tournaments due or running, by start time
- ``matches:live``     sorted set: matches not yet archived, by when they were created (ms): the
  live half of the listings (``service.domain.listings``); a match leaves it when settlement
  has archived it
- ``tournaments:listed`` sorted set: tournaments by when they were created (ms), for the
  listings; one the archive holds is read from there (and leaves this set)
"""

from __future__ import annotations

DEADLINES = "deadlines"
#: Ended matches not yet settled (ratings, tournament standings), by when they ended.
UNSETTLED = "matches:unsettled"
#: Matches not yet archived, by when they were created (ms): what listings read from Redis.
LIVE_MATCHES = "matches:live"
#: Tournaments by when they were created (ms), until the listings find them archived.
LISTED_TOURNAMENTS = "tournaments:listed"
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


#: tournaments that are due or running, by when they start (ms)
ACTIVE_TOURNAMENTS = "tournaments:active"


def tournament_key(tournament_id: str) -> str:
    return f"{{tn:{tournament_id}}}:tournament"


def tournament_tables_key(tournament_id: str) -> str:
    return f"{{tn:{tournament_id}}}:slots"


def tournament_results_key(tournament_id: str) -> str:
    return f"{{tn:{tournament_id}}}:results"


def tournament_lock_key(tournament_id: str) -> str:
    return f"{{tn:{tournament_id}}}:lock"


#: ended (FINISHED or CANCELLED) tournaments not yet in the archive, by when they ended (ms)
UNARCHIVED_TOURNAMENTS = "tournaments:unarchived"


def archive_claim_key(tournament_id: str) -> str:
    """Held while an ended tournament's archiving job is queued or running (or waits to retry)."""
    return f"archive-claim:{tournament_id}"


def settle_claim_key(match_id: str) -> str:
    """Held while an ended match's settlement job is queued or running."""
    return f"settle-claim:{match_id}"


#: rulesets whose fitted ratings someone asked to refit
FIT_REQUESTS = "ratings:fit-requests"
