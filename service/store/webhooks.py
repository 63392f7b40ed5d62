"""Bots' webhooks in Redis: the URL and signing secret in the bot's hash with the webhook's
health (failures in a row, the last error, a pause), and the stream of calls due that the
commit script fills (``service.store.matches.WEBHOOK_CALLS``), read by the workers'
dispatchers as one consumer group: each call goes to one dispatcher."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from redis.asyncio import Redis
from redis.exceptions import ResponseError

from service.store.keys import WEBHOOK_CALLS, WEBHOOK_DISPATCHERS, bot_key, webhook_sent_key, webhook_started_key

FIELDS = ("webhook", "webhook_secret", "webhook_failures", "webhook_error", "webhook_error_at", "webhook_paused_until")

# One more failure of a bot's webhook (unless it was removed meanwhile): counted, its reason
# kept, and from ARGV[4] failures in a row on, a pause of ARGV[5] ms doubled by each failure
# after (ARGV[6] ms at most). KEYS: the bot. ARGV: the error, now (ms), the URL called, the
# failures that pause, the first pause, the longest. Returns the failures in a row (0: the
# webhook is gone or another URL now).
FAILED = """
if redis.call('HGET', KEYS[1], 'webhook') ~= ARGV[3] then return 0 end
local failures = redis.call('HINCRBY', KEYS[1], 'webhook_failures', 1)
redis.call('HSET', KEYS[1], 'webhook_error', ARGV[1], 'webhook_error_at', ARGV[2])
local over = failures - tonumber(ARGV[4])
if over >= 0 then
  local pause = math.min(tonumber(ARGV[6]), tonumber(ARGV[5]) * math.pow(2, math.min(over, 30)))
  redis.call('HSET', KEYS[1], 'webhook_paused_until', tonumber(ARGV[2]) + math.floor(pause))
end
return failures
"""


@dataclass(frozen=True, slots=True)
class WebhookCall:
    """One call due, as queued: ``kind`` is turn, start or end."""

    entry_id: bytes
    match_id: str
    version: int
    seat: int
    kind: str
    bot_id: str

    @classmethod
    def parse(cls, entry_id: bytes, fields: dict[bytes, bytes]) -> WebhookCall | None:
        try:
            match_id, version, seat, kind, bot_id = fields[b"c"].decode().split("|")
            return cls(entry_id, match_id, int(version), int(seat), kind, bot_id)
        except (KeyError, ValueError):
            return None

    @property
    def sent_key(self) -> str:
        return webhook_sent_key(self.match_id, self.version, self.seat, self.kind)

    @property
    def started_key(self) -> str:
        return webhook_started_key(self.match_id, self.seat)


class WebhookStore:
    def __init__(self, redis: Redis) -> None:
        self.redis = redis
        self._failed = redis.register_script(FAILED)

    async def set(self, bot_id: str, url: str, secret: str) -> None:
        """The bot's webhook from now on (a new one starts healthy)."""
        async with self.redis.pipeline(transaction=True) as pipe:
            pipe.hdel(bot_key(bot_id), *FIELDS[2:])
            pipe.hset(bot_key(bot_id), mapping={"webhook": url, "webhook_secret": secret})
            await pipe.execute()

    async def remove(self, bot_id: str) -> None:
        await self.redis.hdel(bot_key(bot_id), *FIELDS)

    async def get(self, bot_id: str) -> dict[str, str] | None:
        """The webhook's fields (those set), or None when the bot has none."""
        return decode(await self.redis.hmget(bot_key(bot_id), FIELDS))

    async def failed(self, bot_id: str, url: str, error: str, now_ms: int, pause_after: int, pause_ms: int,
                     pause_max_ms: int) -> int:
        return int(await self._failed(keys=[bot_key(bot_id)], args=[error[:500], now_ms, url, pause_after, pause_ms,
                                                                   pause_max_ms]))

    async def succeeded(self, bot_id: str) -> None:
        """A call went well: no failures in a row, no pause (the last error stays, for its owner)."""
        await self.redis.hdel(bot_key(bot_id), "webhook_failures", "webhook_paused_until")

    # ------------------------------------------------------------------ the calls due
    async def join_dispatchers(self) -> None:
        """Make the dispatchers' consumer group (from the first call queued) unless it is there."""
        try:
            await self.redis.xgroup_create(WEBHOOK_CALLS, WEBHOOK_DISPATCHERS, id="0", mkstream=True)
        except ResponseError as error:
            if "BUSYGROUP" not in str(error):
                raise

    async def next_calls(self, consumer: str, count: int, block_ms: int) -> list[WebhookCall]:
        """The next calls nobody was given yet, now ``consumer``'s (waits up to ``block_ms``)."""
        answer = await self.redis.xreadgroup(
            WEBHOOK_DISPATCHERS, consumer, {WEBHOOK_CALLS: ">"}, count=count, block=block_ms
        )
        return _calls(answer[0][1] if answer else [])

    async def take_over(self, consumer: str, idle_ms: int, count: int = 100) -> list[WebhookCall]:
        """Calls given to a dispatcher that has not finished them in ``idle_ms`` (gone, surely)."""
        answer = await self.redis.xautoclaim(WEBHOOK_CALLS, WEBHOOK_DISPATCHERS, consumer, idle_ms, "0-0", count=count)
        return _calls(answer[1])

    async def done(self, entry_ids: Sequence[bytes]) -> None:
        if entry_ids:
            await self.redis.xack(WEBHOOK_CALLS, WEBHOOK_DISPATCHERS, *entry_ids)


def decode(values: Sequence[bytes | None]) -> dict[str, str] | None:
    if values[0] is None:
        return None
    return {name: value.decode() for name, value in zip(FIELDS, values, strict=True) if value is not None}


def _calls(rows: Sequence[tuple[bytes, dict[bytes, bytes]] | None]) -> list[WebhookCall]:
    calls = []
    for row in rows:
        if row is None or row[1] is None:  # (an entry trimmed while pending)
            continue
        call = WebhookCall.parse(row[0], row[1])
        if call is not None:
            calls.append(call)
    return calls
