"""``wizard-arena watch MATCH``: a match live in the terminal, as the token's bot (its seat's
view) or, without a token, as a spectator (no card of a live match). One picture per change,
from the ``matchUpdates`` subscription; a dropped connection is picked up again."""

from __future__ import annotations

import argparse
import asyncio
import time

from sdk.client import ArenaClient, ArenaError, ArenaUnavailable, Match
from sdk.render import render_view
from sdk.runner import Backoff


def render_update(match: Match) -> str:
    """One update as ``watch`` prints it: a rule with the version and time, then the view."""
    stamp = time.strftime("%H:%M:%S")
    head = f"--- match {match.id} | v{match.version} | {match.status} | {stamp} ---"
    return f"{head}\n{render_view(match.view, match.names())}"


async def watch(url: str, match_id: str, token: str | None = None) -> Match | None:
    """Prints every update of the match until it ends; the last one."""
    last: Match | None = None
    backoff = Backoff()
    async with ArenaClient(url, token) as client:
        while last is None or not last.is_over:
            try:
                async for match in client.match_updates(match_id):
                    backoff.reset()
                    if last is None or match.version > last.version:
                        print(render_update(match), flush=True)
                        last = match
                if last is None:
                    return None
            except ArenaUnavailable as e:
                if last is None:  # never connected: a wrong --url, or the server is down
                    raise ValueError(f"cannot watch match {match_id} at {url}: {e}") from None
                delay = backoff.next()
                print(f"(connection lost: {e}; again in {delay:.1f} s)", flush=True)
                await asyncio.sleep(delay)
    return last


def watch_command(args: argparse.Namespace) -> None:
    try:
        asyncio.run(watch(args.url, args.match_id, args.token))
    except ArenaError as e:
        raise ValueError(f"the server refused: {e.code}: {e.message}") from None
