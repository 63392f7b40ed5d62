"""``wizard-arena replay FILE|MATCH``: re-run a finished match's record through the engine,
check it, and show it round by round.

A record is the JSON of ``GET /api/matches/{id}/record`` (or a file holding it): config,
seed and salt, every move, the final scores and every round's dealt hands, with the
``seedHash`` the match published at its start, its ``winners`` and its seat names. The checks:

- seed: the SHA-256 of ``salt ":" seed`` (of the seed alone for a record without a salt,
  from a match made before salts) is the published ``seedHash``, so the deals were fixed
  before the first card was played (a record without ``seedHash`` is replayed unchecked);
- record: it is well formed (a format and deal algorithm this engine reads);
- moves: every move applies, in order, and the match ends;
- result: the replay ends with the recorded scores;
- winners: the replay's winners are the recorded ones;
- dealt hands: the hands the record states are the ones its seed deals.

:func:`verify_record` does the checks (no I/O) and :func:`render_record` the text;
:func:`replay_command` reads the record, prints, and fails with every failed check named.
"""

from __future__ import annotations

import argparse
import asyncio
import json
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from sdk.client import ArenaClient, ArenaError, ArenaUnavailable
from sdk.render import PlayedRound, render_round, scores_text, seat_labels, seats_text
from wizard import MatchRecord, RecordError, new_match, seed_hash


class ReplayError(ValueError):
    """A record that does not verify; the message names each failed check."""

    def __init__(self, failures: Sequence[str]) -> None:
        super().__init__("replay failed:\n" + "\n".join(f"  {f}" for f in failures))
        self.failures = tuple(failures)


@dataclass(frozen=True)
class ReplayReport:
    """A verified record, replayed."""

    record: MatchRecord
    match_id: str | None
    #: seat names from the record's ``seats``, when it has them
    names: tuple[str | None, ...] | None
    #: False when the record had no ``seedHash`` to check the seed against
    seed_checked: bool
    rounds: tuple[PlayedRound, ...]
    scores: tuple[int, ...]
    winners: tuple[int, ...]

    @property
    def verdict(self) -> str:
        if self.seed_checked:
            return "verified: seed matches seedHash, replay reproduces the recorded result"
        return "verified: replay reproduces the recorded result; the seed could not be checked (the record has no seedHash)"


# ----------------------------------------------------------------------------- checking


def verify_record(data: Any) -> ReplayReport:
    """Check a record (its JSON data) and replay it; :class:`ReplayError` names what failed."""
    if not isinstance(data, dict):
        raise ReplayError([f"record check failed: a record is a JSON object, not {type(data).__name__}"])
    failures: list[str] = []
    published = data.get("seedHash")
    seed = data.get("seed")
    salt = data.get("salt")
    if published is not None:
        if not isinstance(seed, str):
            failures.append(f"seed check failed: the record's seed is {seed!r}, not a string")
        elif salt is not None and not isinstance(salt, str):
            failures.append(f"seed check failed: the record's salt is {salt!r}, not a string")
        elif seed_hash(seed, salt) != published:
            what = "the seed hashes" if salt is None else "the salt and seed hash (SHA-256 of salt:seed)"
            failures.append(f"seed check failed: {what} to {seed_hash(seed, salt)}, the match published seedHash {published}")
    try:  # the dealt hands are checked once the moves are known to replay
        record = MatchRecord.from_dict({**data, "rounds": None})
    except RecordError as e:
        raise ReplayError([*failures, f"record check failed: {e}"]) from None
    if record.scores is None:
        raise ReplayError([*failures, "result check failed: the record has no final scores (is the match finished?)"])
    try:
        state = replace(record, scores=None).replay()
    except RecordError as e:
        raise ReplayError([*failures, f"moves check failed: {e}"]) from None
    outcome = state.outcome
    if outcome is None:
        raise ReplayError([
            *failures,
            f"result check failed: the record's {len(record.moves)} moves leave the match unfinished"
            f" (round {state.round}, {state.phase.value}), yet it gives final scores",
        ])
    if outcome.scores != record.scores:
        failures.append(f"result check failed: the replay ends with scores {list(outcome.scores)}, the record says {list(record.scores)}")
    recorded = data.get("winners")
    if recorded is not None and recorded != list(outcome.winners):
        failures.append(f"winners check failed: the replay's winners are seats {list(outcome.winners)}, the record says {recorded!r}")
    if data.get("rounds") is not None:
        try:
            MatchRecord.from_dict(data)  # compares the stated hands with the ones the seed deals
        except RecordError as e:
            failures.append(f"dealt hands check failed: {e}")
    if failures:
        raise ReplayError(failures)
    match_id = data.get("matchId")
    return ReplayReport(
        record=record,
        match_id=match_id if isinstance(match_id, str) else None,
        names=_names(data.get("seats"), record.config.players),
        seed_checked=published is not None,
        rounds=tuple(played_rounds(record)),
        scores=outcome.scores,
        winners=outcome.winners,
    )


def _names(seats: Any, players: int) -> tuple[str | None, ...] | None:
    """The seat names of a record's ``seats`` (display only: anything else is ignored)."""
    if not isinstance(seats, list) or len(seats) != players:
        return None
    names = tuple(s.get("name") if isinstance(s, dict) and isinstance(s.get("name"), str) else None for s in seats)
    return names if any(names) else None


def played_rounds(record: MatchRecord) -> list[PlayedRound]:
    """Every round of a record, as the spectator views of its replay showed them, with the
    dealt hands (which no spectator saw) from :meth:`MatchRecord.dealt_rounds`."""
    dealt = record.dealt_rounds()
    state = new_match(record.config, record.seed, record.salt)
    view = state.view(None)
    rounds: list[PlayedRound] = []
    trump_chosen = False
    for seat, move in record.moves:
        before = view
        state.apply(seat, move)
        view = state.view(None)
        trump_chosen = trump_chosen or move.trump is not None
        if len(view.round_results) == len(before.round_results):
            continue
        # the move ended the round: its last trick is the view's last trick (the
        # clairvoyant round 1 is played by the server on the last bid: one trick too)
        assert view.last_trick is not None
        rounds.append(
            PlayedRound(
                round=before.round,
                rounds=before.rounds,
                dealer=before.dealer,
                trump_card=before.trump_card,
                trump_suit=before.trump_suit,
                trump_chosen=trump_chosen,
                hands=dealt[before.round - 1].hands,
                tricks=(*before.completed_tricks, view.last_trick),
                result=view.round_results[-1],
                totals=tuple(s.score for s in view.seats),
            )
        )
        trump_chosen = False
    return rounds


# ----------------------------------------------------------------------------- showing


def render_record(report: ReplayReport) -> str:
    """The whole match, round by round, then the final scores and the winners."""
    config = report.record.config
    labels = seat_labels(config.players, report.names)
    variants = ", ".join(sorted(v.value for v in config.variants)) or "none"
    head = f"match {report.match_id}" if report.match_id else "match"
    lines = [
        f"{head} | {config.ruleset.value} | {config.players} players | variants: {variants}",
        f"seed {report.record.seed}" + ("" if report.record.salt is None else f" | salt {report.record.salt}"),
        "seats: " + ", ".join(f"{s} {label}" for s, label in enumerate(labels)),
        "",
    ]
    for played in report.rounds:
        lines += [render_round(played, report.names), ""]
    lines.append(f"final scores: {scores_text(report.scores, labels)}")
    lines.append(f"winners: {seats_text(report.winners, labels)}")
    return "\n".join(lines)


# ----------------------------------------------------------------------------- the command


def replay_command(args: argparse.Namespace) -> None:
    data = load_record(args.source, args.url)
    report = verify_record(data)
    if not args.quiet:
        print(render_record(report))
    print(report.verdict)


def load_record(source: str, url: str) -> Any:
    """The record's JSON data: from the file ``source`` if there is one, else the record of
    match ``source`` on the server at ``url``."""
    path = Path(source)
    if path.is_file():
        try:
            return json.loads(path.read_text())
        except (OSError, UnicodeDecodeError, json.JSONDecodeError) as e:
            raise ValueError(f"cannot read a record from {source}: {e}") from None
    if path.suffix == ".json" or "/" in source or "\\" in source:
        raise ValueError(f"no file {source} (and it is not a match id)")
    return _fetch_record(source, url.rstrip("/"))


def _fetch_record(match_id: str, url: str) -> Any:
    async def fetch() -> dict[str, Any]:
        async with ArenaClient(url) as client:
            data = await client.record(match_id)
            if data.get("seedHash") is None:
                # an older server's record has no seedHash: ask for the one the match publishes
                try:
                    data["seedHash"] = await client.seed_hash(match_id)
                except (ArenaError, ArenaUnavailable):
                    pass  # then the seed is reported as not checked
            return data

    try:
        return asyncio.run(fetch())
    except ArenaError as e:
        raise ValueError(f"the server refused ({e.code}): {e.message}") from None
    except ArenaUnavailable as e:
        raise ValueError(f"cannot reach {url}: {e}") from None
