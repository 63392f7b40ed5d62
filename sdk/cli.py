"""The bot author's commands of ``wizard-arena``: play, register, match new, watch, replay
and tournament run. :func:`add_commands` puts them on the main parser (wizard_arena/cli.py)."""

from __future__ import annotations

import argparse
import os

from wizard import Ruleset, Variant

DEFAULT_URL = "http://127.0.0.1:8000"


def _url_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--url", default=os.environ.get("WIZARD_ARENA_URL", DEFAULT_URL),
        help=f"the server (default: $WIZARD_ARENA_URL or {DEFAULT_URL})",
    )


def _token_option(parser: argparse.ArgumentParser, required: bool = True) -> None:
    parser.add_argument(
        "--token", default=os.environ.get("WIZARD_ARENA_TOKEN"),
        help="the bot's token (default: $WIZARD_ARENA_TOKEN)" + ("" if required else "; without one you watch as a spectator"),
    )


def _play(args: argparse.Namespace) -> None:
    from sdk.runner import play_command

    play_command(args)


def _register(args: argparse.Namespace) -> None:
    from sdk.client import register_command

    register_command(args)


def _match_new(args: argparse.Namespace) -> None:
    from sdk.client import match_new_command

    match_new_command(args)


def _watch(args: argparse.Namespace) -> None:
    from sdk.watch import watch_command

    watch_command(args)


def _replay(args: argparse.Namespace) -> None:
    from sdk.replay import replay_command

    replay_command(args)


def _tournament_run(args: argparse.Namespace) -> None:
    from sdk.local_tournament import tournament_run_command

    tournament_run_command(args)


def add_commands(commands: argparse._SubParsersAction) -> None:
    play = commands.add_parser("play", help="run a bot against a server until stopped")
    _url_option(play)
    _token_option(play)
    play.add_argument("--bot", default="heuristic", help="heuristic, random, module:Class or path/to/file.py:Class")
    play.add_argument(
        "--transport", default="auto", choices=["auto", "ws", "poll"],
        help="ws: the myTurns subscription; poll: awaitTurn long-polls; auto: ws, polling where WebSockets fail",
    )
    play.add_argument("--log-level", default="info", choices=["debug", "info", "warning", "error"])
    play.set_defaults(run=_play)

    register = commands.add_parser("register", help="register a bot and print its token (shown once)")
    _url_option(register)
    register.add_argument("name")
    register.add_argument("--secret", default=os.environ.get("WIZARD_ARENA_REGISTRATION_SECRET"),
                          help="the server's registration secret, if it has one")
    register.add_argument("--json", action="store_true", help="print the registration as one JSON line")
    register.set_defaults(run=_register)

    match = commands.add_parser("match", help="matches on a server")
    match_commands = match.add_subparsers(dest="match_command", required=True)
    new = match_commands.add_parser("new", help="create a match and print its id")
    _url_option(new)
    _token_option(new)
    new.add_argument("--ruleset", default="WIZARD", choices=[r.value for r in Ruleset])
    new.add_argument("--players", type=int, default=4, choices=range(3, 7))
    new.add_argument("--variant", action="append", choices=[v.value for v in Variant], help="repeat for several")
    new.add_argument("--move-timeout-ms", type=int, help="per move (default: the server's)")
    new.add_argument("--rated", action="store_true")
    new.add_argument("--seed", help="same seed, same deals (unrated matches only)")
    new.add_argument("--house-bot", action="append", default=[], metavar="KIND",
                     help="seat a house bot (RANDOM or HEURISTIC); repeat for several")
    new.add_argument("--join", action="store_true", help="seat the token's bot too")
    new.add_argument("--json", action="store_true", help="print the match as one JSON line")
    new.set_defaults(run=_match_new)

    watch = commands.add_parser("watch", help="follow a match live in the terminal")
    _url_option(watch)
    _token_option(watch, required=False)
    watch.add_argument("match_id", metavar="MATCH")
    watch.set_defaults(run=_watch)

    replay = commands.add_parser(
        "replay", help="re-run a finished match's record through the engine, check it and show it round by round"
    )
    _url_option(replay)
    replay.add_argument("source", metavar="FILE|MATCH", help="a record saved as JSON, or a match id on --url")
    replay.add_argument("--quiet", action="store_true", help="only the verdict, not the rounds")
    replay.set_defaults(run=_replay)

    tournament = commands.add_parser("tournament", help="tournaments")
    tournament_commands = tournament.add_subparsers(dest="tournament_command", required=True)
    run = tournament_commands.add_parser("run", help="bots against each other in this process, no server")
    run.add_argument("--bots", required=True,
                     help="comma-separated: heuristic, random, module:Class, path/to/file.py:Class")
    run.add_argument("--matches", type=int, default=100)
    run.add_argument("--players", type=int, default=4, choices=range(3, 7))
    run.add_argument("--ruleset", default="WIZARD", choices=[r.value for r in Ruleset])
    run.add_argument("--variant", action="append", choices=[v.value for v in Variant], help="repeat for several")
    run.add_argument("--seed", type=int, default=1, help="the tournament's deals and seatings follow from it")
    run.add_argument("--json", action="store_true", help="print the leaderboard as one JSON line")
    run.set_defaults(run=_tournament_run)
