"""Runs a :class:`~sdk.bot.Bot` against a server: every turn of every match it is seated in,
until stopped.

- Turns arrive over the ``myTurns`` subscription (graphql-transport-ws); where WebSockets
  are unavailable (a proxy refuses the upgrade), the runner long-polls ``awaitTurn``.
- After a dropped connection it reconnects with backoff; ``myTurns`` answers the turns
  already waiting first, so none is missed.
- Each decision runs in a worker thread, so a slow bot does not stall the connection, and
  turns of different matches are decided at once. A move is sent with ``expectedVersion``:
  resent after a lost answer, it can never apply twice, and a move decided on a state
  that has moved on is decided again.
- ``RATE_LIMITED`` answers are waited out; a bot that raises, or answers an illegal move,
  is logged and loses only that move (the server's fallback plays it at the deadline).
- Told to (``invitations``), it answers tournament invitations as they come on its turn
  stream (``myTurnsAndInvitations``, or ``nextTurn(invitations: true)`` when polling), those
  pending at its start too. It sets no standing policy on the server for that: a bot that is
  not running is entered in nothing (a standing ACCEPT_ALL would enter it after a crash too).
- Told to (``challenges``), it answers the challenges that name the bot the same way, on the
  same stream (``myTurnsAndInvitations(challenges: true)``, ``nextTurn(challenges: true)``):
  accepting or declining each, or as the bot's own rule (:meth:`Bot.accepts_challenge`) says.
- Told to (``ladders``, ``--ladder WIZARD:4``), it joins those continuous rated ladders as it
  starts (joining again lifts a pause the server put on the bot for moves that timed out).
"""

from __future__ import annotations

import argparse
import asyncio
import functools
import logging
import os
import random
import signal
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from sdk.bot import Bot, Decision, load_bot
from sdk.client import ArenaClient, ArenaError, ArenaUnavailable, Match, WebSocketsUnavailable, rate_limit_wait
from sdk.render import scores_text, seat_labels, seats_text

log = logging.getLogger("wizard_arena.bot")

#: Errors no retry can cure: the runner stops with them.
FATAL_CODES = frozenset({"UNAUTHENTICATED", "FORBIDDEN"})
#: awaitTurn's wait per request while long-polling
POLL_TIMEOUT_MS = 25_000
#: the pause before asking again when awaitTurn answers a turn the bot has already failed
POLL_RETRY_SECONDS = 0.05
#: the pause before looking for new matches again when awaitTurn finds a known one
DISCOVERY_PAUSE_SECONDS = 0.5
#: matches whose last decided version is remembered (the oldest are forgotten beyond it)
DECIDED_MEMORY = 10_000
#: threads for the bot's decisions: one per match deciding at once
DECISION_THREADS = 32
#: refusals after which a bot is not asked again for the same turn (:meth:`Bot.retry`)
MOVE_ATTEMPTS = 3
#: the refusals a bot may answer with another move (the move was wrong, the turn still stands)
RETRIED_CODES = frozenset({"ILLEGAL_MOVE", "BAD_INPUT"})


#: ``wizard-arena play --invitations``: the runner's answer to each invitation that comes while
#: it runs (True: accept; None: answer none, ``ask`` also clearing a standing policy)
INVITATION_ANSWERS: dict[str, bool | None] = {"accept": True, "decline": False, "ask": None}
#: ``wizard-arena play --challenges``: how the runner answers each challenge naming the bot
CHALLENGE_ANSWERS = ("accept", "decline", "bot")


class Backoff:
    """Waits that double from ``first`` to ``most`` seconds, with jitter (unless told not to)
    so that many bots cut off together do not reconnect together."""

    def __init__(self, first: float = 0.2, most: float = 10.0, jitter: bool = True) -> None:
        self.first = first
        self.most = most
        self.jitter = jitter
        self.failures = 0

    def next(self) -> float:
        delay = min(self.most, self.first * 2**self.failures)
        if self.jitter:
            delay *= random.uniform(0.5, 1.0)
        self.failures += 1
        return delay

    def reset(self) -> None:
        self.failures = 0


class BotRunner:
    """Plays ``bot`` in every match its token's bot is seated in. ``transport`` is ``ws``,
    ``poll`` or ``auto`` (ws, then polling if WebSockets are unavailable)."""

    def __init__(
        self, bot: Bot, client: ArenaClient, transport: str = "auto", invitations: str | None = None,
        challenges: str | None = None,
        ladders: Sequence[tuple[str, int]] = (),
    ) -> None:
        if transport not in ("auto", "ws", "poll"):
            raise ValueError(f"transport {transport!r}: use auto, ws or poll")
        if invitations is not None and invitations not in INVITATION_ANSWERS:
            raise ValueError(f"invitations {invitations!r}: use {', '.join(INVITATION_ANSWERS)}")
        if challenges is not None and challenges not in CHALLENGE_ANSWERS:
            raise ValueError(f"challenges {challenges!r}: use {', '.join(CHALLENGE_ANSWERS)}")
        self.bot = bot
        #: how to answer the challenges naming the bot (None: not at all)
        self.challenges = challenges
        #: what to do with tournament invitations (None: nothing)
        self.invitations = invitations
        #: the answer given to each invitation as it comes (True: accept, False: decline; None: none)
        self.accept_invitations = None if invitations is None else INVITATION_ANSWERS[invitations]
        #: polling: an answer failed, so the next wait leaves invitations and challenges out (one
        #: still pending would end every wait at once)
        self._invitation_failed = False
        #: the ladders (ruleset, players) joined at the start
        self.ladders = list(ladders)
        self.client = client
        #: the bot's id (known once it runs): the challenges that name it are its to answer
        self._bot_id: str | None = None
        self.transport = transport
        self.moves_sent = 0
        self.bot_errors = 0
        self.refused_moves = 0
        self._deciding: dict[str, asyncio.Task[None]] = {}
        self._newer: dict[str, Match] = {}
        #: the version of each match the bot last decided on: a turn is decided once
        self._decided: dict[str, int] = {}
        self._backoff = Backoff()
        #: the bot's decisions run here, off the event loop; a decision past the move
        #: timeout is given up (its thread cannot be stopped, so the pool is generous)
        self._executor = ThreadPoolExecutor(max_workers=DECISION_THREADS, thread_name_prefix="bot-decision")
        self._running = 0
        self._running_lock = threading.Lock()

    def close(self) -> None:
        """Stops taking decisions; one still running is abandoned, not waited for."""
        self._executor.shutdown(wait=False, cancel_futures=True)

    @property
    def deciding(self) -> bool:
        """Whether a decision of the bot is still running in a thread."""
        return self._running > 0

    def _in_thread(self, decide: Callable[[], Decision | None]) -> Decision | None:
        """One of the bot's decisions (``decide``), in a decision thread."""
        with self._running_lock:
            self._running += 1
        try:
            return decide()
        finally:
            with self._running_lock:
                self._running -= 1

    # ------------------------------------------------------------------ connection
    async def run(self) -> None:
        """Plays until cancelled. Raises :class:`ArenaError` for a bad token."""
        me = await self._who_am_i()
        if me is None:
            raise ArenaError("UNAUTHENTICATED", "the server knows no bot with this token: check --token")
        self._bot_id = me["id"]
        log.info("playing as %s (bot %s) with %s over %s", me["name"], me["id"], self.bot.label, self.client.url)
        await self._check_invitation_policy()
        for ruleset, players in self.ladders:
            joined = await self.client.join_ladder(ruleset, players)
            log.info("joined the %s ladder with %d players: %s", ruleset, players, joined["state"])
        transport = self.transport
        while True:
            try:
                if transport == "poll":
                    await self._poll()
                else:
                    await self._subscribe()
            except WebSocketsUnavailable as e:
                if transport == "auto":
                    log.warning("WebSockets are unavailable (%s): long-polling awaitTurn instead", e)
                    transport = "poll"
                    continue
                await self._pause(f"no WebSocket connection ({e})")
            except ArenaUnavailable as e:
                await self._pause(f"connection lost ({e})")
            except ArenaError as e:
                if e.code in FATAL_CODES:
                    raise
                if e.code == "RATE_LIMITED":  # a subscription is charged too, as it starts
                    await rate_limit_wait(e)
                else:
                    await self._pause(f"the server refused the turn stream: {e}")
            except asyncio.CancelledError:
                raise
            except Exception:  # a bug or an answer nobody foresaw: log it, keep the bot alive
                log.exception("the turn stream failed unexpectedly")
                await self._pause("the turn stream failed")

    async def _check_invitation_policy(self) -> None:
        """``ask`` clears the bot's standing invitation policy; ``accept`` and ``decline``
        warn of one, which answers invitations before the runner sees them (and while it is not
        running)."""
        if self.invitations == "ask":
            await self.client.set_invitation_policy("ASK")
            log.info("invitations: none answered; the bot's standing policy is ASK")
            return
        if self.accept_invitations is None:
            return
        policy = await self.client.invitation_policy()
        if policy not in (None, "ASK"):
            log.warning(
                "the bot's standing invitation policy is %s: the server answers its invitations with it, also while "
                "this runner is not running; `--invitations ask` clears it", policy,
            )

    async def _answer_offer(self, offer: dict[str, Any]) -> None:
        """An invitation or a challenge met on the turn stream, answered as told."""
        if offer.get("kind") == "challenge":
            await self._answer_challenge(offer)
        elif self.accept_invitations is not None:
            await self._answer_invitation(offer)

    async def _answer_challenge(self, challenge: dict[str, Any]) -> None:
        """Gives a challenge waiting for the bot's answer the one ``--challenges`` names (or
        the bot's rule); one it does not wait for (the bot's own, one answered) is logged."""
        by = (challenge.get("challenger") or {}).get("name")
        me = next((b for b in challenge.get("bots") or () if b.get("answer") == "PENDING"
                   and (b.get("bot") or {}).get("id") == self._bot_id), None)
        if self.challenges is None or challenge.get("status") != "OPEN" or me is None:
            log.info("challenge %s from %s: %s", challenge.get("id"), by, challenge.get("status"))
            return
        if self.challenges == "bot":
            try:
                accept = bool(await asyncio.get_running_loop().run_in_executor(
                    self._executor, self.bot.accepts_challenge, challenge))
            except Exception:  # the bot's own rule failed: it answers nothing, logged
                log.exception("challenge %s from %s: %s.accepts_challenge raised", challenge.get("id"), by, self.bot.label)
                self._invitation_failed = True
                return
        else:
            accept = self.challenges == "accept"
        try:
            after = await self.client.answer_challenge(str(challenge["id"]), accept)
        except ArenaError as e:  # accepted by enough others meanwhile, expired, ...
            self._invitation_failed = True
            log.warning("challenge %s from %s not answered: %s: %s", challenge.get("id"), by, e.code, e.message)
        else:
            log.info("challenge %s from %s: %s, the challenge is %s", challenge.get("id"), by,
                     "accepted" if accept else "declined", after.get("status"))

    async def _answer_invitation(self, invitation: dict[str, Any]) -> None:
        """Gives a PENDING invitation the answer ``--invitations`` names (others were answered
        already: by the bot's standing policy, say)."""
        name = (invitation.get("tournament") or {}).get("name")
        if invitation.get("status") != "PENDING":
            log.info("invitation to tournament %s: %s", name, invitation.get("status"))
            return
        try:
            status = await self.client.answer_invitation(str(invitation["id"]), accept=bool(self.accept_invitations))
        except ArenaError as e:  # the tournament started or filled meanwhile, say
            self._invitation_failed = True
            log.warning("invitation to tournament %s not answered: %s: %s", name, e.code, e.message)
        else:
            log.info("invitation to tournament %s: %s", name, status)

    async def _who_am_i(self) -> dict[str, str] | None:
        """The token's bot, waiting for a server that is not up yet."""
        while True:
            try:
                return await self.client.me()
            except ArenaUnavailable as e:
                await self._pause(f"cannot reach the server ({e})")

    async def _pause(self, why: str) -> None:
        delay = self._backoff.next()
        log.warning("%s; reconnecting in %.1f s", why, delay)
        await asyncio.sleep(delay)

    @property
    def _answers_offers(self) -> bool:
        """Whether the runner answers invitations or challenges (and so follows them)."""
        return self.accept_invitations is not None or self.challenges is not None

    async def _subscribe(self) -> None:
        if self._answers_offers:
            stream = self.client.my_turns_and_invitations(challenges=self.challenges is not None)
        else:
            stream = self.client.my_turns()
        async for item in stream:
            self._backoff.reset()
            if isinstance(item, Match):
                self._turn(item)
            else:
                await self._answer_offer(item)
        raise ArenaUnavailable("the server ended the turn stream")

    async def _next_turn(self) -> Match | None:
        """A match where the bot has a move to make, or None after a while; an invitation or a
        challenge met on the way (when the runner answers them) is answered."""
        if not self._answers_offers or self._invitation_failed:
            self._invitation_failed = False
            return await self.client.await_turn(None, POLL_TIMEOUT_MS)
        wait = await self.client.next_turn_or_invitation(
            POLL_TIMEOUT_MS, invitations=self.accept_invitations is not None, challenges=self.challenges is not None
        )
        if wait.invitation is not None:
            await self._answer_invitation(wait.invitation)
        if wait.challenge is not None:
            await self._answer_challenge(wait.challenge)
        return wait.match if wait.reason == "YOUR_TURN" else None

    async def _poll(self) -> None:
        """Long-polls: ``awaitTurn`` over all matches finds the matches with a turn, and each
        found match gets a poller of its own (``awaitTurn(matchId)``), so a slow or failed
        turn in one match holds up no other."""
        pollers: dict[str, asyncio.Task[None]] = {}
        try:
            while True:
                match = await self._next_turn()
                self._backoff.reset()
                if match is None:
                    continue
                poller = pollers.get(match.id)
                if poller is None or poller.done():
                    pollers[match.id] = asyncio.create_task(self._poll_match(match), name=f"poll {match.id}")
                else:
                    # awaitTurn answers the same match while its turn is pending: give the
                    # match's own poller time to move before asking for others again
                    await asyncio.sleep(DISCOVERY_PAUSE_SECONDS)
        finally:
            for poller in pollers.values():
                poller.cancel()

    async def _poll_match(self, first: Match) -> None:
        try:
            await self._poll_turns(first)
        except asyncio.CancelledError:
            raise
        except Exception:  # this match's poller only: the others and the finder go on
            log.exception("match %s: polling failed unexpectedly", first.id)

    async def _poll_turns(self, first: Match) -> None:
        match_id = first.id
        match: Match | None = first
        backoff = Backoff()
        while match is not None:
            self._turn(match)
            deciding = self._deciding.get(match_id)
            if deciding is not None:
                await asyncio.shield(deciding)
            elif match.my_turn:
                # a turn already decided (the bot failed it): awaitTurn keeps answering it
                # until the server moves for the seat at the deadline, so do not spin
                await asyncio.sleep(POLL_RETRY_SECONDS)
            try:
                match = await self.client.await_turn(match_id, POLL_TIMEOUT_MS)
                backoff.reset()
            except ArenaError as e:
                if e.code != "MATCH_NOT_ACTIVE":
                    log.error("match %s: awaitTurn refused: %s: %s", match_id, e.code, e.message)
                return
            except ArenaUnavailable as e:
                delay = backoff.next()
                log.warning("match %s: polling failed (%s); again in %.1f s", match_id, e, delay)
                await asyncio.sleep(delay)
            if match is None:  # nothing due within the poll, or the match is over
                match = await self._fetch(match_id, time.monotonic() + POLL_TIMEOUT_MS / 1000)
                if match is None or match.is_over:
                    return

    # ------------------------------------------------------------------ turns
    def _turn(self, match: Match) -> None:
        if not match.my_turn or match.version <= self._decided.get(match.id, -1):
            return
        if match.id in self._deciding:
            known = self._newer.get(match.id)
            if known is None or match.version > known.version:
                self._newer[match.id] = match
            return
        task = asyncio.create_task(self._play_turns(match), name=f"match {match.id}")
        self._deciding[match.id] = task

    async def _play_turns(self, match: Match) -> None:
        """Moves in ``match`` while it is this bot's turn (it may lead the next trick too)."""
        current: Match | None = match
        try:
            while current is not None and current.my_turn and current.version > self._decided.get(match.id, -1):
                self._remember_decided(match.id, current.version)
                current = await self._move(current)
                newer = self._newer.pop(match.id, None)
                if newer is not None and (current is None or newer.version > current.version):
                    current = newer
        except asyncio.CancelledError:
            raise
        except Exception:  # never let one match take the client down
            log.exception("match %s: unexpected error; the turn stream goes on", match.id)
        finally:
            self._deciding.pop(match.id, None)
            self._newer.pop(match.id, None)

    def _remember_decided(self, match_id: str, version: int) -> None:
        self._decided.pop(match_id, None)  # to the end: the dict's order is by last decision
        self._decided[match_id] = version
        if len(self._decided) > DECIDED_MEMORY:  # matches that ended by another seat's move
            for stale in list(self._decided)[: DECIDED_MEMORY // 2]:
                del self._decided[stale]

    async def _move(self, match: Match) -> Match | None:
        """Decides and sends one move; the match after it (None when nothing more to do)."""
        view = match.view
        where = f"match {match.id} v{match.version} round {view.round}/{view.rounds} {view.phase.value}"
        started = time.perf_counter()
        timeout = int(match.data.get("moveTimeoutMs") or 10_000) / 1000
        until = time.monotonic() + timeout
        decision = await self._decision(where, until, lambda: self.bot.decide(match, until))
        if decision is None:
            return None
        log.info("%s: %s (%.0f ms)", where, decision.move, (time.perf_counter() - started) * 1000)
        return await self._send(match, decision, where, until)

    async def _decision(self, where: str, until: float, decide: Callable[[], Decision | None]) -> Decision | None:
        """The bot's decision, made in a decision thread, given up at ``until`` (None: none made,
        the server makes the move at the deadline)."""
        try:
            future = asyncio.get_running_loop().run_in_executor(self._executor, self._in_thread, decide)
            decision = await asyncio.wait_for(future, max(0.0, until - time.monotonic()))
            if decision is not None and not isinstance(decision, Decision):
                raise TypeError(f"{self.bot.label} answered {decision!r}, not an sdk.Decision")
        except TimeoutError:
            self.bot_errors += 1
            log.error("%s: %s thought past the move timeout; the server moves for it", where, self.bot.label)
            return None
        except Exception:
            self.bot_errors += 1
            log.exception("%s: %s raised; the server makes this move at the deadline", where, self.bot.label)
            return None
        return decision

    async def _send(self, match: Match, decision: Decision, where: str, until: float) -> Match | None:
        give_up = until + 5
        backoff = Backoff(0.1, 2.0)
        refusals = 0
        while True:
            move = decision.move
            try:
                after = await self.client.submit_move(
                    match.id, move, expected_version=match.version, debug=decision.debug
                )
            except ArenaError as e:
                if e.code == "STALE_VERSION":
                    # the match moved on (another seat's bid, a timeout, or this very move,
                    # sent again after a lost answer): decide again on what it is now
                    return await self._fetch(match.id, give_up)
                if e.code == "INTERNAL_ERROR" and time.monotonic() < give_up:
                    # safe to send again: expectedVersion refuses it if it did apply
                    await asyncio.sleep(backoff.next())
                    continue
                self.refused_moves += 1
                log.error("%s: the server refused %s: %s: %s", where, move, e.code, e.message)
                refusals += 1
                if e.code in RETRIED_CODES and refusals < MOVE_ATTEMPTS and time.monotonic() < until:
                    retry = functools.partial(self.bot.retry, match, move, e.code, e.message, until)
                    again = await self._decision(where, until, retry)
                    if again is not None:
                        decision = decision.then(again)  # the debug text of the whole turn goes with the move
                        log.info("%s: %s answered again: %s", where, self.bot.label, decision.move)
                        continue
                return None
            except ArenaUnavailable as e:
                if time.monotonic() > give_up:
                    log.error("%s: could not send %s before the deadline (%s)", where, move, e)
                    return None
                delay = backoff.next()
                log.warning("%s: sending %s failed (%s); again in %.1f s", where, move, e, delay)
                await asyncio.sleep(delay)
                continue
            self.moves_sent += 1
            if after.is_over:
                self._decided.pop(match.id, None)
                final = await self._fetch(match.id, give_up)
                if final is not None:
                    self._log_result(final)
            return None

    async def _fetch(self, match_id: str, give_up: float) -> Match | None:
        """The match now, through lost connections until ``give_up``."""
        backoff = Backoff(0.1, 2.0)
        while True:
            try:
                return await self.client.match(match_id)
            except ArenaUnavailable:
                if time.monotonic() > give_up:
                    raise
                await asyncio.sleep(backoff.next())

    def _log_result(self, match: Match) -> None:
        view = match.view
        labels = seat_labels(view.players, match.names())
        winners = seats_text(view.winners or (), labels) or "nobody"
        log.info("match %s %s: %s; won by %s", match.id, match.status.lower(), scores_text([s.score for s in view.seats], labels), winners)


def configure_logging(log_level: str) -> None:
    """The terminal's log of ``wizard-arena play``: the runner's and the bot's lines, not the HTTP libraries'."""
    logging.basicConfig(level=log_level.upper(), format="%(asctime)s %(levelname)s %(message)s")
    for noisy in ("httpx", "httpcore", "websockets"):
        logging.getLogger(noisy).setLevel(logging.WARNING)


def run_bot(
    bot: Bot, url: str, token: str, transport: str = "auto", log_level: str = "info", invitations: str | None = None,
    challenges: str | None = None, ladders: Sequence[tuple[str, int]] = (),
) -> None:
    """Plays ``bot`` on the server at ``url`` until interrupted (Ctrl-C or SIGTERM), logging
    each decision: what ``wizard-arena play`` does."""
    configure_logging(log_level)
    abandoned = False

    async def main() -> None:
        nonlocal abandoned
        task = asyncio.current_task()
        assert task is not None
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(sig, task.cancel)
        async with ArenaClient(url, token) as client:
            runner = BotRunner(bot, client, transport, invitations, challenges, ladders)
            try:
                await runner.run()
            except asyncio.CancelledError:
                log.info(
                    "stopped: %d moves sent, %d failed in the bot, %d refused by the server",
                    runner.moves_sent, runner.bot_errors, runner.refused_moves,
                )
            finally:
                abandoned = runner.deciding
                runner.close()

    try:
        asyncio.run(main())
    except ArenaError as e:
        raise ValueError(f"the server refused: {e.code}: {e.message}") from None
    finally:
        bot.close()
    if abandoned:  # a decision stuck in the bot's code would keep the process alive
        log.warning("a decision of the bot was still running; not waiting for it")
        logging.shutdown()
        os._exit(0)


def play_command(args: argparse.Namespace) -> None:
    if not args.token:
        raise ValueError("play needs the bot's token: --token T or WIZARD_ARENA_TOKEN (from `wizard-arena register NAME`)")
    bot: Bot
    if args.cmd is not None:
        from sdk.line_bot import LineBot

        bot = LineBot(args.cmd)
        configure_logging(args.log_level)  # before the start, which it logs
        bot.start()  # a command that cannot run is said now, not at the first turn
    else:
        bot = load_bot(args.bot)
    run_bot(bot, args.url, args.token, args.transport, args.log_level, args.invitations, args.challenges,
            [parse_ladder(text) for text in args.ladder or ()])


def parse_ladder(text: str) -> tuple[str, int]:
    """``--ladder WIZARD:4``: the ruleset and the players a table (the server checks the pair)."""
    ruleset, _, players = text.partition(":")
    if not ruleset or not players.isdigit():
        raise ValueError(f"--ladder {text!r}: give RULESET:PLAYERS, for example WIZARD:4")
    return ruleset.upper(), int(players)
