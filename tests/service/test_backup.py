"""`wizard-arena backup` during play, then a wipe of Redis and the archive, then `wizard-arena
restore`: every move acknowledged before the backup began, every rating and every archived
match is back, and play goes on from there (real API, worker, Redis and PostgreSQL)."""

from __future__ import annotations

import os
import secrets
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import redis

from service.store.archive import migrate
from service.store.embedded_postgres import _binaries
from service.store.keys import match_home_key
from tests.service.arena_client import REPO, first_legal, wait_until
from tests.service.conftest import embedded_redis_url

AWAIT = "query($m: ID!) { awaitTurn(matchId: $m, timeoutMs: 5000) { version legalMoves { bid card trump } } }"
LEADERBOARD = "{ leaderboard(ruleset: WIZARD) { bot { id } rating games } }"


def psql(url: str, sql: str) -> None:
    subprocess.run([str(_binaries() / "psql"), "-q", "-v", "ON_ERROR_STOP=1", "-d", url, "-c", sql], check=True,
                   capture_output=True)


def arena(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "wizard_arena", *args], env=env, cwd=REPO, capture_output=True,
                          text=True, timeout=120)


def test_backup_during_play_wipe_and_restore_loses_nothing_acknowledged(
    start_api: Any, start_worker: Any, database_url: str, tmp_path: Path
) -> None:
    redis_source = embedded_redis_url(tmp_path / "redis")
    redis_url = next(redis_source)
    name = f"backup_{secrets.token_hex(4)}"
    psql(database_url, f"CREATE DATABASE {name}")
    db_url = database_url.replace("@/postgres?", f"@/{name}?")
    migrate(db_url)
    env = {**os.environ, "REDIS_URL": redis_url, "DATABASE_URL": db_url}
    try:
        api = start_api(REDIS_URL=redis_url, DATABASE_URL=db_url)
        worker = start_worker(REDIS_URL=redis_url, DATABASE_URL=db_url)
        token, _ = api.register()

        # rated matches of house bots, played out, settled and archived
        finished = []
        for _ in range(2):
            match_id = api.create_match(token, players=3, rated=True, moveTimeoutMs=60_000)
            for _ in range(3):
                api.add_house_bot(token, match_id, "HEURISTIC")
            finished.append(match_id)
        records = {}
        for match_id in finished:
            wait_until(lambda m=match_id: api.http.get(f"/api/matches/{m}/record").status_code == 200,
                       "the match to finish", 30)
        client = redis.Redis.from_url(redis_url)
        wait_until(lambda: not any(
            client.zscore(match_home_key(m, "unsettled"), m) or client.zscore(match_home_key(m, "live"), m) for m in finished), "the matches to be archived", 30)
        for match_id in finished:
            records[match_id] = api.http.get(f"/api/matches/{match_id}/record").json()
        leaderboard = api.data(LEADERBOARD)["leaderboard"]
        assert leaderboard and all(entry["games"] >= 1 for entry in leaderboard)

        # a match in play: our bot moves while the backup runs
        # (a short timeout: a house seat due when the backup was taken is played by the worker
        # once its deadline passes, as after any API process that stopped before moving it)
        live = api.create_match(token, players=3, moveTimeoutMs=3_000)
        api.join(token, live, 0)
        api.add_house_bot(token, live)
        api.add_house_bot(token, live)
        stop = threading.Event()
        acknowledged: list[int] = []

        def play() -> None:
            while not stop.is_set():
                turn = api.data(AWAIT, {"m": live}, token)["awaitTurn"]
                if turn is None:
                    return
                body = api.submit(token, live, first_legal(turn), turn["version"])
                assert not body.get("errors"), body
                acknowledged.append(body["data"]["submitMove"]["version"])

        player = threading.Thread(target=play)
        player.start()
        wait_until(lambda: len(acknowledged) >= 3, "a few moves to be acknowledged")
        before_backup = acknowledged[-1]
        made = arena("backup", str(tmp_path / "backup"), env=env)
        stop.set()
        player.join(30)
        assert made.returncode == 0, made.stderr
        assert "and the archive" in made.stdout, made.stdout

        # a restore over live data is refused, and changes nothing
        refused = arena("restore", str(tmp_path / "backup"), env=env)
        assert refused.returncode != 0 and "--replace" in refused.stderr, refused

        # wipe everything, with the service stopped
        api.process.stop()
        worker.stop()
        client.flushall()
        psql(db_url, "DROP SCHEMA public CASCADE; CREATE SCHEMA public")

        restored = arena("restore", str(tmp_path / "backup"), env=env)
        assert restored.returncode == 0, restored.stderr
        assert client.dbsize() > 0

        api = start_api(REDIS_URL=redis_url, DATABASE_URL=db_url)
        start_worker(REDIS_URL=redis_url, DATABASE_URL=db_url)
        for match_id in finished:  # archived (gone from Redis's live set): read from the archive
            assert api.http.get(f"/api/matches/{match_id}/record").json() == records[match_id]
        assert api.data(LEADERBOARD)["leaderboard"] == leaderboard
        match = api.match(live, token)
        assert match["version"] >= before_backup, (match["version"], before_backup)
        # and play goes on from the restored state
        final = api.play_out(token, live)
        assert final["status"] == "FINISHED"
        client.close()
    finally:
        next(redis_source, None)
