"""``wizard-arena backup DIR`` and ``wizard-arena restore DIR``: everything live (Redis) and
everything archived (PostgreSQL), taken while the service plays on, and put back into an
empty Redis and database with the service stopped.

- **Redis** is read whole by one Lua script (every key, its remaining time to live and its
  ``DUMP``): one atomic snapshot, so a match's keys, the deadline index and the settlement
  queue agree with each other as they did at one instant. Redis answers nothing else while
  the script runs (about a second per million keys; the live data is small, since finished
  matches leave for the archive). The snapshot is written to ``redis.dump`` (records of key,
  TTL and DUMP payload) and restored with ``RESTORE``: into a Redis of the same version or
  newer.
- **The archive** is dumped by PostgreSQL's own ``pg_dump`` (custom format, one consistent
  snapshot; the binaries the ``pgserver`` package ships, PostgreSQL 16) into
  ``archive.pgdump``, and restored by ``pg_restore``.
- Redis is taken first, then the archive: a match archived in between is in the archive and
  also still queued in Redis, and its settlement, run again after a restore, changes nothing
  (settlement is idempotent). So whatever was acknowledged before the backup began (a move,
  a rating, an archived match) is in it.

**Not on a Redis Cluster**: its keys are on several servers, which no one script reads at
one instant, and masters copied one after another would not agree with each other (a change
made in steps on two masters could be in the copy of its second step and not of its first).
Both commands refuse, naming what to use: Redis's own persistence on every node, and the
archive's ``pg_dump`` (:data:`CLUSTER_BACKUP`).

Without ``REDIS_URL`` / ``DATABASE_URL`` the commands work on the embedded servers of
``wizard-arena up``'s data folder: ``backup`` on the running ones, ``restore`` by starting
them itself (which ``up`` must not be running for: the folder's lock says so)."""

from __future__ import annotations

import hashlib
import json
import struct
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any, BinaryIO

import redis as sync_redis

from service.store.redis_client import is_cluster

REDIS_FILE = "redis.dump"
ARCHIVE_FILE = "archive.pgdump"
MANIFEST = "manifest.json"
#: the file's first bytes, and the format's version
MAGIC = b"WZA-REDIS-DUMP-1\n"
RESTORE_BATCH = 500

SNAPSHOT = """
local out = {}
for _, key in ipairs(redis.call('KEYS', '*')) do
  out[#out + 1] = key
  out[#out + 1] = redis.call('PTTL', key)
  out[#out + 1] = redis.call('DUMP', key)
end
return out
"""


class BackupError(RuntimeError):
    """A backup or restore that cannot be done; the message says why and what to do."""


#: what to do instead, on a Redis Cluster
CLUSTER_BACKUP = (
    "back a cluster up with Redis's own persistence instead: `appendonly yes` (or RDB snapshots) on every node, and "
    "a copy of each master's data taken with writes paused on all masters at once (`CLIENT PAUSE <ms> WRITE` on "
    "each, then `redis-cli -h HOST -p PORT --rdb FILE` per master), so that the copies agree; restore by starting "
    "each master from its own file (with its nodes.conf). The archive: `pg_dump --format=custom` / `pg_restore` on "
    "DATABASE_URL. RQ's queue (ARENA_QUEUE_URL) needs no copy: the workers derive their work from the cluster"
)


def _refuse_a_cluster(url: str, command: str) -> None:
    if is_cluster(url):
        raise BackupError(f"REDIS_URL ({url}) is a Redis Cluster, and `wizard-arena {command}` works on one Redis "
                          f"server only (its copy is one snapshot, read by one script); {CLUSTER_BACKUP}")


def _libpq_url(url: str) -> str:
    """A DATABASE_URL as libpq takes it (no SQLAlchemy driver in the scheme)."""
    scheme, sep, rest = url.partition("://")
    return f"postgresql://{rest}" if sep and scheme.startswith("postgres") else url


def _pg_binary(name: str) -> str:
    from service.store.embedded_postgres import _binaries

    return str(_binaries() / name)


# ---------------------------------------------------------------------------- Redis
def _write_records(out: BinaryIO, snapshot: list[Any]) -> int:
    out.write(MAGIC)
    keys = 0
    for i in range(0, len(snapshot), 3):
        key, ttl, payload = snapshot[i], int(snapshot[i + 1]), snapshot[i + 2]
        if payload is None or ttl == -2:  # gone (expired) as the script ran
            continue
        out.write(struct.pack(">IqI", len(key), ttl, len(payload)))
        out.write(key)
        out.write(payload)
        keys += 1
    return keys


def _read_records(path: Path) -> Iterator[tuple[bytes, int, bytes]]:
    with path.open("rb") as source:
        if source.read(len(MAGIC)) != MAGIC:
            raise BackupError(f"{path} is not a backup of Redis made by `wizard-arena backup`")
        header = struct.calcsize(">IqI")
        while chunk := source.read(header):
            key_length, ttl, payload_length = struct.unpack(">IqI", chunk)
            yield source.read(key_length), ttl, source.read(payload_length)


def backup_redis(url: str, path: Path) -> int:
    """Redis's whole data set, at one instant, into ``path``; the number of keys."""
    _refuse_a_cluster(url, "backup")
    client = sync_redis.Redis.from_url(url, socket_timeout=600)
    try:
        snapshot = client.eval(SNAPSHOT, 0)
    finally:
        client.close()
    with path.open("wb") as out:
        return _write_records(out, snapshot)


def restore_redis(url: str, path: Path, replace: bool = False) -> int:
    """The keys of ``path`` into the Redis at ``url``, which must be empty unless ``replace``
    (then everything in it is deleted first); the number of keys."""
    _refuse_a_cluster(url, "restore")
    client = sync_redis.Redis.from_url(url, socket_timeout=600)
    try:
        present = client.dbsize()
        if present and not replace:
            raise BackupError(
                f"the Redis server at {url} holds {present} keys: restore into an empty one, or give --replace to "
                "delete them all first"
            )
        if present:
            client.flushdb()
        restored = 0
        pipe = client.pipeline(transaction=False)
        for key, ttl, payload in _read_records(path):
            pipe.restore(key, max(ttl, 0), payload, replace=True)
            restored += 1
            if restored % RESTORE_BATCH == 0:
                pipe.execute()
        pipe.execute()
        return restored
    finally:
        client.close()


# ---------------------------------------------------------------------------- the archive
def _run(command: list[str], what: str) -> None:
    done = subprocess.run(command, capture_output=True, text=True)
    if done.returncode != 0:
        raise BackupError(f"{what} failed ({Path(command[0]).name} exit {done.returncode}): {done.stderr.strip()}")


def backup_archive(url: str, path: Path) -> None:
    _run([_pg_binary("pg_dump"), "--format=custom", "--no-owner", "--file", str(path), "--dbname", _libpq_url(url)],
         "dumping the archive")


def restore_archive(url: str, path: Path) -> None:
    """The archive's tables from ``path``, replacing those of the same names (in one transaction)."""
    _run([_pg_binary("pg_restore"), "--clean", "--if-exists", "--no-owner", "--single-transaction",
          "--exit-on-error", "--dbname", _libpq_url(url), str(path)], "restoring the archive")


# ---------------------------------------------------------------------------- both
def backup(folder: Path, redis_url: str, database_url: str | None) -> dict[str, Any]:
    """Redis, then the archive, into ``folder`` (made if missing; its files replaced)."""
    _refuse_a_cluster(redis_url, "backup")
    folder.mkdir(parents=True, exist_ok=True)
    # the manifest goes last: a backup that fails half-way leaves none, which restore refuses
    (folder / MANIFEST).unlink(missing_ok=True)
    started = time.time()
    keys = backup_redis(redis_url, folder / REDIS_FILE)
    taken = time.time()
    if database_url:
        backup_archive(database_url, folder / ARCHIVE_FILE)
    elif (folder / ARCHIVE_FILE).exists():
        (folder / ARCHIVE_FILE).unlink()  # not this backup's
    manifest = {
        "started": started, "redisSnapshotAt": taken, "finished": time.time(), "redisKeys": keys,
        "archive": bool(database_url),
        "sha256": {name: hashlib.sha256((folder / name).read_bytes()).hexdigest()
                   for name in (REDIS_FILE, ARCHIVE_FILE) if (folder / name).exists()},
    }
    (folder / MANIFEST).write_text(json.dumps(manifest, indent=2) + "\n")
    return manifest


def restore(folder: Path, redis_url: str, database_url: str | None, replace: bool = False) -> dict[str, Any]:
    """``folder``'s backup back into Redis and the archive (stop the API and the workers first)."""
    _refuse_a_cluster(redis_url, "restore")
    manifest_path = folder / MANIFEST
    if not manifest_path.exists():
        raise BackupError(f"{folder} holds no backup ({MANIFEST} is missing): give the folder `wizard-arena backup` wrote")
    manifest = json.loads(manifest_path.read_text())
    for name, digest in manifest["sha256"].items():
        if hashlib.sha256((folder / name).read_bytes()).hexdigest() != digest:
            raise BackupError(f"{folder / name} is not the file the backup wrote (its SHA-256 differs): nothing restored")
    if manifest["archive"] and not database_url:
        raise BackupError("the backup holds an archive but DATABASE_URL is not set: nothing restored")
    keys = restore_redis(redis_url, folder / REDIS_FILE, replace)
    if manifest["archive"] and database_url:
        restore_archive(database_url, folder / ARCHIVE_FILE)
    return {"redisKeys": keys, "archive": bool(manifest["archive"] and database_url)}

