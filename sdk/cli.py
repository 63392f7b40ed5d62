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


def _tournament_remote(args: argparse.Namespace) -> None:
    from sdk.client import tournament_command

    tournament_command(args)


def _leaderboard(args: argparse.Namespace) -> None:
    from sdk.client import leaderboard_command

    leaderboard_command(args)


def _serve_bot(args: argparse.Namespace) -> None:
    import logging

    from sdk.bot import load_bot
    from sdk.webhook import serve_bot

    if not args.secret:
        raise ValueError("serve-bot needs the webhook's signing secret: --secret S or WIZARD_ARENA_WEBHOOK_SECRET "
                         "(setWebhook or registerBot(webhook:) gave it)")
    logging.basicConfig(level=args.log_level.upper(), format="%(asctime)s %(levelname)s %(message)s")
    serve_bot(load_bot(args.bot), args.secret, args.host, args.port)


def add_commands(commands: argparse._SubParsersAction) -> None:
    serve = commands.add_parser(
        "serve-bot", help="serve a bot as a webhook endpoint: the server calls it with each turn (signatures checked)"
    )
    serve.add_argument("--bot", default="heuristic", help="heuristic, random, module:Class or path/to/file.py:Class")
    serve.add_argument("--host", default="127.0.0.1")
    serve.add_argument("--port", type=int, default=9000)
    serve.add_argument("--secret", default=os.environ.get("WIZARD_ARENA_WEBHOOK_SECRET"),
                       help="the webhook's signing secret (default: $WIZARD_ARENA_WEBHOOK_SECRET)")
    serve.add_argument("--log-level", default="info", choices=["debug", "info", "warning", "error"])
    serve.set_defaults(run=_serve_bot)

    play = commands.add_parser("play", help="run a bot against a server until stopped")
    _url_option(play)
    _token_option(play)
    players = play.add_mutually_exclusive_group()
    players.add_argument("--bot", default="heuristic", help="heuristic, random, search, module:Class or path/to/file.py:Class")
    players.add_argument(
        "--cmd", metavar="COMMAND",
        help='a program in any language as the bot: each turn is one JSON line on its stdin, its move one JSON line '
        'on its stdout, its stderr kept with the move for you (README: "Bots in any language"); split like a shell '
        'line, e.g. --cmd "node examples/line_bot.mjs"',
    )
    play.add_argument(
        "--transport", default="auto", choices=["auto", "ws", "poll"],
        help="ws: the myTurns subscription; poll: awaitTurn long-polls; auto: ws, polling where WebSockets fail",
    )
    play.add_argument(
        "--invitations", choices=["accept", "decline", "ask"], default=None,
        help="tournament invitations: accept or decline each one as it comes (those pending too) while this runs, "
        "leaving no standing policy on the server; ask: answer none, and clear a standing ACCEPT_ALL or DECLINE_ALL "
        "policy; default: answer none",
    )
    play.add_argument(
        "--challenges", choices=["accept", "decline", "bot"], default=None,
        help="challenges naming the bot: accept or decline each one as it comes (those pending too) while this runs; "
        "bot: as the bot's accepts_challenge answers; default: answer none",
    )
    play.add_argument(
        "--ladder", action="append", metavar="RULESET:PLAYERS",
        help="join this continuous rated ladder as the bot starts (WIZARD:4; again for more): the workers pair it "
        "into rated matches until it leaves (leaveLadder)",
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
                     help="seat a house bot (RANDOM, HEURISTIC or SEARCH); repeat for several")
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
                     help="comma-separated: heuristic, random, search, module:Class, path/to/file.py:Class")
    run.add_argument("--matches", type=int, default=100)
    run.add_argument("--players", type=int, default=4, choices=range(3, 7))
    run.add_argument("--ruleset", default="WIZARD", choices=[r.value for r in Ruleset])
    run.add_argument("--variant", action="append", choices=[v.value for v in Variant], help="repeat for several")
    run.add_argument("--seed", type=int, default=1, help="the tournament's deals and seatings follow from it")
    run.add_argument("--json", action="store_true", help="print the leaderboard as one JSON line")
    run.set_defaults(run=_tournament_run)

    create = tournament_commands.add_parser("create", help="schedule a tournament on a server (your token's bot organises it)")
    create.add_argument("name")
    create.add_argument("--format", default="ROUND_ROBIN", choices=["ROUND_ROBIN", "SWISS", "ARENA"])
    create.add_argument("--rounds", type=int, help="ROUND_ROBIN and SWISS")
    create.add_argument("--duration-minutes", type=float, help="ARENA")
    create.add_argument("--ruleset", default="WIZARD", choices=[r.value for r in Ruleset])
    create.add_argument("--variant", action="append", choices=[v.value for v in Variant], help="repeat for several")
    create.add_argument("--players", type=int, default=4, choices=range(3, 7), help="players per match")
    create.add_argument("--starts-at", help="ISO 8601 date-time (default: now)")
    create.add_argument("--move-timeout-ms", type=int, help="per move (default: the server's)")
    create.add_argument("--unrated", action="store_true", help="leave ratings alone (tournaments are rated by default)")
    create.add_argument("--duplicate", action="store_true", help="replay each set of deals with the seats rotated")
    create.add_argument("--bot", action="append", default=[], metavar="ID",
                        help="invite a bot by id (it enters when it accepts; a house bot's id, house-heuristic, "
                        "enters at once); repeat")
    create.add_argument("--house-bot", action="append", default=[], metavar="KIND", help="enter a house bot; repeat")
    listing = tournament_commands.add_parser("list", help="a server's tournaments, newest first")
    listing.add_argument("--status", choices=["SCHEDULED", "RUNNING", "FINISHED", "CANCELLED"])
    listing.add_argument("--first", type=int, default=20, help="how many (1-100)")
    listing.add_argument("--after", help="the cursor a previous page ended with")
    show = tournament_commands.add_parser("show", help="one tournament: its plan, entrants and standings")
    show.add_argument("tournament_id", metavar="TOURNAMENT")
    cancel = tournament_commands.add_parser("cancel", help="cancel a tournament you created")
    cancel.add_argument("tournament_id", metavar="TOURNAMENT")
    cancel.add_argument("--reason", help="why (at most 200 characters): shown as the tournament's cancelledReason")
    for remote in (create, listing, show, cancel):
        _url_option(remote)
        _token_option(remote, required=remote in (create, cancel))
        remote.add_argument("--json", action="store_true", help="print the answer as one JSON line")
        remote.set_defaults(run=_tournament_remote)

    leaderboard = commands.add_parser("leaderboard", help="a server's bots by rating, highest first")
    _url_option(leaderboard)
    _token_option(leaderboard, required=False)
    leaderboard.add_argument("--ruleset", default="WIZARD", choices=[r.value for r in Ruleset])
    leaderboard.add_argument("--method", default="ELO", choices=["ELO", "FITTED"])
    leaderboard.add_argument("--first", type=int, default=50, help="how many (1-100)")
    leaderboard.add_argument("--offset", type=int, default=0)
    leaderboard.add_argument(
        "--established", action="store_true", help="leave provisional bots out (ranks counted among those shown)"
    )
    leaderboard.add_argument("--json", action="store_true", help="print the rows as one JSON line")
    leaderboard.set_defaults(run=_leaderboard)
