"""Redis brought to the key layout this code reads, once per server: the one start-up step of
every process (``Services.start``), run before the process touches anything.

What it does: on one Redis server, it moves the keys kept before Redis Cluster came (before
each ruleset's ratings and each ladder's keys shared a hash tag) to their names now
(``service.store.keys``):
- the ratings: each bot's ``{b:<id>}:ratings`` and ``{b:<id>}:history:<ruleset>``, the boards
  ``leaderboard:<ruleset>:<method>``, and ``ratings:*`` (names, changes, applied marks,
  results, fitted, fit requests), into each ruleset's ``{r:<ruleset>}:...`` and ``{fits}:...``;
  then ``ratings:layout`` is set;
- the ladders: each ladder's ``ladder:<ladder>:*`` into ``{l:<ladder>}:...``, each registered
  bot at a table in play given its place there (what the old table script counted in its
  ``playing`` without a field); then ``ladders:layout`` is set.
Once both markers are set, the step is one command (MGET). A Redis Cluster never held the
old layout: there it does nothing.

Safe to run by several processes at once, and again after one died half way: every move is
one script that moves what it finds under an old name (nothing when another moved it first)
and does nothing once the marker is set; a process goes on only after its own run has
finished, so none reads a rating or a ladder before the move. The bots' old keys are found
by SCAN, a page at a time (a script walking the whole key space would hold up the server for
as long)."""

from __future__ import annotations

from redis.asyncio import Redis

from service.store.keys import LADDERS, LADDERS_LAYOUT, RATINGS_LAYOUT
from service.store.redis_client import clustered
from wizard import Ruleset

# The ratings kept under global names, or per ruleset without its hash tag, moved into each
# ruleset's: the global applied marks, names and changes go to every ruleset (a match id is
# one ruleset's; the others' copies are never asked for). KEYS: the marker. ARGV: every ruleset.
MOVE_RULESET_RATINGS = """
if redis.call('EXISTS', KEYS[1]) == 1 then return 0 end
local function move(old, new)
  if redis.call('EXISTS', old) == 1 then redis.call('RENAME', old, new) end
end
local names = redis.call('HGETALL', 'ratings:names')
local changes = redis.call('HGETALL', 'ratings:changes')
local applied = redis.call('EXISTS', 'ratings:applied') == 1
for _, ruleset in ipairs(ARGV) do
  local tag = '{r:' .. ruleset .. '}:'
  move('leaderboard:' .. ruleset .. ':ELO', tag .. 'leaderboard:ELO')
  move('leaderboard:' .. ruleset .. ':FITTED', tag .. 'leaderboard:FITTED')
  move('ratings:results:' .. ruleset, tag .. 'results')
  move('ratings:fitted:' .. ruleset, tag .. 'fitted')
  if applied then redis.call('SUNIONSTORE', tag .. 'applied', tag .. 'applied', 'ratings:applied') end
  for i = 1, #names, 2 do redis.call('HSETNX', tag .. 'names', names[i], names[i + 1]) end
  for i = 1, #changes, 2 do redis.call('HSETNX', tag .. 'changes', changes[i], changes[i + 1]) end
end
if redis.call('EXISTS', 'ratings:fit-requests') == 1 then
  redis.call('SUNIONSTORE', '{fits}:requests', '{fits}:requests', 'ratings:fit-requests')
end
redis.call('DEL', 'ratings:names', 'ratings:changes', 'ratings:applied', 'ratings:fit-requests')
return 1
"""

#: the bots' old rating keys (``{b:<id>}:ratings``, ``{b:<id>}:history:<ruleset>``) as one SCAN
#: pass finds them: a glob cannot say both alone, so it lets through any other bot key whose
#: name goes on with r or h after the tag, which MOVE_BOT_RATINGS leaves where it is
OLD_BOT_RATINGS = "{b:*}:[rh]*"

# Bots' rating keys under their own tag moved to their rulesets' (one found gone: moved by
# another process already; one of another name: left alone). KEYS: the marker, then the keys
# found. Answer: 0 once the marker is set (the move is over: nothing more to look for).
MOVE_BOT_RATINGS = """
if redis.call('EXISTS', KEYS[1]) == 1 then return 0 end
for i = 2, #KEYS do
  local key = KEYS[i]
  local bot = string.match(key, '^{b:(.*)}:ratings$')
  local owner, ruleset = string.match(key, '^{b:(.*)}:history:(.*)$')
  if bot then
    local fields = redis.call('HGETALL', key)
    for j = 1, #fields, 2 do redis.call('HSETNX', '{r:' .. fields[j] .. '}:elo', bot, fields[j + 1]) end
    redis.call('DEL', key)
  elseif owner and redis.call('EXISTS', key) == 1 then
    redis.call('RENAME', key, '{r:' .. ruleset .. '}:history:' .. owner)
  end
end
return 1
"""

# The ladders kept before each one's keys shared a hash tag, moved there, and each registered
# bot at a table in play given its place there; then the marker (one script: the ladders are
# few, listed in one set). KEYS: the marker, the ladders.
MOVE_LADDERS = """
if redis.call('EXISTS', KEYS[1]) == 1 then return 0 end
for _, ladder in ipairs(redis.call('SMEMBERS', KEYS[2])) do
  local old, new = 'ladder:' .. ladder .. ':', '{l:' .. ladder .. '}:'
  for _, name in ipairs({'members', 'tables', 'meetings', 'tables-made', 'unstarted'}) do
    if redis.call('EXISTS', old .. name) == 1 then redis.call('RENAME', old .. name, new .. name) end
  end
  redis.call('DEL', old .. 'lock')
  local tables = redis.call('HGETALL', new .. 'tables')
  for i = 1, #tables, 2 do
    local t = cjson.decode(tables[i + 1])
    local matches = 1
    if t['duplicate'] then matches = #t['seats'] end
    for _, seat in ipairs(t['seats']) do
      if seat['house'] == cjson.null or seat['house'] == nil then
        redis.call('HSETNX', '{b:' .. seat['id'] .. '}:ladder-state', 'table:' .. ladder .. ':' .. tables[i], matches)
      end
    end
  end
end
redis.call('SET', KEYS[1], '1')
return 1
"""

#: keys SCAN looks at per call while the bots' old rating keys are looked for (a millisecond or
#: two of the server's time a call; fewer calls: a key space of 500,000 is walked in ~50)
SCAN_COUNT = 10_000


async def upgrade_layout(redis: Redis) -> None:
    """Move what one Redis server keeps under the old layout (see the module's docstring);
    nothing on a cluster, or once done."""
    if clustered(redis):
        return
    ratings_moved, ladders_moved = await redis.mget(RATINGS_LAYOUT, LADDERS_LAYOUT)
    if ratings_moved is None:
        await _move_ratings(redis)
    if ladders_moved is None:
        await redis.register_script(MOVE_LADDERS)(keys=[LADDERS_LAYOUT, LADDERS])


async def _move_ratings(redis: Redis) -> None:
    await redis.register_script(MOVE_RULESET_RATINGS)(keys=[RATINGS_LAYOUT], args=[r.value for r in Ruleset])
    move_bot_ratings = redis.register_script(MOVE_BOT_RATINGS)
    cursor = 0
    while True:
        cursor, found = await redis.scan(cursor, match=OLD_BOT_RATINGS, count=SCAN_COUNT)
        if found and not await move_bot_ratings(keys=[RATINGS_LAYOUT, *found]):
            return  # another process finished the move meanwhile
        if cursor == 0:
            break
    await redis.set(RATINGS_LAYOUT, "1")
