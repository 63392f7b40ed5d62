"""Every name the service gives a Redis key or channel: this module, and only this one,
knows them (the scripts name channels after their keys, as below).

Keys (hash tags keep each match's keys, and each bot's, in one Cluster slot):
- ``{m:<id>}:match``   hash: version, settings (JSON), state (engine bytes), live (JSON),
  eid (id of the match's latest event), record (JSON, once finished), hooked (``|<bot>|<bot>|``:
  its seats' bots that have a webhook, whose calls its commits queue; kept by
  ``service.domain.webhooks`` as a bot sets or removes its webhook)
- ``{m:<id>}:events``  stream: one entry per change, ``v`` (version) and ``e`` (event JSON);
  the match's event log and replay source
- ``{m:<id>}:wake``    pub/sub channel: each event as it is committed, ``<version>|<event id>|<event
  JSON>``; what wakes the waiters of every API process (``service.store.feed``)
- ``deadlines``        sorted set: match id by when the workers' sweeper must look at it (ms):
  the deadline of its seats to act, or while seats are free, when it is aborted unless taken
- ``{b:<id>}:bot``     hash: name, created, invitations (its invitation policy, absent: ASK),
  challenges (its challenge policy, absent: ACCEPT_ANY); ``botname:<casefolded name>`` -> bot id
- ``botlook:<look-alike key>`` -> bot id (``service.domain.bot_names``); either holds
  ``~<bot id>|<ms>`` while a registration has reserved it (``service.store.bots.RESERVE_NAME``);
  each in a slot of its own; ``botnames:lookalike-index``
  the key version that index is built for (absent: to be built)
- ``{b:<id>}:bot``     also description, homepage (updateBot), retired (ms, once retired)
- ``{t:<sha256>}:bot`` the bot a token hash belongs to, and the token's id (tokens themselves are
  never stored); ``{t:<sha256>}:used`` when the token was last looked up (ms)
- ``{b:<id>}:tokens``  hash: token id -> JSON {name, created, hash, state}: the bot's tokens;
  ``state`` ``making`` or ``revoking`` while a change of the two slots (this and the token's
  ``{t:<sha256>}:bot``) is under way (``service.store.bots``), absent when in use
- ``{b:tokens}:revoked`` pub/sub channel: the hash of each token revoked, so every API process
  drops what it keeps of it (``service.domain.bots``); on a cluster, published on every node
- ``{b:<id>}:matches`` set: matches the bot sits in that have not ended
- ``{b:<id>}:waiting`` sorted set: matches the bot created whose seats are not all taken yet,
  by when they are aborted if they still are not
- ``{b:<id>}:wake``    pub/sub channel: a match's id when the bot is seated in it
- ``{b:<id>}:invitations`` sorted set: tournaments the bot was invited to, by when;
  ``{b:<id>}:invited`` pub/sub channel: what the bot is offered and must answer: a tournament's
  id when it is invited to it, ``c:<challenge id>`` when a challenge it made or is named in
  is made or changes (``service.domain.invitations`` reads both on one stream)
- ``{c:<id>}:challenge`` hash: version, data (JSON: the challenge, ``service.model.challenge``),
  seed (the match's, drawn at creation, never shown); ``{b:<id>}:challenges`` sorted set: the
  challenges the bot made or is named in, by when made (its latest 100);
  ``challenges:open`` sorted set: OPEN challenges that name nobody (anyone may accept), by when
  they expire; ``challenges:due`` sorted set: challenges by when the workers' clock must look at
  them (an OPEN one's expiry; an ACCEPTED one's match, should the accepting process die before
  making it)
- ``{t:<sha256>}:rate`` a token's request bucket
- ``registrations:<address>`` bots registered from a client address this hour
- ``matches:unsettled`` sorted set: ended matches not yet settled, by when they ended;
  ``settle-claim:<match>`` held while one's settlement job is queued or running
- ``{b:<id>}:ratings`` hash: ruleset -> the bot's Elo rating, games and deviation (JSON; kept
  before deviations were: no deviation); ``{b:<id>}:history:<ruleset>``
  list: its rating after each rated match; ``leaderboard:<ruleset>:<ELO|FITTED>`` sorted sets;
  ``ratings:applied`` set of matches whose change is applied; ``ratings:results:<ruleset>``
  list: each rated match's result, for the fit; ``ratings:names``, ``ratings:fitted:<ruleset>``
  hash: bot -> its fitted games and deviation (JSON; kept before deviations were: the games);
  ``ratings:fit-requests`` set: rulesets to refit; ``ratings:fit-queued:<ruleset>`` held while
  a refit waits in the queue
- ``{tn:<id>}:tournament`` hash: spec, status, entrants (JSON), started, finished;
  ``{tn:<id>}:slots`` hash: table id -> table (JSON); ``{tn:<id>}:results`` hash: match id ->
  result (JSON); ``{tn:<id>}:invitations`` hash: bot id -> its invitation (JSON);
  ``{tn:<id>}:lock`` held by the one run advancing it; ``tournaments:active``
  sorted set: tournaments due or running, by start time
- ``matches:live``     sorted set: matches not yet archived, by when they were created (ms): the
  live half of the listings (``service.domain.listings``); a match leaves it when settlement
  has archived it
- ``archive:outage``  when the workers' jobs first found the archive's database away (ms),
  while it is: the one job that sets it says so in the log, the one that finds it back says that
- ``clock:heartbeats`` hash: worker host name -> when its clock last went round (ms), for
  ``/readyz``, ``wizard-arena worker --check`` and the metrics (``service.health``)
- ``{<home tag>}:webhook-calls`` stream, one per home (``webhooks:calls`` for matches made before
  homes): the webhook calls due (a bot's turn, a match's start or end), each
  ``c`` = ``<match>|<version>|<seat>|<turn|start|end>|<bot>``, queued by the commit script on the
  match's home's stream (its slot) for the workers' dispatchers (``worker.webhooks``), read by
  the consumer group ``dispatchers`` of each stream (``service.store.webhooks.CALL_STREAMS``);
  ``webhook-sent:<match>:<version>:<seat>:<kind>`` held once a turn or end call is sent (never
  twice); ``webhook-started:<match>:<seat>`` the seat's start call: ``sending``, then ``done``
  (a turn call makes the start itself when nobody has, and waits while another dispatcher does);
  both in slots of their own, touched by single-key commands only
- ``{b:<id>}:bot``     also webhook (URL), webhook_secret, webhook_failures (in a row),
  webhook_error, webhook_error_at, webhook_paused_until (ms)
- ``tournaments:listed`` sorted set: tournaments by when they were created (ms), for the
  listings; one the archive holds is read from there (and leaves this set)
- ``ladders`` set: the ladders (``<ruleset>:<players>``) any bot ever joined, for the workers'
  pairing passes (``service.domain.ladders``); per ladder: ``ladder:<ladder>:members`` sorted
  set: bot id by when it joined; ``ladder:<ladder>:tables`` hash: table id -> table (JSON) for
  each table in play; ``ladder:<ladder>:meetings`` hash: ``<bot>|<bot>`` (ids sorted) -> tables
  the two sat at together; ``ladder:<ladder>:tables-made`` counter, the table ids;
  ``ladder:<ladder>:unstarted`` set: tables stored whose first match is not created yet (a
  pass that died in between leaves them there for the next);
  ``ladder:<ladder>:lock`` held by the one pairing pass running
- ``{b:<id>}:ladders`` hash: ladder -> when the bot joined it (ms); ``{b:<id>}:ladder-state``
  hash: ``playing`` (the ladder matches it plays now, in all ladders: what the cap counts),
  ``playing:<ladder>`` (those of one ladder, while it has any: what its memberships show),
  ``timeouts`` (its ladder tables in a row in which it let a move time out), ``paused`` (ms)
  and ``reason`` while it is paused

Homes: on a Redis Cluster every script and transaction must touch one slot, so what the
service keeps beside a match in one script (its deadline, its place in the settlement queue,
the live listing, its webhook calls) is sharded into ``HOMES`` homes, each one slot, evenly
spread over the 16,384 (home ``h`` is slot ``h * 256``). Match ids are drawn so that a match's
own keys hash to one of those slots (:func:`new_match_id`): a match's keys and its home's are
in one slot, and its scripts stay whole. A home's keys are ``{<tag>}:deadlines``,
``{<tag>}:unsettled``, ``{<tag>}:live``, ``{<tag>}:webhook-calls`` (:func:`home_key`); the
workers' sweepers go over every home. A match whose id is not in a home (one made before
homes, on one Redis server) uses the unsharded keys named below (``deadlines``, …), which the
sweepers also cover: on one server, slots do not matter.
"""

from __future__ import annotations

from service.model.homes import HOME_TAGS


def home_key(home: int | None, name: str) -> str:
    """Home ``home``'s key ``name`` (``deadlines``, ``unsettled``, ``live``, ``webhook-calls``);
    None: the unsharded key of that name (see the module's docstring)."""
    if home is None:
        return _UNSHARDED[name]
    return f"{{{HOME_TAGS[home]}}}:{name}"


DEADLINES = "deadlines"
#: Ended matches not yet settled (ratings, tournament standings), by when they ended.
UNSETTLED = "matches:unsettled"
#: Matches not yet archived, by when they were created (ms): what listings read from Redis.
LIVE_MATCHES = "matches:live"
#: Tournaments by when they were created (ms), until the listings find them archived.
LISTED_TOURNAMENTS = "tournaments:listed"
#: When the workers' jobs first found the archive away (ms); gone once one finds it back.
ARCHIVE_OUTAGE = "archive:outage"
#: Each worker host's clock's last round (ms), by host name.
CLOCK_HEARTBEATS = "clock:heartbeats"
#: the webhook calls due of matches made before homes, for the workers' dispatchers
#: (service.store.webhooks; a home's are ``home_key(home, "webhook-calls")``)
WEBHOOK_CALLS = "webhooks:calls"
#: the consumer group of the dispatchers on each stream of webhook calls
WEBHOOK_DISPATCHERS = "dispatchers"
#: a home's keys (home_key) by name, and the unsharded key each stands in for
_UNSHARDED = {"deadlines": DEADLINES, "unsettled": UNSETTLED, "live": LIVE_MATCHES, "webhook-calls": WEBHOOK_CALLS}


def webhook_sent_key(match_id: str, version: int, seat: int, kind: str) -> str:
    """Held once the call is sent: a call taken over from a dead dispatcher is not sent twice."""
    return f"webhook-sent:{match_id}:{version}:{seat}:{kind}"


def webhook_started_key(match_id: str, seat: int) -> str:
    """A seat's start call: ``sending`` while a dispatcher makes it, then ``done``; no turn call
    goes out before it is done (whichever dispatchers the two reach)."""
    return f"webhook-started:{match_id}:{seat}"


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


def bot_tokens_key(bot_id: str) -> str:
    return f"{{b:{bot_id}}}:tokens"


def token_key(token_hash: str) -> str:
    return f"{{t:{token_hash}}}:bot"


def token_used_key(token_hash: str) -> str:
    return f"{{t:{token_hash}}}:used"


def token_rate_key(token_hash: str) -> str:
    return f"{{t:{token_hash}}}:rate"


#: the pub/sub channel a revoked token's hash is published on (tagged like a bot's notices, so
#: that the event feed reads its messages as notices: service.store.matches.decode_published)
REVOKED_TOKENS = b"{b:tokens}:revoked"


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


def fitted_ratings_key(ruleset: str) -> str:
    """Hash: bot -> JSON {games, deviation} of its rating in the ruleset's latest refit."""
    return f"ratings:fitted:{ruleset}"


def rating_results_key(ruleset: str) -> str:
    """List: each rated match's result (bots, scores), what the refit reads."""
    return f"ratings:results:{ruleset}"


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


def tournament_invitations_key(tournament_id: str) -> str:
    return f"{{tn:{tournament_id}}}:invitations"


def bot_invitations_key(bot_id: str) -> str:
    return f"{{b:{bot_id}}}:invitations"


def bot_invited_channel(bot_id: str) -> bytes:
    """The pub/sub channel a tournament's id is published on when the bot is invited to it."""
    return f"{{b:{bot_id}}}:invited".encode()


def challenge_key(challenge_id: str) -> str:
    return f"{{c:{challenge_id}}}:challenge"


def bot_challenges_key(bot_id: str) -> str:
    """The challenges a bot made or is named in, by when they were made."""
    return f"{{b:{bot_id}}}:challenges"


#: OPEN challenges that name no bot (anyone may accept), by when they expire (ms)
OPEN_CHALLENGES = "challenges:open"
#: challenges by when the workers' clock must look at them (ms)
CHALLENGES_DUE = "challenges:due"


def challenge_notice(challenge_id: str) -> str:
    """What is published on a bot's ``bot_invited_channel`` for a challenge (a tournament's id
    has no ``:``)."""
    return f"c:{challenge_id}"


def challenge_of_notice(payload: str) -> str | None:
    """The challenge a message on a bot's ``bot_invited_channel`` names (None: a tournament)."""
    return payload[2:] if payload.startswith("c:") else None


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


#: the ladders (``<ruleset>:<players>``) any bot ever joined: the workers pass over each
LADDERS = "ladders"


def ladder_members_key(ladder: str) -> str:
    """The ladder's members: bot id by when it joined (ms)."""
    return f"ladder:{ladder}:members"


def ladder_tables_key(ladder: str) -> str:
    """The ladder's tables in play: table id -> table (JSON), until its last match is settled."""
    return f"ladder:{ladder}:tables"


def ladder_meetings_key(ladder: str) -> str:
    """How many of the ladder's tables each pair of bots sat at together (``<a>|<b>``, sorted)."""
    return f"ladder:{ladder}:meetings"


def ladder_tables_made_key(ladder: str) -> str:
    """The ladder's table counter: each new table's id."""
    return f"ladder:{ladder}:tables-made"


def ladder_unstarted_key(ladder: str) -> str:
    """The ladder's tables stored whose first match is not created yet."""
    return f"ladder:{ladder}:unstarted"


def ladder_lock_key(ladder: str) -> str:
    """Held by the one pairing pass of the ladder running (with an expiry: a dead worker's lapses)."""
    return f"ladder:{ladder}:lock"


def bot_ladders_key(bot_id: str) -> str:
    """The ladders the bot is a member of: ladder -> when it joined (ms)."""
    return f"{{b:{bot_id}}}:ladders"


def bot_ladder_state_key(bot_id: str) -> str:
    """The bot's ladder matches in play, its ladder tables in a row with a timed-out move, and
    its pause (since, reason)."""
    return f"{{b:{bot_id}}}:ladder-state"
