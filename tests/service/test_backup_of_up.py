"""`wizard-arena backup` and `restore` on `up`'s own data folder, with no REDIS_URL or
DATABASE_URL: the embedded servers. A match played and archived under a running `up` is in
the backup's archive dump, and a restore into a fresh data folder serves it again from the
archive. A backup that cannot reach the archive `up` runs fails, saying why, rather than
leaving it out."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import redis

from service.store.embedded_postgres import EmbeddedPostgres, _binaries
from service.store.embedded_redis import EmbeddedRedis
from service.store.keys import match_key
from tests.service.arena_client import REPO, wait_until
from tests.service.up_process import Up

#: an archived match's keys leave Redis at once: its record can only come from the archive
NO_GRACE = {"ARENA_ARCHIVE_GRACE_SECONDS": "0"}


def own_env(data_dir: Path) -> dict[str, str]:
    """The environment of a command on ``data_dir`` with no server of its own named."""
    named = {"REDIS_URL", "ARENA_REDIS_URL", "DATABASE_URL", "ARENA_DATABASE_URL"}
    return {**{k: v for k, v in os.environ.items() if k not in named}, "ARENA_DATA_DIR": str(data_dir)}


def arena(*args: str, data_dir: Path, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "wizard_arena", *args], env={**own_env(data_dir), **env}, cwd=REPO,
                          capture_output=True, text=True, timeout=120)


def archived(url: str, match_id: str) -> bool:
    answer = subprocess.run(
        [str(_binaries() / "psql"), "-tA", "-v", "ON_ERROR_STOP=1", "-d", url, "-c",
         f"SELECT count(*) FROM matches WHERE id = '{match_id}'"],
        check=True, capture_output=True, text=True,
    )
    return answer.stdout.strip() == "1"


def test_backup_of_ups_data_folder_holds_the_archive_and_restore_brings_it_back(tmp_path: Path) -> None:
    data = tmp_path / "arena"
    up = Up(data, tmp_path / "up.log", **NO_GRACE).wait_healthy()
    try:
        token, _ = up.api.register()
        match_id = up.api.create_match(token, players=3, moveTimeoutMs=60_000)
        for _ in range(3):
            up.api.add_house_bot(token, match_id, "HEURISTIC")
        database_url = EmbeddedPostgres.of_up(data).running_url()
        assert database_url is not None, "up's PostgreSQL runs in its data folder"
        wait_until(lambda: archived(database_url, match_id), "the match to be archived", 60)
        live = redis.Redis.from_url(f"unix://{EmbeddedRedis(data).socket}")
        try:
            wait_until(lambda: not live.exists(match_key(match_id)), "the match's keys to leave Redis", 30)
        finally:
            live.close()
        record = up.api.http.get(f"/api/matches/{match_id}/record")  # from the archive alone
        assert record.status_code == 200, record.text

        made = arena("backup", str(tmp_path / "backup"), data_dir=data)
        assert made.returncode == 0, made.stderr
        assert "and the archive" in made.stdout, made.stdout
    finally:
        up.stop()
    assert up.popen.returncode == 0, up.output()

    manifest = json.loads((tmp_path / "backup" / "manifest.json").read_text())
    assert manifest["archive"] is True and "archive.pgdump" in manifest["sha256"], manifest
    rows = subprocess.run(
        [str(_binaries() / "pg_restore"), "--data-only", "--table=matches", "--file=-",
         str(tmp_path / "backup" / "archive.pgdump")],
        check=True, capture_output=True, text=True,
    )
    assert match_id in rows.stdout, "the dump holds the archived match's row"

    # into a fresh data folder: `restore` starts its embedded servers there, then `up` serves
    # the match from the restored archive (its keys were gone from Redis at the backup)
    fresh = tmp_path / "fresh"
    restored = arena("restore", str(tmp_path / "backup"), data_dir=fresh)
    assert restored.returncode == 0, restored.stderr
    assert "and the archive" in restored.stdout, restored.stdout
    again = Up(fresh, tmp_path / "up-again.log", **NO_GRACE).wait_healthy()
    try:
        back = again.api.http.get(f"/api/matches/{match_id}/record")
        assert back.status_code == 200, back.text
        assert back.json() == record.json()
    finally:
        again.stop()


def test_backup_fails_loudly_when_ups_archive_does_not_run(tmp_path: Path) -> None:
    """Redis runs in the data folder (as under `up`) but no PostgreSQL does: no backup, and a
    message that says what to do, rather than a backup without the archive."""
    data = tmp_path / "arena"
    server = EmbeddedRedis(data, appendonly=False)
    server.start()
    try:
        missing = arena("backup", str(tmp_path / "backup"), data_dir=data)
        assert missing.returncode != 0, missing
        assert "no PostgreSQL runs in" in missing.stderr and "DATABASE_URL" in missing.stderr, missing.stderr
        assert "no archive" not in missing.stdout + missing.stderr
        assert not (tmp_path / "backup" / "manifest.json").exists()

        unreachable = arena("backup", str(tmp_path / "backup"), data_dir=data,
                            DATABASE_URL=f"postgresql://postgres@/postgres?host={tmp_path / 'no-such-socket'}")
        assert unreachable.returncode != 0, unreachable
        assert "dumping the archive failed" in unreachable.stderr, unreachable.stderr
        assert not (tmp_path / "backup" / "manifest.json").exists(), "a half-made backup has no manifest"
    finally:
        server.stop()

