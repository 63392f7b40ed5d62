"""Work queues in Redis: a sorted set of the items waiting (oldest first), each taken by a
claim key that lapses, so that an item a dead worker held is taken again. The settlement
queue (ended matches) and the archive's queue of ended tournaments are such queues."""

from __future__ import annotations

# The oldest waiting items whose claim nobody holds: each claimed for ARGV[2] s, the
# claimed ones answered.
# KEYS: the queue. ARGV: how many to look at, the claim's life in s, the claim keys' prefix.
CLAIM_QUEUED = """
local claimed = {}
for _, item in ipairs(redis.call('ZRANGE', KEYS[1], 0, tonumber(ARGV[1]) - 1)) do
  if redis.call('SET', ARGV[3] .. item, '1', 'NX', 'EX', ARGV[2]) then
    table.insert(claimed, item)
  end
end
return claimed
"""
