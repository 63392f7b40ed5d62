"""Webhook bots: a bot that gives a URL is called by the server when it must act (and when its
matches start and end) instead of asking. This module is the webhook's life as the API sees
it (set, removed, its health) and the rules of a URL the server may call; the calls themselves
are the workers' (``worker.webhooks``).

A URL must be http or https, without credentials; the server connects only to an address
that is public: one that resolves to a loopback, private, link-local, multicast, reserved or
unspecified address is refused (unless ``ARENA_WEBHOOK_ALLOW_PRIVATE``), checked on the very
address the worker connects to (it resolves the name once, checks, and connects to that
address), so a name that resolves differently a second time gains nothing.
"""

from __future__ import annotations

import asyncio
import ipaddress
import secrets
import time
from dataclasses import dataclass
from enum import Enum
from urllib.parse import urlsplit

from service.domain.matches import Caller
from service.errors import BadInput
from service.settings import Settings
from service.store.bots import BotStore
from service.store.matches import MatchStore
from service.store.webhooks import WebhookStore

#: longest webhook URL
URL_MAX = 500
SECRET_PREFIX = "whsec_"


class WebhookStatus(str, Enum):
    ACTIVE = "ACTIVE"  #: its last call went well (or none was made yet)
    FAILING = "FAILING"  #: its last calls failed, not yet enough of them in a row to pause it
    PAUSED = "PAUSED"  #: called no more until ``paused_until`` (its seats get fallback moves)


@dataclass(frozen=True, slots=True)
class WebhookInfo:
    """A bot's webhook as its owner sees it (times in ms since the epoch)."""

    url: str
    status: WebhookStatus
    failures: int
    last_error: str | None
    last_error_ms: int | None
    paused_until_ms: int | None

    @classmethod
    def of(cls, fields: dict[str, str], now_ms: int | None = None) -> WebhookInfo:
        now = int(time.time() * 1000) if now_ms is None else now_ms
        failures = int(fields.get("webhook_failures", 0))
        paused = fields.get("webhook_paused_until")
        paused_until = None if paused is None else int(paused)
        if paused_until is not None and paused_until > now:
            status = WebhookStatus.PAUSED
        elif failures:
            status = WebhookStatus.FAILING
        else:
            status = WebhookStatus.ACTIVE
        error_at = fields.get("webhook_error_at")
        return cls(fields["webhook"], status, failures, fields.get("webhook_error"),
                   None if error_at is None else int(error_at), paused_until)


def refused_address(address: str, allow_private: bool) -> str | None:
    """Why the server will not connect to ``address`` (an IP), or None: it may. Only a globally
    routable address is called; an IPv6 address that carries an IPv4 one (mapped, 6to4, Teredo)
    is judged by the IPv4 address it leads to."""
    ip = ipaddress.ip_address(address)
    if isinstance(ip, ipaddress.IPv6Address):
        carried = ip.ipv4_mapped or ip.sixtofour or (ip.teredo[1] if ip.teredo else None)
        if carried is not None:
            ip = carried
    if allow_private:
        return None
    for kind, flag in (("loopback", ip.is_loopback), ("private", ip.is_private), ("link-local", ip.is_link_local),
                       ("multicast", ip.is_multicast), ("unspecified", ip.is_unspecified), ("reserved", ip.is_reserved),
                       ("non-global (shared or special-purpose)", not ip.is_global)):
        if flag:
            return f"{address} is a {kind} address: webhooks must reach a public address"
    return None


def checked_url(url: object, allow_private: bool) -> str:
    """The URL a webhook may have, or BadInput saying why not. A host given as an IP address is
    checked now; a name is checked where it resolves, at each call."""
    if not isinstance(url, str) or not url or len(url) > URL_MAX:
        raise BadInput(f"the webhook must be an http(s) URL of at most {URL_MAX} characters")
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError as error:
        raise BadInput(f"the webhook {url!r} is not a URL: {error}") from None
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise BadInput(f"the webhook must be an http:// or https:// URL with a host, not {url!r}")
    if parts.username is not None or parts.password is not None:
        raise BadInput("the webhook URL must not hold credentials: the calls are signed (verify the signature)")
    if port == 0:
        raise BadInput("the webhook URL's port must not be 0")
    try:
        why = refused_address(parts.hostname, allow_private)
    except ValueError:  # a name, resolved at each call
        why = None
    if why is not None:
        raise BadInput(f"the webhook {url!r} is refused: {why}")
    return url


class WebhookService:
    """A bot's webhook is kept in two places: its URL in the bot's hash, and a mark in each of
    its live matches (``hooked``), which the commit script reads to queue the bot's calls (the
    two are in different slots). The URL is written first, then the marks are made to follow
    what the bot has *then*, again while that changed meanwhile: a set and a remove racing end
    with the marks of the later one. A mark without a webhook (a remove that died midway) only
    queues calls the dispatcher drops; a webhook without its marks (a set that died midway) is
    a request that failed, made whole by sending it again."""

    def __init__(self, store: WebhookStore, settings: Settings, matches: MatchStore, bots: BotStore) -> None:
        self.store = store
        self.settings = settings
        self.matches = matches
        self.bots = bots

    def check(self, url: object) -> str:
        return checked_url(url, self.settings.webhook_allow_private)

    async def set(self, caller: Caller, url: object) -> tuple[str, WebhookInfo]:
        """The caller's webhook from now on, and its new signing secret (shown this once)."""
        checked = self.check(url)
        secret = SECRET_PREFIX + secrets.token_urlsafe(32)
        await self.store.set(caller.bot_id, checked, secret)
        await self.mark_matches(caller.bot_id)
        return secret, WebhookInfo.of({"webhook": checked})

    async def remove(self, caller: Caller) -> None:
        """No more calls: the bot plays by asking again (idempotent)."""
        await self.store.remove(caller.bot_id)
        await self.mark_matches(caller.bot_id)

    async def mark_matches(self, bot_id: str) -> None:
        """Each live match of the bot marks it hooked if it has a webhook now, unmarks it if
        not; done again while the webhook came or went meanwhile."""
        hooked = await self.store.get(bot_id) is not None
        while True:
            match_ids = await self.bots.open_matches(bot_id)
            await asyncio.gather(*(self.matches.set_hooked(match_id, bot_id, hooked) for match_id in match_ids))
            now = await self.store.get(bot_id) is not None
            if now == hooked:
                return
            hooked = now

    async def info(self, bot_id: str) -> WebhookInfo | None:
        fields = await self.store.get(bot_id)
        return None if fields is None else WebhookInfo.of(fields)
