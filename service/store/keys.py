"""Every name the service gives a Redis key or channel: this module, and only this one,
knows them (the scripts name channels after their keys, as below).

Keys (hash tags keep each match's keys, and each bot's, in one Cluster slot):
- ``{m:<id>}:match``   hash: version, settings (JSON), state (engine bytes), live (JSON),
  eid (id of the match's latest event), record (JSON, once finished), hooked (``|<bot>|<bot>|``:
  its seats' bots that have a webhook, whose calls its scripts queue; kept as bots join and by
  ``service.domain.webhooks`` as a bot sets or removes its webhook; absent in a match made
  before homes, whose scripts look at its bots' hashes)
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
- ``{b:<id>}:matches`` set: matches the bot sits in that have not ended, noted before the
  script that seats it and dropped after the one that ends the match (or frees its seat), in
  steps of their own (another slot): it may hold a match where the bot holds no seat or that
  ended, which readers ignore and settlement (or the cap on open matches) drops
- ``{b:<id>}:waiting`` sorted set: matches the bot created whose seats are not all taken yet,
  by when they are aborted if they still are not, reserved before the match is created and
  dropped after the commit that fills or aborts it (an entry past its time counts no more)
- ``{b:<id>}:wake``    pub/sub channel: a match's id when the bot is seated in it
- ``{b:<id>}:invitations`` sorted set: tournaments the bot was invited to, by when;
  ``{b:<id>}:invited`` pub/sub channel: what the bot is offered and must answer: a tournament's
  id when it is invited to it, ``c:<challenge id>`` when a challenge it made or is named in
  is made or changes (``service.domain.invitations`` reads both on one stream)
- ``{b:<challenger>}:challenge:<rest>`` hash (the challenge ``<challenger>-<rest>``, in its
  challenger's slot, beside the ``{b:<id>}:waiting`` it counts among; ``{c:<id>}:challenge`` for
  one made before, one server only): version, data (JSON: the challenge,
  ``service.model.challenge``), seed (the match's, drawn at creation, never shown);
  ``{b:<id>}:challenges`` sorted set: the challenges the bot made or is named in, by when made
  (its latest 100); ``challenges:open`` sorted set: OPEN challenges that name nobody (anyone
  may accept), by when they expire; ``challenges:due`` sorted set: challenges by when the
  workers' clock must look at them (an OPEN one's expiry; an ACCEPTED one's match, should the
  accepting process die before making it; a few seconds after a challenge is made or changes
  status, until the other bots' lists, the open ones and the telling are written, should the
  process die before: ``service.store.challenges``)
- ``{t:<sha256>}:rate`` a token's request bucket
- ``registrations:<address>`` bots registered from a client address this hour
- ``matches:unsettled`` sorted set: ended matches not yet settled, by when they ended;
  ``matches:settle-claims`` hash: match -> until when (ms) its settlement job, queued or
  running, holds it
- ``{r:<ruleset>}:...`` a ruleset's ratings, all in one slot (one script applies a match's
  change whole): ``elo`` hash: bot -> its Elo rating, games and deviation (JSON; kept before
  deviations were: no deviation); ``history:<bot>`` list: its rating after each rated match;
  ``leaderboard:<ELO|FITTED>`` sorted sets; ``names`` hash: bot -> name; ``applied`` set of
  matches whose change is applied; ``changes`` hash: match -> its changes (JSON, for the
  archive); ``results`` list: each rated match's result, for the fit; ``fitted`` hash: bot ->
  its fitted games and deviation (JSON; kept before deviations were: the games)
- ``{fits}:requests`` set: rulesets to refit, until a refit of each starts; ``{fits}:queued``
  hash: ruleset -> until when (ms) a refit queued holds it (one slot: one script claims requests)
- ``ratings:layout`` on one server, once the ratings kept before this layout (``{b:<id>}:ratings``,
  ``{b:<id>}:history:<ruleset>``, ``leaderboard:*``, ``ratings:*``) are moved into it: every
  process's start-up step moves them (``service.store.upgrade``) before it reads any; a cluster
  never held them
- ``{tn:<id>}:tournament`` hash: spec, status, entrants (JSON), started, finished;
  ``{tn:<id>}:slots`` hash: table id -> table (JSON); ``{tn:<id>}:results`` hash: match id ->
  result (JSON); ``{tn:<id>}:invitations`` hash: bot id -> its invitation (JSON);
  ``{tn:<id>}:lock`` held by the one run advancing it; ``tournaments:active``
  sorted set: tournaments due or running, by start time (by now while a creation or an end is
  under way, so that the clock completes one cut short: ``service.store.tournaments``)
- ``matches:live``     sorted set: matches not yet archived, by when they were created (ms): the
  live half of the listings (``service.domain.listings``); a match leaves it when settlement
  has archived it
- ``archive:outage``  when the workers' jobs first found the archive's database away (ms),
  while it is: the one job that sets it says so in the log, the one that finds it back says that
- ``matches:house-play`` list: house-only matches (a tournament's tables of house bots) started by a
  worker, for any worker's clock to hand to an RQ job that plays them (``service.store.house_play``)
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
  listings; one the archive holds is read from there (and leaves this set);
  ``tournaments:unarchived`` sorted set: ended tournaments the archive awaits, by when they
  ended; ``archive-claim:<id>`` held while one's archiving job is queued or running
- ``ladders`` set: the ladders (``<ruleset>:<players>``) any bot ever joined, for the workers'
  pairing passes (``service.domain.ladders``); per ladder, one slot (``{l:<ladder>}:...``):
  ``members`` sorted set: bot id by when it joined (what the pass reads; the bot's own
  ``{b:<id>}:ladders`` says whether it is a member: written first on joining, removed first on
  leaving); ``tables`` hash: table id -> table (JSON) for each table in play; ``pending`` hash:
  table id -> table (JSON) while its pass reserves its bots' places (a dead pass's are released
  by the next); ``meetings`` hash: ``<bot>|<bot>`` (ids sorted) -> tables the two sat at
  together; ``tables-made`` counter, the table ids; ``unstarted`` set: tables stored whose
  first match is not created yet (a pass that died in between leaves them there for the next);
  ``lock`` held by the one pairing pass running (the table and pending scripts check it)
- ``{b:<id>}:ladders`` hash: ladder -> when the bot joined it (ms); ``{b:<id>}:ladder-state``
  hash: ``playing`` (the ladder matches it plays now, in all ladders: what the cap counts),
  ``playing:<ladder>`` (those of one ladder, while it has any: what its memberships show),
  ``table:<ladder>:<table>`` (its place reserved at that table: the table's matches, counted
  in ``playing`` until the table ends), ``timeouts`` (its ladder tables in a row in which it
  let a move time out), ``paused`` (ms) and ``reason`` while it is paused
- ``ladders:layout`` on one server, once the ladders kept before this layout
  (``ladder:<ladder>:*``) are moved into it (``service.store.upgrade``, as ``ratings:layout``)

Homes: on a Redis Cluster every script and transaction must touch one slot, so what the
service keeps beside a match in one script (its deadline, its place in the settlement queue,
the live listing, its webhook calls) is sharded into ``HOMES`` homes, each one slot, evenly
spread over the 16,384 (home ``h`` is slot ``h * 256``). Match ids are drawn so that a match's
own keys hash to one of those slots (:func:`new_match_id`): a match's keys and its home's are
in one slot, and its scripts stay whole. A home's keys are ``{<tag>}:deadlines``,
``{<tag>}:unsettled``, ``{<tag>}:settle-claims``, ``{<tag>}:live``, ``{<tag>}:webhook-calls``
(:func:`home_key`, :func:`match_home_key`); the workers' sweepers, the settlement claims, the
listings and the metrics go over every home (pipelined reads). A match's bots' keys are in
other slots: what a commit changes there (their open and waiting matches) is written by steps
of its own around the match's script (``service.store.matches``). A match whose id is not in
a home (one made before homes, on one Redis server) uses the unsharded keys named below
(``deadlines``, …), which the sweepers also cover: on one server, slots do not matter.
"""

from __future__ import annotations

import secrets

from service.model.homes import HOME_TAGS, home_of_match


def home_key(home: int | None, name: str) -> str:
    """Home ``home``'s key ``name`` (``deadlines``, ``unsettled``, ``settle-claims``, ``live``,
    ``webhook-calls``); None: the unsharded key of that name (see the module's docstring)."""
    if home is None:
        return _UNSHARDED[name]
    return f"{{{HOME_TAGS[home]}}}:{name}"


def match_home_key(match_id: str, name: str) -> str:
    """The key ``name`` of the home match ``match_id`` lives in (:func:`home_key`): in the
    match's own slot."""
    return home_key(home_of_match(match_id), name)


DEADLINES = "deadlines"
#: Ended matches not yet settled (ratings, tournament standings), by when they ended.
UNSETTLED = "matches:unsettled"
#: Matches not yet archived, by when they were created (ms): what listings read from Redis.
LIVE_MATCHES = "matches:live"
#: Tournaments by when they were created (ms), until the listings find them archived.
LISTED_TOURNAMENTS = "tournaments:listed"
#: When the workers' jobs first found the archive away (ms); gone once one finds it back.
ARCHIVE_OUTAGE = "archive:outage"
#: House-only matches waiting for a worker's job to make their moves (service.store.house_play).
HOUSE_PLAY = "matches:house-play"
#: Each worker host's clock's last round (ms), by host name.
CLOCK_HEARTBEATS = "clock:heartbeats"
#: the webhook calls due of matches made before homes, for the workers' dispatchers
#: (service.store.webhooks; a home's are ``home_key(home, "webhook-calls")``)
WEBHOOK_CALLS = "webhooks:calls"
#: the consumer group of the dispatchers on each stream of webhook calls
WEBHOOK_DISPATCHERS = "dispatchers"
#: Until when (ms) each queued settlement is claimed, by match.
SETTLE_CLAIMS = "matches:settle-claims"
#: a home's keys (home_key) by name, and the unsharded key each stands in for
_UNSHARDED = {"deadlines": DEADLINES, "unsettled": UNSETTLED, "live": LIVE_MATCHES, "webhook-calls": WEBHOOK_CALLS,
              "settle-claims": SETTLE_CLAIMS}


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


def _ratings_tag(ruleset: str) -> str:
    return f"{{r:{ruleset}}}"


def elo_ratings_key(ruleset: str) -> str:
    """Hash: bot -> JSON {rating, games, deviation} of its Elo rating under ``ruleset``."""
    return f"{_ratings_tag(ruleset)}:elo"


def leaderboard_key(ruleset: str, method: str) -> str:
    return f"{_ratings_tag(ruleset)}:leaderboard:{method}"


def fitted_ratings_key(ruleset: str) -> str:
    """Hash: bot -> JSON {games, deviation} of its rating in the ruleset's latest refit."""
    return f"{_ratings_tag(ruleset)}:fitted"


def rating_results_key(ruleset: str) -> str:
    """List: each rated match's result (bots, scores), what the refit reads."""
    return f"{_ratings_tag(ruleset)}:results"


def rating_names_key(ruleset: str) -> str:
    """Hash: bot -> the name its leaderboard rows show."""
    return f"{_ratings_tag(ruleset)}:names"


def ratings_applied_key(ruleset: str) -> str:
    """Set: the ruleset's matches whose rating change is applied."""
    return f"{_ratings_tag(ruleset)}:applied"


def rating_changes_key(ruleset: str) -> str:
    """Hash: match -> JSON list of its bots' changes (bot, name, before, after), for the archive."""
    return f"{_ratings_tag(ruleset)}:changes"


def history_key(bot_id: str, ruleset: str) -> str:
    return f"{_ratings_tag(ruleset)}:history:{bot_id}"


#: on one server: set once the ratings kept under the names before ``{r:<ruleset>}`` are moved
RATINGS_LAYOUT = "ratings:layout"


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


def new_challenge_id(challenger_id: str) -> str:
    """A new challenge's id: its challenger's id and 12 random hex digits, so that its key
    (:func:`challenge_key`) lies in its challenger's slot, beside the challenger's waiting
    matches it counts among (one script makes it and holds the limit)."""
    return f"{challenger_id}-{secrets.token_hex(6)}"


def challenge_key(challenge_id: str) -> str:
    """A challenge's hash: ``{b:<challenger>}:challenge:<rest>`` (:func:`new_challenge_id`);
    ``{c:<id>}:challenge`` for a challenge made before (an id without ``-``, one server only)."""
    challenger, _, own = challenge_id.rpartition("-")
    if not challenger:
        return f"{{c:{challenge_id}}}:challenge"
    return f"{{b:{challenger}}}:challenge:{own}"


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


#: rulesets whose fitted ratings someone asked to refit, until their refit starts
FIT_REQUESTS = "{fits}:requests"
#: ruleset -> until when (ms) a refit of it queued holds its claim (the requests' slot)
FIT_CLAIMS = "{fits}:queued"


#: the ladders (``<ruleset>:<players>``) any bot ever joined: the workers pass over each
LADDERS = "ladders"


def _ladder_tag(ladder: str) -> str:
    return f"{{l:{ladder}}}"


def ladder_members_key(ladder: str) -> str:
    """The ladder's members: bot id by when it joined (ms)."""
    return f"{_ladder_tag(ladder)}:members"


def ladder_tables_key(ladder: str) -> str:
    """The ladder's tables in play: table id -> table (JSON), until its last match is settled."""
    return f"{_ladder_tag(ladder)}:tables"


def ladder_pending_key(ladder: str) -> str:
    """The ladder's tables whose bots' places a pass is reserving: table id -> table (JSON)."""
    return f"{_ladder_tag(ladder)}:pending"


def ladder_meetings_key(ladder: str) -> str:
    """How many of the ladder's tables each pair of bots sat at together (``<a>|<b>``, sorted)."""
    return f"{_ladder_tag(ladder)}:meetings"


def ladder_tables_made_key(ladder: str) -> str:
    """The ladder's table counter: each new table's id."""
    return f"{_ladder_tag(ladder)}:tables-made"


def ladder_unstarted_key(ladder: str) -> str:
    """The ladder's tables stored whose first match is not created yet."""
    return f"{_ladder_tag(ladder)}:unstarted"


def ladder_lock_key(ladder: str) -> str:
    """Held by the one pairing pass of the ladder running (with an expiry: a dead worker's lapses)."""
    return f"{_ladder_tag(ladder)}:lock"


#: on one server: set once the ladders kept under the names before ``{l:<ladder>}`` are moved
LADDERS_LAYOUT = "ladders:layout"


def ladder_seat_field(ladder: str, table_id: str) -> str:
    """A bot's ladder state's field holding its place at a table (the table's matches)."""
    return f"table:{ladder}:{table_id}"


def bot_ladders_key(bot_id: str) -> str:
    """The ladders the bot is a member of: ladder -> when it joined (ms)."""
    return f"{{b:{bot_id}}}:ladders"


def bot_ladder_state_key(bot_id: str) -> str:
    """The bot's ladder matches in play, its ladder tables in a row with a timed-out move, and
    its pause (since, reason)."""
    return f"{{b:{bot_id}}}:ladder-state"
