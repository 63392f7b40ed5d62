"""Bots' webhooks in Redis: the URL and signing secret in the bot's hash with the webhook's
health (failures in a row, the last error, a pause), and the streams of calls due that the
commit script fills, one per home (a match's calls go on its home's stream, in the match's own
slot: ``home_key(home, "webhook-calls")``; the old ``webhooks:calls`` for matches made before
homes), read by the workers' dispatchers as one consumer group ``dispatchers`` per stream:
each call goes to one dispatcher."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from redis.asyncio import Redis

from service.model.homes import ALL_HOMES
from service.store.keys import WEBHOOK_DISPATCHERS, bot_key, home_key, webhook_sent_key, webhook_started_key

#: every stream the commit script queues calls on: each home's, then the unsharded one
CALL_STREAMS = tuple(home_key(home, "webhook-calls") for home in ALL_HOMES)

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
    """One call due, as queued on ``stream``: ``kind`` is turn, start or end."""

    stream: str
    entry_id: bytes
    match_id: str
    version: int
    seat: int
    kind: str
    bot_id: str

    @classmethod
    def parse(cls, stream: str, entry_id: bytes, fields: dict[bytes, bytes]) -> WebhookCall | None:
        try:
            match_id, version, seat, kind, bot_id = fields[b"c"].decode().split("|")
            return cls(stream, entry_id, match_id, int(version), int(seat), kind, bot_id)
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
    async def join_dispatchers(self, streams: Iterable[str] = CALL_STREAMS) -> None:
        """Make the dispatchers' consumer group on each of ``streams`` (from the stream's
        first call) where it is not there yet (idempotent: a group there is left as it is)."""
        async with self.redis.pipeline(transaction=False) as pipe:
            for stream in streams:
                pipe.xgroup_create(stream, WEBHOOK_DISPATCHERS, id="0", mkstream=True)
            answers = await pipe.execute(raise_on_error=False)
        for answer in answers:
            if isinstance(answer, Exception) and "BUSYGROUP" not in str(answer):
                raise answer

    async def next_calls(self, consumer: str, stream: str, count: int, block_ms: int | None,
                         reading: Redis | None = None) -> list[WebhookCall]:
        """The next calls on ``stream`` that nobody was given yet, now ``consumer``'s; waits up
        to ``block_ms`` for one (None: not at all). ``reading``: the client whose connection the
        wait holds."""
        return calls_read(await (reading or self.redis).xreadgroup(
            WEBHOOK_DISPATCHERS, consumer, {stream: ">"}, count=count, block=block_ms
        ))

    async def take_over(self, consumer: str, idle_ms: int, count: int = 100) -> list[WebhookCall]:
        """Calls, on any stream, given to a dispatcher that has not finished them in ``idle_ms``
        (gone, surely). A stream without the group yet (its reader makes it) has none."""
        async with self.redis.pipeline(transaction=False) as pipe:
            for stream in CALL_STREAMS:
                pipe.xautoclaim(stream, WEBHOOK_DISPATCHERS, consumer, idle_ms, "0-0", count=count)
            answers = await pipe.execute(raise_on_error=False)
        calls = []
        for stream, answer in zip(CALL_STREAMS, answers, strict=True):
            if isinstance(answer, Exception):
                if "NOGROUP" not in str(answer):
                    raise answer
                continue
            calls += _calls(stream, answer[1])
        return calls

    async def done(self, calls: Iterable[WebhookCall]) -> None:
        """Acknowledge ``calls``, each on the stream it came from."""
        by_stream: dict[str, list[bytes]] = defaultdict(list)
        for call in calls:
            by_stream[call.stream].append(call.entry_id)
        if not by_stream:
            return
        async with self.redis.pipeline(transaction=False) as pipe:
            for stream, entry_ids in by_stream.items():
                pipe.xack(stream, WEBHOOK_DISPATCHERS, *entry_ids)
            await pipe.execute()


def decode(values: Sequence[bytes | None]) -> dict[str, str] | None:
    if values[0] is None:
        return None
    return {name: value.decode() for name, value in zip(FIELDS, values, strict=True) if value is not None}


def calls_read(answer: Sequence[tuple[bytes, Sequence[tuple[bytes, dict[bytes, bytes]] | None]]] | None,
               ) -> list[WebhookCall]:
    """The calls in an XREADGROUP's answer (None: none came), of whichever streams."""
    return [call for stream, rows in answer or () for call in _calls(stream, rows)]


def _calls(stream: str | bytes, rows: Sequence[tuple[bytes, dict[bytes, bytes]] | None]) -> list[WebhookCall]:
    name = stream.decode() if isinstance(stream, bytes) else stream
    calls = []
    for row in rows:
        if row is None or row[1] is None:  # (an entry trimmed while pending)
            continue
        call = WebhookCall.parse(name, row[0], row[1])
        if call is not None:
            calls.append(call)
    return calls
